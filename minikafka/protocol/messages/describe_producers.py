"""DescribeProducers (api key 61): requests and responses, version 0."""

from ..schema import Message, f

DescribeProducersRequest = Message('DescribeProducersRequest', 61, "0", '0+', [
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partition_indexes', '[]int32', entity='partitionIndex'),
    ]),
])

DescribeProducersResponse = Message('DescribeProducersResponse', 61, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
            f('active_producers', [
                f('producer_id', 'int64', entity='producerId'),
                f('producer_epoch', 'int32'),
                f('last_sequence', 'int32', default=-1),
                f('last_timestamp', 'int64', default=-1),
                f('coordinator_epoch', 'int32'),
                f('current_txn_start_offset', 'int64', default=-1),
            ]),
        ]),
    ]),
])
