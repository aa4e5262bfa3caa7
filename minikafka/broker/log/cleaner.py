"""Cleaning one log (Kafka's ``Cleaner``, ``SkimpyOffsetMap`` and ``CleanedTransactionMetadata``).

A cleaning of a compacted log has two passes over its cleanable sections:

1. :meth:`Cleaner.build_offset_map` reads the dirty section ``[first dirty, first uncleanable)`` and
   records each key's last offset, until the map holds as many keys as ``log.cleaner.dedupe.buffer.size``
   allows (then the pass stops at that point and a later cleaning takes the rest);
2. :meth:`Cleaner.clean_group` rewrites a group of segments (from the start of the log up to the
   map's end, grouped up to ``segment.bytes``) into one new segment keeping, as Kafka keeps them:
   the last record of each key; tombstones until ``delete.retention.ms`` after the cleaning that
   first reached them (KIP-534's delete horizon in the batch); no record of an aborted transaction;
   transaction markers until no data of their transaction is left and their delete horizon passed;
   an empty batch where a producer's last batch lost every record (its sequence numbers stay valid).

Both passes are synchronous and touch only inactive segments and snapshots handed in, so the
:class:`~.cleaner_manager.LogCleaner` runs them away from the request loop: for a log in a data dir in a
cleaning process (:func:`run_cleaning_job`, :mod:`.cleaning_process`), for a log in memory on a worker
thread; it swaps the result in on the broker's own thread. Deliberate differences from Kafka: the offset
map is keyed by the key bytes themselves (Kafka: their MD5 hash) with Kafka's capacity (24 bytes a slot,
``load factor`` 0.9); a rewritten batch keeps its base timestamp (see :mod:`~minikafka.protocol.record_filter`);
the last batch of every group (not only of the whole cleaning) is kept, empty if need be, so a crash
mid-swap can tell which segments a cleaned one replaces.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from minikafka.common.clock import SYSTEM_CLOCK, Clock
from minikafka.protocol.record_filter import RecordSpan, build_empty_batch, build_filtered_batch, scan_records
from minikafka.protocol.records import (ControlRecordType, CorruptRecordError, RecordBatchHeader, read_end_txn_marker,
                                       read_header, records_payload)

from .segment import BatchMeta, Segment, SegmentFile, new_cleaned_file_segment
from .txn_index import AbortedTxn
from .unified import Log, LogConfig

log = logging.getLogger(__name__)

BYTES_PER_ENTRY = 24  # Kafka's SkimpyOffsetMap: a 16-byte MD5 hash and an 8-byte offset
_WRITE_RUN_BYTES = 1 << 20


class Throttler:
    """Sleeps the cleaner to hold its I/O to ``log.cleaner.io.max.bytes.per.second`` (Kafka's ``Throttler``:
    every ``check_interval_ms`` of work, nap long enough to bring the observed rate down to the desired one).
    Shared by the cleaner threads, which it blocks with ``clock.sleep`` (a ``ManualClock`` in tests)."""

    def __init__(self, desired_rate_per_sec: float, check_interval_ms: int = 300,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.desired_rate_per_sec = desired_rate_per_sec
        self.check_interval_ns = check_interval_ms * 1_000_000
        self.clock = clock
        self._lock = threading.Lock()
        self._period_start_ns = clock.monotonic_ns()
        self._observed = 0.0
        self.slept_ms = 0

    def maybe_throttle(self, observed: float) -> None:
        rate = self.desired_rate_per_sec
        if rate == math.inf:
            return
        with self._lock:
            self._observed += observed
            now = self.clock.monotonic_ns()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns <= self.check_interval_ns or self._observed <= 0:
                return
            if self._observed * 1e9 / elapsed_ns > rate:
                sleep_ms = round(self._observed / (rate / 1000) - elapsed_ns // 1_000_000)
                if sleep_ms > 0:
                    self.clock.sleep(sleep_ms)
                    self.slept_ms += sleep_ms
            self._period_start_ns = self.clock.monotonic_ns()
            self._observed = 0.0


class LogCleaningAbortedError(Exception):
    """The log changed under the cleaner (deleted, truncated): this cleaning is dropped."""


class OffsetMap:
    """Key -> last offset for one pass (Kafka's ``SkimpyOffsetMap``), bounded like Kafka's: ``memory``
    bytes at 24 bytes a slot, filled to ``load_factor`` of its slots. ``offsets`` is the mapping itself, read
    directly by the cleaner's per-record loop."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        self.slots = max(memory // BYTES_PER_ENTRY, 1)
        self.max_entries = max(int(self.slots * load_factor), 1)
        self.offsets: dict[bytes, int] = {}
        self.latest_offset = -1

    def clear(self) -> None:
        self.offsets.clear()
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return len(self.offsets) / self.slots

    def put_all(self, keyed: list[tuple[bytes, int]]) -> bool:
        """Map each ``(key, offset)`` in order; stops and returns True at the first new key that does not
        fit (the map is full), else False."""
        offsets = self.offsets
        if len(offsets) + len(keyed) < self.max_entries:
            offsets.update(keyed)
        else:  # near the bound: one by one
            limit = self.max_entries
            for key, offset in keyed:
                if len(offsets) >= limit and key not in offsets:
                    return True
                offsets[key] = offset
        if keyed:
            self.update_latest_offset(max(offset for _, offset in keyed))
        return False

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset


@dataclass
class CleanerStats:
    """What one cleaning read and wrote (Kafka's ``CleanerStats``)."""

    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    start: float = field(default_factory=SYSTEM_CLOCK.monotonic)  # the real time the work took
    map_done: float = 0.0
    end: float = 0.0

    @property
    def elapsed_secs(self) -> float:
        return max((self.end or SYSTEM_CLOCK.monotonic()) - self.start, 1e-9)


@dataclass
class _AbortedTxnState:
    txn: AbortedTxn
    last_observed_batch_offset: int = -1


class CleanedTransactionMetadata:
    """The transactions the cleaner is inside of as it walks the log (Kafka's ``CleanedTransactionMetadata``):
    decides which batches belong to aborted transactions and when a marker may go."""

    def __init__(self, aborted: Sequence[AbortedTxn] = ()) -> None:
        self._committed: set[int] = set()
        self._aborted: dict[int, _AbortedTxnState] = {}
        self._pending: list[tuple[int, int, AbortedTxn]] = []  # heap by first offset
        self.retained_aborts: list[AbortedTxn] = []
        self.add_aborted(aborted)

    def add_aborted(self, aborted: Sequence[AbortedTxn]) -> None:
        for t in aborted:
            heapq.heappush(self._pending, (t.first_offset, t.last_offset, t))

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            t = heapq.heappop(self._pending)[2]
            self._aborted.setdefault(t.producer_id, _AbortedTxnState(t))

    def on_control_batch(self, h: RecordBatchHeader, control_type: int | None) -> bool:
        """Whether a marker may be discarded (its transaction left no data behind)."""
        self._consume_aborted_up_to(h.last_offset)
        if control_type is None:  # an empty control batch: already cleaned
            return True
        if control_type == ControlRecordType.ABORT:
            state = self._aborted.pop(h.producer_id, None)
            if state is not None and state.last_observed_batch_offset >= 0:
                self.retained_aborts.append(state.txn)
                return False
            return True
        if control_type == ControlRecordType.COMMIT:
            if h.producer_id in self._committed:
                self._committed.discard(h.producer_id)
                return False
            return True
        return False

    def on_batch(self, h: RecordBatchHeader) -> bool:
        """Whether a data batch belongs to an aborted transaction."""
        self._consume_aborted_up_to(h.last_offset)
        if not h.is_transactional:
            return False
        state = self._aborted.get(h.producer_id)
        if state is not None:
            state.last_observed_batch_offset = h.last_offset
            return True
        self._committed.add(h.producer_id)
        return False


def _control_type(h: RecordBatchHeader, view: memoryview) -> int | None:
    """The control record's type; None for a control batch the cleaner already emptied, -1 if unreadable."""
    if h.record_count == 0:
        return None
    try:
        return read_end_txn_marker(view)[0]
    except CorruptRecordError:
        return -1


@dataclass
class LogToClean:
    """A compacted log chosen for cleaning and its sections (Kafka's ``LogToClean``)."""

    name: str
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def group_segments_by_size(segments: Sequence[_S], max_size: int, first_uncleanable: int) -> list[list[_S]]:
    """Consecutive segments grouped up to ``segment.bytes`` of data and 2^31 offsets each (Kafka's
    ``groupSegmentsBySize``, without its index-size bound)."""
    groups: list[list[_S]] = []
    segs = list(segments)
    while segs:
        group = [segs.pop(0)]
        size = group[0].size
        while segs:
            nxt = segs[0]
            last_offset = segs[1].base_offset - 1 if len(segs) > 1 else first_uncleanable - 1
            if size + nxt.size > max_size or (nxt.size and last_offset - group[0].base_offset > 0x7FFFFFFF):
                break
            group.append(segs.pop(0))
            size += nxt.size
        groups.append(group)
    return groups


class StoredSegment(Protocol):
    """What the cleaner reads of a segment: a live one (:class:`Segment`) or, in a cleaning process, its
    file (:class:`SegmentFile`)."""

    base_offset: int
    size: int
    next_offset: int
    last_modified_ms: int

    def iter_batches(self) -> Iterator[tuple[RecordBatchHeader, memoryview]]: ...


class CleanedSegments(Protocol):
    """Where cleaned segments are made: the log itself, or its directory in a cleaning process."""

    config: LogConfig

    def new_cleaned_segment(self, base_offset: int) -> Segment: ...


_S = TypeVar("_S", bound=StoredSegment)


def _with_last(group: Sequence[StoredSegment]) -> Iterator[tuple[RecordBatchHeader, memoryview, bool]]:
    """The batches of a group of segments, the last one flagged."""
    prev: tuple[RecordBatchHeader, memoryview] | None = None
    for seg in group:
        for item in seg.iter_batches():
            if prev is not None:
                yield prev[0], prev[1], False
            prev = item
    if prev is not None:
        yield prev[0], prev[1], True


def _unchanged(h: RecordBatchHeader, view: memoryview) -> BatchMeta:
    """A batch copied as it is."""
    return (bytes(view), h.base_offset, h.last_offset, h.max_timestamp)


@dataclass
class GroupResult:
    """One group cleaned into ``cleaned``, to be swapped in for ``replaced``."""

    cleaned: Segment
    replaced: list[StoredSegment]


class Cleaner:
    """The cleaning of one log at a time (Kafka's ``Cleaner``); one per concurrent cleaning."""

    def __init__(self, cleaner_id: int, offset_map: OffsetMap,
                 check_done: Callable[[], None] = lambda: None, throttler: Throttler | None = None) -> None:
        self.id = cleaner_id
        self.offset_map = offset_map
        self.check_done = check_done
        self.throttler = throttler or Throttler(math.inf)

    # -- pass 1 ---------------------------------------------------------------------------
    def build_offset_map(self, segments: Sequence[StoredSegment], start: int, end: int, aborted: Sequence[AbortedTxn],
                         stats: CleanerStats) -> int:
        """Map keys to their last offset in ``[start, end)``; returns the end of what was mapped
        (``map.latest_offset + 1``): short of ``end`` when the map filled up."""
        omap = self.offset_map
        omap.clear()
        dirty = [s for s in segments if s.base_offset < end and s.next_offset > start]
        txns = CleanedTransactionMetadata(aborted)
        for i, seg in enumerate(dirty):
            next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
            if self._map_segment(seg, start, end, txns, stats):
                break
            omap.update_latest_offset(next_start - 1)
        stats.buffer_utilization = omap.utilization
        stats.map_done = SYSTEM_CLOCK.monotonic()
        return omap.latest_offset + 1

    def _map_segment(self, seg: StoredSegment, start: int, end: int, txns: CleanedTransactionMetadata,
                     stats: CleanerStats) -> bool:
        omap = self.offset_map
        for h, view in seg.iter_batches():
            self.check_done()
            if h.base_offset >= end:
                break
            stats.map_bytes_read += h.size
            self.throttler.maybe_throttle(h.size)
            if h.last_offset < start:
                continue
            if h.is_control:
                txns.on_control_batch(h, _control_type(h, view))
                stats.map_messages_read += 1
            elif txns.on_batch(h):
                stats.map_messages_read += h.record_count
            elif h.record_count:
                try:
                    spans = scan_records(records_payload(view, h), h.record_count)
                except CorruptRecordError as exc:
                    log.warning("cleaner %d: unreadable batch at %d skipped while mapping: %s", self.id,
                                h.base_offset, exc)
                    spans = []
                base = h.base_offset
                keyed = [(sp.key, base + sp.offset_delta) for sp in spans
                         if sp.key is not None and base + sp.offset_delta >= start]
                if omap.put_all(keyed):
                    return True
                stats.map_messages_read += len(spans)
            if h.last_offset >= start:
                omap.update_latest_offset(h.last_offset)
        return False

    # -- pass 2 ---------------------------------------------------------------------------
    def clean_group(self, lg: CleanedSegments, group: Sequence[StoredSegment], txns: CleanedTransactionMetadata,
                    active_producers: dict[int, tuple[int, int]], upper_bound: int, now_ms: int,
                    stats: CleanerStats) -> GroupResult:
        """Write the retained batches of ``group`` into a new segment (Kafka ``cleanSegments`` +
        ``cleanInto``); the caller swaps it in."""
        cleaned = lg.new_cleaned_segment(group[0].base_offset)
        try:
            run: list[BatchMeta] = []
            run_bytes = 0
            last_seg = group[-1]
            delete_retention = lg.config.delete_retention_ms
            for h, view, is_last in _with_last(group):
                self.check_done()
                out = self._filter_batch(h, view, txns, active_producers, upper_bound, now_ms, delete_retention,
                                         stats, keep_empty=is_last)
                if out is None:
                    continue
                run.append(out)
                run_bytes += len(out[0])
                self.throttler.maybe_throttle(h.size + len(out[0]))
                if run_bytes >= _WRITE_RUN_BYTES:
                    cleaned.append(run, now_ms)
                    run, run_bytes = [], 0
            if run:
                cleaned.append(run, now_ms)
            stats.bytes_written += cleaned.size
            cleaned.on_become_inactive()
            cleaned.flush(fsync=True)
            cleaned.set_last_modified(last_seg.last_modified_ms)
        except BaseException:
            cleaned.delete()
            raise
        return GroupResult(cleaned, list(group))

    def _filter_batch(self, h: RecordBatchHeader, view: memoryview, txns: CleanedTransactionMetadata,
                      active_producers: dict[int, tuple[int, int]], upper_bound: int, now_ms: int,
                      delete_retention_ms: int, stats: CleanerStats, keep_empty: bool) -> BatchMeta | None:
        stats.bytes_read += h.size
        has_pid = h.producer_id >= 0
        if h.is_control:
            control_type = _control_type(h, view)
            can_discard = txns.on_control_batch(h, control_type)
            horizon_passed = h.has_delete_horizon and h.base_timestamp <= now_ms
            discard_records = can_discard and horizon_passed
            marker_for_empty_txn = can_discard
        else:
            discard_records = txns.on_batch(h)
            marker_for_empty_txn = False
        last = active_producers.get(h.producer_id) if has_pid else None
        if last is not None and (h.last_offset == last[0] if last[0] >= 0
                                 else h.is_control and h.producer_epoch == last[1]):
            retention = "retain_empty"
        elif h.next_offset == upper_bound or keep_empty:
            retention = "retain_empty"
        elif discard_records:
            retention = "delete"
        else:
            retention = "delete_empty"
        stats.messages_read += max(h.record_count, 0)
        if retention == "delete":
            return None
        if discard_records:
            pass  # no record stays; at most the empty batch below
        elif h.is_control:
            if marker_for_empty_txn and not h.has_delete_horizon:  # start the marker's delete horizon
                data = records_payload(view, h)
                spans = scan_records(data, h.record_count) if h.record_count else []
                stats.messages_written += len(spans)
                return self._meta(build_filtered_batch(h, data, spans, now_ms + delete_retention_ms), h)
            stats.messages_written += h.record_count
            return _unchanged(h, view)
        else:
            try:
                data = records_payload(view, h)
                spans = scan_records(data, h.record_count) if h.record_count else []
            except CorruptRecordError as exc:
                log.warning("cleaner %d: unreadable batch at %d kept as is: %s", self.id, h.base_offset, exc)
                return _unchanged(h, view)
            kept = self._retained(h, spans, now_ms, stats)
            # A batch's first tombstones start its delete horizon (KIP-534): the batch is rewritten for that.
            new_horizon = not h.has_delete_horizon and any(not sp.has_value for sp in kept)
            if len(kept) == len(spans) and spans and not new_horizon:
                stats.messages_written += len(kept)
                return _unchanged(h, view)
            if kept:
                stats.messages_written += len(kept)
                horizon = now_ms + delete_retention_ms if new_horizon else None
                return self._meta(build_filtered_batch(h, data, kept, horizon), h)
        if retention == "retain_empty":
            return self._meta(build_empty_batch(h), h)
        return None

    def _retained(self, h: RecordBatchHeader, spans: list[RecordSpan], now_ms: int,
                  stats: CleanerStats) -> list[RecordSpan]:
        """Kafka's ``shouldRetainRecord`` for each record of a data batch."""
        omap = self.offset_map
        latest = omap.latest_offset
        get = omap.offsets.get
        base = h.base_offset
        retain_deletes = not h.has_delete_horizon or now_ms < h.base_timestamp
        kept = []
        for s in spans:
            offset = base + s.offset_delta
            if offset > latest:
                kept.append(s)
            elif s.key is None:
                stats.invalid_messages += 1
            elif offset >= get(s.key, -1) and (s.has_value or retain_deletes):
                kept.append(s)
        return kept

    @staticmethod
    def _meta(batch: bytes, h: RecordBatchHeader) -> BatchMeta:
        nh = read_header(batch)
        return (batch, h.base_offset, h.last_offset, nh.max_timestamp)


# -- cleaning in a process of its own (logs in a data dir) -----------------------------------------------------
@dataclass
class CleaningJob:
    """Everything a cleaning of a log in a data dir needs, picklable: the log's directory and config, its
    inactive segments as the broker saw them, the sections to clean and the transaction and producer
    state the cleaning must respect (the snapshots the in-process path takes too)."""

    directory: Path
    config: LogConfig
    segments: list[tuple[int, int, int, int]]  # base offset, size, next offset, last modified ms
    first_dirty_offset: int
    first_uncleanable_offset: int
    aborted: list[AbortedTxn]
    producers: dict[int, tuple[int, int]]
    now_ms: int
    dedupe_buffer_size: int
    load_factor: float
    io_max_bytes_per_second: float


@dataclass
class CleaningOutcome:
    """What a cleaning process wrote: per group, the ``.cleaned`` segment's base and next offset and the
    base offsets it replaces, to be swapped in by the broker."""

    end_offset: int
    stats: CleanerStats
    groups: list[tuple[int, int, list[int]]]
    retained_aborts: list[AbortedTxn]


class _CleanedFiles:
    """:class:`CleanedSegments` for a cleaning process: ``.cleaned`` files in the log's directory."""

    def __init__(self, job: CleaningJob) -> None:
        self.config = job.config
        self.directory = job.directory
        self.now_ms = job.now_ms

    def new_cleaned_segment(self, base_offset: int) -> Segment:
        return new_cleaned_file_segment(self.directory, base_offset, self.config.index_interval_bytes, self.now_ms)


def run_cleaning_job(job: CleaningJob) -> CleaningOutcome:
    """A whole cleaning of one log's files (Kafka ``Cleaner.doClean``), run in a cleaning process: map the
    dirty section, clean every group into ``.cleaned`` segments (closed, fsynced), leave the swaps to the
    broker."""
    stats = CleanerStats()
    cleaner = Cleaner(0, OffsetMap(job.dedupe_buffer_size, job.load_factor),
                      throttler=Throttler(job.io_max_bytes_per_second))
    files = [SegmentFile(job.directory, *seg) for seg in job.segments]
    end = cleaner.build_offset_map(files, job.first_dirty_offset, job.first_uncleanable_offset, job.aborted, stats)
    txns = CleanedTransactionMetadata(job.aborted)
    dest = _CleanedFiles(job)
    groups = []
    for group in group_segments_by_size([f for f in files if f.base_offset < end], job.config.segment_bytes,
                                        job.first_uncleanable_offset):
        result = cleaner.clean_group(dest, group, txns, job.producers, job.first_uncleanable_offset, job.now_ms,
                                     stats)
        result.cleaned.close()
        groups.append((result.cleaned.base_offset, result.cleaned.next_offset, [s.base_offset for s in group]))
    stats.end = SYSTEM_CLOCK.monotonic()
    return CleaningOutcome(end, stats, groups, txns.retained_aborts)
