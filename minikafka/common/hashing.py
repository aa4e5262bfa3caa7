"""Java's hash codes, where Kafka uses them to place keys (no I/O)."""

from __future__ import annotations

import functools
import struct


@functools.lru_cache(maxsize=4096)  # group and transactional ids are placed on every request that names them
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


_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Java's ``Utils.murmur2`` (32-bit MurmurHash2, seed 0x9747b28c), as a signed int32."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        for k in struct.unpack_from(f"<{n4}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    extra = length & 3
    if extra:
        i = length & ~3
        if extra >= 3:
            h ^= data[i + 2] << 16
        if extra >= 2:
            h ^= data[i + 1] << 8
        h ^= data[i]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not abs)."""
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    """The partition of a keyed record (the producer's ``BuiltInPartitioner.partitionForKey``):
    ``toPositive(murmur2(key)) % numPartitions``."""
    return to_positive(murmur2(key)) % num_partitions
