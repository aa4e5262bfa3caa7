"""KafkaMetric and Sensor (org.apache.kafka.common.metrics.{KafkaMetric,Sensor})."""

from __future__ import annotations

import inspect
import sys
from typing import Callable, Iterable, Protocol, Union

from ..common.clock import Clock
from .config import MetricConfig, MetricName, should_record
from .quota import QuotaViolationError
from .stats import CompoundStat, Measurable, MeasurableStat, Meter, SampledStat, TokenBucket


class MetricRegistry(Protocol):
    """What a sensor needs of its registry (:class:`~minikafka.metrics.registry.Metrics`)."""

    config: MetricConfig
    clock: Clock

    def register_metric(self, metric: "KafkaMetric") -> None: ...

#: What ``Metrics.add_metric`` accepts: a Measurable, or a gauge function ``f()`` / ``f(config, now_ms)``.
MeasurableOrFn = Union[Measurable, Callable[..., float]]

NEVER_EXPIRES = sys.maxsize


class _FnMeasurable:
    """Adapts a plain function to Kafka's Measurable/Gauge."""

    def __init__(self, fn: Callable[..., float]) -> None:
        self.fn = fn
        try:
            self._nargs = len(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            self._nargs = 0

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return float(self.fn(config, now_ms) if self._nargs >= 2 else self.fn())

    def __repr__(self) -> str:
        return f"Gauge({self.fn!r})"


def as_measurable(m: MeasurableOrFn) -> Measurable:
    if hasattr(m, "measure"):
        return m
    if callable(m):
        return _FnMeasurable(m)
    raise TypeError(f"Unsupported metric value provider {m!r}")


class KafkaMetric:
    """Kafka's ``KafkaMetric``: a named measurable with a (replaceable) config and a clock.

    ``config`` may be reassigned at run time (Kafka's ``metric.config(newConfig)``, used when a quota
    changes); a sensor records this metric's stat with the metric's current config.
    """

    __slots__ = ("metric_name", "measurable", "config", "clock")

    def __init__(self, metric_name: MetricName, measurable: Measurable, config: MetricConfig,
                 clock: Clock) -> None:
        self.metric_name = metric_name
        self.measurable = measurable
        self.config = config
        self.clock = clock

    def measurable_value(self, time_ms: int) -> float:
        return self.measurable.measure(self.config, time_ms)

    def value(self) -> float:
        """The value measured now (Kafka's deprecated ``value()`` / ``metricValue()``)."""
        return self.measurable_value(self.clock.time_ms())

    metric_value = value

    def __repr__(self) -> str:
        return f"KafkaMetric({self.metric_name}, {self.measurable!r})"


class Sensor:
    """Kafka's ``Sensor``: records values into its stats (and its parents'), then checks quotas.

    Deliberate difference: the inactivity expiration is given in ms (Kafka takes seconds);
    ``None`` means never (Long.MAX_VALUE).
    """

    def __init__(self, registry: MetricRegistry, name: str, parents: Iterable["Sensor"] = (),
                 config: MetricConfig | None = None, inactive_sensor_expiration_ms: int | None = None,
                 recording_level: str = "INFO") -> None:
        self.registry = registry
        self.name = name
        self.parents: tuple[Sensor, ...] = tuple(parents or ())
        self.config = config if config is not None else registry.config
        self.inactive_sensor_expiration_ms = (
            NEVER_EXPIRES if inactive_sensor_expiration_ms is None else inactive_sensor_expiration_ms)
        self.recording_level = recording_level.upper()
        self._stats: list[tuple[object, Callable[[], MetricConfig]]] = []
        self._metrics: dict[MetricName, KafkaMetric] = {}
        self.last_record_time: int = registry.clock.time_ms()
        self._check_forest(set())

    def _check_forest(self, seen: set[int]) -> None:
        if id(self) in seen:
            raise ValueError(f"Circular dependency in sensors: {self.name} is its own parent.")
        seen.add(id(self))
        for p in self.parents:
            p._check_forest(seen)

    # -- recording ---------------------------------------------------------------------------------
    def should_record(self) -> bool:
        return should_record(self.recording_level, self.config.recording_level)

    def record(self, value: float = 1.0, time_ms: int | None = None, check_quotas: bool = True) -> None:
        """Record ``value`` at ``time_ms`` (default: the registry clock) into every stat, then (if
        ``check_quotas``) raise :class:`QuotaViolationError` for the first metric outside its quota,
        then record into the parents.  The value stays recorded even when it violates; a violation
        in this sensor means the parents do not see the value (as in Kafka)."""
        if not self.should_record():
            return
        if time_ms is None:
            time_ms = self.registry.clock.time_ms()
        self.last_record_time = time_ms
        for stat, config_of in self._stats:
            stat.record(config_of(), value, time_ms)  # type: ignore[attr-defined]
        if check_quotas:
            self.check_quotas(time_ms)
        for parent in self.parents:
            parent.record(value, time_ms, check_quotas)

    def check_quotas(self, time_ms: int | None = None) -> None:
        """Raise :class:`QuotaViolationError` for the first metric (in registration order) whose value is
        outside its config's quota (a TokenBucket violates when its credits are below 0)."""
        if time_ms is None:
            time_ms = self.registry.clock.time_ms()
        for metric in self._metrics.values():
            config = metric.config
            if config is None or config.quota is None:
                continue
            value = metric.measurable_value(time_ms)
            if isinstance(metric.measurable, TokenBucket):
                if value < 0:
                    raise QuotaViolationError(metric, value, config.quota.bound)
            elif not config.quota.acceptable(value):
                raise QuotaViolationError(metric, value, config.quota.bound)

    # -- registration ------------------------------------------------------------------------------
    def add(self, metric_name: MetricName, stat: MeasurableStat | Measurable,
            config: MetricConfig | None = None) -> bool:
        """Register ``stat`` as metric ``metric_name``.  False if the sensor has expired; True (and no
        change) if the sensor already has that metric."""
        if self.has_expired():
            return False
        if metric_name in self._metrics:
            return True
        metric = KafkaMetric(metric_name, stat, config if config is not None else self.config,
                             self.registry.clock)
        self.registry.register_metric(metric)
        self._metrics[metric_name] = metric
        self._stats.append((stat, lambda: metric.config))
        return True

    def add_compound(self, stat: CompoundStat, config: MetricConfig | None = None) -> bool:
        """Register a CompoundStat (Meter, ...): one stat, several metrics sharing one config."""
        if self.has_expired():
            return False
        stat_config = config if config is not None else self.config
        self._stats.append((stat, lambda: stat_config))
        for named in stat.stats():
            if named.name not in self._metrics:
                metric = KafkaMetric(named.name, named.stat, stat_config, self.registry.clock)
                self.registry.register_metric(metric)
                self._metrics[named.name] = metric
        return True

    def add_meter(self, rate_name: MetricName, total_name: MetricName, *, unit: str = "seconds",
                  rate_stat: SampledStat | None = None, config: MetricConfig | None = None) -> bool:
        """Register a :class:`Meter` (a rate under ``rate_name`` and a cumulative total under ``total_name``)."""
        return self.add_compound(Meter(rate_name, total_name, unit=unit, rate_stat=rate_stat), config)

    # -- lifecycle ---------------------------------------------------------------------------------
    def has_expired(self, now_ms: int | None = None) -> bool:
        """Inactive for strictly more than the expiration time."""
        if now_ms is None:
            now_ms = self.registry.clock.time_ms()
        return now_ms - self.last_record_time > self.inactive_sensor_expiration_ms

    def has_metrics(self) -> bool:
        return bool(self._metrics)

    @property
    def metrics(self) -> list[KafkaMetric]:
        return list(self._metrics.values())

    def __repr__(self) -> str:
        return f"Sensor({self.name!r}, metrics={[str(n) for n in self._metrics]})"
