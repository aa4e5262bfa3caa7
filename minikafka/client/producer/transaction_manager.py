"""Producer id, epoch and per-partition sequence bookkeeping for the idempotent producer
(the idempotence half of Kafka's ``TransactionManager`` + ``TxnPartitionMap``).

Transactions are not modelled.  Deliberate simplification: when a sequence becomes unresolved
(a batch that had been sent fails or expires, or the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER
for the batch that was next in line, or UNKNOWN_PRODUCER_ID), the producer bumps its epoch
(KIP-360 InitProducerId with the current id/epoch, or a fresh id on old brokers) once nothing is
in flight, and renumbers *every* partition's pending batches from sequence 0, as Java does for the
partitions it resets.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

from ...protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from .batch import ProducerBatch

log = logging.getLogger(__name__)



@dataclass
class PartitionSequences:
    """``TxnPartitionEntry``: next sequence to assign, last acknowledged, batches in flight by sequence."""

    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[tuple[int, int, ProducerBatch]] = field(default_factory=list)  # (seq, id, batch)


class TransactionManager:
    """Idempotent producer state (``TransactionManager`` without transactions)."""

    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.partitions: dict[tuple[str, int], PartitionSequences] = {}
        self.epoch_bump_required = False
        self.fatal_error: BaseException | None = None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new id or epoch: every partition starts again at sequence 0 (in-flight batches renumbered)."""
        log.info("producer id %d epoch %d", producer_id, epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.epoch_bump_required = False
        for entry in self.partitions.values():
            entry.last_acked_sequence = -1
            seq = 0
            renumbered = []
            for _, i, b in entry.in_flight:
                b.set_producer_state(producer_id, epoch, seq)
                renumbered.append((seq, i, b))
                seq += b.record_count
            entry.in_flight = renumbered
            entry.next_sequence = seq

    def entry(self, tp: tuple[str, int]) -> PartitionSequences:
        e = self.partitions.get(tp)
        if e is None:
            e = self.partitions[tp] = PartitionSequences()
        return e

    # -- drain ----------------------------------------------------------------------------------
    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a batch drained for the first time its producer state and sequence (``RecordAccumulator.drain``)."""
        e = self.entry((batch.topic, batch.partition))
        batch.set_producer_state(self.producer_id, self.producer_epoch, e.next_sequence)
        e.next_sequence += batch.record_count
        bisect.insort(e.in_flight, (batch.base_sequence, id(batch), batch))

    def first_in_flight_sequence(self, tp: tuple[str, int]) -> int:
        e = self.partitions.get(tp)
        return e.in_flight[0][0] if e and e.in_flight else NO_SEQUENCE

    def should_stop_drain(self, batch: ProducerBatch, tp: tuple[str, int]) -> bool:
        """``shouldStopDrainBatchesForPartition``: keep batches of a partition in sequence order."""
        if not self.has_producer_id or self.epoch_bump_required:
            return True
        first = self.first_in_flight_sequence(tp)
        if batch.has_sequence:
            # A retried batch may only go when it is the first one in flight for its partition.
            return first != NO_SEQUENCE and batch.base_sequence != first
        return False

    # -- completion -----------------------------------------------------------------------------
    def remove_in_flight(self, batch: ProducerBatch) -> None:
        e = self.partitions.get((batch.topic, batch.partition))
        if e is None:
            return
        for i, (_, bid, b) in enumerate(e.in_flight):
            if b is batch:
                del e.in_flight[i]
                return

    def handle_completed(self, batch: ProducerBatch) -> None:
        e = self.entry((batch.topic, batch.partition))
        if batch.producer_epoch == self.producer_epoch and batch.producer_id == self.producer_id:
            e.last_acked_sequence = max(e.last_acked_sequence, batch.last_sequence)
        self.remove_in_flight(batch)

    def handle_failed(self, batch: ProducerBatch) -> None:
        """A batch failed for good: if it had been sent, its sequence is unresolved -> bump epoch."""
        self.remove_in_flight(batch)
        if batch.has_sequence and batch.producer_id == self.producer_id:
            self.epoch_bump_required = True

    def is_next_sequence(self, batch: ProducerBatch) -> bool:
        e = self.entry((batch.topic, batch.partition))
        return batch.base_sequence == e.last_acked_sequence + 1

    def can_retry_out_of_order(self, batch: ProducerBatch) -> bool:
        """``canRetry`` for OUT_OF_ORDER_SEQUENCE_NUMBER: an earlier batch failed, so this one is retried;
        if it *was* the next sequence the broker lost our state -> bump the epoch and retry."""
        if batch.producer_epoch != self.producer_epoch:
            return True  # sent with an old epoch; will be renumbered
        if not self.is_next_sequence(batch):
            return True
        self.epoch_bump_required = True
        return True
