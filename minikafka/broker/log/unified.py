"""One partition's log (Kafka's ``UnifiedLog`` + ``LocalLog``).

Deliberate differences from Kafka:

* Single-threaded and synchronous: the broker calls it from trio tasks; writes
  are ``os.writev`` on an ``O_APPEND`` descriptor (page cache, no fsync unless
  ``flush(fsync=True)``), reads are ``os.pread``.
* No producer-state snapshots; the aborted-transactions index (:mod:`.txn_index`) is in
  memory, rebuilt with the producer state on load. Compaction is the log cleaner's
  (:mod:`.cleaner`); this class swaps its cleaned segments in (:meth:`Log.replace_segments`).
* The log start offset and high watermark are checkpointed per partition in
  ``partition-offsets-checkpoint`` (Kafka keeps one log-start-offset-checkpoint
  and one replication-offset-checkpoint per data directory).
* Recovery always re-validates the last (active) segment, and any older segment
  whose indexes fail the sanity check, instead of tracking a recovery point.
* Segments roll per batch (not per produce request) when the next batch would
  push the segment past ``segment_bytes``.
"""

from __future__ import annotations

import logging
import os
import shutil
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...common import SYSTEM_CLOCK, Clock
from minikafka.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    ConsumerRecord,
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchHeader,
    assign_offsets,
    decode_records,
    iter_batches,
    read_header,
)

from .epoch import CHECKPOINT_FILE, LeaderEpochFileCache
from .index import IndexCorruptError
from .txn_index import TransactionIndex
from .segment import (BatchMeta, FileSegment, MemorySegment, Segment, new_cleaned_file_segment,
                      remove_segment_files)

log = logging.getLogger(__name__)

OFFSETS_CHECKPOINT_FILE = "partition-offsets-checkpoint"
_unpack_header = BATCH_HEADER.unpack_from
_MAX_REL_OFFSET = 0x7FFFFFFF


class OffsetOutOfRangeError(Exception):
    """Requested offset outside [log start offset, log end offset] (OFFSET_OUT_OF_RANGE)."""


@dataclass
class LogConfig:
    """Per-topic log settings (subset of Kafka's ``LogConfig``)."""

    segment_bytes: int = 1 << 30  # segment.bytes
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms (-1 = unlimited)
    retention_bytes: int = -1  # retention.bytes (-1 = unlimited)
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    index_interval_bytes: int = 4096  # index.interval.bytes
    segment_ms: int = 7 * 24 * 3600 * 1000  # segment.ms
    cleanup_policy: frozenset[str] = frozenset({"delete"})  # cleanup.policy
    delete_retention_ms: int = 24 * 3600 * 1000  # delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = (1 << 63) - 1  # max.compaction.lag.ms
    max_message_bytes: int = 1048588  # max.message.bytes
    timestamp_before_max_ms: int = (1 << 63) - 1  # message.timestamp.before.max.ms
    timestamp_after_max_ms: int = (1 << 63) - 1  # message.timestamp.after.max.ms

    @property
    def compact(self) -> bool:
        """``cleanup.policy`` includes ``compact``: the log cleaner keeps the last record per key."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """``cleanup.policy`` includes ``delete``: time and size retention apply."""
        return "delete" in self.cleanup_policy


@dataclass(slots=True)
class LogAppendInfo:
    """Result of an append (Kafka ``LogAppendInfo``)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless LogAppendTime
    log_start_offset: int
    num_records: int


@dataclass
class FetchDataInfo:
    """Whole batches as stored, never decoded (Kafka ``FetchDataInfo``)."""

    start_offset: int
    chunks: list[memoryview | bytes] = field(default_factory=list)
    size: int = 0


def _decode_or_none(batch: bytes | memoryview) -> list[ConsumerRecord] | None:
    """The batch's records, or None when they cannot be decoded (the caller then
    falls back to batch granularity)."""
    try:
        return decode_records(batch, check_crc=False)
    except CorruptRecordError:
        return None


