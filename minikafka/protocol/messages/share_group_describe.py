"""ShareGroupDescribe (api key 77, KIP-932): requests and responses, version 1.

Version 0 was Kafka 4.0's early access and is gone from Kafka 4.1 on: not declared.
"""

from ..schema import Message, f, struct

ShareGroupDescribeRequest = Message('ShareGroupDescribeRequest', 77, "1", '0+', [
    f('group_ids', '[]string', entity='groupId'),
    f('include_authorized_operations', 'bool'),
])

ShareGroupDescribeResponse = Message('ShareGroupDescribeResponse', 77, "1", '0+', [
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
            f('rack_id', 'string', nullable='0+', default=None),
            f('member_epoch', 'int32'),
            f('client_id', 'string', entity='clientId'),
            f('client_host', 'string'),
            f('subscribed_topic_names', '[]string', entity='topicName'),
            f('assignment', struct(
                f('topic_partitions', [
                    f('topic_id', 'uuid', entity='topicId'),
                    f('topic_name', 'string', entity='topicName'),
                    f('partitions', '[]int32', entity='partitionIndex'),
                ]),
            )),
        ]),
        f('authorized_operations', 'int32', default=-2147483648),
    ]),
])
