"""Java's hash codes, where Kafka uses them to place keys (no I/O)."""

from __future__ import annotations


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode()``: ``31*h + c`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Math.abs`` with ``Integer.MIN_VALUE`` mapped to 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for_key(key: str, partitions: int) -> int:
    """The partition of an internal topic a key belongs to (Kafka's ``GroupCoordinator.partitionFor`` and
    ``TransactionStateManager.partitionFor``): ``Utils.abs(key.hashCode()) % partitions``."""
    return kafka_abs(java_string_hash(key)) % partitions
