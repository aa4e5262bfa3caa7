"""IncrementalAlterConfigs (api key 44): requests and responses, versions 0-1."""

from ..schema import Message, f

IncrementalAlterConfigsRequest = Message('IncrementalAlterConfigsRequest', 44, "0-1", '1+', [
    f('resources', [
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
        f('configs', [
            f('name', 'string'),
            f('config_operation', 'int8'),  # 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
            f('value', 'string', nullable='0+'),
        ]),
    ]),
    f('validate_only', 'bool'),
])

IncrementalAlterConfigsResponse = Message('IncrementalAlterConfigsResponse', 44, "0-1", '1+', [
    f('throttle_time_ms', 'int32'),
    f('responses', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
    ]),
])
