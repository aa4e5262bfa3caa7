"""ListTransactions (api key 66): requests and responses, versions 0-2.

v1 (KIP-994) adds the duration filter; v2 (KIP-1152) a regular expression the transactional ids must
match (RE2 syntax; INVALID_REGULAR_EXPRESSION when it does not compile).
"""

from ..schema import Message, f

ListTransactionsRequest = Message('ListTransactionsRequest', 66, "0-2", '0+', [
    f('state_filters', '[]string'),
    f('producer_id_filters', '[]int64', entity='producerId'),
    f('duration_filter', 'int64', '1+', default=-1),
    f('transactional_id_pattern', 'string', '2+', nullable='2+', default=None),
])

ListTransactionsResponse = Message('ListTransactionsResponse', 66, "0-2", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('unknown_state_filters', '[]string'),
    f('transaction_states', [
        f('transactional_id', 'string', entity='transactionalId'),
        f('producer_id', 'int64', entity='producerId'),
        f('transaction_state', 'string'),
    ]),
])
