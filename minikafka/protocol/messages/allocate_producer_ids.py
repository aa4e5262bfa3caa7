"""AllocateProducerIds (api key 67, KIP-730): requests and responses, version 0.

A broker asks the KRaft controller for a block of producer ids (for its transaction coordinator and
idempotent producers).
"""

from ..schema import Message, f

AllocateProducerIdsRequest = Message('AllocateProducerIdsRequest', 67, "0", '0+', [
    f('broker_id', 'int32', entity='brokerId'),
    f('broker_epoch', 'int64', default=-1),
])

AllocateProducerIdsResponse = Message('AllocateProducerIdsResponse', 67, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('producer_id_start', 'int64', entity='producerId'),
    f('producer_id_len', 'int32'),
])
