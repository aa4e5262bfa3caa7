"""ListOffsets (api key 2): requests and responses, versions 0-7."""

from ..schema import Message, f

ListOffsetsRequest = Message('ListOffsetsRequest', 2, "0-7", '6+', [
    f('replica_id', 'int32'),
    f('isolation_level', 'int8', '2+'),
    f('topics', [
        f('name', 'string'),
        f('partitions', [
            f('partition_index', 'int32'),
            f('current_leader_epoch', 'int32', '4+', default=-1),
            f('timestamp', 'int64'),
            f('max_num_offsets', 'int32', '0', default=1),
        ]),
    ]),
])

ListOffsetsResponse = Message('ListOffsetsResponse', 2, "0-7", '6+', [
    f('throttle_time_ms', 'int32', '2+'),
    f('topics', [
        f('name', 'string'),
        f('partitions', [
            f('partition_index', 'int32'),
            f('error_code', 'int16'),
            f('old_style_offsets', '[]int64', '0'),
            f('timestamp', 'int64', '1+', default=-1),
            f('offset', 'int64', '1+', default=-1),
            f('leader_epoch', 'int32', '4+', default=-1),
        ]),
    ]),
])
