"""ApiVersions (api key 18): requests and responses, versions 0-4.

v3 is the first flexible version, with the client's software name and version and the KIP-584 features
(tagged fields).  v4 (KAFKA-17011) only lets ``supported_features`` carry a feature whose minimum
supported level is 0: brokers leave such features out of v0-v3 answers, which older clients could not
parse.
"""

from ..schema import Message, f

ApiVersionsRequest = Message('ApiVersionsRequest', 18, "0-4", '3+', [
    f('client_software_name', 'string', '3+'),
    f('client_software_version', 'string', '3+'),
])

ApiVersionsResponse = Message('ApiVersionsResponse', 18, "0-4", '3+', [
    f('error_code', 'int16'),
    f('api_keys', [
        f('api_key', 'int16'),
        f('min_version', 'int16'),
        f('max_version', 'int16'),
    ]),
    f('throttle_time_ms', 'int32', '1+'),
    f('supported_features', [
        f('name', 'string', '3+'),
        f('min_version', 'int16', '3+'),
        f('max_version', 'int16', '3+'),
    ], '3+', tag=0),
    f('finalized_features_epoch', 'int64', '3+', default=-1, tag=1),
    f('finalized_features', [
        f('name', 'string', '3+'),
        f('max_version_level', 'int16', '3+'),
        f('min_version_level', 'int16', '3+'),
    ], '3+', tag=2),
    f('zk_migration_ready', 'bool', '3+', default=False, tag=3),
])
