"""DeleteRecords (api key 21): requests and responses, versions 0-2."""

from ..schema import Message, f

DeleteRecordsRequest = Message('DeleteRecordsRequest', 21, "0-2", '2+', [
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('offset', 'int64'),
        ]),
    ]),
    f('timeout_ms', 'int32'),
])

DeleteRecordsResponse = Message('DeleteRecordsResponse', 21, "0-2", '2+', [
    f('throttle_time_ms', 'int32'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('low_watermark', 'int64'),
            f('error_code', 'int16'),
        ]),
    ]),
])
