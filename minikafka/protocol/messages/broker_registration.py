"""BrokerRegistration (api key 62, KIP-631, KIP-866, KIP-858, KIP-966): requests and responses, versions 0-4.

A broker registers with the KRaft controller: its listeners, supported features, rack and incarnation; the
answer is its broker epoch.  v1 adds whether it is a ZooKeeper broker migrating, v2 its log directories
(KIP-858), v3 its epoch before a clean shutdown (KIP-966); v4 changes no field: it lists features whose
minimum supported version is 0, which v0-v3 leave out (KAFKA-17011).  A controller-listener API.
"""

from ..schema import Message, f

BrokerRegistrationRequest = Message('BrokerRegistrationRequest', 62, "0-4", '0+', [
    f('broker_id', 'int32', entity='brokerId'),
    f('cluster_id', 'string'),
    f('incarnation_id', 'uuid'),
    f('listeners', [
        f('name', 'string'),
        f('host', 'string'),
        f('port', 'uint16'),
        f('security_protocol', 'int16'),
    ]),
    f('features', [
        f('name', 'string'),
        f('min_supported_version', 'int16'),
        f('max_supported_version', 'int16'),
    ]),
    f('rack', 'string', nullable='0+'),
    f('is_migrating_zk_broker', 'bool', '1+', default=False),
    f('log_dirs', '[]uuid', '2+'),
    f('previous_broker_epoch', 'int64', '3+', default=-1),
])

BrokerRegistrationResponse = Message('BrokerRegistrationResponse', 62, "0-4", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('broker_epoch', 'int64', default=-1),
])
