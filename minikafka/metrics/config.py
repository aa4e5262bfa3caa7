"""Metric configuration, quotas and names (org.apache.kafka.common.metrics.{MetricConfig,Quota}, common.MetricName)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from typing import NamedTuple

#: Kafka's Sensor.RecordingLevel, lowest (always recorded) first.
RECORDING_LEVELS: tuple[str, ...] = ("INFO", "DEBUG", "TRACE")


def should_record(sensor_level: str, config_level: str) -> bool:
    """Sensor.RecordingLevel.shouldRecord: a sensor records if its level is enabled by the config's level.

    INFO config records INFO sensors only; DEBUG records INFO and DEBUG; TRACE records everything.
    """
    return RECORDING_LEVELS.index(sensor_level.upper()) <= RECORDING_LEVELS.index(config_level.upper())


@dataclass(frozen=True)
class Quota:
    """Kafka's ``Quota``: an upper or lower bound on a metric value."""

    bound: float
    upper: bool = True

    @classmethod
    def upper_bound(cls, bound: float) -> "Quota":
        return cls(float(bound), True)

    @classmethod
    def lower_bound(cls, bound: float) -> "Quota":
        return cls(float(bound), False)

    def acceptable(self, value: float) -> bool:
        """Upper quota: ``value <= bound``; lower quota: ``value >= bound`` (NaN is never acceptable, as in Java)."""
        return value <= self.bound if self.upper else value >= self.bound

    def __str__(self) -> str:
        return f"{'upper' if self.upper else 'lower'}={self.bound}"


@dataclass
class MetricConfig:
    """Kafka's ``MetricConfig`` with Kafka's defaults (2 samples of 30 s, unbounded event window, INFO).

    Kafka's fluent setters become ``dataclasses.replace``: see :meth:`with_`.
    """

    samples: int = 2
    time_window_ms: int = 30000
    event_window: int = sys.maxsize
    quota: Quota | None = None
    recording_level: str = "INFO"
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.samples < 1:
            raise ValueError("The number of samples must be at least 1.")
        if self.time_window_ms <= 0:
            raise ValueError("The time window must be positive.")
        if self.event_window < 1:
            raise ValueError("The event window must be at least 1.")
        if self.recording_level.upper() not in RECORDING_LEVELS:
            raise ValueError(f"unknown recording level {self.recording_level!r}")

    def with_(self, **changes: object) -> "MetricConfig":
        """A copy with some fields changed (Kafka: ``new MetricConfig().quota(q).samples(n)...``)."""
        return replace(self, **changes)  # type: ignore[arg-type]


class MetricName(NamedTuple):
    """Kafka's ``MetricName``: (name, group, tags, description).

    As in Kafka, equality and hashing ignore the description and the order of the tags (Kafka keeps tags
    in a Map).  ``str()`` gives ``group:k1=v1,k2=v2/name`` with the tags in the stored order.
    """

    name: str
    group: str
    tags: tuple[tuple[str, str], ...] = ()
    description: str = ""

    @classmethod
    def of(cls, name: str, group: str, description: str = "", **tags: str) -> "MetricName":
        """Build a name with keyword tags, sorted by key (``-`` in keys may be spelt ``_``: ``client_id``)."""
        return cls(name, group, tuple(sorted((k.replace("_", "-"), str(v)) for k, v in tags.items())), description)

    @classmethod
    def with_tags(cls, name: str, group: str, tags: dict[str, str] | tuple[tuple[str, str], ...] = (),
                  description: str = "") -> "MetricName":
        """Build a name keeping the given tag order (a dict or pairs), e.g. user before client-id."""
        items = tuple(tags.items()) if isinstance(tags, dict) else tuple(tags)
        return cls(name, group, tuple((str(k), str(v)) for k, v in items), description)

    @property
    def tag_dict(self) -> dict[str, str]:
        return dict(self.tags)

    def _key(self) -> tuple[str, str, tuple[tuple[str, str], ...]]:
        return (self.name, self.group, tuple(sorted(self.tags)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MetricName):
            return self._key() == other._key()
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return f"{self.group}:{','.join(f'{k}={v}' for k, v in self.tags)}/{self.name}"
