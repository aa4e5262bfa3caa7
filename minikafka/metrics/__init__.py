"""A Python model of Kafka's client metrics library (org.apache.kafka.common.metrics).

Pure, synchronous and deterministic: every time is an integer millisecond passed in or read from the
registry's injected :class:`~minikafka.common.clock.Clock` (the one module below metrics, as Kafka's metrics use
``org.apache.kafka.common.utils.Time``).  Used by the broker's quota managers and by offline replays.
"""

from .config import RECORDING_LEVELS, MetricConfig, MetricName, Quota, should_record
from .quota import (QuotaViolationError, bounded_throttle_time_ms, java_round, measurable_as_rate,
                    throttle_time_ms)
from .registry import Metrics
from .sensor import KafkaMetric, Sensor
from .stats import (Avg, CompoundStat, CumulativeCount, CumulativeSum, Max, Measurable, MeasurableStat, Meter,
                    Min, NamedMeasurable, Rate, Sample, SampledStat, SampledTotal, SimpleRate, TokenBucket, Total,
                    Value, WindowedCount, WindowedSum, convert_ms)

__all__ = [
    "RECORDING_LEVELS", "MetricConfig", "MetricName", "Quota", "should_record",
    "QuotaViolationError", "bounded_throttle_time_ms", "java_round", "measurable_as_rate", "throttle_time_ms",
    "Metrics", "KafkaMetric", "Sensor",
    "Avg", "CompoundStat", "CumulativeCount", "CumulativeSum", "Max", "Measurable", "MeasurableStat", "Meter",
    "Min", "NamedMeasurable", "Rate", "Sample", "SampledStat", "SampledTotal", "SimpleRate", "TokenBucket",
    "Total", "Value", "WindowedCount", "WindowedSum", "convert_ms",
]
