"""Kafka's ``ClientQuotaManager`` (produce and fetch byte rates) and ``ClientRequestQuotaManager``.

Each (user, client-id) that a quota applies to gets a quota sensor holding a
``Rate`` with the quota as its bound, over ``quota.window.num`` samples of
``quota.window.size.seconds``.  Recording a value that takes the rate over the
bound yields a throttle time of ``round((rate - bound) / bound * windowSize)``
ms (Kafka's ``QuotaUtils.throttleTime``); the caller then answers with
``throttle_time_ms`` and hands the connection's :class:`~.throttle.ThrottleCallback`
to :meth:`ClientQuotaManager.throttle`, which mutes it through the reaper's
delay queue (see :mod:`.throttle`).

Deliberate differences: the principal is a plain user name (``ANONYMOUS``
until authentication exists; pluggable through the request context), and
sensors are refreshed lazily when the quota configuration changes instead of
through Kafka's config-change callbacks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ...common.clock import SYSTEM_CLOCK, Clock
from ...metrics import (
    Avg,
    CumulativeSum,
    MetricConfig,
    MetricName,
    Metrics,
    Quota,
    QuotaViolationError,
    Rate,
    Sensor,
    bounded_throttle_time_ms,
    throttle_time_ms,
)
from .entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, REQUEST_PERCENTAGE, QuotaConfigs
from .throttle import ThrottleCallback, ThrottledChannelReaper

log = logging.getLogger(__name__)


@dataclass
class ClientSensors:
    """The sensors of one quota entity: its rate (with the quota) and its throttle time."""

    quota_sensor: Sensor
    throttle_sensor: Sensor
    bound: float | None
    config_version: int


class ClientQuotaManager:
    """Byte-rate quotas of one kind: ``Produce`` (producer_byte_rate) or ``Fetch`` (consumer_byte_rate)."""

    quota_key = PRODUCER_BYTE_RATE
    rate_metric = "byte-rate"

    def __init__(
        self,
        quota_type: str,
        configs: QuotaConfigs,
        metrics: Metrics,
        reaper: ThrottledChannelReaper | None = None,
        *,
        window_num: int = 11,
        window_size_s: int = 1,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.quota_type = quota_type
        self.configs = configs
        self.metrics = metrics
        self.reaper = reaper
        self.window_num = window_num
        self.window_size_s = window_size_s
        self.clock = clock
        self._sensors: dict[tuple[str, str], ClientSensors] = {}
        queue = metrics.sensor(f"{quota_type}-delayQueue")
        queue.add(MetricName.of("queue-size", quota_type), CumulativeSum())
        self._queue_sensor = queue

    @property
    def quotas_enabled(self) -> bool:
        return self.configs.has_quotas(self.quota_key)

    def metric_config(self, bound: float | None) -> MetricConfig:
        return MetricConfig(
            samples=self.window_num,
            time_window_ms=self.window_size_s * 1000,
            quota=Quota.upper_bound(bound) if bound is not None else None,
        )

    def sensors(self, user: str, client_id: str) -> ClientSensors:
        """The sensors for the entity this (user, client id) falls under, created on first use."""
        resolved = self.configs.resolve(self.quota_key, user, client_id)
        tags = (resolved.user_tag, resolved.client_tag)
        cs = self._sensors.get(tags)
        if cs is not None and cs.config_version == self.configs.version and cs.bound == resolved.bound:
            return cs
        if cs is None:
            quota_sensor = self.metrics.sensor(f"{self.quota_type}-{tags[0]}-{tags[1]}",
                                               self.metric_config(resolved.bound))
            quota_sensor.add(self._metric_name(self.rate_metric, tags), self._rate_stat(),
                             self.metric_config(resolved.bound))
            throttle_sensor = self.metrics.sensor(f"{self.quota_type}ThrottleTime-{tags[0]}-{tags[1]}",
                                                  self.metric_config(None))
            throttle_sensor.add(self._metric_name("throttle-time", tags), Avg())
            cs = ClientSensors(quota_sensor, throttle_sensor, resolved.bound, self.configs.version)
            self._sensors[tags] = cs
        else:
            # The quota changed: keep the measured rate, move the bound (Kafka's updateQuotaMetricConfigs).
            metric = self.metrics.metric(self._metric_name(self.rate_metric, tags))
            if metric is not None:
                metric.config = self.metric_config(resolved.bound)
            cs.bound = resolved.bound
            cs.config_version = self.configs.version
        return cs

    def _rate_stat(self) -> Rate:
        return Rate()

    def _metric_name(self, name: str, tags: tuple[str, str]) -> MetricName:
        return MetricName.of(name, self.quota_type, user=tags[0], **{"client-id": tags[1]})

    def maybe_record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float,
                                              time_ms: int | None = None) -> int:
        """Record ``value`` against the entity's quota; the throttle time in ms (0 if within quota)."""
        if not self.quotas_enabled:
            return 0
        now = self.clock.time_ms() if time_ms is None else time_ms
        cs = self.sensors(user, client_id)
        try:
            cs.quota_sensor.record(value, now, True)
            return 0
        except QuotaViolationError as e:
            throttle = self.throttle_time(e, now)
            log.debug("%s quota violated by user=%r client-id=%r: rate %.0f > %.0f, throttle %d ms",
                      self.quota_type, user, client_id, e.value, e.bound, throttle)
            return throttle

    def throttle_time(self, e: QuotaViolationError, now_ms: int) -> int:
        """Kafka's ``throttleTime``: unbounded for byte rates (QuotaUtils.throttleTime)."""
        return throttle_time_ms(e, now_ms)

    def unrecord_quota_sensor(self, user: str, client_id: str, value: float, time_ms: int | None = None) -> None:
        """Take back a recorded value (a throttled fetch returns nothing, so its bytes do not count)."""
        if not self.quotas_enabled:
            return
        now = self.clock.time_ms() if time_ms is None else time_ms
        self.sensors(user, client_id).quota_sensor.record(-value, now, False)

    def get_max_value_in_quota_window(self, user: str, client_id: str) -> float:
        """The most a client may take in one go without being guaranteed throttling."""
        if not self.quotas_enabled:
            return float("inf")
        bound = self.configs.resolve(self.quota_key, user, client_id).bound
        if bound is None:
            return float("inf")
        return bound * (self.window_num - 1) * self.window_size_s

    def record_throttle(self, user: str, client_id: str, throttle_ms: int) -> None:
        """Account a throttle that is being applied (throttle-time and queue-size metrics)."""
        self.sensors(user, client_id).throttle_sensor.record(throttle_ms, self.clock.time_ms(), False)
        self._queue_sensor.record(1, self.clock.time_ms(), False)

    def throttle(self, user: str, client_id: str, callback: ThrottleCallback, throttle_ms: int) -> None:
        """Kafka's ``ClientQuotaManager.throttle``: account the throttle and mute the channel for
        ``throttle_ms`` (``callback.start_throttling()`` now, ``end_throttling()`` when due)."""
        if throttle_ms <= 0:
            return
        if self.reaper is None:
            raise RuntimeError(f"{self.quota_type} quota manager has no throttled-channel reaper")
        self.record_throttle(user, client_id, throttle_ms)
        self.reaper.add(callback, self.quota_type, throttle_ms, self.on_unmuted)

    def on_unmuted(self) -> None:
        self._queue_sensor.record(-1, self.clock.time_ms(), False)

    def entity_snapshot(self, now_ms: int | None = None) -> list[tuple[str, str, float, float | None, float]]:
        """(user tag, client-id tag, measured rate, quota bound or None, average throttle time in ms) of every
        entity with sensors, measured now (Kafka's per-entity ``byte-rate`` and ``throttle-time``)."""
        now = self.clock.time_ms() if now_ms is None else now_ms
        out = []
        for tags, cs in list(self._sensors.items()):
            rate = self.metrics.metric(self._metric_name(self.rate_metric, tags))
            throttle = self.metrics.metric(self._metric_name("throttle-time", tags))
            out.append((tags[0], tags[1], rate.measurable_value(now) if rate is not None else 0.0, cs.bound,
                        throttle.measurable_value(now) if throttle is not None else 0.0))
        return out

    def throttle_metrics(self) -> dict[str, float]:
        return {k: v for k, v in self.metrics.snapshot().items() if k.startswith(self.quota_type)}


