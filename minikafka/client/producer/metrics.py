"""Producer metrics with the Java client's names (``SenderMetrics``, ``BufferPool`` and
``KafkaProducer`` metrics in group ``producer-metrics``, tag ``client-id``), on minikafka's model of
Kafka's metrics library.

Deliberate difference: per-topic and per-node metrics are not registered; network-layer metrics
(outgoing-byte-rate, request-rate, ...) are recorded by the Sender per produce request.
"""

from __future__ import annotations

from typing import Callable

from ...common.clock import Clock
from ...metrics import Avg, CumulativeSum, Max, MetricConfig, Metrics, Rate, Sensor, Value, WindowedCount

GROUP = "producer-metrics"


class ProducerMetrics:
    """Sensors the Sender, accumulator and producer record into."""

    def __init__(self, client_id: str, clock: Clock, sample_window_ms: int = 30000,
                 num_samples: int = 2) -> None:
        config = MetricConfig(samples=num_samples, time_window_ms=sample_window_ms,
                              tags={"client-id": client_id})
        self.registry = Metrics(config, clock=clock)
        m = self.registry

        def name(n: str, desc: str = ""):  # noqa: ANN202
            return m.metric_name(n, GROUP, desc)

        def sensor(sname: str) -> Sensor:
            return m.sensor(sname)

        self.batch_size = sensor("batch-size")
        self.batch_size.add(name("batch-size-avg", "The average number of bytes sent per partition per-request."),
                            Avg())
        self.batch_size.add(name("batch-size-max"), Max())
        self.compression_rate = sensor("compression-rate")
        self.compression_rate.add(name("compression-rate-avg"), Avg())
        self.queue_time = sensor("queue-time")
        self.queue_time.add(name("record-queue-time-avg"), Avg())
        self.queue_time.add(name("record-queue-time-max"), Max())
        self.request_time = sensor("request-time")
        self.request_time.add(name("request-latency-avg"), Avg())
        self.request_time.add(name("request-latency-max"), Max())
        self.records_per_request = sensor("records-per-request")
        self.records_per_request.add_meter(name("record-send-rate"), name("record-send-total"))
        self.records_per_request.add(name("records-per-request-avg"), Avg())
        self.retries = sensor("record-retries")
        self.retries.add_meter(name("record-retry-rate"), name("record-retry-total"))
        self.errors = sensor("errors")
        self.errors.add_meter(name("record-error-rate"), name("record-error-total"))
        self.record_size = sensor("record-size")
        self.record_size.add(name("record-size-max"), Max())
        self.record_size.add(name("record-size-avg"), Avg())
        self.throttle_time = sensor("produce-throttle-time")
        self.throttle_time.add(name("produce-throttle-time-avg"), Avg())
        self.throttle_time.add(name("produce-throttle-time-max"), Max())
        self.requests = sensor("request-sent")
        self.requests.add_meter(name("request-rate"), name("request-total"))
        self.outgoing_bytes = sensor("bytes-sent")
        self.outgoing_bytes.add_meter(name("outgoing-byte-rate"), name("outgoing-byte-total"))
        self.responses = sensor("response-received")
        self.responses.add_meter(name("response-rate"), name("response-total"))
        self.bufferpool_wait = sensor("bufferpool-wait-time")
        self.bufferpool_wait.add(name("bufferpool-wait-ratio"), Rate(unit="nanoseconds"))
        self.bufferpool_wait.add(name("bufferpool-wait-time-ns-total"), CumulativeSum())
        self.buffer_exhausted = sensor("buffer-exhausted-records")
        self.buffer_exhausted.add_meter(name("buffer-exhausted-rate"), name("buffer-exhausted-total"))
        self.flush_time = sensor("flush-time")
        self.flush_time.add(name("flush-time-ns-total"), CumulativeSum())
        # KafkaProducerMetrics: total time in each transactional call
        self.txn_init_time = sensor("txn-init-time")
        self.txn_init_time.add(name("txn-init-time-ns-total"), CumulativeSum())
        self.txn_begin_time = sensor("txn-begin-time")
        self.txn_begin_time.add(name("txn-begin-time-ns-total"), CumulativeSum())
        self.txn_send_offsets_time = sensor("txn-send-offsets-time")
        self.txn_send_offsets_time.add(name("txn-send-offsets-time-ns-total"), CumulativeSum())
        self.txn_commit_time = sensor("txn-commit-time")
        self.txn_commit_time.add(name("txn-commit-time-ns-total"), CumulativeSum())
        self.txn_abort_time = sensor("txn-abort-time")
        self.txn_abort_time.add(name("txn-abort-time-ns-total"), CumulativeSum())
        _ = (Value, WindowedCount)

    def gauge(self, metric: str, fn: Callable[[], float], desc: str = "") -> None:
        """Register a gauge such as buffer-available-bytes (``Metrics.addMetric`` with a ``Measurable``)."""
        self.registry.add_metric(self.registry.metric_name(metric, GROUP, desc), fn)

    def snapshot(self) -> dict[str, float]:
        """``{metric name: value}`` for the producer-metrics group (Java's ``producer.metrics()``)."""
        now = self.registry.clock.time_ms()
        return {n.name: mt.measurable_value(now) for n, mt in sorted(self.registry.metrics.items(),
                                                                     key=lambda kv: kv[0].name)}
