"""DeleteAcls (api key 31): requests and responses, versions 0-3 (v0: literal patterns only)."""

from ..schema import Message, f

DeleteAclsRequest = Message('DeleteAclsRequest', 31, "0-3", '2+', [
    f('filters', [
        f('resource_type_filter', 'int8'),
        f('resource_name_filter', 'string', nullable='0+'),
        f('pattern_type_filter', 'int8', '1+', default=3),
        f('principal_filter', 'string', nullable='0+'),
        f('host_filter', 'string', nullable='0+'),
        f('operation', 'int8'),
        f('permission_type', 'int8'),
    ]),
])

DeleteAclsResponse = Message('DeleteAclsResponse', 31, "0-3", '2+', [
    f('throttle_time_ms', 'int32'),
    f('filter_results', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+', default=None),
        f('matching_acls', [
            f('error_code', 'int16'),
            f('error_message', 'string', nullable='0+', default=None),
            f('resource_type', 'int8'),
            f('resource_name', 'string'),
            f('pattern_type', 'int8', '1+', default=3),
            f('principal', 'string'),
            f('host', 'string'),
            f('operation', 'int8'),
            f('permission_type', 'int8'),
        ]),
    ]),
])
