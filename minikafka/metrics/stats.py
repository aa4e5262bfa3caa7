"""Statistics (org.apache.kafka.common.metrics.stats): SampledStat and friends, Rate, Meter, TokenBucket.

All times are integer milliseconds supplied by the caller; nothing here reads a clock.

SampledStat follows the algorithm Kafka used up to 3.7 by default (ring of ``samples`` slots, a sample
is purged once its *start* is ``samples * window`` old).  ``SampledStat(overlapping=True)`` models
Kafka 3.8+ (apache/kafka#15889): one extra slot and purging by the sample's *last event*, so a
sample overlapping the monitored window is kept.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import NamedTuple, Protocol, runtime_checkable

from .config import MetricConfig, MetricName

#: Kafka's MetricsUtils.convert: milliseconds per unit.
_MS_PER_UNIT: dict[str, float] = {
    "nanoseconds": 1e-6,
    "microseconds": 1e-3,
    "milliseconds": 1.0,
    "seconds": 1000.0,
    "minutes": 60_000.0,
    "hours": 3_600_000.0,
    "days": 86_400_000.0,
}


def convert_ms(time_ms: int | float, unit: str) -> float:
    """``MetricsUtils.convert``: a duration in ms expressed in ``unit`` (e.g. 1500 ms -> 1.5 seconds)."""
    try:
        per = _MS_PER_UNIT[unit.lower()]
    except KeyError:
        raise ValueError(f"unknown time unit {unit!r}") from None
    if per == 1.0:
        return float(time_ms)
    if per < 1.0:
        return time_ms * (1.0 / per)  # Java multiplies for sub-ms units
    return time_ms / per


def _java_div(a: int, b: int) -> int:
    """Java ``long / long``: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@runtime_checkable
class Measurable(Protocol):
    """Kafka's ``Measurable``."""

    def measure(self, config: MetricConfig, now_ms: int) -> float: ...


@runtime_checkable
class Stat(Protocol):
    """Kafka's ``Stat``."""

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None: ...


class MeasurableStat(ABC):
    """Kafka's ``MeasurableStat``: something that records values and measures them."""

    @abstractmethod
    def record(self, config: MetricConfig, value: float, time_ms: int) -> None: ...

    @abstractmethod
    def measure(self, config: MetricConfig, now_ms: int) -> float: ...


class NamedMeasurable(NamedTuple):
    """Kafka's ``CompoundStat.NamedMeasurable``."""

    name: MetricName
    stat: Measurable


class CompoundStat(ABC):
    """Kafka's ``CompoundStat``: one stat exposing several named measurables (Meter, Percentiles)."""

    @abstractmethod
    def stats(self) -> list[NamedMeasurable]: ...

    @abstractmethod
    def record(self, config: MetricConfig, value: float, time_ms: int) -> None: ...


class Sample:
    """Kafka's ``SampledStat.Sample``.

    ``last_window_ms`` is the start of the sample's window (Kafka 3.8 renamed it ``startTimeMs``;
    ``start_time_ms`` is an alias).  ``last_event_ms`` is the time of its last recorded event.
    """

    __slots__ = ("initial_value", "event_count", "last_window_ms", "last_event_ms", "value")

    def __init__(self, initial_value: float, now_ms: int) -> None:
        self.initial_value = initial_value
        self.event_count = 0
        self.last_window_ms = now_ms
        self.last_event_ms = now_ms
        self.value = initial_value

    @property
    def start_time_ms(self) -> int:
        return self.last_window_ms

    def reset(self, now_ms: int) -> None:
        self.event_count = 0
        self.last_window_ms = now_ms
        self.last_event_ms = now_ms
        self.value = self.initial_value

    def is_complete(self, time_ms: int, config: MetricConfig) -> bool:
        return time_ms - self.last_window_ms >= config.time_window_ms or self.event_count >= config.event_window

    def __repr__(self) -> str:
        return (f"Sample(value={self.value}, event_count={self.event_count}, "
                f"last_window_ms={self.last_window_ms}, last_event_ms={self.last_event_ms})")


