"""Kafka's default partitioning: ``Utils.murmur2`` for keyed records and the built-in sticky
partitioner (KIP-480 / KIP-794 ``BuiltInPartitioner``) for records without a key.

Keyed records land where the Java client (and librdkafka's ``murmur2_random``) puts them:
``toPositive(murmur2(key)) % numPartitions``.
"""

from __future__ import annotations

import random
import struct
from typing import Callable

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


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """``BuiltInPartitioner.partitionForKey``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class BuiltInPartitioner:
    """Sticky partitioning for records without a key (Kafka 3.3+'s ``BuiltInPartitioner``).

    All keyless records of a topic go to one partition until about ``batch_size`` bytes have been
    produced to it, then a new partition is chosen at random among those with a known leader
    (different from the current one when there is a choice).  Deliberate difference: Java weighs
    the choice by queue sizes when ``partitioner.adaptive.partitioning.enable`` is on; this picks
    uniformly.
    """

    def __init__(self, topic: str, sticky_batch_size: int, rng: Callable[[int], int] | None = None) -> None:
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self._rng = rng or random.randrange
        self.partition = -1
        self.produced = 0

    def peek(self, available: list[int], all_partitions: int) -> int:
        """The partition the next keyless record goes to (``peekCurrentPartitionInfo``)."""
        if self.partition < 0 or self.partition >= all_partitions:
            self._next(available, all_partitions)
        return self.partition

    def _next(self, available: list[int], all_partitions: int) -> None:
        choices = available if available else list(range(all_partitions))
        if len(choices) > 1 and self.partition in choices:
            choices = [p for p in choices if p != self.partition]
        self.partition = choices[self._rng(len(choices))]
        self.produced = 0

    def update(self, partition: int, appended_bytes: int, available: list[int] | Callable[[], list[int]],
               all_partitions: int) -> None:
        """``updatePartitionInfo``: count bytes; switch after ``sticky_batch_size``.
        ``available`` may be a function, called only when switching."""
        if partition != self.partition:
            return
        self.produced += appended_bytes
        if self.produced >= self.sticky_batch_size:
            self._next(available() if callable(available) else available, all_partitions)
