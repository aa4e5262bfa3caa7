"""BrokerHeartbeat (api key 63, KIP-631): requests and responses, versions 0-1.

A registered broker tells the KRaft controller it is alive, how far it has applied the metadata log, and
whether it wants to be fenced or to shut down; the answer says whether it caught up, is fenced, or may shut
down.  v1 adds the broker's offline log directories (a tagged field).
"""

from ..schema import Message, f

BrokerHeartbeatRequest = Message('BrokerHeartbeatRequest', 63, "0-1", '0+', [
    f('broker_id', 'int32', entity='brokerId'),
    f('broker_epoch', 'int64', default=-1),
    f('current_metadata_offset', 'int64'),
    f('want_fence', 'bool'),
    f('want_shut_down', 'bool'),
    f('offline_log_dirs', '[]uuid', '1+', tag=0),
])

BrokerHeartbeatResponse = Message('BrokerHeartbeatResponse', 63, "0-1", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('is_caught_up', 'bool', default=False),
    f('is_fenced', 'bool', default=True),
    f('should_shut_down', 'bool'),
])
