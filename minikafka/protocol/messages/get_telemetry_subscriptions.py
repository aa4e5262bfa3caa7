"""GetTelemetrySubscriptions (api key 71): requests and responses, version 0 (KIP-714)."""

from ..schema import Message, f

GetTelemetrySubscriptionsRequest = Message('GetTelemetrySubscriptionsRequest', 71, "0", '0+', [
    f('client_instance_id', 'uuid'),
])

GetTelemetrySubscriptionsResponse = Message('GetTelemetrySubscriptionsResponse', 71, "0", '0+', [
    f('throttle_time_ms', 'int32'),
    f('error_code', 'int16'),
    f('client_instance_id', 'uuid'),
    f('subscription_id', 'int32'),
    f('accepted_compression_types', '[]int8'),
    f('push_interval_ms', 'int32'),
    f('telemetry_max_bytes', 'int32'),
    f('delta_temporality', 'bool'),
    f('requested_metrics', '[]string'),
])
