"""Quota violations and throttle-time arithmetic (QuotaViolationException, server.quota.QuotaUtils)."""

from __future__ import annotations

import math
from typing import Any, Protocol

from .config import MetricConfig, MetricName
from .stats import Rate


class QuotaMetric(Protocol):
    """The metric a quota was violated on (a :class:`~minikafka.metrics.sensor.KafkaMetric`)."""

    metric_name: MetricName
    measurable: Any
    config: MetricConfig


class QuotaViolationError(Exception):
    """Kafka's ``QuotaViolationException``: ``metric`` measured ``value`` beyond ``bound``."""

    def __init__(self, metric: QuotaMetric, value: float, bound: float) -> None:
        super().__init__(f"'{metric.metric_name}' violated quota. Actual: {value:f}, Threshold: {bound:f}")
        self.metric = metric
        self.value = value
        self.bound = bound


def java_round(x: float) -> int:
    """Java ``Math.round(double)``: floor(x + 0.5) (halves round up, unlike Python's ``round``)."""
    return int(math.floor(x + 0.5))


def measurable_as_rate(metric: QuotaMetric) -> Rate:
    """QuotaUtils.measurableAsRate: the metric's Rate, else ValueError."""
    m = metric.measurable
    if not isinstance(m, Rate):
        raise ValueError(f"Metric {metric.metric_name} is not a Rate metric, value {m!r}")
    return m


def throttle_time_ms(e: QuotaViolationError, time_ms: int) -> int:
    """QuotaUtils.throttleTime: ``round((value - bound) / bound * windowSize)`` ms.

    With observed rate O over window W and target T, delaying by X gives O*W/(W+X) = T, so X = (O-T)/T*W.
    """
    window = measurable_as_rate(e.metric).window_size(e.metric.config, time_ms)
    return java_round((e.value - e.bound) / e.bound * window)


def bounded_throttle_time_ms(e: QuotaViolationError, time_ms: int, max_throttle_ms: int) -> int:
    """QuotaUtils.boundedThrottleTime: :func:`throttle_time_ms` capped at ``max_throttle_ms``.

    Note the argument order differs from Java's ``(e, maxThrottleTime, timeMs)``.
    """
    return min(throttle_time_ms(e, time_ms), max_throttle_ms)
