"""Producer state: producer ids, epochs, per-partition sequence checks and open transactions.

Models Kafka's ``ProducerStateManager`` / ``ProducerAppendInfo`` (the last
five batches per producer are remembered so that a retried duplicate is
answered with its original offsets, and each producer's open transaction is
tracked by its first offset, which bounds the last stable offset) and
``ProducerIdManager`` (id allocation).

Deliberate differences from Kafka: no producer-state snapshots (the state is
rebuilt from the log when a partition is loaded or truncated) and no producer
id expiration (``producer.id.expiration.ms``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import NamedTuple

from ..protocol.errors import ErrorCode

NUM_BATCHES_TO_RETAIN = 5


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's ``CompletedTxn``): its first offset and the marker's."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass
class ProducerEntry:
    """What a partition remembers about one producer id."""

    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    current_txn_first_offset: int = -1  # the first offset of its open transaction, -1 when none
    coordinator_epoch: int = -1
    last_timestamp: int = -1

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
    """Per-partition producer state, including the transactions open on the partition."""

    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # Transactions whose marker is not yet below the high watermark: they still hold the LSO back.
        self.unreplicated: list[CompletedTxn] = []

    def check(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
              transactional: bool = False) -> SequenceCheck:
        """Validate a batch's epoch and sequence before it is appended (Kafka's ``ProducerAppendInfo.checkSequence``).

        A producer this partition has no state for (its records deleted by retention or DeleteRecords, or never
        written here) may start at any sequence, as in Kafka; a transactional one at 0 only, which is Kafka's
        rule for a producer of transaction version 2 (KIP-890) and deliberately stricter for older ones, whose
        first sequence Kafka bounds by the one its verification saw."""
        entry = self.producers.get(producer_id)
        if entry is None:
            if transactional and first_seq != 0:
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

    def check_transactional(self, producer_id: int, epoch: int, is_transactional: bool) -> ErrorCode:
        """Kafka's ``ProducerAppendInfo.checkProducerEpoch`` plus the transactional-state check:
        a non-transactional batch while the producer has a transaction open is INVALID_TXN_STATE."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if epoch < entry.epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if not is_transactional and entry.current_txn_first_offset >= 0:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def has_ongoing_txn(self, producer_id: int, epoch: int) -> bool:
        """Whether this producer (at this epoch) already has a transaction open here (no KIP-890 check needed)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.epoch == epoch and entry.current_txn_first_offset >= 0

    def update(self, producer_id: int, epoch: int, meta: BatchMetadata, is_transactional: bool = False) -> None:
        """Remember an appended batch (and open a transaction at its offset if it is the first)."""
        entry = self.producers.get(producer_id)
        if entry is None or epoch != entry.epoch:
            old = entry
            entry = self.producers[producer_id] = ProducerEntry(epoch)
            if old is not None:
                entry.current_txn_first_offset = old.current_txn_first_offset
                entry.coordinator_epoch = old.coordinator_epoch
        entry.batches.append(meta)
        entry.last_timestamp = meta.timestamp
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = meta.first_offset
            self.ongoing[producer_id] = meta.first_offset

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     transaction_version: int = 0) -> ErrorCode:
        """Kafka's ``appendEndTxnMarker`` checks: a stale producer epoch or coordinator epoch is refused.

        A marker of transaction version 2 (KIP-1228) carries the epoch the coordinator bumped when the
        transaction ended, so it must be above the producer's epoch here: one that is not is a late copy of
        an earlier marker, which would otherwise end the producer's next transaction."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return ErrorCode.NONE
        if epoch < entry.epoch or (transaction_version >= 2 and epoch == entry.epoch):
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if coordinator_epoch < entry.coordinator_epoch:
            return ErrorCode.TRANSACTION_COORDINATOR_FENCED
        return ErrorCode.NONE

    def complete_txn(self, producer_id: int, epoch: int, coordinator_epoch: int, marker_offset: int,
                     is_aborted: bool, timestamp: int, log_start_offset: int = 0) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at ``marker_offset``: close the producer's open transaction.

        Returns the completed transaction, or None when the producer had none open here
        (a marker for a transaction that wrote nothing to this partition).  A transaction
        whose start is no longer known (rebuilt from a log whose start was deleted) is
        taken to start at ``log_start_offset``."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(epoch)
        elif epoch > entry.epoch:  # a bumped epoch (fencing, or KIP-890): sequences restart at 0
            entry = self.producers[producer_id] = ProducerEntry(
                epoch, current_txn_first_offset=entry.current_txn_first_offset)
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.ongoing.pop(producer_id, None)
        if first < 0:
            return None
        done = CompletedTxn(producer_id, max(first, log_start_offset), marker_offset, is_aborted)
        self.unreplicated.append(done)
        return done

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of an open transaction, or of a completed one whose marker is not yet below
        the high watermark (Kafka's ``firstUnstableOffset``); None when every transaction is stable."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]
        first: int | None = None
        for off in self.ongoing.values():
            if first is None or off < first:
                first = off
        for t in self.unreplicated:
            if first is None or t.first_offset < first:
                first = t.first_offset
        return first

    def truncate(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()


class ProducerIdManager:
    """Hands out producer ids (Kafka's ``ProducerIdManager``, one block, no controller)."""

    def __init__(self, start: int = 1000) -> None:
        self.next_id = start

    def generate(self) -> int:
        pid = self.next_id
        self.next_id += 1
        return pid


class ProducerIdsUnavailable(Exception):
    """No producer id block has come from the controller yet."""


class ProducerIdBlocks(ProducerIdManager):
    """Producer ids from blocks the controller hands out (AllocateProducerIds): the next block is asked for
    once half of the current one is used (``request_block``), so that ids rarely run out."""

    def __init__(self) -> None:
        super().__init__(0)
        self.end = 0  # the current block's end (exclusive)
        self.blocks: deque[tuple[int, int]] = deque()
        self.request_block: Callable[[], None] | None = None
        self._requested = False

    def add_block(self, first: int, count: int) -> None:
        self._requested = False
        if self.next_id >= self.end:
            self.next_id, self.end = first, first + count
        else:
            self.blocks.append((first, first + count))

    def request_failed(self) -> None:
        """The controller did not hand out the block asked for: the next use asks again."""
        self._requested = False

    @property
    def available(self) -> int:
        return max(self.end - self.next_id, 0) + sum(e - f for f, e in self.blocks)

    def generate(self) -> int:
        if self.next_id >= self.end:
            if not self.blocks:
                self._want_block()
                raise ProducerIdsUnavailable("no producer id block from the controller yet")
            self.next_id, self.end = self.blocks.popleft()
        pid = self.next_id
        self.next_id += 1
        if not self.blocks and (self.end - self.next_id) * 2 < PRODUCER_ID_LOW_WATER:
            self._want_block()
        return pid

    def _want_block(self) -> None:
        if not self._requested and self.request_block is not None:
            self._requested = True
            self.request_block()


#: Ask for the next block when fewer than half of a block's ids are left.
PRODUCER_ID_LOW_WATER = 1000
