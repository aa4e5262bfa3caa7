"""One share-partition: the records of a topic-partition in flight for one share group (KIP-932).

Models Kafka's ``SharePartition`` (``core/.../share/SharePartition.java``) with its
``InFlightBatch``/``InFlightState``, ``RecordState`` and ``AcknowledgeType``:

* The share-partition start offset (SPSO, :attr:`SharePartition.start_offset`) is the first offset
  not yet delivered to completion; everything below it is done.  :attr:`SharePartition.next_offset`
  is the first offset never acquired (Kafka's end offset, SPEO, plus one).  The records in between
  are *in flight*: AVAILABLE (to be delivered again), ACQUIRED (by one member, under an acquisition
  lock that expires), ACKNOWLEDGED or ARCHIVED (done, waiting for the SPSO to move past them).
* :meth:`~SharePartition.acquire` takes the stored batches a fetch read from the log (only their
  offsets: the bytes stay opaque) and acquires for a member the AVAILABLE in-flight records among
  them, then new records at the end, up to ``max_records`` (at batch boundaries, or exactly with
  the record-limit acquire mode of ShareFetch v2) and the partition's in-flight limit
  (``group.share.partition.max.record.locks``).  Each acquisition increments the delivery count.
* :meth:`~SharePartition.acknowledge`: ACCEPT, RELEASE, REJECT, GAP and (v2) RENEW, all-or-nothing
  per request partition; records not acquired by that member answer INVALID_RECORD_STATE.
* A lock that expires (:meth:`~SharePartition.expire_locks`), a RELEASE, or a member leaving
  (:meth:`~SharePartition.release_member`) makes records AVAILABLE again, or ARCHIVED once their
  delivery count reached ``share.delivery.count.limit``.

Pure state: no I/O, no Trio; times are milliseconds passed in by the caller
(:mod:`.manager` uses Trio's clock).  Deliberate differences from Kafka: in-flight state is kept
as contiguous runs of offsets that split and merge as states change (Kafka keeps a batch map
with an optional per-offset map), which covers exactly the same states; an ACQUIRED record is
persisted as AVAILABLE with its delivery count (see :meth:`SharePartition.snapshot`).
"""

from __future__ import annotations

import logging
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from ...protocol.errors import ErrorCode

log = logging.getLogger(__name__)

EMPTY_MEMBER_ID = ""


