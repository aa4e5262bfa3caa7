"""Kafka's ``ReplicationQuotaManager``: byte-rate throttling of replication traffic.

Each broker has two: ``LeaderReplication`` (bytes a leader sends to followers)
and ``FollowerReplication`` (bytes a follower fetches).  The bound is the
broker's ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``
(bytes/s); which partitions it applies to comes from the topic configs
``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``:
``*`` (every replica of the topic) or a ``partition:broker,...`` list, of which a
broker keeps the partitions listed with its own id (Kafka's
``TopicConfigHandler.parseThrottledPartitions``): the leader list names replicas
on the leader side, the follower list replicas on the follower side.

As in Kafka the sensor holds a :class:`~minikafka.metrics.SimpleRate` over
``replication.quota.window.num`` x ``replication.quota.window.size.seconds``
(no padding of young windows, unlike client quotas' Rate); :meth:`record`
never throws (a violation is ignored) and :meth:`is_quota_exceeded` checks
the sensor's quota without recording.

Metrics: ``kafka.server:type=LeaderReplication,name=byte-rate`` (Kafka's
``byte-rate`` metric in group ``LeaderReplication``) and likewise
``FollowerReplication``, plus minikafka's ``throttled-partitions`` (partitions
of this broker currently marked throttled), ``recorded-bytes-total`` and
``recorded-count`` (every :meth:`record` call; the leader records once per
follower fetch, so these expose the phantom empty-response bytes).
"""

from __future__ import annotations

import logging
import sys
from typing import Callable, Iterable

from ...common.clock import Clock
from ...metrics import (CumulativeCount, CumulativeSum, MetricConfig, MetricName, Metrics, Quota,
                        QuotaViolationError, SimpleRate, Sensor)

log = logging.getLogger(__name__)

LEADER_REPLICATION = "LeaderReplication"
FOLLOWER_REPLICATION = "FollowerReplication"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
#: The largest empty Fetch response (``FetchResponse.sizeOf`` without partitions: 12 bytes at v4-v6, 18 at
#: v7-v11, 16 at v12+); a response holding any partition is larger.
EMPTY_FETCH_RESPONSE_MAX_BYTES = 18
UNLIMITED = sys.maxsize  # Kafka's ReplicationQuotaManagerConfig.QuotaBytesPerSecondDefault (Long.MAX_VALUE)


class AllReplicas:
    """Kafka's ``ReplicationQuotaManager.AllReplicas`` marker (``*``)."""

    def __repr__(self) -> str:
        return "*"


ALL_REPLICAS = AllReplicas()


def validate_throttled_replicas(value: str) -> None:
    """Kafka's ``ThrottledReplicaListValidator``: ``""``, ``*`` or ``partition:broker`` pairs.

    Raises ValueError otherwise."""
    v = value.strip()
    if v in ("", "*"):
        return
    for item in v.split(","):
        parts = item.strip().split(":")
        if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"{value!r} must be the literal '*' or a list of replicas in the following format: "
                             "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def parse_throttled_partitions(value: str | None, broker_id: int) -> list[int] | AllReplicas:
    """Kafka's ``TopicConfigHandler.parseThrottledPartitions``: the partitions of ``broker_id``'s
    replicas a throttled-replicas list names (``*`` = all)."""
    if value is None:
        return []
    v = value.strip()
    validate_throttled_replicas(v)
    if v == "":
        return []
    if v == "*":
        return ALL_REPLICAS
    out = []
    for item in v.split(","):
        partition, broker = (int(x) for x in item.strip().split(":"))
        if broker == broker_id:
            out.append(partition)
    return out


def rate_of(value: int | float | None) -> float:
    """A configured rate: negative or None means unlimited."""
    return float(UNLIMITED) if value is None or value < 0 else float(value)


