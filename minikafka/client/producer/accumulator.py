"""Per-partition batch queues (Kafka's ``RecordAccumulator``).

``append`` puts a record into the last batch of its partition's deque (allocating a new batch from
the :class:`BufferPool` when it does not fit), ``ready`` says which leaders have something
sendable (full batch, linger.ms passed, memory exhausted, flush or close in progress, and not
backing off a retry), ``drain`` takes up to max.request.size of batches per node round-robin over
its partitions (one batch per partition per request, as Java does), assigning producer id, epoch
and sequence numbers on first drain.  ``expired_batches`` enforces delivery.timeout.ms.

Deliberate differences: times are integer milliseconds from the injected clock; there is no
per-deque lock (one Trio thread); a batch that does not fit because of compression estimates is
not split (MESSAGE_TOO_LARGE fails it instead of ``splitAndReenqueue``).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from ...common.clock import Clock
from .batch import BATCH_HEADER_SIZE, Callback, FutureRecordMetadata, ProducerBatch
from .buffer_pool import BufferPool
from .errors import ProducerClosedError
from .transaction_manager import TransactionManager

log = logging.getLogger(__name__)



@dataclass
class ReadyCheckResult:
    """``RecordAccumulator.ReadyCheckResult``."""

    ready_nodes: set[int]
    next_ready_check_delay_ms: float
    unknown_leader_topics: set[str] = field(default_factory=set)


class RecordAccumulator:
    """Batches per partition, ready checks and draining."""

    def __init__(self, batch_size: int, compression: int, linger_ms: float, retry_backoff_ms: float,
                 delivery_timeout_ms: float, pool: BufferPool, txn: TransactionManager | None,
                 clock: Clock) -> None:
        self.batch_size = batch_size
        self.compression = compression
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self.txn = txn
        self.clock = clock  # the producer's Trio clock: batch creation times are linger deadlines' origins
        self.batches: dict[tuple[str, int], deque[ProducerBatch]] = {}  # by (topic, partition)
        self.incomplete: set[ProducerBatch] = set()  # IncompleteBatches
        self.muted: set[tuple[str, int]] = set()
        self.flushes_in_progress = 0
        self.appends_in_progress = 0
        self.closed = False
        self._drain_index: dict[int, int] = {}

    # -- append ----------------------------------------------------------------------------------
    def try_append_existing(self, tp: tuple[str, int], timestamp: int, key: bytes | None, value: bytes | None,
                            headers: bytes, callback: Callback | None) -> FutureRecordMetadata | None:
        """Append to the last batch of the partition if it has room (no allocation, no waiting)."""
        dq = self.batches.get(tp)
        if dq:
            return dq[-1].try_append(timestamp, key, value, headers, callback)
        return None

    def new_batch(self, tp: tuple[str, int], buffer: bytearray, capacity: int) -> ProducerBatch:
        """Start a batch with a buffer from the pool and put it at the end of the partition's deque."""
        if self.closed:
            self.pool.deallocate(buffer, capacity)
            raise ProducerClosedError("Producer closed while send in progress")
        batch = ProducerBatch(tp[0], tp[1], buffer, capacity, max(self.batch_size, capacity), self.compression,
                              int(self.clock.monotonic() * 1000))
        dq = self.batches.get(tp)
        if dq is None:
            dq = self.batches[tp] = deque()
        if dq:
            dq[-1].close_for_appends()
        dq.append(batch)
        self.incomplete.add(batch)
        return batch

    def allocation_size(self, key: bytes | None, value: bytes | None, headers: bytes) -> int:
        """``max(batch.size, estimated size of a batch holding just this record)``."""
        est = BATCH_HEADER_SIZE + 21 + (len(key) if key else 0) + (len(value) if value else 0) + len(headers)
        return max(self.batch_size, est)

    # -- ready -----------------------------------------------------------------------------------
    def ready(self, leader_of: Callable[[str, int], int | None], now_ms: float,
              node_ready: Callable[[int], bool] | None = None) -> ReadyCheckResult:
        """Nodes with sendable data, and how long until the next batch may become sendable."""
        ready_nodes: set[int] = set()
        next_delay = float("inf")
        unknown: set[str] = set()
        exhausted = self.pool.queued > 0
        flushing = self.flushes_in_progress > 0 or self.closed
        linger = self.linger_ms
        backoff = self.retry_backoff_ms
        for tp, dq in self.batches.items():
            if not dq:
                continue
            leader = leader_of(tp[0], tp[1])
            if leader is None:
                unknown.add(tp[0])
                continue
            if leader in ready_nodes or tp in self.muted:
                continue
            batch = dq[0]
            backing_off = batch.attempts > 0 and batch.last_attempt_ms + backoff > now_ms
            waited = now_ms - max(batch.created_ms, batch.last_attempt_ms)
            time_to_wait = backoff if backing_off else linger
            full = len(dq) > 1 or batch.is_full
            expired = waited >= time_to_wait
            sendable = full or expired or exhausted or flushing
            if sendable and not backing_off:
                ready_nodes.add(leader)
            else:
                next_delay = min(next_delay, max(time_to_wait - waited, 0))
        return ReadyCheckResult(ready_nodes, next_delay, unknown)

    def has_undrained(self) -> bool:
        return any(self.batches.values())

    # -- drain -----------------------------------------------------------------------------------
    def drain(self, partitions_of_node: Callable[[int], list[tuple[str, int]]], nodes: set[int],
              max_size: int, now_ms: float) -> dict[int, list[ProducerBatch]]:
        """Batches to send per node, at most ``max_size`` bytes per node (``drain``)."""
        out: dict[int, list[ProducerBatch]] = {}
        for node in nodes:
            got = self._drain_node(partitions_of_node(node), node, max_size, now_ms)
            if got:
                out[node] = got
        return out

    def _drain_node(self, parts: list[tuple[str, int]], node: int, max_size: int, now_ms: float) -> list[ProducerBatch]:
        size = 0
        ready: list[ProducerBatch] = []
        n = len(parts)
        if not n:
            return ready
        start = self._drain_index.get(node, 0) % n
        txn = self.txn
        for i in range(n):
            tp = parts[(start + i) % n]
            if tp in self.muted:
                continue
            dq = self.batches.get(tp)
            if not dq:
                continue
            first = dq[0]
            if first.attempts > 0 and first.last_attempt_ms + self.retry_backoff_ms > now_ms:
                continue
            if ready and size + first.estimated_size_in_bytes > max_size:
                self._drain_index[node] = (start + i) % n
                break
            if txn is not None and txn.should_stop_drain(first, tp):
                continue
            dq.popleft()
            if txn is not None and not first.has_sequence:
                txn.assign_sequence(first)
            first.build_chunks()
            size += first.built_size
            first.drained_ms = now_ms
            ready.append(first)
        else:
            self._drain_index[node] = (start + 1) % n
        return ready

    # -- retries, expiry, completion -------------------------------------------------------------
    def reenqueue(self, batch: ProducerBatch, now_ms: float) -> None:
        """Put a batch back at the front for a retry (``reenqueue`` / ``insertInSequenceOrder``)."""
        batch.attempts += 1
        batch.last_attempt_ms = now_ms
        batch.retry = True
        tp = (batch.topic, batch.partition)
        dq = self.batches.get(tp)
        if dq is None:
            dq = self.batches[tp] = deque()
        if self.txn is not None and batch.has_sequence:
            # keep the retried batches first, in sequence order, before any unsent batch
            i = 0
            while i < len(dq) and dq[i].has_sequence and dq[i].base_sequence < batch.base_sequence:
                i += 1
            dq.insert(i, batch)
        else:
            dq.appendleft(batch)

    def expired_batches(self, now_ms: float) -> list[ProducerBatch]:
        """Batches in the queues past delivery.timeout.ms (``expiredBatches``)."""
        out: list[ProducerBatch] = []
        dt = self.delivery_timeout_ms
        for tp, dq in self.batches.items():
            while dq and dq[0].has_reached_delivery_timeout(dt, now_ms):
                b = dq.popleft()
                b.close_for_appends()
                out.append(b)
        return out

    def deallocate(self, batch: ProducerBatch) -> None:
        """Done with a batch: forget it and give its memory back (``deallocate``)."""
        self.incomplete.discard(batch)
        if batch.capacity:
            self.pool.deallocate(batch.buffer, batch.capacity)
            batch.capacity = 0

    def abort_incomplete(self, error: BaseException) -> list[ProducerBatch]:
        """Fail every batch not yet done (``abortIncompleteBatches`` on a forced close)."""
        aborted = []
        for b in list(self.incomplete):
            b.close_for_appends()
            if b.complete(-1, -1, error):
                aborted.append(b)
            self.deallocate(b)
        for dq in self.batches.values():
            dq.clear()
        return aborted

    def abort_undrained_batches(self, error: BaseException) -> list[ProducerBatch]:
        """Fail the batches never sent (no sequence yet) (``abortUndrainedBatches``, when a transaction
        is being aborted); batches already sent are left to complete."""
        aborted = []
        for b in list(self.incomplete):
            if b.has_sequence:
                continue
            dq = self.batches.get((b.topic, b.partition))
            if dq is not None and b in dq:
                dq.remove(b)
            b.close_for_appends()
            if b.complete(-1, -1, error):
                aborted.append(b)
            self.deallocate(b)
        return aborted

    def begin_flush(self) -> None:
        self.flushes_in_progress += 1

    def end_flush(self) -> None:
        self.flushes_in_progress -= 1

    def close(self) -> None:
        self.closed = True
