"""DescribeDelegationToken (api key 41): requests and responses, versions 1-3 (KIP-48, KIP-373).

Kafka 4.0 removed version 0 (KIP-896); version 1 is version 0's format, version 2 the first flexible one,
version 3 adds each token's requester.  ``owners`` null describes every token the requester may see; an
empty list describes none.
"""

from ..schema import Message, f

DescribeDelegationTokenRequest = Message('DescribeDelegationTokenRequest', 41, "1-3", '2+', [
    f('owners', [
        f('principal_type', 'string'),
        f('principal_name', 'string'),
    ], nullable='0+'),
])

DescribeDelegationTokenResponse = Message('DescribeDelegationTokenResponse', 41, "1-3", '2+', [
    f('error_code', 'int16'),
    f('tokens', [
        f('principal_type', 'string'),
        f('principal_name', 'string'),
        f('token_requester_principal_type', 'string', '3+'),
        f('token_requester_principal_name', 'string', '3+'),
        f('issue_timestamp', 'int64'),
        f('expiry_timestamp', 'int64'),
        f('max_timestamp', 'int64'),
        f('token_id', 'string'),
        f('hmac', 'bytes'),
        f('renewers', [
            f('principal_type', 'string'),
            f('principal_name', 'string'),
        ]),
    ]),
    f('throttle_time_ms', 'int32'),
])
