"""AddOffsetsToTxn (api key 25): requests and responses, versions 0-4."""

from ..schema import Message, f

AddOffsetsToTxnRequest = Message('AddOffsetsToTxnRequest', 25, "0-4", '3+', [
    f('transactional_id', 'string', entity='transactionalId'),
    f('producer_id', 'int64', entity='producerId'),
    f('producer_epoch', 'int16'),
    f('group_id', 'string', entity='groupId'),
])

AddOffsetsToTxnResponse = Message('AddOffsetsToTxnResponse', 25, "0-4", '3+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
])
