"""DescribeTransactions (api key 65): requests and responses, version 0."""

from ..schema import Message, f

DescribeTransactionsRequest = Message('DescribeTransactionsRequest', 65, "0", '0+', [
    f('transactional_ids', '[]string', entity='transactionalId'),
])

DescribeTransactionsResponse = Message('DescribeTransactionsResponse', 65, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('transaction_states', [
        f('error_code', 'int16'),
        f('transactional_id', 'string', entity='transactionalId'),
        f('transaction_state', 'string'),
        f('transaction_timeout_ms', 'int32'),
        f('transaction_start_time_ms', 'int64'),
        f('producer_id', 'int64', entity='producerId'),
        f('producer_epoch', 'int16'),
        f('topics', [
            f('topic', 'string', entity='topicName'),
            f('partitions', '[]int32', entity='partitionIndex'),
        ]),
    ]),
])
