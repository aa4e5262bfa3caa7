"""WriteTxnMarkers (api key 27): requests and responses, versions 1-2.

Sent by the transaction coordinator to partition leaders;
``transaction_result`` False is ABORT, True is COMMIT.  Kafka 4.0 removed v0 (v1, the first flexible
version, is the baseline); v2 (KIP-1228) tells the leader each marker's transaction version, so that a
transaction-version-2 marker, written under the epoch the coordinator bumped, must be above the
producer's epoch on the partition.
"""

from ..schema import Message, f

WriteTxnMarkersRequest = Message('WriteTxnMarkersRequest', 27, "1-2", '1+', [
    f('markers', [
        f('producer_id', 'int64', entity='producerId'),
        f('producer_epoch', 'int16'),
        f('transaction_result', 'bool'),
        f('topics', [
            f('name', 'string', entity='topicName'),
            f('partition_indexes', '[]int32', entity='partitionIndex'),
        ]),
        f('coordinator_epoch', 'int32'),
        f('transaction_version', 'int8', '2+', default=0),
    ]),
])

WriteTxnMarkersResponse = Message('WriteTxnMarkersResponse', 27, "1-2", '1+', [
    f('markers', [
        f('producer_id', 'int64', entity='producerId'),
        f('topics', [
            f('name', 'string', entity='topicName'),
            f('partitions', [
                f('partition_index', 'int32', entity='partitionIndex'),
                f('error_code', 'int16'),
            ]),
        ]),
    ]),
])
