"""DescribeAcls (api key 29): requests and responses, versions 0-3.

Version 0 knows only literal patterns: its filter and its resources carry no pattern type, which reads
back as LITERAL (3).
"""

from ..schema import Message, f

DescribeAclsRequest = Message('DescribeAclsRequest', 29, "0-3", '2+', [
    f('resource_type_filter', 'int8'),
    f('resource_name_filter', 'string', nullable='0+'),
    f('pattern_type_filter', 'int8', '1+', default=3),
    f('principal_filter', 'string', nullable='0+'),
    f('host_filter', 'string', nullable='0+'),
    f('operation', 'int8'),
    f('permission_type', 'int8'),
])

DescribeAclsResponse = Message('DescribeAclsResponse', 29, "0-3", '2+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+', default=None),
    f('resources', [
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
        f('pattern_type', 'int8', '1+', default=3),
        f('acls', [
            f('principal', 'string'),
            f('host', 'string'),
            f('operation', 'int8'),
            f('permission_type', 'int8'),
        ]),
    ]),
])
