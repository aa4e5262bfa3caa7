"""ConsumerGroupDescribe (api key 69, KIP-848): requests and responses, versions 0-1.

Version 1 adds each member's ``member_type`` (KIP-1099); the request is the same as version 0.
"""

from ..schema import Message, f, struct


def _assignment():  # Kafka's common struct Assignment: a member's topic-partitions
    return struct(
        f('topic_partitions', [
            f('topic_id', 'uuid', entity='topicId'),
            f('topic_name', 'string', entity='topicName'),
            f('partitions', '[]int32', entity='partitionIndex'),
        ]),
    )


ConsumerGroupDescribeRequest = Message('ConsumerGroupDescribeRequest', 69, "0-1", '0+', [
    f('group_ids', '[]string', entity='groupId'),
    f('include_authorized_operations', 'bool'),
])

ConsumerGroupDescribeResponse = Message('ConsumerGroupDescribeResponse', 69, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('groups', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('group_id', 'string', entity='groupId'),
        f('group_state', 'string'),
        f('group_epoch', 'int32'),
        f('assignment_epoch', 'int32'),
        f('assignor_name', 'string'),
        f('members', [
            f('member_id', 'string'),
            f('instance_id', 'string', nullable='0+', default=None),
            f('rack_id', 'string', nullable='0+', default=None),
            f('member_epoch', 'int32'),
            f('client_id', 'string', entity='clientId'),
            f('client_host', 'string'),
            f('subscribed_topic_names', '[]string', entity='topicName'),
            f('subscribed_topic_regex', 'string', nullable='0+', default=None, entity='topicRegex'),
            f('assignment', _assignment()),
            f('target_assignment', _assignment()),
            f('member_type', 'int8', '1+', default=-1),
        ]),
        f('authorized_operations', 'int32', default=-2147483648),
    ]),
])
