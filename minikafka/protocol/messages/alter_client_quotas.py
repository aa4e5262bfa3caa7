"""AlterClientQuotas (api key 49): requests and responses, versions 0-1."""

from ..schema import Message, f

AlterClientQuotasRequest = Message('AlterClientQuotasRequest', 49, "0-1", '1+', [
    f('entries', [
        f('entity', [
            f('entity_type', 'string'),
            f('entity_name', 'string', nullable='0+'),
        ]),
        f('ops', [
            f('key', 'string'),
            f('value', 'float64'),
            f('remove', 'bool'),
        ]),
    ]),
    f('validate_only', 'bool'),
])

AlterClientQuotasResponse = Message('AlterClientQuotasResponse', 49, "0-1", '1+', [
    f('throttle_time_ms', 'int32'),
    f('entries', [
        f('error_code', 'int16'),
        f('error_message', 'string', nullable='0+'),
        f('entity', [
            f('entity_type', 'string'),
            f('entity_name', 'string', nullable='0+'),
        ]),
    ]),
])
