"""Log segments (Kafka's ``LogSegment``), in memory and on disk.

Per-batch metadata, deliberately asymmetric:

* ``MemorySegment`` keeps the batches themselves (the caller's buffers, no copy, except
  that batches of 64 KiB or more are copied into populated memory regions, :mod:`.arena`,
  so that the request frame holding them is freed) plus parallel ``array``s of base
  offset, start position and running max
  timestamp, so every lookup (offset, byte budget, high watermark, timestamp) is
  a ``bisect`` and a read is a list of zero-copy ``memoryview``s. The table costs
  32 bytes per batch, small next to the batch bytes it describes.
* ``FileSegment`` keeps *no* per-batch table, only Kafka's sparse offset/time
  indexes (one entry per ``index.interval.bytes``), so memory stays bounded
  (~3 MB per GiB of log) however small the batches are. A read is one index
  bisect, one ``os.pread`` of about ``index.interval.bytes`` to find the batch
  holding the target offset, and one ``os.pread`` of up to ``max_bytes`` whose
  batch headers are walked in memory to cut at the byte budget / high watermark.
"""

from __future__ import annotations

import logging
import os
import struct
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from pathlib import Path

from minikafka.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    InvalidRecordError,
    RecordBatchHeader,
    read_header,
    recover_batches,
)

from ...iovec import writev_all
from .arena import Arena
from .index import IndexCorruptError, OffsetIndex, TimeIndex

log = logging.getLogger(__name__)

_SCAN_CHUNK = 64 * 1024
_READ_PIECE = 4 * 1024 * 1024
_RECOVERY_CHUNK = 8 * 1024 * 1024
_BASE_OFFSET_AND_LENGTH = struct.Struct(">qi")  # the LOG_OVERHEAD prefix of a batch

#: (batch, base_offset, last_offset, max_timestamp) as prepared by ``Log``
BatchMeta = tuple[bytes | bytearray | memoryview, int, int, int]


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def remove_segment_files(directory: Path, base_offset: int, suffix: str = "") -> None:
    """Delete a segment's ``.log``, ``.index`` and ``.timeindex`` files (with ``suffix``), those that exist."""
    for kind in (".log", ".index", ".timeindex"):
        (directory / segment_file_name(base_offset, kind + suffix)).unlink(missing_ok=True)


def new_cleaned_file_segment(directory: Path, base_offset: int, index_interval_bytes: int,
                             now_ms: int) -> "FileSegment":
    """An empty ``<base>.log.cleaned`` segment (and indexes) for the cleaner, replacing any left over."""
    remove_segment_files(directory, base_offset, ".cleaned")
    return FileSegment(directory, base_offset, index_interval_bytes, now_ms, suffix=".cleaned")


class SegmentFile:
    """A closed segment's file as the cleaner reads it in another process: its offsets and size as the
    broker saw them, its batches read through a descriptor of its own."""

    def __init__(self, directory: Path, base_offset: int, size: int, next_offset: int,
                 last_modified_ms: int) -> None:
        self.path = directory / segment_file_name(base_offset, ".log")
        self.base_offset = base_offset
        self.size = size
        self.next_offset = next_offset
        self.last_modified_ms = last_modified_ms

    def iter_batches(self) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            yield from iter_file_batches(fd, self.size)
        finally:
            os.close(fd)


def iter_file_batches(fd: int, size: int, pos: int = 0) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
    """The whole batches in ``[pos, size)`` of a log file, read ``_RECOVERY_CHUNK`` bytes at a time
    (headers are not validated: these are batches the log stored). Stops at a torn tail."""
    while pos + BATCH_HEADER_SIZE <= size:
        chunk = os.pread(fd, min(_RECOVERY_CHUNK, size - pos), pos)
        view = memoryview(chunk)
        p, n = 0, len(chunk)
        while p + BATCH_HEADER_SIZE <= n:
            h = read_header(view, p)
            end = p + h.size
            if h.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
                raise InvalidRecordError(f"bad batch length {h.batch_length} at position {pos + p}")
            if end > n:
                break
            yield h, view[p:end]
            p = end
        if p == 0:  # one batch larger than the chunk
            h = read_header(view, 0)
            if pos + h.size > size:
                return
            big = os.pread(fd, h.size, pos)
            if len(big) < h.size:
                return
            yield h, memoryview(big)
            p = h.size
        pos += p


