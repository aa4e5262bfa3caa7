"""AlterConfigs (api key 33): requests and responses, versions 0-2."""

from ..schema import Message, f

AlterConfigsRequest = Message('AlterConfigsRequest', 33, "0-2", '2+', [
    f('resources', [
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
        f('configs', [
            f('name', 'string'),
            f('value', 'string', nullable='0+'),
        ]),
    ]),
    f('validate_only', 'bool'),
])

AlterConfigsResponse = Message('AlterConfigsResponse', 33, "0-2", '2+', [
    f('throttle_time_ms', 'int32'),
    f('responses', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('resource_type', 'int8'),
        f('resource_name', 'string'),
    ]),
])
