"""PushTelemetry (api key 72): requests and responses, version 0 (KIP-714)."""

from ..schema import Message, f

PushTelemetryRequest = Message('PushTelemetryRequest', 72, "0", '0+', [
    f('client_instance_id', 'uuid'),
    f('subscription_id', 'int32'),
    f('terminating', 'bool'),
    f('compression_type', 'int8'),
    f('metrics', 'bytes'),
])

PushTelemetryResponse = Message('PushTelemetryResponse', 72, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
])
