"""Idempotent-producer state: producer ids, epochs and per-partition sequence checks.

Models Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` (the last
five batches per producer are remembered so that a retried duplicate is
answered with its original offsets) and ``ProducerIdManager`` (id
allocation).  Transactions are not modelled.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..protocol.errors import ErrorCode

NUM_BATCHES_TO_RETAIN = 5


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass
class ProducerEntry:
    """What a partition remembers about one producer id."""

    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class SequenceCheck(NamedTuple):
    """Outcome of checking a batch: an error, a duplicate's original metadata, or fine."""

    error: ErrorCode
    duplicate: BatchMetadata | None = None


def _next_seq(seq: int) -> int:
    return 0 if seq == 0x7FFFFFFF else seq + 1


class ProducerStateManager:
    """Per-partition producer state."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int) -> SequenceCheck:
        """Validate a batch's epoch and sequence before it is appended."""
        entry = self.producers.get(producer_id)
        if entry is None:
            # A new producer (or one whose state expired) must start at sequence 0.
            if first_seq != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return SequenceCheck(ErrorCode.NONE)
        if epoch < entry.epoch:
            return SequenceCheck(ErrorCode.INVALID_PRODUCER_EPOCH)
        if epoch > entry.epoch:
            if first_seq != 0:
                return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
            return SequenceCheck(ErrorCode.NONE)
        for b in entry.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return SequenceCheck(ErrorCode.NONE, b)
        if first_seq != _next_seq(entry.last_seq):
            return SequenceCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER)
        return SequenceCheck(ErrorCode.NONE)

    def update(self, producer_id: int, epoch: int, meta: BatchMetadata) -> None:
        """Remember an appended batch."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        entry.batches.append(meta)

    def truncate(self) -> None:
        self.producers.clear()


class ProducerIdManager:
    """Hands out producer ids (Kafka's ``ProducerIdManager``, one block, no controller)."""

    def __init__(self, start: int = 1000) -> None:
        self.next_id = start

    def generate(self) -> int:
        pid = self.next_id
        self.next_id += 1
        return pid