class RecordState(IntEnum):
    """Kafka's ``RecordState`` (the ids are those the share coordinator persists)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """The acknowledge types of ShareFetch/ShareAcknowledge (Kafka's ``AcknowledgeType`` plus GAP)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # v2 (KIP-1222): extend the acquisition lock


class ShareAcquireMode(IntEnum):
    """ShareFetch v2's ``ShareAcquireMode`` (KIP-1206)."""

    BATCH_OPTIMIZED = 0  # acquire whole batches; MaxRecords may be exceeded to finish a batch
    RECORD_LIMIT = 1  # acquire at most MaxRecords records, splitting batches


DONE_STATES = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class FetchedBatch(NamedTuple):
    """The offsets of one stored batch a fetch read (its header only); ``aborted``: a data batch of an
    aborted transaction, never delivered to a read_committed share group."""

    base_offset: int
    last_offset: int
    aborted: bool = False


class AcquiredRecords(NamedTuple):
    """One entry of ShareFetch's AcquiredRecords: an offset range acquired with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(slots=True)
class InFlightBatch:
    """A run of consecutive in-flight offsets in one state (Kafka's ``InFlightBatch`` + ``InFlightState``).

    ``lock_deadline_ms``: when the acquisition lock of ACQUIRED records expires (None otherwise)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str = EMPTY_MEMBER_ID
    lock_deadline_ms: int | None = None

    @property
    def size(self) -> int:
        return self.last_offset - self.first_offset + 1

    def same_state(self, other: InFlightBatch) -> bool:
        return (self.state == other.state and self.delivery_count == other.delivery_count
                and self.member_id == other.member_id and self.lock_deadline_ms == other.lock_deadline_ms)


class AckBatch(NamedTuple):
    """One AcknowledgementBatch of a request: a range and one type for all of it or one per offset."""

    first_offset: int
    last_offset: int
    types: list[int]


def validate_ack_batches(batches: Iterable[AckBatch], allow_renew: bool) -> ErrorCode:
    """Kafka's ``validateAcknowledgementBatches``: ranges in order and not overlapping, one type or one
    per offset, each type known (RENEW only from v2).  INVALID_REQUEST otherwise."""
    previous_last = -1
    top = AcknowledgeType.RENEW if allow_renew else AcknowledgeType.REJECT
    for b in batches:
        if b.first_offset < 0 or b.last_offset < b.first_offset or b.first_offset <= previous_last:
            return ErrorCode.INVALID_REQUEST
        if not b.types or (len(b.types) > 1 and len(b.types) != b.last_offset - b.first_offset + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t < AcknowledgeType.GAP or t > top for t in b.types):
            return ErrorCode.INVALID_REQUEST
        previous_last = b.last_offset
    return ErrorCode.NONE


class SharePartition:
    """The in-flight records of one (share group, topic-partition) and their state machine."""

    def __init__(self, group_id: str, topic: str, partition: int, start_offset: int,
                 batches: Iterable[InFlightBatch] = (), *, state_epoch: int = 0) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.start_offset = start_offset
        self.state_epoch = state_epoch
        self._batches: list[InFlightBatch] = []
        self._firsts: list[int] = []
        self.next_offset = start_offset
        for b in sorted(batches, key=lambda b: b.first_offset):
            if b.last_offset < self.next_offset:
                continue
            b.first_offset = max(b.first_offset, self.next_offset)
            if b.first_offset > self.next_offset:  # a hole: nothing to deliver there
                self._append(InFlightBatch(self.next_offset, b.first_offset - 1, RecordState.ARCHIVED, 0))
            self._append(b)
            self.next_offset = b.last_offset + 1
        self.maybe_advance_start()

    def __repr__(self) -> str:
        return (f"SharePartition({self.group_id}, {self.topic}-{self.partition}, start={self.start_offset}, "
                f"next={self.next_offset}, batches={len(self._batches)})")

    # -- views -------------------------------------------------------------------------------------
    @property
    def batches(self) -> list[InFlightBatch]:
        """The in-flight runs, in offset order (a copy: change state through the methods)."""
        return list(self._batches)

    @property
    def in_flight_records(self) -> int:
        """Kafka's ``numInFlightRecords``: offsets between the SPSO and the end offset."""
        return self.next_offset - self.start_offset

    def state_of(self, offset: int) -> RecordState | None:
        b = self._find(offset)
        return b.state if b is not None else None

    def delivery_count_of(self, offset: int) -> int:
        b = self._find(offset)
        return b.delivery_count if b is not None else 0

    def next_fetch_offset(self) -> int:
        """Kafka's ``nextFetchOffset``: the first AVAILABLE in-flight offset, else the end offset + 1."""
        for b in self._batches:
            if b.state == RecordState.AVAILABLE:
                return b.first_offset
        return self.next_offset

    def has_available(self) -> bool:
        return any(b.state == RecordState.AVAILABLE for b in self._batches)

    def can_acquire(self, max_in_flight: int) -> bool:
        """Kafka's ``canAcquireRecords``: something to redeliver, or room for new records."""
        return self.has_available() or self.in_flight_records < max_in_flight

    def next_lock_deadline(self) -> int | None:
        deadlines = [b.lock_deadline_ms for b in self._batches
                     if b.state == RecordState.ACQUIRED and b.lock_deadline_ms is not None]
        return min(deadlines) if deadlines else None

    def acquired_by(self, member_id: str) -> int:
        return sum(b.size for b in self._batches if b.state == RecordState.ACQUIRED and b.member_id == member_id)

    def snapshot(self) -> tuple[int, int, list[tuple[int, int, int, int]]]:
        """``(start offset, state epoch, [(first, last, state, delivery count)])`` to persist (Kafka's
        ``ShareSnapshot``).  ACQUIRED runs are written as AVAILABLE: the locks do not outlive the
        leader, so their records are delivered again (with the delivery count they reached)."""
        runs: list[tuple[int, int, int, int]] = []
        for b in self._batches:
            state = RecordState.AVAILABLE if b.state == RecordState.ACQUIRED else b.state
            if runs and runs[-1][2] == state and runs[-1][3] == b.delivery_count and runs[-1][1] + 1 == b.first_offset:
                runs[-1] = (runs[-1][0], b.last_offset, state, b.delivery_count)
            else:
                runs.append((b.first_offset, b.last_offset, int(state), b.delivery_count))
        return self.start_offset, self.state_epoch, runs

    # -- acquisition -------------------------------------------------------------------------------
    def acquire(self, member_id: str, fetched: list[FetchedBatch], now_ms: int, lock_duration_ms: int, *,
                max_records: int, max_in_flight: int, batch_size: int = 0,
                mode: ShareAcquireMode = ShareAcquireMode.BATCH_OPTIMIZED) -> list[AcquiredRecords]:
        """Acquire for ``member_id`` the AVAILABLE in-flight records and the new records among the
        ``fetched`` batches (read from the log from :meth:`next_fetch_offset`), at most ``max_records``
        (rounded up to a batch end unless ``mode`` is RECORD_LIMIT) and never past ``max_in_flight``
        in-flight records (again at a batch boundary).  New records are grouped into in-flight runs of
        about ``batch_size`` records along batch boundaries (Kafka's BatchSize).  Records of aborted
        batches are archived, not acquired.  Returns the acquired ranges with their delivery counts."""
        if not fetched or max_records <= 0:
            return []
        deadline = now_ms + lock_duration_ms
        exact = mode == ShareAcquireMode.RECORD_LIMIT
        redelivered: list[AcquiredRecords] = []
        count = 0
        lo = max(fetched[0].base_offset, self.start_offset)
        hi = fetched[-1].last_offset
        # 1. Records already in flight: redeliver those AVAILABLE.
        for b in list(self._batches):
            if count >= max_records:
                break
            if b.last_offset < lo or b.state != RecordState.AVAILABLE:
                continue
            if b.first_offset > hi:
                break
            first = max(b.first_offset, lo)
            last = min(b.last_offset, hi)
            if exact:
                last = min(last, first + (max_records - count) - 1)
            run = self._isolate(first, last)
            for r in run:
                r.state = RecordState.ACQUIRED
                r.delivery_count += 1
                r.member_id = member_id
                r.lock_deadline_ms = deadline
                redelivered.append(AcquiredRecords(r.first_offset, r.last_offset, r.delivery_count))
                count += r.size
        out = _merge_ranges(redelivered)
        # 2. New records at the end.
        if count < max_records and hi >= self.next_offset:
            self._acquire_new(member_id, fetched, deadline, max_records - count, max_in_flight, batch_size, exact,
                              out)
        self._merge()
        return out

    def _acquire_new(self, member_id: str, fetched: list[FetchedBatch], deadline: int, budget: int,
                     max_in_flight: int, batch_size: int, exact: bool, out: list[AcquiredRecords]) -> None:
        room = max_in_flight - self.in_flight_records
        if room <= 0:
            return
        limit = min(budget, room)
        taken = 0
        run: InFlightBatch | None = None  # the run new records are being added to
        for fb in fetched:
            if fb.last_offset < self.next_offset:
                continue
            first = max(fb.base_offset, self.next_offset)
            if first > self.next_offset:  # offsets missing from the log (compaction, a moved start)
                self._append(InFlightBatch(self.next_offset, first - 1, RecordState.ARCHIVED, 0))
                run = None
            last = fb.last_offset
            if exact:
                last = min(last, first + (limit - taken) - 1)
            if fb.aborted:
                # read_committed: the data of an aborted transaction is never delivered.
                self._append(InFlightBatch(first, last, RecordState.ARCHIVED, 1))
                run = None
            elif run is None or (batch_size > 0 and run.size >= batch_size):
                run = InFlightBatch(first, last, RecordState.ACQUIRED, 1, member_id, deadline)
                self._append(run)
                out.append(AcquiredRecords(first, last, 1))
            else:
                run.last_offset = last
                out[-1] = AcquiredRecords(out[-1].first_offset, last, 1)
            self.next_offset = last + 1
            taken += last - first + 1
            if taken >= limit:
                break

    # -- acknowledgement ---------------------------------------------------------------------------
    def acknowledge(self, member_id: str, batches: list[AckBatch], now_ms: int, lock_duration_ms: int,
                    delivery_count_limit: int) -> ErrorCode:
        """Apply a request partition's acknowledgements, all or nothing (Kafka rolls back on error).
        Every offset named must be in flight and ACQUIRED by ``member_id``: INVALID_RECORD_STATE
        otherwise.  Validate the batches first (:func:`validate_ack_batches`)."""
        for ab in batches:
            if ab.first_offset < self.start_offset or ab.last_offset >= self.next_offset:
                return ErrorCode.INVALID_RECORD_STATE
            if not self._all_acquired_by(member_id, ab.first_offset, ab.last_offset):
                return ErrorCode.INVALID_RECORD_STATE
        for ab in batches:
            if len(ab.types) == 1:
                self._apply(ab.first_offset, ab.last_offset, AcknowledgeType(ab.types[0]), now_ms, lock_duration_ms,
                            delivery_count_limit)
            else:
                # Per-offset types: apply runs of equal types together.
                start = ab.first_offset
                for i in range(1, len(ab.types) + 1):
                    if i == len(ab.types) or ab.types[i] != ab.types[i - 1]:
                        self._apply(start, ab.first_offset + i - 1, AcknowledgeType(ab.types[i - 1]), now_ms,
                                    lock_duration_ms, delivery_count_limit)
                        start = ab.first_offset + i
        self.maybe_advance_start()
        self._merge()
        return ErrorCode.NONE

    def _all_acquired_by(self, member_id: str, first: int, last: int) -> bool:
        pos = first
        i = max(bisect_right(self._firsts, first) - 1, 0)
        while pos <= last:
            if i >= len(self._batches):
                return False
            b = self._batches[i]
            if b.first_offset > pos or b.last_offset < pos:
                return False
            if b.state != RecordState.ACQUIRED or b.member_id != member_id:
                return False
            pos = b.last_offset + 1
            i += 1
        return True

    def _apply(self, first: int, last: int, kind: AcknowledgeType, now_ms: int, lock_duration_ms: int,
               limit: int) -> None:
        for b in self._isolate(first, last):
            if kind == AcknowledgeType.RENEW:
                b.lock_deadline_ms = now_ms + lock_duration_ms
                continue
            if kind == AcknowledgeType.ACCEPT:
                b.state = RecordState.ACKNOWLEDGED
            elif kind == AcknowledgeType.RELEASE:
                b.state = RecordState.ARCHIVED if b.delivery_count >= limit else RecordState.AVAILABLE
            else:  # REJECT, GAP
                b.state = RecordState.ARCHIVED
            b.member_id = EMPTY_MEMBER_ID
            b.lock_deadline_ms = None

    # -- releases ----------------------------------------------------------------------------------
    def expire_locks(self, now_ms: int, delivery_count_limit: int) -> list[tuple[int, int]]:
        """Kafka's acquisition lock timeout: ACQUIRED records whose lock expired at ``now_ms`` become
        AVAILABLE (ARCHIVED at the delivery count limit).  Returns the released ranges."""
        released = self._release(lambda b: b.lock_deadline_ms is not None and b.lock_deadline_ms <= now_ms,
                                 delivery_count_limit)
        if released:
            log.debug("%r: acquisition locks expired on %s", self, released)
        return released

    def release_member(self, member_id: str, delivery_count_limit: int) -> list[tuple[int, int]]:
        """Kafka's ``releaseAcquiredRecords``: a member's session closed or it left the group."""
        return self._release(lambda b: b.member_id == member_id, delivery_count_limit)

    def _release(self, which, limit: int) -> list[tuple[int, int]]:
        released = []
        for b in self._batches:
            if b.state == RecordState.ACQUIRED and which(b):
                b.state = RecordState.ARCHIVED if b.delivery_count >= limit else RecordState.AVAILABLE
                b.member_id = EMPTY_MEMBER_ID
                b.lock_deadline_ms = None
                released.append((b.first_offset, b.last_offset))
        if released:
            self.maybe_advance_start()
            self._merge()
        return released

    # -- the start offset ------------------------------------------------------------------------
    def maybe_advance_start(self) -> bool:
        """Kafka's ``maybeUpdateCachedStateAndOffsets``: move the SPSO past a prefix of ACKNOWLEDGED/
        ARCHIVED records and drop them from the in-flight state."""
        cut = 0
        while cut < len(self._batches) and self._batches[cut].state in DONE_STATES:
            cut += 1
        if not cut:
            return False
        self.start_offset = self._batches[cut - 1].last_offset + 1
        del self._batches[:cut], self._firsts[:cut]
        if not self._batches:
            self.start_offset = max(self.start_offset, self.next_offset)
        return True

    def move_start_to(self, offset: int) -> None:
        """Move the SPSO to ``offset`` (the log start offset moved past it: those records are gone), or
        reset the share-partition there (AlterShareGroupOffsets): in-flight records below it are dropped,
        and an offset beyond the end forgets the end too."""
        if offset == self.start_offset:
            return
        if offset >= self.next_offset or offset < self.start_offset:
            self._batches.clear()
            self._firsts.clear()
            self.next_offset = offset
        else:
            self._split_at(offset)
            cut = bisect_left(self._firsts, offset)
            del self._batches[:cut], self._firsts[:cut]
        self.start_offset = offset
        self.maybe_advance_start()

    # -- the runs ----------------------------------------------------------------------------------
    def _append(self, b: InFlightBatch) -> None:
        self._batches.append(b)
        self._firsts.append(b.first_offset)

    def _find(self, offset: int) -> InFlightBatch | None:
        i = bisect_right(self._firsts, offset) - 1
        if i >= 0 and self._batches[i].last_offset >= offset:
            return self._batches[i]
        return None

    def _split_at(self, offset: int) -> None:
        """Make ``offset`` the first offset of a run (when it lies inside one)."""
        i = bisect_right(self._firsts, offset) - 1
        if i < 0:
            return
        b = self._batches[i]
        if b.first_offset == offset or b.last_offset < offset:
            return
        tail = InFlightBatch(offset, b.last_offset, b.state, b.delivery_count, b.member_id, b.lock_deadline_ms)
        b.last_offset = offset - 1
        self._batches.insert(i + 1, tail)
        self._firsts.insert(i + 1, offset)

    def _isolate(self, first: int, last: int) -> list[InFlightBatch]:
        """The runs exactly covering [first, last] (splitting at both ends)."""
        self._split_at(first)
        self._split_at(last + 1)
        i = bisect_right(self._firsts, first) - 1
        j = bisect_right(self._firsts, last)
        return self._batches[max(i, 0):j]

    def _merge(self) -> None:
        """Join adjacent runs in the same state (keeps the list short after splits)."""
        if len(self._batches) < 2:
            return
        merged = [self._batches[0]]
        for b in self._batches[1:]:
            prev = merged[-1]
            if prev.last_offset + 1 == b.first_offset and prev.same_state(b):
                prev.last_offset = b.last_offset
            else:
                merged.append(b)
        if len(merged) != len(self._batches):
            self._batches = merged
            self._firsts = [b.first_offset for b in merged]


def _merge_ranges(ranges: list[AcquiredRecords]) -> list[AcquiredRecords]:
    """Ranges in offset order, adjacent ones with the same delivery count joined."""
    out: list[AcquiredRecords] = []
    for r in sorted(ranges):
        if out and out[-1].last_offset + 1 == r.first_offset and out[-1].delivery_count == r.delivery_count:
            out[-1] = AcquiredRecords(out[-1].first_offset, r.last_offset, r.delivery_count)
        else:
            out.append(r)
    return out
