"""InitProducerId (api key 22): requests and responses, versions 0-5.

Version 5 (KIP-890: the TRANSACTION_ABORTABLE error) has version 4's format.
"""

from ..schema import Message, f

InitProducerIdRequest = Message('InitProducerIdRequest', 22, "0-5", '2+', [
    f('transactional_id', 'string', nullable='0+', entity='transactionalId'),
    f('transaction_timeout_ms', 'int32'),
    f('producer_id', 'int64', '3+', default=-1, entity='producerId'),
    f('producer_epoch', 'int16', '3+', default=-1),
])

InitProducerIdResponse = Message('InitProducerIdResponse', 22, "0-5", '2+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('producer_id', 'int64', default=-1, entity='producerId'),
    f('producer_epoch', 'int16'),
])