class Segment:
    """State common to both segment kinds (Kafka ``LogSegment`` fields)."""

    base_offset: int
    next_offset: int  # offset after the last batch in this segment
    size: int  # bytes
    max_timestamp: int  # Kafka maxTimestampSoFar, -1 if none
    offset_of_max_timestamp: int  # base offset of the batch holding it
    rolling_timestamp: int  # first batch's maxTimestamp (Kafka rollingBasedTimestamp) or -1
    created_ms: int
    last_modified_ms: int

    def __init__(self, base_offset: int, now_ms: int) -> None:
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.size = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.rolling_timestamp = -1
        self.created_ms = now_ms
        self.last_modified_ms = now_ms

    @property
    def largest_timestamp(self) -> int:
        """Kafka ``LogSegment.largestTimestamp``: max record timestamp, else mtime."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms

    def _track(self, base: int, last: int, max_ts: int, size: int) -> None:
        if max_ts > self.max_timestamp:
            self.max_timestamp = max_ts
            self.offset_of_max_timestamp = base
        if self.rolling_timestamp < 0:
            self.rolling_timestamp = max_ts
        self.next_offset = last + 1
        self.size += size

    # interface --------------------------------------------------------------------------
    def append(self, batches: Sequence[BatchMeta], now_ms: int) -> None:
        raise NotImplementedError

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[list[bytes | memoryview], int, bool]:
        """``(chunks, size, reached_segment_end)`` of whole batches from the one holding *offset*."""
        raise NotImplementedError

    def batch_at(self, offset: int) -> bytes | memoryview | None:
        raise NotImplementedError

    def first_batch_with_timestamp(self, timestamp: int, min_offset: int) -> bytes | memoryview | None:
        """First batch with maxTimestamp >= *timestamp* and last offset >= *min_offset*."""
        raise NotImplementedError

    def truncate_to(self, offset: int) -> None:
        """Drop the batch holding *offset* and everything after it."""
        raise NotImplementedError

    def iter_batches(self) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        """Every stored batch, in order (the log cleaner's read; safe from a worker thread while
        the segment is inactive: a file segment is read through a descriptor of its own)."""
        raise NotImplementedError

    def set_last_modified(self, ms: int) -> None:
        """Keep the replaced segments' modification time on a cleaned one (Kafka ``setLastModified``)."""
        self.last_modified_ms = ms

    def on_become_inactive(self) -> None:
        pass

    def flush(self, fsync: bool = False) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        pass


class MemorySegment(Segment):
    """In-memory segment: batches in a list with parallel ``array`` columns."""

    def __init__(self, base_offset: int, now_ms: int) -> None:
        super().__init__(base_offset, now_ms)
        self.batches: list[bytes | bytearray | memoryview] = []
        self.arena = Arena()  # large batches are copied here (see .arena), freeing the request's frame
        self.offsets = array("q")  # base offset of each batch
        self.last_offsets = array("q")  # last offset of each batch (compaction leaves gaps between them)
        self.positions = array("q", [0])  # start position of each batch, plus the end
        self.max_ts = array("q")  # maxTimestamp of each batch
        self.prefix_max_ts = array("q")  # running max, for bisect by timestamp

    def append(self, batches: Sequence[BatchMeta], now_ms: int) -> None:
        running = self.prefix_max_ts[-1] if self.prefix_max_ts else -1
        store = self.arena.store
        for batch, base, last, max_ts in batches:
            n = len(batch)
            self.batches.append(store(batch))
            self.offsets.append(base)
            self.last_offsets.append(last)
            self.positions.append(self.positions[-1] + n)
            self.max_ts.append(max_ts)
            running = max(running, max_ts)
            self.prefix_max_ts.append(running)
            self._track(base, last, max_ts, n)
        self.last_modified_ms = now_ms

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[list[bytes | memoryview], int, bool]:
        n = len(self.batches)
        if n == 0:
            return [], 0, True
        i = bisect_right(self.offsets, offset) - 1
        if i < 0:
            i = 0
        elif self.last_offsets[i] < offset:  # in a gap left by the cleaner: the next batch
            i += 1
            if i == n:
                return [], 0, True
        j_max = n if max_offset is None else bisect_left(self.offsets, max_offset, i, n)
        if j_max <= i:
            return [], 0, False
        start = self.positions[i]
        j = min(bisect_right(self.positions, start + max_bytes, i, j_max + 1) - 1, j_max)
        if j <= i:
            if not min_one_batch:
                return [], 0, False
            j = i + 1
        chunks: list[bytes | memoryview] = [memoryview(b) for b in self.batches[i:j]]
        return chunks, self.positions[j] - start, j == n

    def batch_at(self, offset: int) -> bytes | memoryview | None:
        i = bisect_right(self.offsets, offset) - 1
        if i < 0 or offset >= self.next_offset:
            return None
        if self.last_offsets[i] < offset:
            i += 1
            if i == len(self.batches):
                return None
        return memoryview(self.batches[i])

    def iter_batches(self) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        for batch in list(self.batches):
            view = memoryview(batch)
            yield read_header(view), view

    def first_batch_with_timestamp(self, timestamp: int, min_offset: int) -> bytes | memoryview | None:
        i = bisect_left(self.prefix_max_ts, timestamp)
        lo = max(bisect_right(self.offsets, min_offset) - 1, 0)
        for k in range(max(i, lo), len(self.batches)):
            if self.max_ts[k] >= timestamp:
                return memoryview(self.batches[k])
        return None

    def truncate_to(self, offset: int) -> None:
        if offset >= self.next_offset:
            return
        i = max(bisect_right(self.offsets, offset) - 1, 0)
        if i < len(self.offsets):
            self.next_offset = self.offsets[i]
        del self.batches[i:]
        del self.offsets[i:]
        del self.last_offsets[i:]
        del self.positions[i + 1 :]
        del self.max_ts[i:]
        del self.prefix_max_ts[i:]
        self.size = self.positions[-1]
        self.max_timestamp = self.offset_of_max_timestamp = -1
        for k, ts in enumerate(self.max_ts):
            if ts > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = ts, self.offsets[k]
        if not self.batches:
            self.rolling_timestamp = -1

    def on_become_inactive(self) -> None:
        self.arena.release()

    def delete(self) -> None:
        self.arena.release()


