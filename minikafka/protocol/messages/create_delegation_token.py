"""CreateDelegationToken (api key 38): requests and responses, versions 1-3 (KIP-48, KIP-373).

Kafka 4.0 removed version 0 (KIP-896); version 1 is version 0's format.  Version 2 is the first
flexible version; version 3 names the token's owner in the request (KIP-373: create a token for another
user, CREATE_TOKENS on that USER) and the requester in the response.  An absent or empty owner is the
requesting principal.  ``max_lifetime_ms`` -1 (or any value <= 0) takes ``delegation.token.max.lifetime.ms``.
"""

from ..schema import Message, f

CreateDelegationTokenRequest = Message('CreateDelegationTokenRequest', 38, "1-3", '2+', [
    f('owner_principal_type', 'string', '3+', nullable='3+'),
    f('owner_principal_name', 'string', '3+', nullable='3+'),
    f('renewers', [
        f('principal_type', 'string'),
        f('principal_name', 'string'),
    ]),
    f('max_lifetime_ms', 'int64'),
])

CreateDelegationTokenResponse = Message('CreateDelegationTokenResponse', 38, "1-3", '2+', [
    f('error_code', 'int16'),
    f('principal_type', 'string'),
    f('principal_name', 'string'),
    f('token_requester_principal_type', 'string', '3+'),
    f('token_requester_principal_name', 'string', '3+'),
    f('issue_timestamp_ms', 'int64'),
    f('expiry_timestamp_ms', 'int64'),
    f('max_timestamp_ms', 'int64'),
    f('token_id', 'string'),
    f('hmac', 'bytes'),
    f('throttle_time_ms', 'int32'),
])
