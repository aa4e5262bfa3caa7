"""OffsetForLeaderEpoch (api key 23): requests and responses, versions 0-4."""

from ..schema import Message, f

OffsetForLeaderEpochRequest = Message('OffsetForLeaderEpochRequest', 23, "0-4", '4+', [
    f('replica_id', 'int32', '3+', default=-2, entity='brokerId'),
    f('topics', [
        f('topic', 'string', entity='topicName'),
        f('partitions', [
            f('partition', 'int32', entity='partitionIndex'),
            f('current_leader_epoch', 'int32', '2+', default=-1),
            f('leader_epoch', 'int32'),
        ]),
    ]),
])

OffsetForLeaderEpochResponse = Message('OffsetForLeaderEpochResponse', 23, "0-4", '4+', [
    f('throttle_time_ms', 'int32', '2+'),
    f('topics', [
        f('topic', 'string', entity='topicName'),
        f('partitions', [
            f('error_code', 'int16'),
            f('partition', 'int32', entity='partitionIndex'),
            f('leader_epoch', 'int32', '1+', default=-1),
            f('end_offset', 'int64', default=-1),
        ]),
    ]),
])
