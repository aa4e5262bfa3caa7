"""Kafka's default partitioning: ``Utils.murmur2`` for keyed records and the built-in sticky
partitioner (KIP-480 / KIP-794 ``BuiltInPartitioner``) for records without a key.

Keyed records land where the Java client (and librdkafka's ``murmur2_random``) puts them:
``toPositive(murmur2(key)) % numPartitions``.
"""

from __future__ import annotations

import random
from typing import Callable

from ...common.hashing import murmur2, murmur2_partition, to_positive

__all__ = ["BuiltInPartitioner", "murmur2", "partition_for_key", "to_positive"]


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """``BuiltInPartitioner.partitionForKey``."""
    return murmur2_partition(key, num_partitions)


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
        if self.add_bytes(partition, appended_bytes):
            self._next(available() if callable(available) else available, all_partitions)

    def add_bytes(self, partition: int, appended_bytes: int) -> bool:
        """Count bytes appended to ``partition``; True when the sticky partition is due to change
        (then call :meth:`switch`): the producer's per-record half of :meth:`update`."""
        if partition != self.partition:
            return False
        self.produced += appended_bytes
        return self.produced >= self.sticky_batch_size

    def switch(self, available: list[int], all_partitions: int) -> None:
        """Move to another partition among ``available`` (after :meth:`add_bytes` said so)."""
        self._next(available, all_partitions)
