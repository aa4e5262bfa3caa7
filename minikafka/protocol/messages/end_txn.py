"""EndTxn (api key 26): requests and responses, versions 0-5.

Version 5 (KIP-890 part 2: the epoch is bumped on every transaction) adds the
producer id and epoch to the response.
"""

from ..schema import Message, f

EndTxnRequest = Message('EndTxnRequest', 26, "0-5", '3+', [
    f('transactional_id', 'string', entity='transactionalId'),
    f('producer_id', 'int64', entity='producerId'),
    f('producer_epoch', 'int16'),
    f('committed', 'bool'),
])

EndTxnResponse = Message('EndTxnResponse', 26, "0-5", '3+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('producer_id', 'int64', '5+', default=-1, entity='producerId'),
    f('producer_epoch', 'int16', '5+', default=-1),
])
