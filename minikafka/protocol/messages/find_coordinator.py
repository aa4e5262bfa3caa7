"""FindCoordinator (api key 10): requests and responses, versions 0-6.

v4 (KIP-699) batches keys; v5 (KIP-890) only says the client handles TRANSACTION_ABORTABLE; v6 (KIP-932)
adds key type 2, a share coordinator, with keys ``groupId:topicId:partition``.
"""

from ..schema import Message, f

FindCoordinatorRequest = Message('FindCoordinatorRequest', 10, "0-6", '3+', [
    f('key', 'string', '0-3'),
    f('key_type', 'int8', '1+', default=0),
    f('coordinator_keys', '[]string', '4+'),
])

FindCoordinatorResponse = Message('FindCoordinatorResponse', 10, "0-6", '3+', [
    f('throttle_time_ms', 'int32', '1+'),
    f('error_code', 'int16', '0-3'),
    f('error_message', 'string', '1-3', nullable='1-3'),
    f('node_id', 'int32', '0-3', entity='brokerId'),
    f('host', 'string', '0-3'),
    f('port', 'int32', '0-3'),
    f('coordinators', [
        f('key', 'string', '4+'),
        f('node_id', 'int32', '4+', entity='brokerId'),
        f('host', 'string', '4+'),
        f('port', 'int32', '4+'),
        f('error_code', 'int16', '4+'),
        f('error_message', 'string', '4+', nullable='4+'),
    ], '4+'),
])