class ReplicationQuotaManager:
    """Kafka's ``kafka.server.ReplicationQuotaManager`` for one replication type."""

    def __init__(self, replication_type: str, metrics: Metrics, *, rate: float = UNLIMITED,
                 window_num: int = 11, window_size_s: int = 1,
                 clock: Clock | None = None) -> None:
        self.replication_type = replication_type
        self.metrics = metrics
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.clock = clock or metrics.clock
        self.quota = Quota.upper_bound(rate_of(rate))
        self.throttled_partitions: dict[str, list[int] | AllReplicas] = {}
        self.rate_metric_name = MetricName.of("byte-rate", replication_type)
        self._sensor: Sensor | None = None
        self.recorded_bytes = 0  # every value recorded (the leader: once per follower fetch)
        self.recorded_count = 0
        # Records of an empty Fetch response's size: the leader's phantom 18-byte (v7-v11) answers.
        self.empty_recorded_count = 0
        self.observers: list[Callable[[int], None]] = []  # fn(bytes) per record()
        total = metrics.sensor(f"{replication_type}-recorded")
        total.add(MetricName.of("recorded-bytes-total", replication_type), CumulativeSum())
        total.add(MetricName.of("recorded-count", replication_type), CumulativeCount())
        self._total_sensor = total
        metrics.add_metric_if_absent(MetricName.of("throttled-partitions", replication_type),
                                     lambda: float(self.throttled_partition_count()))
        self._hosted: Callable[[], Iterable[tuple[str, int]]] = lambda: ()

    # -- the quota ---------------------------------------------------------------
    def quota_metric_config(self, quota: Quota) -> MetricConfig:
        """Kafka's ``getQuotaMetricConfig``."""
        return MetricConfig(samples=self.window_num, time_window_ms=self.window_size_s * 1000, quota=quota)

    def sensor(self) -> Sensor:
        if self._sensor is None:
            s = self.metrics.sensor(self.replication_type, self.quota_metric_config(self.quota))
            s.add(self.rate_metric_name, SimpleRate(), self.quota_metric_config(self.quota))
            self._sensor = s
        return self._sensor

    def update_quota(self, rate: float | None) -> None:
        """Kafka's ``updateQuota``: a new bound for the live sensor (the measured rate is kept)."""
        self.quota = Quota.upper_bound(rate_of(rate))
        metric = self.metrics.metric(self.rate_metric_name)
        if metric is not None:
            metric.config = self.quota_metric_config(self.quota)
        log.info("%s quota set to %s bytes/s", self.replication_type,
                 "unlimited" if self.quota.bound >= UNLIMITED else int(self.quota.bound))

    @property
    def limited(self) -> bool:
        return self.quota.bound < UNLIMITED

    def is_quota_exceeded(self) -> bool:
        """Kafka's ``isQuotaExceeded``: the sensor's quotas checked without recording."""
        if not self.limited:
            return False
        try:
            self.sensor().check_quotas()
        except QuotaViolationError as e:
            log.debug("%s: quota violated: rate %.0f > %.0f", self.replication_type, e.value, e.bound)
            return True
        return False

    def record(self, value: int) -> None:
        """Kafka's ``record``: record bytes; a violation is ignored (the caller checks before sending)."""
        try:
            self.sensor().record(float(value))
        except QuotaViolationError:
            pass
        self._total_sensor.record(float(value), check_quotas=False)
        self.recorded_bytes += value
        self.recorded_count += 1
        if value <= EMPTY_FETCH_RESPONSE_MAX_BYTES:
            self.empty_recorded_count += 1
        for observe in self.observers:
            observe(value)

    def rate(self) -> float:
        """The measured byte rate (bytes/s)."""
        metric = self.metrics.metric(self.rate_metric_name)
        return metric.value() if metric is not None else 0.0

    # -- which partitions ----------------------------------------------------------
    def mark_throttled(self, topic: str, partitions: list[int] | AllReplicas) -> None:
        self.throttled_partitions[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self.throttled_partitions.pop(topic, None)

    def update_topic(self, topic: str, value: str | None, broker_id: int) -> None:
        """Kafka's ``TopicConfigHandler.updateThrottledList`` for this manager's config."""
        if value is not None and value.strip():
            self.mark_throttled(topic, parse_throttled_partitions(value, broker_id))
        else:
            self.remove_throttle(topic)

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Kafka's ``isThrottled``: the topic is marked ``*`` or lists this partition."""
        parts = self.throttled_partitions.get(topic)
        if parts is None:
            return False
        return parts is ALL_REPLICAS or partition in parts  # type: ignore[operator]

    def set_hosted(self, hosted: Callable[[], Iterable[tuple[str, int]]]) -> None:
        """Where :meth:`throttled_partition_count` finds this broker's partitions of the right role."""
        self._hosted = hosted

    def throttled_partition_count(self) -> int:
        return sum(1 for t, p in self._hosted() if self.is_throttled(t, p))