class ClientRequestQuotaManager(ClientQuotaManager):
    """``request_percentage`` quotas: handler time as a percentage of one thread's time per window."""

    quota_key = REQUEST_PERCENTAGE
    rate_metric = "request-time"

    def throttle_time(self, e: QuotaViolationError, now_ms: int) -> int:
        """Bounded by one quota window, as Kafka's ClientRequestQuotaManager does
        (``QuotaUtils.boundedThrottleTime(e, maxThrottleTimeMs = quota.window.size.seconds)``)."""
        return bounded_throttle_time_ms(e, now_ms, self.window_size_s * 1000)

    def maybe_record_request_time(self, user: str, client_id: str, handler_ns: int,
                                  time_ms: int | None = None) -> int:
        """Record a request's handler time (ns) as a percentage; the throttle time in ms."""
        return self.maybe_record_and_get_throttle_time_ms(user, client_id, handler_ns * 100 / 1e9, time_ms)


class FetchQuotaManager(ClientQuotaManager):
    """``consumer_byte_rate`` quotas (Kafka's Fetch ClientQuotaManager)."""

    quota_key = CONSUMER_BYTE_RATE


class QuotaManagers:
    """The broker's quota managers (Kafka's ``QuotaFactory.QuotaManagers``) sharing one config and reaper.

    ``reaper`` None: the managers only measure (the analysis' what-if replays); ``throttle`` is then
    unavailable.
    """

    def __init__(self, configs: QuotaConfigs, metrics: Metrics, *, window_num: int = 11,
                 window_size_s: int = 1, reaper: ThrottledChannelReaper | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.configs = configs
        self.metrics = metrics
        self.reaper = reaper
        self.produce = ClientQuotaManager("Produce", configs, metrics, reaper, window_num=window_num,
                                          window_size_s=window_size_s, clock=clock)
        self.fetch = FetchQuotaManager("Fetch", configs, metrics, reaper, window_num=window_num,
                                       window_size_s=window_size_s, clock=clock)
        self.request = ClientRequestQuotaManager("Request", configs, metrics, reaper, window_num=window_num,
                                                 window_size_s=window_size_s, clock=clock)

    def by_type(self, quota_type: str) -> ClientQuotaManager:
        return {"Produce": self.produce, "Fetch": self.fetch, "Request": self.request}[quota_type]
