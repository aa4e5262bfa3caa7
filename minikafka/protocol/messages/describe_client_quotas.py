"""DescribeClientQuotas (api key 48): requests and responses, versions 0-1."""

from ..schema import Message, f

DescribeClientQuotasRequest = Message('DescribeClientQuotasRequest', 48, "0-1", '1+', [
    f('components', [
        f('entity_type', 'string'),
        f('match_type', 'int8'),
        f('match', 'string', nullable='0+'),
    ]),
    f('strict', 'bool'),
])

DescribeClientQuotasResponse = Message('DescribeClientQuotasResponse', 48, "0-1", '1+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('error_message', 'string', nullable='0+'),
    f('entries', [
        f('entity', [
            f('entity_type', 'string'),
            f('entity_name', 'string', nullable='0+'),
        ]),
        f('values', [
            f('key', 'string'),
            f('value', 'float64'),
        ]),
    ], nullable='0+'),
])