class Log:
    """A partition log: an ordered list of segments, the last one active."""

    def __init__(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        directory: Path | None,
        *,
        auto_advance_hw: bool = True,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.topic = topic
        self.clock = clock
        self.partition = partition
        self.config = config
        self.directory = directory
        self.auto_advance_hw = auto_advance_hw
        self.segments: list[Segment] = []
        self._bases: list[int] = []  # segment base offsets, for bisect
        self.log_start_offset = 0
        self.log_end_offset = 0
        self._high_watermark = 0
        self._closed = False
        self.truncated_to: int | None = None  # lowest truncation since the cleaner last looked
        self.truncations = 0  # how often the log was truncated (a cleaning that saw an earlier count is void)
        self.txn_index = TransactionIndex()
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self.epoch_cache = LeaderEpochFileCache(directory / CHECKPOINT_FILE)
            self._load()
        else:
            self.epoch_cache = LeaderEpochFileCache(None)
            self._add_segment(0, self.clock.time_ms())

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, hw={self._high_watermark}, segments={len(self.segments)})")

    # -- properties -----------------------------------------------------------------------
    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self._high_watermark = min(max(value, self.log_start_offset), self.log_end_offset)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def num_segments(self) -> int:
        return len(self.segments)

    @property
    def active_segment(self) -> Segment:
        return self.segments[-1]

    # -- segments -------------------------------------------------------------------------
    def _new_segment(self, base_offset: int, now_ms: int) -> Segment:
        if self.directory is None:
            return MemorySegment(base_offset, now_ms)
        return FileSegment(self.directory, base_offset, self.config.index_interval_bytes, now_ms)

    def _add_segment(self, base_offset: int, now_ms: int) -> Segment:
        seg = self._new_segment(base_offset, now_ms)
        self.segments.append(seg)
        self._bases.append(base_offset)
        return seg

    def roll(self, now_ms: int | None = None) -> Segment:
        """Start a new active segment at the log end offset (Kafka ``roll``)."""
        now_ms = self.clock.time_ms() if now_ms is None else now_ms
        active = self.active_segment
        if active.size == 0:  # nothing to roll; just move an empty segment's base if needed
            if active.base_offset == self.log_end_offset:
                return active
            self._drop_segments([active])
            return self._add_segment(self.log_end_offset, now_ms)
        active.on_become_inactive()
        log.debug("%r: rolling new segment at %d", self, self.log_end_offset)
        return self._add_segment(self.log_end_offset, now_ms)

    def _should_roll(self, seg: Segment, size: int, batch_size: int, last_offset: int, now_ms: int) -> bool:
        """Kafka ``LogSegment.shouldRoll``, checked per batch; *size* includes pending bytes."""
        if size == 0:
            return False
        if size + batch_size > self.config.segment_bytes:
            return True
        if last_offset - seg.base_offset > _MAX_REL_OFFSET:
            return True
        rolling_ts = seg.rolling_timestamp if seg.rolling_timestamp >= 0 else seg.created_ms
        return now_ms - rolling_ts > self.config.segment_ms

    def _drop_segments(self, doomed: Sequence[Segment]) -> None:
        ids = {id(s) for s in doomed}
        for s in doomed:
            s.delete()
        self.segments = [s for s in self.segments if id(s) not in ids]
        self._bases = [s.base_offset for s in self.segments]

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    # -- loading (Kafka LogLoader) -------------------------------------------------------
    def _load(self) -> None:
        assert self.directory is not None
        now = self.clock.time_ms()
        for stray in self.directory.glob("*.tmp"):
            stray.unlink(missing_ok=True)
        self._complete_swaps(now)
        bases = sorted(int(p.stem) for p in self.directory.glob("*.log") if p.stem.isdigit())
        for suffix in (".index", ".timeindex"):  # orphan indexes
            for p in self.directory.glob("*" + suffix):
                if not p.stem.isdigit() or int(p.stem) not in bases:
                    p.unlink(missing_ok=True)
        ckpt_start, ckpt_hw = self._read_offsets_checkpoint()
        segments: list[Segment] = []
        for i, base in enumerate(bases):
            seg = FileSegment(self.directory, base, self.config.index_interval_bytes, now)
            segments.append(seg)
            is_last = i == len(bases) - 1
            recover = is_last
            if not is_last:
                try:
                    seg.load_inactive(bases[i + 1])
                except IndexCorruptError as exc:
                    log.warning("%s: %s; rebuilding the index", seg.path, exc)
                    recover = True
            if recover:
                truncated = seg.recover(check_crc=True, on_batch=self._on_recovered_batch)
                if truncated and not is_last:
                    log.warning("%s: corrupt segment, deleting %d later segment(s)", seg.path, len(bases) - i - 1)
                    for later in bases[i + 1 :]:
                        FileSegment(self.directory, later, self.config.index_interval_bytes, now).delete()
                    break
                if not is_last and seg.next_offset > bases[i + 1]:
                    raise InvalidRecordError(f"{seg.path}: overlaps next segment {bases[i + 1]}")
        self.segments = segments
        self._bases = [s.base_offset for s in segments]
        if not segments:
            self._add_segment(max(ckpt_start, 0), now)
        self.log_end_offset = self.active_segment.next_offset
        self.log_start_offset = min(max(ckpt_start, self.segments[0].base_offset), self.log_end_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        if self.auto_advance_hw or ckpt_hw < 0:
            self._high_watermark = self.log_end_offset
        else:
            self.high_watermark = ckpt_hw
        log.info("%r: loaded", self)

    def _complete_swaps(self, now: int) -> None:
        """Finish what a crash interrupted in :meth:`replace_segments` (Kafka ``LogLoader``'s swap
        handling): ``.cleaned`` files were never committed and go; a ``.swap`` segment was, so the
        segments it replaces (those starting within its offsets) go and it takes their place."""
        assert self.directory is not None
        for stray in self.directory.glob("*.cleaned"):
            stray.unlink(missing_ok=True)
        for swap in sorted(self.directory.glob("*.log.swap")):
            stem = swap.name[: -len(".log.swap")]
            if not stem.isdigit():
                continue
            base = int(stem)
            seg = FileSegment(self.directory, base, self.config.index_interval_bytes, now, suffix=".swap")
            seg.recover(check_crc=True)
            for old in self.directory.glob("*.log"):
                if old.stem.isdigit() and base <= int(old.stem) < max(seg.next_offset, base + 1):
                    remove_segment_files(self.directory, int(old.stem))
            seg.close()
            seg.change_suffix("")
            log.info("%s: completed the swap of a cleaned segment at %d", self.directory, base)

    def _on_recovered_batch(self, h: RecordBatchHeader) -> None:
        if h.partition_leader_epoch >= 0:
            self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)

    def _read_offsets_checkpoint(self) -> tuple[int, int]:
        assert self.directory is not None
        p = self.directory / OFFSETS_CHECKPOINT_FILE
        try:
            lines = p.read_text().split("\n")
            if lines[0] != "0":
                raise ValueError(lines[0])
            start, hw = lines[1].split()
            return int(start), int(hw)
        except FileNotFoundError:
            return 0, -1
        except (ValueError, IndexError):
            log.warning("%s: unreadable, ignoring", p)
            return 0, -1

    def _write_offsets_checkpoint(self) -> None:
        if self.directory is None or self._closed:
            return
        p = self.directory / OFFSETS_CHECKPOINT_FILE
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(f"0\n{self.log_start_offset} {self._high_watermark}\n")
        os.replace(tmp, p)

    # -- appends --------------------------------------------------------------------------
    def append_as_leader(self, batches: Sequence[bytearray | memoryview], leader_epoch: int,
                         now_ms: int, headers: Sequence[tuple[int, ...]] | None = None) -> LogAppendInfo:
        """Assign offsets to already CRC-validated batches and store them.

        Rewrites baseOffset and partitionLeaderEpoch in place (outside the CRC); for
        LogAppendTime topics also maxTimestamp + the timestamp-type bit, then re-CRCs
        (Kafka ``LogValidator`` for uncompressed/compressed v2 without recompression).
        Raises ``CorruptRecordError`` (nothing stored) if a batch header is invalid.
        ``headers``: the batches' headers (``RecordBatchHeader``) as the caller validated them just before
        (``records.iter_batches(produce=True)``, the produce path): the structural re-check is then skipped.
        """
        if headers is None:
            # The caller validated each batch (records.iter_batches(produce=True)); this is only the
            # cheap structural re-check that keeps the append atomic, on raw BATCH_HEADER tuples
            # because it is the produce hot path (validate_batch costs ~3x as much per batch).
            checked = []
            for b in batches:
                size = len(b)
                if size < BATCH_HEADER_SIZE:
                    raise InvalidRecordError("batch shorter than its header")
                h = _unpack_header(b)
                if h[3] != MAGIC or h[1] + LOG_OVERHEAD != size or h[6] < 0:
                    raise InvalidRecordError(f"invalid batch header (magic={h[3]}, length={h[1]}, "
                                             f"size={size}, lastOffsetDelta={h[6]})")
                checked.append(h)
            headers = checked
        append_time = now_ms if self.config.message_timestamp_type == "LogAppendTime" else None
        first = next_offset = self.log_end_offset
        if leader_epoch >= 0 and leader_epoch != self.epoch_cache.latest_epoch():
            self.epoch_cache.assign(leader_epoch, first)
        metas: list[BatchMeta] = []
        max_ts = -1
        offset_of_max = first
        num_records = 0
        assign = assign_offsets
        for b, h in zip(batches, headers):
            end = assign(b, next_offset, leader_epoch, append_time)
            ts = h[8] if append_time is None else append_time  # maxTimestamp
            if ts > max_ts:
                max_ts, offset_of_max = ts, next_offset
            metas.append((b, next_offset, end - 1, ts))
            num_records += h[12]  # recordCount
            next_offset = end
        self._store(metas, now_ms)
        return LogAppendInfo(first, next_offset - 1, max_ts, offset_of_max, -1 if append_time is None else append_time,
                             self.log_start_offset, num_records)

    def append_as_follower(self, records: bytes | memoryview) -> LogAppendInfo:
        """Store batches that already carry offsets (replication): each must start at or
        after the log end offset, offsets strictly increasing; epochs go to the cache."""
        mv = memoryview(records)
        metas: list[BatchMeta] = []
        expected = self.log_end_offset
        max_ts, offset_of_max, num_records = -1, -1, 0
        first = -1
        epochs: list[tuple[int, int]] = []
        for h, view in iter_batches(mv, check_crc=False):
            if h.last_offset_delta < 0:
                raise InvalidRecordError(f"negative lastOffsetDelta {h.last_offset_delta}")
            if h.base_offset < expected:
                raise InvalidRecordError(f"non-monotonic offset {h.base_offset}, expected >= {expected}")
            if first < 0:
                first = h.base_offset
            metas.append((bytes(view), h.base_offset, h.last_offset, h.max_timestamp))
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.base_offset
            num_records += h.record_count
            epochs.append((h.partition_leader_epoch, h.base_offset))
            expected = h.last_offset + 1
        if not metas:
            return LogAppendInfo(-1, -1, -1, -1, -1, self.log_start_offset, 0)
        # A gap before ``first`` (the leader's cleaner removed those offsets) stays a gap, as in the
        # leader's log: segments hold batches with gaps between them.
        for epoch, off in epochs:
            if epoch >= 0 and epoch != self.epoch_cache.latest_epoch():
                self.epoch_cache.assign(epoch, off)
        self._store(metas, self.clock.time_ms())
        return LogAppendInfo(first, expected - 1, max_ts, offset_of_max, -1, self.log_start_offset, num_records)

    def _store(self, metas: list[BatchMeta], now_ms: int) -> None:
        seg = self.active_segment
        run: list[BatchMeta] = []
        run_bytes = 0
        for meta in metas:
            n = len(meta[0])
            if self._should_roll(seg, seg.size + run_bytes, n, meta[2], now_ms):
                if run:
                    seg.append(run, now_ms)
                    self.log_end_offset = seg.next_offset
                    run, run_bytes = [], 0
                seg = self.roll(now_ms)
            run.append(meta)
            run_bytes += n
        if run:
            seg.append(run, now_ms)
        self.log_end_offset = seg.next_offset
        if self.auto_advance_hw:
            self._high_watermark = self.log_end_offset

    # -- reads ----------------------------------------------------------------------------
    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} not in [{self.log_start_offset}, {self.log_end_offset}] "
                f"for {self.topic}-{self.partition}")

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True
    ) -> FetchDataInfo:
        """Whole stored batches from the one holding *offset* (Kafka ``UnifiedLog.read``).

        KIP-74: the first batch is returned even if larger than *max_bytes* when
        *min_one_batch*; batches whose base offset >= *max_offset* are never returned.
        Continues into following segments while the byte budget lasts.
        """
        self._check_range(offset)
        info = FetchDataInfo(offset, [], 0)
        if offset == self.log_end_offset or (max_offset is not None and offset >= max_offset):
            return info
        i = self._segment_index(offset)
        remaining = max_bytes
        while i < len(self.segments):
            seg = self.segments[i]
            if offset < seg.next_offset:
                chunks, n, at_end = seg.read(offset, remaining, max_offset, min_one_batch and info.size == 0)
                if n:
                    info.chunks.extend(chunks)
                    info.size += n
                    remaining -= n
                if not at_end or remaining <= 0:
                    break
            i += 1
            if i < len(self.segments):
                offset = self.segments[i].base_offset
                if max_offset is not None and offset >= max_offset:
                    break
        return info

    def iter_batches_from(self, offset: int, chunk_bytes: int = 1 << 20
                          ) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        """Every stored batch from the one holding ``offset`` on, read ``chunk_bytes`` at a time
        (headers are not CRC-checked: these are batches this log stored)."""
        pos = max(offset, self.log_start_offset)
        while pos < self.log_end_offset:
            got = self.read(pos, chunk_bytes, min_one_batch=True)
            after = pos
            for chunk in got.chunks:
                for h, view in iter_batches(chunk, check_crc=False):
                    yield h, view
                    after = h.next_offset
            if after <= pos:
                return
            pos = after

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """``(offset, timestamp, leader_epoch)`` of the earliest record with timestamp >=
        *timestamp* (Kafka ``fetchOffsetByTimestamp``), or None. Exact for uncompressed,
        gzip, lz4 and zstd batches; batch granularity (base offset, maxTimestamp) otherwise."""
        for seg in self.segments:
            if seg.max_timestamp < timestamp or seg.next_offset <= self.log_start_offset:
                continue
            batch = seg.first_batch_with_timestamp(timestamp, self.log_start_offset)
            if batch is None:
                continue
            h = read_header(batch)
            recs = _decode_or_none(batch)
            if recs is None:
                return max(h.base_offset, self.log_start_offset), h.max_timestamp, h.partition_leader_epoch
            for r in recs:
                if r.timestamp >= timestamp and r.offset >= self.log_start_offset:
                    return r.offset, r.timestamp, h.partition_leader_epoch
            # No record of it qualifies (a batch the log cleaner emptied keeps its maxTimestamp): go on with the
            # batches after it, as Kafka's searchForTimestamp does, and past this segment (Kafka stops there).
            for h, view in self.iter_batches_from(h.next_offset):
                if h.max_timestamp < timestamp:
                    continue
                recs = _decode_or_none(view)
                if recs is None:
                    return max(h.base_offset, self.log_start_offset), h.max_timestamp, h.partition_leader_epoch
                for r in recs:
                    if r.timestamp >= timestamp:
                        return r.offset, r.timestamp, h.partition_leader_epoch
            return None
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """``(max timestamp, offset of the first record carrying it)`` for ListOffsets
        MAX_TIMESTAMP (KIP-734); ``(-1, -1)`` for an empty log."""
        best: Segment | None = None
        for seg in self.segments:
            if seg.size and seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        if best is None:
            return -1, -1
        ts, off = best.max_timestamp, best.offset_of_max_timestamp
        batch = best.batch_at(off)
        if batch is not None:
            recs = _decode_or_none(batch)
            if recs is not None:
                for r in recs:
                    if r.timestamp == ts:
                        return ts, r.offset
        return ts, off

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(epoch, self.log_end_offset)

    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch()

    # -- deletion / truncation ------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: raise the log start offset to *offset* (-1 = high watermark) and
        drop segments wholly below it. Returns the new log start offset."""
        if offset == -1:
            offset = self._high_watermark
        if offset < 0 or offset > self._high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete before {offset}: high watermark is {self._high_watermark}")
        if offset <= self.log_start_offset:
            return self.log_start_offset
        self.log_start_offset = offset
        if offset >= self.log_end_offset and self.active_segment.size:
            self.roll()  # free the fully deleted active segment too
        doomed = [s for i, s in enumerate(self.segments[:-1]) if self.segments[i + 1].base_offset <= offset]
        if doomed:
            self._drop_segments(doomed)
        self.epoch_cache.truncate_from_start(offset)
        self.txn_index.delete_before(offset)
        self._write_offsets_checkpoint()
        return self.log_start_offset

    def enforce_retention(self, now_ms: int) -> int:
        """Delete old segments by retention.ms then retention.bytes; never the active one,
        never one holding offsets at or above the high watermark. Returns the count deleted.
        A topic whose ``cleanup.policy`` lacks ``delete`` keeps them (the cleaner compacts it)."""
        if not self.config.delete:
            return 0
        deletable = []
        for i, seg in enumerate(self.segments[:-1]):
            if self.segments[i + 1].base_offset > self._high_watermark:
                break
            deletable.append(seg)
        doomed: list[Segment] = []
        if self.config.retention_ms >= 0:
            for seg in deletable:
                if now_ms - seg.largest_timestamp > self.config.retention_ms:
                    doomed.append(seg)
                else:
                    break
        if self.config.retention_bytes >= 0:
            diff = self.size_in_bytes - self.config.retention_bytes - sum(s.size for s in doomed)
            for seg in deletable[len(doomed) :]:
                if diff - seg.size >= 0:
                    doomed.append(seg)
                    diff -= seg.size
                else:
                    break
        if not doomed:
            return 0
        log.info("%r: retention deletes %d segment(s)", self, len(doomed))
        self._drop_segments(doomed)
        if self.segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self.segments[0].base_offset
            self.epoch_cache.truncate_from_start(self.log_start_offset)
            self.txn_index.delete_before(self.log_start_offset)
            self._write_offsets_checkpoint()
        return len(doomed)

    def truncate_to(self, offset: int) -> None:
        """Follower truncation: drop the batch holding *offset* and everything after it."""
        if offset >= self.log_end_offset:
            return
        if offset <= self.log_start_offset and offset <= self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self.truncated_to = offset if self.truncated_to is None else min(self.truncated_to, offset)
        self.truncations += 1
        i = self._segment_index(offset)
        if i + 1 < len(self.segments):
            self._drop_segments(self.segments[i + 1 :])
        self.active_segment.truncate_to(offset)
        self.log_end_offset = self.active_segment.next_offset
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self._high_watermark = min(self._high_watermark, self.log_end_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self.txn_index.truncate_to(offset)
        self._write_offsets_checkpoint()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log at *offset* (Kafka ``truncateFullyAndStartAt``)."""
        self.truncated_to = offset if self.truncated_to is None else min(self.truncated_to, offset)
        self.truncations += 1
        self._drop_segments(list(self.segments))
        self._add_segment(offset, self.clock.time_ms())
        self.log_start_offset = self.log_end_offset = self._high_watermark = offset
        self.epoch_cache.clear()
        self.txn_index.clear()
        self._write_offsets_checkpoint()

    # -- cleaning (Kafka's createNewCleanedSegment / replaceSegments) --------------------------
    def new_cleaned_segment(self, base_offset: int) -> Segment:
        """An empty segment for the cleaner to write into: in memory, or ``<base>.log.cleaned`` and
        its indexes beside the live files (any left over from an earlier attempt are removed)."""
        now = self.clock.time_ms()
        if self.directory is None:
            return MemorySegment(base_offset, now)
        return new_cleaned_file_segment(self.directory, base_offset, self.config.index_interval_bytes, now)

    def replace_segments(self, new: Segment, old: Sequence[Segment], truncations: int | None = None) -> bool:
        """Swap the cleaned segment ``new`` in for ``old`` (consecutive, inactive), atomically as far
        as a crash can tell: ``.cleaned`` -> ``.swap`` (the commit point), old files deleted, ``.swap``
        -> live names; loading completes an interrupted swap (:meth:`_complete_swaps`).

        Returns False, discarding ``new``, when the log changed under the cleaner meanwhile (old
        segments deleted by retention or DeleteRecords, or the log truncated since ``truncations``)."""
        ids = [id(s) for s in self.segments]
        try:
            i = ids.index(id(old[0]))
        except ValueError:
            i = -1
        intact = (i >= 0 and i + len(old) < len(self.segments) and not self._closed
                  and (truncations is None or truncations == self.truncations)
                  and [id(s) for s in self.segments[i:i + len(old)]] == [id(s) for s in old])
        if not intact:
            new.delete()
            return False
        if isinstance(new, FileSegment):
            new.change_suffix(".swap")
            for seg in old:
                seg.delete()
            new.change_suffix("")
        else:
            for seg in old:
                seg.delete()
        self.segments[i:i + len(old)] = [new]
        self._bases = [s.base_offset for s in self.segments]
        return True

    # -- lifecycle ------------------------------------------------------------------------
    def flush(self, fsync: bool = False) -> None:
        """Persist checkpoints; with *fsync* also fsync the active segment."""
        self.active_segment.flush(fsync)
        self._write_offsets_checkpoint()

    @property
    def closed(self) -> bool:
        """Closed or deleted: nothing is appended any more."""
        return self._closed

    def close(self) -> None:
        if self._closed:
            return
        self._write_offsets_checkpoint()
        self.active_segment.on_become_inactive()
        for seg in self.segments:
            seg.close()
        self._closed = True

    def delete(self) -> None:
        """Close and remove every file of this log."""
        for seg in self.segments:
            seg.delete()
        self.segments = []
        self._closed = True
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
