"""DescribeConfigs (api key 32): requests and responses, versions 0-4."""

from ..schema import Message, f

DescribeConfigsRequest = Message('DescribeConfigsRequest', 32, "0-4", '4+', [
    f('resources', [
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
        f('configuration_keys', '[]string', nullable='0+'),
    ]),
    f('include_synonyms', 'bool', '1+', default=False),
    f('include_documentation', 'bool', '3+', default=False),
])

DescribeConfigsResponse = Message('DescribeConfigsResponse', 32, "0-4", '4+', [
    f('throttle_time_ms', 'int32'),
    f('results', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
        f('configs', [
            f('name', 'string'),
            f('value', 'string', nullable='0+'),
            f('read_only', 'bool'),
            f('is_default', 'bool', '0'),
            f('config_source', 'int8', '1+', default=-1),
            f('is_sensitive', 'bool'),
            f('synonyms', [
                f('name', 'string', '1+'),
                f('value', 'string', '1+', nullable='0+'),
                f('source', 'int8', '1+'),
            ], '1+'),
            f('config_type', 'int8', '3+', default=0),
            f('documentation', 'string', '3+', nullable='0+'),
        ]),
    ]),
])