class SampledStat(MeasurableStat):
    """Kafka's abstract ``SampledStat``: a value kept over a ring of time/event windows.

    ``overlapping=False`` (default): Kafka <= 3.7 -- ring of ``config.samples`` slots; purge resets a
    sample when ``now - last_window_ms >= samples * window``.
    ``overlapping=True``: Kafka >= 3.8 -- ring of ``samples + 1`` slots; purge uses ``last_event_ms``.
    """

    def __init__(self, initial_value: float, *, overlapping: bool = False) -> None:
        self.initial_value = initial_value
        self.overlapping = overlapping
        self.current_index = 0
        self.samples: list[Sample] = []

    # -- Kafka's template methods -------------------------------------------------------------
    @abstractmethod
    def update(self, sample: Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        """Fold ``value`` into ``sample`` (the event count is bumped by :meth:`record`)."""

    @abstractmethod
    def combine(self, samples: list[Sample], config: MetricConfig, now_ms: int) -> float:
        """Combine the (purged) samples into the measured value."""

    # -- the algorithm ----------------------------------------------------------------------------
    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        sample = self.current(time_ms)
        if sample.is_complete(time_ms, config):
            sample = self._advance(config, time_ms)
        self.update(sample, config, float(value), time_ms)
        sample.event_count += 1
        sample.last_event_ms = time_ms

    def _advance(self, config: MetricConfig, time_ms: int) -> Sample:
        max_samples = config.samples + 1 if self.overlapping else config.samples
        self.current_index = (self.current_index + 1) % max_samples
        if self.current_index >= len(self.samples):
            sample = self.new_sample(time_ms)
            self.samples.append(sample)
            return sample
        sample = self.current(time_ms)
        sample.reset(time_ms)
        return sample

    def new_sample(self, time_ms: int) -> Sample:
        return Sample(self.initial_value, time_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete_samples(config, now_ms)
        return self.combine(self.samples, config, now_ms)

    def current(self, time_ms: int) -> Sample:
        """The current sample (created at ``time_ms`` if there is none yet)."""
        if not self.samples:
            self.samples.append(self.new_sample(time_ms))
        return self.samples[self.current_index]

    def oldest(self, now_ms: int) -> Sample:
        """The sample with the earliest window start (created at ``now_ms`` if there is none yet)."""
        if not self.samples:
            self.samples.append(self.new_sample(now_ms))
        oldest = self.samples[0]
        for s in self.samples[1:]:
            if s.last_window_ms < oldest.last_window_ms:  # strict: first of equals wins, as in Java
                oldest = s
        return oldest

    def purge_obsolete_samples(self, config: MetricConfig, now_ms: int) -> None:
        """Reset (to start at ``now_ms``) every sample older than ``samples * window``."""
        expire_age = config.samples * config.time_window_ms
        for s in self.samples:
            ref = s.last_event_ms if self.overlapping else s.last_window_ms
            if now_ms - ref >= expire_age:
                s.reset(now_ms)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(current={self.current_index}, samples={self.samples})"


class WindowedSum(SampledStat):
    """Kafka's ``WindowedSum`` (formerly ``SampledTotal``/``Sum``): sum of the values in the live samples."""

    def __init__(self, *, overlapping: bool = False) -> None:
        super().__init__(0.0, overlapping=overlapping)

    def update(self, sample: Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value += value

    def combine(self, samples: list[Sample], config: MetricConfig, now_ms: int) -> float:
        return float(sum(s.value for s in samples))


class WindowedCount(WindowedSum):
    """Kafka's ``WindowedCount`` (formerly ``Count``): number of events in the live samples."""

    def update(self, sample: Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value += 1.0


class Avg(SampledStat):
    """Kafka's ``Avg``: sum / count over the live samples; NaN when there are no events."""

    def __init__(self, *, overlapping: bool = False) -> None:
        super().__init__(0.0, overlapping=overlapping)

    def update(self, sample: Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value += value

    def combine(self, samples: list[Sample], config: MetricConfig, now_ms: int) -> float:
        total = 0.0
        count = 0
        for s in samples:
            total += s.value
            count += s.event_count
        return math.nan if count == 0 else total / count


class Max(SampledStat):
    """Kafka's ``Max``: maximum over the live samples (initial -inf); NaN when there are no events."""

    def __init__(self, *, overlapping: bool = False) -> None:
        super().__init__(-math.inf, overlapping=overlapping)

    def update(self, sample: Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value = max(sample.value, value)

    def combine(self, samples: list[Sample], config: MetricConfig, now_ms: int) -> float:
        count = sum(s.event_count for s in samples)
        return math.nan if count == 0 else max(s.value for s in samples)


class Min(SampledStat):
    """Kafka's ``Min``: minimum over the live samples (initial Double.MAX_VALUE); NaN when there are no events."""

    def __init__(self, *, overlapping: bool = False) -> None:
        super().__init__(1.7976931348623157e308, overlapping=overlapping)

    def update(self, sample: Sample, config: MetricConfig, value: float, time_ms: int) -> None:
        sample.value = min(sample.value, value)

    def combine(self, samples: list[Sample], config: MetricConfig, now_ms: int) -> float:
        count = sum(s.event_count for s in samples)
        return math.nan if count == 0 else min(s.value for s in samples)


class CumulativeSum(MeasurableStat):
    """Kafka's ``CumulativeSum`` (formerly ``Total``): the sum of every value ever recorded."""

    def __init__(self, value: float = 0.0) -> None:
        self.total = float(value)

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.total += value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.total


class CumulativeCount(CumulativeSum):
    """Kafka's ``CumulativeCount``: the number of values ever recorded."""

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.total += 1.0


class Value(MeasurableStat):
    """Kafka's ``Value``: the last recorded value (0.0 before any)."""

    def __init__(self) -> None:
        self.value = 0.0

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.value = float(value)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self.value


class Rate(MeasurableStat):
    """Kafka's ``Rate``: a SampledStat (WindowedSum by default) divided by the elapsed window in ``unit``.

    Deliberate difference: :meth:`window_size` is at least 1 ms (Kafka can return 0 when ``samples == 1``
    and the rate is measured at the very start of a sample, dividing by zero).
    """

    def __init__(self, unit: str | SampledStat = "seconds", stat: SampledStat | None = None) -> None:
        if isinstance(unit, SampledStat):  # Rate(WindowedCount()) like Java's Rate(SampledStat)
            stat, unit = unit, "seconds"
        convert_ms(1, unit)  # validate
        self.unit = unit.lower()
        self.stat: SampledStat = stat if stat is not None else WindowedSum()

    def unit_name(self) -> str:
        """Kafka's ``unitName``: ``second``, ``millisecond``..."""
        return self.unit[:-1]

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.stat.record(config, value, time_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        value = self.stat.measure(config, now_ms)
        return value / convert_ms(self.window_size(config, now_ms), self.unit)

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        """Elapsed ms since the oldest live sample started, padded up to ``samples - 1`` full windows."""
        self.stat.purge_obsolete_samples(config, now_ms)
        total = now_ms - self.stat.oldest(now_ms).last_window_ms
        num_full = _java_div(total, config.time_window_ms)
        min_full = config.samples - 1
        if num_full < min_full:
            total += (min_full - num_full) * config.time_window_ms
        return max(total, 1)

    def __repr__(self) -> str:
        return f"Rate(unit={self.unit}, stat={self.stat!r})"


class SimpleRate(Rate):
    """Kafka's ``SimpleRate`` (used by ReplicationQuotaManager): window = max(now - oldest start, one window)."""

    def window_size(self, config: MetricConfig, now_ms: int) -> int:
        self.stat.purge_obsolete_samples(config, now_ms)
        elapsed = now_ms - self.stat.oldest(now_ms).last_window_ms
        return max(elapsed, config.time_window_ms)


class Meter(CompoundStat):
    """Kafka's ``Meter``: a Rate plus a CumulativeSum registered under two names.

    With a WindowedCount rate stat the total counts occurrences (records 1.0 per event).
    """

    def __init__(self, rate_name: MetricName, total_name: MetricName, *, unit: str = "seconds",
                 rate_stat: SampledStat | None = None) -> None:
        rate_stat = rate_stat if rate_stat is not None else WindowedSum()
        if not isinstance(rate_stat, WindowedSum):
            raise ValueError("Meter is supported only for WindowedCount or WindowedSum.")
        self.rate_name = rate_name
        self.total_name = total_name
        self.rate = Rate(unit, rate_stat)
        self.total = CumulativeSum()

    def stats(self) -> list[NamedMeasurable]:
        return [NamedMeasurable(self.total_name, self.total), NamedMeasurable(self.rate_name, self.rate)]

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        self.rate.record(config, value, time_ms)
        self.total.record(config, 1.0 if isinstance(self.rate.stat, WindowedCount) else value, time_ms)


class TokenBucket(MeasurableStat):
    """Kafka's ``TokenBucket`` (KIP-599): credits refilled at ``quota.bound`` per ``unit``, burst
    ``samples * window * bound``; measures the remaining credits (a Sensor violates when < 0).

    Without a quota in the config it records nothing and measures ``Long.MAX_VALUE``.
    """

    def __init__(self, unit: str = "seconds") -> None:
        convert_ms(1, unit)
        self.unit = unit.lower()
        self.tokens = 0.0
        self.last_update_ms = 0

    def _burst(self, config: MetricConfig) -> float:
        assert config.quota is not None
        return config.samples * convert_ms(config.time_window_ms, self.unit) * config.quota.bound

    def _refill(self, quota: float, burst: float, time_ms: int) -> None:
        self.tokens = min(burst, self.tokens + quota * convert_ms(time_ms - self.last_update_ms, self.unit))
        self.last_update_ms = time_ms

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        if config.quota is None:
            return float(2**63 - 1)
        self._refill(config.quota.bound, self._burst(config), now_ms)
        return self.tokens

    def record(self, config: MetricConfig, value: float, time_ms: int) -> None:
        if config.quota is None:
            return
        burst = self._burst(config)
        self._refill(config.quota.bound, burst, time_ms)
        self.tokens = min(burst, self.tokens - value)


# Kafka's older names.
SampledTotal = WindowedSum
Total = CumulativeSum
