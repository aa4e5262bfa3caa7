"""ShareGroupHeartbeat (api key 76, KIP-932): requests and responses, version 1.

Version 0 was Kafka 4.0's early access and is gone from Kafka 4.1 on: not declared.
"""

from ..schema import Message, f, struct

ShareGroupHeartbeatRequest = Message('ShareGroupHeartbeatRequest', 76, "1", '0+', [
    f('group_id', 'string', entity='groupId'),
    f('member_id', 'string'),
    f('member_epoch', 'int32'),
    f('rack_id', 'string', nullable='0+', default=None),
    f('subscribed_topic_names', '[]string', nullable='0+', default=None, entity='topicName'),
])

ShareGroupHeartbeatResponse = Message('ShareGroupHeartbeatResponse', 76, "1", '0+', [
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
