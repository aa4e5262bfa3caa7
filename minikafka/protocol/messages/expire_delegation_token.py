"""ExpireDelegationToken (api key 40): requests and responses, versions 1-2 (KIP-48).

Kafka 4.0 removed version 0 (KIP-896); version 1 is version 0's format, version 2 the first flexible one.
The token is named by its HMAC; a negative ``expiry_time_period_ms`` expires it at once.
"""

from ..schema import Message, f

ExpireDelegationTokenRequest = Message('ExpireDelegationTokenRequest', 40, "1-2", '2+', [
    f('hmac', 'bytes'),
    f('expiry_time_period_ms', 'int64'),
])

ExpireDelegationTokenResponse = Message('ExpireDelegationTokenResponse', 40, "1-2", '2+', [
    f('error_code', 'int16'),
    f('expiry_timestamp_ms', 'int64'),
    f('throttle_time_ms', 'int32'),
])
