"""ListOffsets (api key 2): requests and responses, versions 0-11.

What each version means (Kafka 4.2's ``ListOffsetsRequest.json``): the versions add special timestamps
a partition can be asked for: -1 latest and -2 earliest (all), -3 the record with the largest
timestamp (v7, KIP-734), -4 the local log start offset (v8, KIP-405), -5 the last offset in tiered
storage (v9, KIP-1005) and -6 the earliest offset pending upload to tiered storage (v11, KIP-1023).
v10 (KIP-1075) adds ``timeout_ms``, how long to wait for a lookup in remote storage.  A special
timestamp sent at a version older than its own is answered UNSUPPORTED_VERSION.
"""

from ..schema import Message, f

ListOffsetsRequest = Message('ListOffsetsRequest', 2, "0-11", '6+', [
    f('replica_id', 'int32', entity='brokerId'),
    f('isolation_level', 'int8', '2+'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('current_leader_epoch', 'int32', '4+', default=-1),
            f('timestamp', 'int64'),
            f('max_num_offsets', 'int32', '0', default=1),
        ]),
    ]),
    f('timeout_ms', 'int32', '10+'),
])

ListOffsetsResponse = Message('ListOffsetsResponse', 2, "0-11", '6+', [
    f('throttle_time_ms', 'int32', '2+'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('old_style_offsets', '[]int64', '0'),
            f('timestamp', 'int64', '1+', default=-1),
            f('offset', 'int64', '1+', default=-1),
            f('leader_epoch', 'int32', '4+', default=-1),
        ]),
    ]),
])
