"""RenewDelegationToken (api key 39): requests and responses, versions 1-2 (KIP-48).

Kafka 4.0 removed version 0 (KIP-896); version 1 is version 0's format, version 2 the first flexible one.
The token is named by its HMAC; ``renew_period_ms`` <= 0 takes ``delegation.token.expiry.time.ms``.
"""

from ..schema import Message, f

RenewDelegationTokenRequest = Message('RenewDelegationTokenRequest', 39, "1-2", '2+', [
    f('hmac', 'bytes'),
    f('renew_period_ms', 'int64'),
])

RenewDelegationTokenResponse = Message('RenewDelegationTokenResponse', 39, "1-2", '2+', [
    f('error_code', 'int16'),
    f('expiry_timestamp_ms', 'int64'),
    f('throttle_time_ms', 'int32'),
])
