"""Consumer metrics under the Java client's names (``FetchMetricsManager`` /
``FetchMetricsRegistry`` and ``ConsumerCoordinator``'s ``ConsumerCoordinatorMetrics``).

Group ``consumer-fetch-manager-metrics`` (tag ``client-id``): fetch-latency-avg/max,
fetch-rate/total, fetch-size-avg/max, bytes-consumed-rate/total,
records-per-request-avg, records-consumed-rate/total, fetch-throttle-time-avg/max,
records-lag-max, and per partition (tags ``client-id``, ``topic``, ``partition``)
records-lag, records-lag-max, records-lag-avg.

Group ``consumer-coordinator-metrics``: commit-latency-avg/max, commit-rate/total,
join-rate/total, sync-rate/total, heartbeat-rate/total, assigned-partitions.

As in Java, records-lag is recorded when records are handed to the
application: high watermark (from the fetch response that carried them) minus
the new position; also when a fetch for a caught-up partition returns nothing.
"""

from __future__ import annotations

from typing import Callable

from ...common.clock import SYSTEM_CLOCK, Clock
from ...metrics import Avg, Max, MetricConfig, MetricName, Metrics, Value, WindowedCount
from ..fetch_session import TopicPartition

__all__ = ["ConsumerMetrics", "FETCH_GROUP", "COORDINATOR_GROUP"]

FETCH_GROUP = "consumer-fetch-manager-metrics"
COORDINATOR_GROUP = "consumer-coordinator-metrics"


class ConsumerMetrics:
    """The consumer's metrics registry and the sensors its parts record into."""

    def __init__(self, client_id: str, *, samples: int = 2, window_ms: int = 30000,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        config = MetricConfig(samples=samples, time_window_ms=window_ms, tags={"client-id": client_id})
        self.registry = Metrics(config, clock)
        self.client_id = client_id
        r = self.registry

        def name(n: str, group: str = FETCH_GROUP, desc: str = "") -> MetricName:
            return r.metric_name(n, group, desc)

        self.fetch_latency = r.sensor("fetch-latency")
        self.fetch_latency.add(name("fetch-latency-avg", desc="The average time taken for a fetch request."), Avg())
        self.fetch_latency.add(name("fetch-latency-max", desc="The max time taken for any fetch request."), Max())
        self.fetch_latency.add_meter(name("fetch-rate"), name("fetch-total"), rate_stat=WindowedCount())

        self.bytes_fetched = r.sensor("bytes-fetched")
        self.bytes_fetched.add(name("fetch-size-avg"), Avg())
        self.bytes_fetched.add(name("fetch-size-max"), Max())
        self.bytes_fetched.add_meter(name("bytes-consumed-rate"), name("bytes-consumed-total"))

        self.records_fetched = r.sensor("records-fetched")
        self.records_fetched.add(name("records-per-request-avg"), Avg())
        self.records_fetched.add_meter(name("records-consumed-rate"), name("records-consumed-total"))

        self.fetch_throttle = r.sensor("fetch-throttle-time")
        self.fetch_throttle.add(name("fetch-throttle-time-avg"), Avg())
        self.fetch_throttle.add(name("fetch-throttle-time-max"), Max())

        self.records_lag = r.sensor("records-lag")
        self.records_lag.add(name("records-lag-max", desc="The maximum lag in terms of number of records for any "
                                                          "partition in this window."), Max())

        self.commit_latency = r.sensor("commit-latency")
        self.commit_latency.add(name("commit-latency-avg", COORDINATOR_GROUP), Avg())
        self.commit_latency.add(name("commit-latency-max", COORDINATOR_GROUP), Max())
        self.commit_latency.add_meter(name("commit-rate", COORDINATOR_GROUP), name("commit-total", COORDINATOR_GROUP),
                                      rate_stat=WindowedCount())
        self.join = r.sensor("join-latency")
        self.join.add(name("join-time-avg", COORDINATOR_GROUP), Avg())
        self.join.add_meter(name("join-rate", COORDINATOR_GROUP), name("join-total", COORDINATOR_GROUP),
                            rate_stat=WindowedCount())
        self.sync = r.sensor("sync-latency")
        self.sync.add(name("sync-time-avg", COORDINATOR_GROUP), Avg())
        self.sync.add_meter(name("sync-rate", COORDINATOR_GROUP), name("sync-total", COORDINATOR_GROUP),
                            rate_stat=WindowedCount())
        self.heartbeat = r.sensor("heartbeat-latency")
        self.heartbeat.add(name("heartbeat-response-time-max", COORDINATOR_GROUP), Max())
        self.heartbeat.add_meter(name("heartbeat-rate", COORDINATOR_GROUP), name("heartbeat-total", COORDINATOR_GROUP),
                                 rate_stat=WindowedCount())
        self._partition_lag: dict[TopicPartition, object] = {}

    def add_gauge(self, metric: str, group: str, fn: Callable[[], float]) -> None:
        self.registry.add_metric(self.registry.metric_name(metric, group), lambda *a: float(fn()))

    # -- recording ---------------------------------------------------------------------------------
    def record_fetch(self, latency_ms: float, throttle_ms: int) -> None:
        self.fetch_latency.record(latency_ms)
        self.fetch_throttle.record(throttle_ms)

    def record_topic_fetch(self, nbytes: int, nrecords: int) -> None:
        """Bytes and records handed to the application from one fetched chunk."""
        self.bytes_fetched.record(nbytes)
        self.records_fetched.record(nrecords)

    def record_partition_lag(self, tp: TopicPartition, lag: int) -> None:
        """Java's ``FetchMetricsManager.recordPartitionLag``."""
        self.records_lag.record(lag)
        name = f"{tp.topic}-{tp.partition}.records-lag"
        sensor = self.registry.get_sensor(name)
        if sensor is None:
            sensor = self.registry.sensor(name)
            tags = {"topic": tp.topic.replace(".", "_"), "partition": str(tp.partition)}
            mk = lambda n: self.registry.metric_name(n, FETCH_GROUP, "", tags)  # noqa: E731
            sensor.add(mk("records-lag"), Value())
            sensor.add(mk("records-lag-max"), Max())
            sensor.add(mk("records-lag-avg"), Avg())
        sensor.record(lag)

    def remove_partition(self, tp: TopicPartition) -> None:
        self.registry.remove_sensor(f"{tp.topic}-{tp.partition}.records-lag")

    # -- reading -----------------------------------------------------------------------------------
    def value(self, metric: str, group: str = FETCH_GROUP, **tags: str) -> float | None:
        """The value of one metric; ``tags`` adds to the client-id tag (e.g. topic, partition)."""
        all_tags = {"client-id": self.client_id, **{k.replace("_", "-"): str(v) for k, v in tags.items()}}
        m = self.registry.metric(MetricName.with_tags(metric, group, all_tags))
        return None if m is None else m.value()

    def snapshot(self) -> dict[MetricName, float]:
        now = self.registry.clock.time_ms()
        return {n: m.measurable_value(now) for n, m in list(self.registry.metrics.items())}
