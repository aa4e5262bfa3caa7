"""ListTransactions (api key 66): requests and responses, versions 0-1."""

from ..schema import Message, f

ListTransactionsRequest = Message('ListTransactionsRequest', 66, "0-1", '0+', [
    f('state_filters', '[]string'),
    f('producer_id_filters', '[]int64'),
    f('duration_filter', 'int64', '1+', default=-1),
])

ListTransactionsResponse = Message('ListTransactionsResponse', 66, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('unknown_state_filters', '[]string'),
    f('transaction_states', [
        f('transactional_id', 'string'),
        f('producer_id', 'int64'),
        f('transaction_state', 'string'),
    ]),
])
