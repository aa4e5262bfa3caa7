"""AlterUserScramCredentials (api key 51): requests and responses, version 0 (KIP-554).

An upsertion carries the salted password (``Hi(password, salt, iterations)``), never the password.
"""

from ..schema import Message, f

AlterUserScramCredentialsRequest = Message('AlterUserScramCredentialsRequest', 51, "0", '0+', [
    f('deletions', [
        f('name', 'string'),
        f('mechanism', 'int8'),
    ]),
    f('upsertions', [
        f('name', 'string'),
        f('mechanism', 'int8'),
        f('iterations', 'int32'),
        f('salt', 'bytes'),
        f('salted_password', 'bytes'),
    ]),
])

AlterUserScramCredentialsResponse = Message('AlterUserScramCredentialsResponse', 51, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('results', [
        f('user', 'string'),
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
    ]),
])
