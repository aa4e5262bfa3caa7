"""ConsumerGroupHeartbeat (api key 68, KIP-848): requests and responses, versions 0-1.

Version 1 adds ``subscribed_topic_regex`` and has the consumer generate its own member id (KIP-1082).
"""

from ..schema import Message, f, struct

ConsumerGroupHeartbeatRequest = Message('ConsumerGroupHeartbeatRequest', 68, "0-1", '0+', [
    f('group_id', 'string', entity='groupId'),
    f('member_id', 'string'),
    f('member_epoch', 'int32'),
    f('instance_id', 'string', nullable='0+', default=None),
    f('rack_id', 'string', nullable='0+', default=None),
    f('rebalance_timeout_ms', 'int32', default=-1),
    f('subscribed_topic_names', '[]string', nullable='0+', default=None, entity='topicName'),
    f('subscribed_topic_regex', 'string', '1+', nullable='1+', default=None, entity='topicRegex'),
    f('server_assignor', 'string', nullable='0+', default=None),
    f('topic_partitions', [
        f('topic_id', 'uuid', entity='topicId'),
        f('partitions', '[]int32', entity='partitionIndex'),
    ], nullable='0+', default=None),
])

ConsumerGroupHeartbeatResponse = Message('ConsumerGroupHeartbeatResponse', 68, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('member_id', 'string', nullable='0+', default=None),
    f('member_epoch', 'int32'),
    f('heartbeat_interval_ms', 'int32'),
    f('assignment', struct(
        f('topic_partitions', [
            f('topic_id', 'uuid', entity='topicId'),
            f('partitions', '[]int32', entity='partitionIndex'),
        ]),
    ), nullable='0+', default=None),
])
