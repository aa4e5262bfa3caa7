"""DescribeUserScramCredentials (api key 50): requests and responses, version 0 (KIP-554)."""

from ..schema import Message, f

DescribeUserScramCredentialsRequest = Message('DescribeUserScramCredentialsRequest', 50, "0", '0+', [
    f('users', [
        f('name', 'string'),
    ], nullable='0+'),
])

DescribeUserScramCredentialsResponse = Message('DescribeUserScramCredentialsResponse', 50, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+'),
    f('results', [
        f('user', 'string'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('credential_infos', [
            f('mechanism', 'int8'),
            f('iterations', 'int32'),
        ]),
    ]),
])
