"""UnregisterBroker (api key 64, KIP-631): requests and responses, version 0.

An administrator removes a broker's registration from the cluster (``kafka-cluster.sh unregister``).
"""

from ..schema import Message, f

UnregisterBrokerRequest = Message('UnregisterBrokerRequest', 64, "0", '0+', [
    f('broker_id', 'int32', entity='brokerId'),
])

UnregisterBrokerResponse = Message('UnregisterBrokerResponse', 64, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
])
