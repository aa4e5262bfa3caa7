"""AddPartitionsToTxn (api key 24): requests and responses, versions 0-5.

Versions 0-3 are the client form: one transaction, its fields prefixed
``v3_and_below_``.  Versions 4+ are the broker form (KIP-890): a batch of
``transactions``, each with ``verify_only`` (check that the partitions are
already in the transaction rather than add them); the response has a
top-level ``error_code`` and ``results_by_transaction``.
"""

from ..schema import Message, f

AddPartitionsToTxnRequest = Message('AddPartitionsToTxnRequest', 24, "0-5", '3+', [
    f('transactions', [
        f('transactional_id', 'string', '4+', entity='transactionalId'),
        f('producer_id', 'int64', '4+', entity='producerId'),
        f('producer_epoch', 'int16', '4+'),
        f('verify_only', 'bool', '4+', default=False),
        f('topics', [
            f('name', 'string', entity='topicName'),
            f('partitions', '[]int32', entity='partitionIndex'),
        ], '4+'),
    ], '4+'),
    f('v3_and_below_transactional_id', 'string', '0-3', entity='transactionalId'),
    f('v3_and_below_producer_id', 'int64', '0-3', entity='producerId'),
    f('v3_and_below_producer_epoch', 'int16', '0-3'),
    f('v3_and_below_topics', [
        f('name', 'string', entity='topicName'),
        f('partitions', '[]int32', entity='partitionIndex'),
    ], '0-3'),
])

AddPartitionsToTxnResponse = Message('AddPartitionsToTxnResponse', 24, "0-5", '3+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16', '4+'),
    f('results_by_transaction', [
        f('transactional_id', 'string', '4+', entity='transactionalId'),
        f('topic_results', [
            f('name', 'string', entity='topicName'),
            f('results_by_partition', [
                f('partition_index', 'int32', entity='partitionIndex'),
                f('partition_error_code', 'int16'),
            ]),
        ], '4+'),
    ], '4+'),
    f('results_by_topic_v3_and_below', [
        f('name', 'string', entity='topicName'),
        f('results_by_partition', [
            f('partition_index', 'int32', entity='partitionIndex'),
            f('partition_error_code', 'int16'),
        ]),
    ], '0-3'),
])
