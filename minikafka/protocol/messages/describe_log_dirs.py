"""DescribeLogDirs (api key 35): requests and responses, versions 0-4 (KIP-113; v3 adds the top-level
error code, v4 each directory's volume size and usable bytes (KIP-827))."""

from ..schema import Message, f

DescribeLogDirsRequest = Message('DescribeLogDirsRequest', 35, "0-4", '2+', [
    f('topics', [
        f('topic', 'string', entity='topicName'),
        f('partitions', '[]int32', entity='partitionIndex'),
    ], nullable='0+'),
])

DescribeLogDirsResponse = Message('DescribeLogDirsResponse', 35, "0-4", '2+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16', '3+'),
    f('results', [
        f('error_code', 'int16'),
        f('log_dir', 'string'),
        f('topics', [
            f('name', 'string', entity='topicName'),
            f('partitions', [
                f('partition_index', 'int32', entity='partitionIndex'),
                f('partition_size', 'int64'),
                f('offset_lag', 'int64'),
                f('is_future_key', 'bool'),
            ]),
        ]),
        f('total_bytes', 'int64', '4+', default=-1),
        f('usable_bytes', 'int64', '4+', default=-1),
    ]),
])
