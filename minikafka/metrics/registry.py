"""The metrics registry (org.apache.kafka.common.metrics.Metrics), driven by an injected clock."""

from __future__ import annotations

from typing import Iterable

from ..common.clock import SYSTEM_CLOCK, Clock
from .config import MetricConfig, MetricName
from .sensor import KafkaMetric, MeasurableOrFn, Sensor, as_measurable


class Metrics:
    """Kafka's ``Metrics``: sensors by name, metrics by :class:`MetricName`.

    Differences: no reporters/JMX and no background expiry thread -- call
    :meth:`remove_expired_sensors` (Kafka's ExpireSensorTask) from your own scheduler.
    """

    def __init__(self, config: MetricConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config if config is not None else MetricConfig()
        self.clock = clock
        self.metrics: dict[MetricName, KafkaMetric] = {}
        self.sensors: dict[str, Sensor] = {}
        self._children: dict[str, list[Sensor]] = {}

    # -- names -------------------------------------------------------------------------------------
    def metric_name(self, name: str, group: str, description: str = "",
                    tags: dict[str, str] | None = None) -> MetricName:
        """Kafka's ``metricName``: the registry config's default tags, overridden by ``tags``."""
        merged = dict(self.config.tags)
        merged.update(tags or {})
        return MetricName.with_tags(name, group, merged, description)

    # -- sensors -----------------------------------------------------------------------------------
    def get_sensor(self, name: str) -> Sensor | None:
        return self.sensors.get(name)

    def sensor(self, name: str, config: MetricConfig | None = None, parents: Iterable[Sensor] = (),
               inactive_sensor_expiration_ms: int | None = None, recording_level: str = "INFO") -> Sensor:
        """Get the sensor called ``name`` or create it (config defaults to the registry's)."""
        s = self.sensors.get(name)
        if s is None:
            parents = tuple(parents or ())
            s = Sensor(self, name, parents, config if config is not None else self.config,
                       inactive_sensor_expiration_ms, recording_level)
            self.sensors[name] = s
            for p in parents:
                self._children.setdefault(p.name, []).append(s)
        return s

    def remove_sensor(self, name: str) -> None:
        """Remove a sensor, its metrics, and (recursively) its child sensors."""
        s = self.sensors.get(name)
        if s is None:
            return
        del self.sensors[name]
        for m in s.metrics:
            self.remove_metric(m.metric_name)
        children = self._children.pop(name, [])
        for p in s.parents:
            siblings = self._children.get(p.name)
            if siblings is not None and s in siblings:
                siblings.remove(s)
        for child in children:
            self.remove_sensor(child.name)

    def remove_expired_sensors(self, now_ms: int | None = None) -> list[str]:
        """Kafka's ExpireSensorTask: remove every sensor inactive for longer than its expiration.
        Returns the names removed (children removed along with a parent included)."""
        if now_ms is None:
            now_ms = self.clock.time_ms()
        before = set(self.sensors)
        for name, s in list(self.sensors.items()):
            if self.sensors.get(name) is s and s.has_expired(now_ms):
                self.remove_sensor(name)
        return sorted(before - set(self.sensors))

    # -- metrics -----------------------------------------------------------------------------------
    def metric(self, metric_name: MetricName) -> KafkaMetric | None:
        return self.metrics.get(metric_name)

    def register_metric(self, metric: KafkaMetric) -> None:
        if metric.metric_name in self.metrics:
            raise ValueError(f"A metric named '{metric.metric_name}' already exists, can't register another one.")
        self.metrics[metric.metric_name] = metric

    def add_metric(self, metric_name: MetricName, measurable_or_fn: MeasurableOrFn,
                   config: MetricConfig | None = None) -> KafkaMetric:
        """Expose a measurable, or a gauge function ``f()`` / ``f(config, now_ms)``, not tied to a sensor."""
        m = KafkaMetric(metric_name, as_measurable(measurable_or_fn),
                        config if config is not None else self.config, self.clock)
        self.register_metric(m)
        return m

    def add_metric_if_absent(self, metric_name: MetricName, measurable_or_fn: MeasurableOrFn,
                             config: MetricConfig | None = None) -> KafkaMetric:
        existing = self.metrics.get(metric_name)
        return existing if existing is not None else self.add_metric(metric_name, measurable_or_fn, config)

    def remove_metric(self, metric_name: MetricName) -> KafkaMetric | None:
        return self.metrics.pop(metric_name, None)

    def snapshot(self, now_ms: int | None = None) -> dict[str, float]:
        """Every metric measured at one instant: ``{"group:k=v,.../name": value}``, sorted by key."""
        if now_ms is None:
            now_ms = self.clock.time_ms()
        out = {str(n): m.measurable_value(now_ms) for n, m in list(self.metrics.items())}
        return dict(sorted(out.items()))