class FileSegment(Segment):
    """On-disk segment: ``.log`` + sparse ``.index`` / ``.timeindex`` (Kafka layout)."""

    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int, now_ms: int,
                 suffix: str = "") -> None:
        super().__init__(base_offset, now_ms)
        self.directory = directory
        self.suffix = suffix  # "" for a live segment, ".cleaned" or ".swap" while the cleaner swaps it in
        self.path = directory / segment_file_name(base_offset, ".log" + suffix)
        self.index_interval_bytes = index_interval_bytes
        self.offset_index = OffsetIndex(base_offset, directory / segment_file_name(base_offset, ".index" + suffix))
        self.time_index = TimeIndex(base_offset, directory / segment_file_name(base_offset, ".timeindex" + suffix))
        self.bytes_since_last_index = 0
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size

    # -- loading / recovery ---------------------------------------------------------------
    def load_inactive(self, next_offset: int) -> None:
        """Load indexes of a closed segment; raise ``IndexCorruptError`` if they look wrong
        (Kafka ``LogSegment.sanityCheck``)."""
        self.offset_index.load()
        self.time_index.load()
        rel_limit = next_offset - self.base_offset
        if self.offset_index.pos and self.offset_index.pos[-1] >= self.size:
            raise IndexCorruptError(f"{self.offset_index.path}: position beyond log size")
        if self.offset_index.rel and self.offset_index.rel[-1] >= rel_limit:
            raise IndexCorruptError(f"{self.offset_index.path}: offset beyond next segment")
        if self.size > 0 and not self.time_index.ts:
            raise IndexCorruptError(f"{self.time_index.path}: empty for a non-empty segment")
        if self.time_index.rel and self.time_index.rel[-1] >= rel_limit:
            raise IndexCorruptError(f"{self.time_index.path}: offset beyond next segment")
        self.next_offset = next_offset
        if self.time_index.ts:
            self.max_timestamp = self.time_index.ts[-1]
            self.offset_of_max_timestamp = self.base_offset + self.time_index.rel[-1]
        self.last_modified_ms = int(os.stat(self.path).st_mtime * 1000)

    def recover(self, check_crc: bool = True, on_batch=None) -> int:
        """Scan every batch, validate it, truncate at the first bad one, rebuild both
        indexes (Kafka ``LogSegment.recover``). Returns the number of bytes truncated."""
        file_size = os.fstat(self._fd).st_size
        self.offset_index.clear()
        self.time_index.clear()
        self.size = 0
        self.next_offset = self.base_offset
        self.max_timestamp = self.offset_of_max_timestamp = self.rolling_timestamp = -1
        self.bytes_since_last_index = 0
        pos = 0
        expected = self.base_offset
        reason = ""
        want = _RECOVERY_CHUNK
        while pos < file_size and not reason:
            # Validate a chunk of whole batches (records.recover_batches); a batch cut by the
            # chunk's end is read again at the start of the next chunk.
            chunk_pos = pos
            chunk = os.pread(self._fd, min(want, file_size - pos), pos)
            want = _RECOVERY_CHUNK
            scan = recover_batches(chunk, check_crc=check_crc)
            for p, h in scan.batches:
                if h.last_offset_delta < 0:
                    reason = f"negative lastOffsetDelta {h.last_offset_delta}"
                    break
                if h.base_offset < expected or h.last_offset - self.base_offset > 0x7FFFFFFF:
                    reason = f"offset {h.base_offset} out of order (expected >= {expected})"
                    break
                size = h.size  # pos == chunk_pos + p: the batches are contiguous
                self._index_batch(pos, h.base_offset, h.max_timestamp, size)
                self._track(h.base_offset, h.last_offset, h.max_timestamp, size)
                if on_batch is not None:
                    on_batch(h)
                expected = h.last_offset + 1
                pos += size
            if reason or scan.error is None:
                continue
            if chunk_pos + len(chunk) < file_size:  # the chunk stops short of the file's end
                if scan.valid_bytes:
                    continue
                # Nothing valid at the chunk's start: a batch larger than the chunk?
                size = read_header(chunk).size if len(chunk) >= BATCH_HEADER_SIZE else BATCH_HEADER_SIZE
                if len(chunk) < size <= file_size - pos:
                    want = size
                    continue
            reason = str(scan.error)
        truncated = file_size - pos
        if truncated:
            log.warning("%s: %s at position %d, truncating %d bytes", self.path, reason, pos, truncated)
            os.ftruncate(self._fd, pos)
        self.offset_index.rewrite()
        self.time_index.rewrite()
        self.last_modified_ms = int(os.stat(self.path).st_mtime * 1000)
        return truncated

    # -- writing --------------------------------------------------------------------------
    def _index_batch(self, pos: int, base: int, max_ts: int, size: int) -> tuple[bytes, bytes]:
        idx = tidx = b""
        if self.bytes_since_last_index > self.index_interval_bytes:
            idx = self.offset_index.append(base, pos)
            ts, ts_off = (max_ts, base) if max_ts > self.max_timestamp else (
                self.max_timestamp, self.offset_of_max_timestamp)
            tidx = self.time_index.maybe_append(ts, ts_off)
            self.bytes_since_last_index = 0
        self.bytes_since_last_index += size
        return idx, tidx

    def append(self, batches: Sequence[BatchMeta], now_ms: int) -> None:
        self.offset_index.open_for_append()
        self.time_index.open_for_append()
        idx_out: list[bytes] = []
        tidx_out: list[bytes] = []
        data: list[bytes | bytearray | memoryview] = []
        for batch, base, last, max_ts in batches:
            n = len(batch)
            idx, tidx = self._index_batch(self.size, base, max_ts, n)
            if idx:
                idx_out.append(idx)
            if tidx:
                tidx_out.append(tidx)
            self._track(base, last, max_ts, n)
            data.append(batch)
        writev_all(self._fd, data)
        if idx_out:
            self.offset_index.write(b"".join(idx_out))
        if tidx_out:
            self.time_index.write(b"".join(tidx_out))
        self.last_modified_ms = now_ms

    def on_become_inactive(self) -> None:
        """Write the final time index entry (Kafka ``onBecomeInactiveSegment``)."""
        if self.max_timestamp >= 0:
            self.time_index.open_for_append()
            self.time_index.write(self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp))
        self.offset_index.close()
        self.time_index.close()

    # -- reading --------------------------------------------------------------------------
    def _iter_headers(self, pos: int) -> Iterator[tuple[int, RecordBatchHeader]]:
        end = self.size
        buf: bytes = b""
        buf_pos = pos
        want = _SCAN_CHUNK
        while pos < end:
            off = pos - buf_pos
            if off + BATCH_HEADER_SIZE > len(buf):
                buf = os.pread(self._fd, min(want, end - pos), pos)
                buf_pos, off = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    raise InvalidRecordError(f"{self.path}: truncated header at {pos}")
            h = read_header(buf, off)
            yield pos, h
            size = h.size
            if size <= 0:
                raise InvalidRecordError(f"{self.path}: bad batch length at {pos}")
            want = 4096 if size > 16384 else _SCAN_CHUNK
            pos += size

    def _find(self, offset: int) -> tuple[int, RecordBatchHeader] | None:
        _, pos = self.offset_index.lookup(offset)
        for p, h in self._iter_headers(pos):
            if h.last_offset >= offset:
                return p, h
        return None

    def read(
        self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[list[bytes | memoryview], int, bool]:
        found = self._find(offset)
        if found is None:
            return [], 0, True
        start, h = found
        if max_offset is not None and h.base_offset >= max_offset:
            return [], 0, False
        first_size = h.size
        if first_size > max_bytes:
            if not min_one_batch:
                return [], 0, False
            data = os.pread(self._fd, first_size, start)
            return [data], first_size, start + first_size >= self.size
        # Read in pieces of <= _READ_PIECE so large fetches reuse heap memory instead of
        # faulting in a fresh mmap every call; each piece is cut at a batch boundary.
        chunks: list[bytes | memoryview] = []
        pos, remaining, total = start, min(max_bytes, self.size - start), 0
        while remaining >= LOG_OVERHEAD:
            want = min(remaining, _READ_PIECE)
            data = os.pread(self._fd, want, pos)
            p, end, stop = 0, len(data), False
            while p + LOG_OVERHEAD <= end:
                base, length = _BASE_OFFSET_AND_LENGTH.unpack_from(data, p)
                size = length + LOG_OVERHEAD
                if max_offset is not None and base >= max_offset:
                    stop = True
                elif p + size > end:
                    if p == 0 and size <= remaining:  # a single batch larger than a piece
                        data = os.pread(self._fd, size, pos)
                        p = end = want = size
                    else:
                        stop = p + size > remaining  # would not fit the byte budget
                if stop or p + size > end:
                    break
                p += size
            if p:
                chunks.append(data if p == end else memoryview(data)[:p])
                pos += p
                total += p
            if stop or p == 0 or want >= remaining:
                break
            remaining -= p
        return chunks, total, start + total >= self.size

    def batch_at(self, offset: int) -> bytes | None:
        found = self._find(offset)
        if found is None:
            return None
        pos, h = found
        return os.pread(self._fd, h.size, pos)

    def first_batch_with_timestamp(self, timestamp: int, min_offset: int) -> bytes | None:
        start_offset = max(self.time_index.lookup_before(timestamp), min_offset)
        _, pos = self.offset_index.lookup(start_offset)
        for p, h in self._iter_headers(pos):
            if h.max_timestamp >= timestamp and h.last_offset >= min_offset:
                return os.pread(self._fd, h.size, p)
        return None

    def truncate_to(self, offset: int) -> None:
        if offset >= self.next_offset:
            return
        found = self._find(offset)
        if found is not None:
            os.ftruncate(self._fd, found[0])
        self.recover(check_crc=False)

    def iter_batches(self) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
        fd = os.open(self.path, os.O_RDONLY)  # its own descriptor: the segment may be closed meanwhile
        try:
            yield from iter_file_batches(fd, self.size)
        finally:
            os.close(fd)

    def set_last_modified(self, ms: int) -> None:
        super().set_last_modified(ms)
        os.utime(self.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def change_suffix(self, suffix: str) -> None:
        """Rename the segment's files (Kafka ``LogSegment.changeFileSuffixes``): the indexes first, the
        log last, so that the log file's name says which state the whole segment is in."""
        for index in (self.offset_index, self.time_index):
            assert index.path is not None
            new = index.path.with_name(index.path.name[: len(index.path.name) - len(self.suffix)] + suffix)
            if index.path.exists():
                os.replace(index.path, new)
            index.path = new
        new_log = self.path.with_name(self.path.name[: len(self.path.name) - len(self.suffix)] + suffix)
        os.replace(self.path, new_log)
        self.path = new_log
        self.suffix = suffix

    # -- lifecycle ------------------------------------------------------------------------
    def flush(self, fsync: bool = False) -> None:
        if fsync:
            os.fsync(self._fd)
            for index in (self.offset_index, self.time_index):
                if index.path is not None and index.path.exists():
                    fd = os.open(index.path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        for p in (self.path, self.offset_index.path, self.time_index.path):
            if p is not None:
                p.unlink(missing_ok=True)
