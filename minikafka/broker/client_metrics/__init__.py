"""KIP-714 client metrics: subscriptions (CLIENT_METRICS config resources), the broker's
:class:`~.manager.ClientMetricsManager` answering GetTelemetrySubscriptions / PushTelemetry, and the
:class:`~.receiver.ClientTelemetryStore` that decodes pushed OTLP metrics for ``/metrics``."""
