"""CreateAcls (api key 30): requests and responses, versions 0-3 (v0: literal patterns only)."""

from ..schema import Message, f

CreateAclsRequest = Message('CreateAclsRequest', 30, "0-3", '2+', [
    f('creations', [
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
        f('resource_pattern_type', 'int8', '1+', default=3),
        f('principal', 'string'),
        f('host', 'string'),
        f('operation', 'int8'),
        f('permission_type', 'int8'),
    ]),
])

CreateAclsResponse = Message('CreateAclsResponse', 30, "0-3", '2+', [
    f('throttle_time_ms', 'int32'),
    f('results', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
    ]),
])
