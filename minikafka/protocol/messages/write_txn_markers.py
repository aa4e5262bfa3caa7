"""WriteTxnMarkers (api key 27): requests and responses, versions 0-1.

Sent by the transaction coordinator to partition leaders;
``transaction_result`` False is ABORT, True is COMMIT.
"""

from ..schema import Message, f

WriteTxnMarkersRequest = Message('WriteTxnMarkersRequest', 27, "0-1", '1+', [
    f('markers', [
        f('producer_id', 'int64'),
        f('producer_epoch', 'int16'),
        f('transaction_result', 'bool'),
        f('topics', [
            f('name', 'string'),
            f('partition_indexes', '[]int32'),
        ]),
        f('coordinator_epoch', 'int32'),
    ]),
])

WriteTxnMarkersResponse = Message('WriteTxnMarkersResponse', 27, "0-1", '1+', [
    f('markers', [
        f('producer_id', 'int64'),
        f('topics', [
            f('name', 'string'),
            f('partitions', [
                f('partition_index', 'int32'),
                f('error_code', 'int16'),
            ]),
        ]),
    ]),
])
