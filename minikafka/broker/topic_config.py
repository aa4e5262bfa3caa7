"""Topic configs minikafka accepts, with Kafka's types and bounds (Kafka's ``LogConfig`` ConfigDef).

:func:`validate_topic_config` answers INVALID_CONFIG with Kafka's ``ConfigException`` wording for an
unknown name or a value of the wrong type or out of range, so a config that a log could not use never
reaches the metadata.
"""

from __future__ import annotations

from collections.abc import Callable

from ..protocol.errors import ErrorCode
from .metadata import MetadataError
from .quota.replication_quota_manager import (FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS,
                                              validate_throttled_replicas)

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1


def _number(kind: str, low: int, high: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            n = int(value.strip())
        except ValueError:
            return f"Not a number of type {kind}"
        if n < low:
            return f"Value must be at least {low}"
        if n > high:
            return f"Not a number of type {kind}"
        return None
    return check


def _int(low: int = -_INT_MAX - 1) -> Callable[[str], str | None]:
    return _number("INT", low, _INT_MAX)


def _long(low: int = -_LONG_MAX - 1) -> Callable[[str], str | None]:
    return _number("LONG", low, _LONG_MAX)


def _boolean(value: str) -> str | None:
    return None if value.strip().lower() in ("true", "false") else "Expected value to be either true or false"


def _one_of(*allowed: str, many: bool = False) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        items = [v.strip() for v in value.split(",")] if many else [value.strip()]
        if all(v in allowed for v in items) and items:
            return None
        return f"String must be one of: {', '.join(allowed)}"
    return check


def _ratio(value: str) -> str | None:
    try:
        x = float(value)
    except ValueError:
        return "Not a number of type DOUBLE"
    return None if 0 <= x <= 1 else "Value must be between 0.0 and 1.0"


def _throttled_replicas(value: str) -> str | None:
    try:
        validate_throttled_replicas(value)
    except ValueError as exc:
        return str(exc)
    return None


TOPIC_CONFIGS: dict[str, Callable[[str], str | None]] = {
    "cleanup.policy": _one_of("compact", "delete", many=True),
    "compression.type": _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    "delete.retention.ms": _long(0),
    "file.delete.delay.ms": _long(0),
    "flush.messages": _long(1),
    "flush.ms": _long(0),
    "index.interval.bytes": _int(0),
    "max.compaction.lag.ms": _long(1),
    "max.message.bytes": _int(0),
    "message.timestamp.type": _one_of("CreateTime", "LogAppendTime"),
    "message.timestamp.difference.max.ms": _long(0),
    "message.timestamp.before.max.ms": _long(0),
    "message.timestamp.after.max.ms": _long(0),
    "min.cleanable.dirty.ratio": _ratio,
    "min.compaction.lag.ms": _long(0),
    "min.insync.replicas": _int(1),
    "preallocate": _boolean,
    "retention.bytes": _long(),
    "retention.ms": _long(-1),
    "segment.bytes": _int(14),
    "segment.index.bytes": _int(4),
    "segment.jitter.ms": _long(0),
    "segment.ms": _long(1),
    "unclean.leader.election.enable": _boolean,
    "message.downconversion.enable": _boolean,
    LEADER_THROTTLED_REPLICAS: _throttled_replicas,
    FOLLOWER_THROTTLED_REPLICAS: _throttled_replicas,
}
# The list-typed topic configs (APPEND/SUBTRACT).
LIST_TOPIC_CONFIGS = {"cleanup.policy", LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS}


def validate_topic_config(name: str, value: str | None) -> None:
    """MetadataError(INVALID_CONFIG) for an unknown topic config or a value Kafka would refuse."""
    check = TOPIC_CONFIGS.get(name)
    if check is None:
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if value is not None:
        problem = check(value)
        if problem is not None:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                          f"{problem}")
