"""Sparse offset and time indexes (Kafka's ``OffsetIndex`` / ``TimeIndex``).

Differences from Kafka, deliberately:

* Kafka pre-allocates and memory-maps the index files; here the entries live in
  two ``array`` objects (12 bytes per offset entry, 12 per time entry — one
  entry per ``index.interval.bytes`` of log, i.e. ~3 MB per 1 GiB segment at the
  4 KiB default) and the files are append-only, written with ``os.write``.
* Offset entries map the *base offset* of a batch (Kafka: its last offset) to
  its file position, so a lookup lands directly on a batch boundary at or before
  the target.
* File format is Kafka's: big-endian ``int32 relativeOffset, int32 position``
  (``.index``) and ``int64 timestamp, int32 relativeOffset`` (``.timeindex``).
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


class IndexCorruptError(Exception):
    """Index file failed its sanity check; the caller rebuilds it from the log."""


class OffsetIndex:
    """Sparse ``relative offset -> file position`` map of one segment."""

    __slots__ = ("base_offset", "path", "rel", "pos", "_fd")

    def __init__(self, base_offset: int, path: Path | None) -> None:
        self.base_offset = base_offset
        self.path = path
        self.rel = array("i")
        self.pos = array("i")
        self._fd: int | None = None

    # -- persistence ------------------------------------------------------------------
    def load(self) -> None:
        assert self.path is not None
        data = self.path.read_bytes() if self.path.exists() else b""
        if len(data) % 8:
            raise IndexCorruptError(f"{self.path}: size {len(data)} not a multiple of 8")
        both = array("i")
        both.frombytes(data)
        if _LITTLE:
            both.byteswap()
        self.rel = both[0::2]
        self.pos = both[1::2]
        for i in range(1, len(self.rel)):
            if self.rel[i] <= self.rel[i - 1] or self.pos[i] <= self.pos[i - 1]:
                raise IndexCorruptError(f"{self.path}: entries not increasing at {i}")

    def open_for_append(self) -> None:
        if self.path is not None and self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def rewrite(self) -> None:
        """Write all in-memory entries to the file (after a rebuild or truncation)."""
        if self.path is None:
            return
        self.close()
        data = bytearray()
        for r, p in zip(self.rel, self.pos):
            data += _OFFSET_ENTRY.pack(r, p)
        tmp = self.path.with_suffix(".index.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- operations -------------------------------------------------------------------
    def append(self, offset: int, position: int) -> bytes:
        """Add an entry; returns its encoding for the caller to write in one go."""
        rel = offset - self.base_offset
        self.rel.append(rel)
        self.pos.append(position)
        return _OFFSET_ENTRY.pack(rel, position)

    def write(self, data: bytes) -> None:
        if self._fd is not None and data:
            os.write(self._fd, data)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry with offset <= target, else (base, 0)."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel[i], self.pos[i]

    def truncate_to_position(self, size: int) -> None:
        i = bisect_left(self.pos, size)
        del self.rel[i:]
        del self.pos[i:]

    def clear(self) -> None:
        del self.rel[:]
        del self.pos[:]


class TimeIndex:
    """Sparse ``max timestamp so far -> relative offset`` map of one segment."""

    __slots__ = ("base_offset", "path", "ts", "rel", "_fd")

    def __init__(self, base_offset: int, path: Path | None) -> None:
        self.base_offset = base_offset
        self.path = path
        self.ts = array("q")
        self.rel = array("i")
        self._fd: int | None = None

    def load(self) -> None:
        assert self.path is not None
        data = self.path.read_bytes() if self.path.exists() else b""
        if len(data) % 12:
            raise IndexCorruptError(f"{self.path}: size {len(data)} not a multiple of 12")
        ts, rel = array("q"), array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            if ts and (t <= ts[-1] or r < rel[-1]):
                raise IndexCorruptError(f"{self.path}: entries not increasing")
            ts.append(t)
            rel.append(r)
        self.ts, self.rel = ts, rel

    def open_for_append(self) -> None:
        if self.path is not None and self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def rewrite(self) -> None:
        if self.path is None:
            return
        self.close()
        data = b"".join(_TIME_ENTRY.pack(t, r) for t, r in zip(self.ts, self.rel))
        tmp = self.path.with_suffix(".timeindex.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    @property
    def last_timestamp(self) -> int:
        return self.ts[-1] if self.ts else -1

    def maybe_append(self, timestamp: int, offset: int) -> bytes:
        """Add an entry if *timestamp* is newer than the last one (Kafka ``maybeAppend``)."""
        if self.ts and timestamp <= self.ts[-1]:
            return b""
        rel = offset - self.base_offset
        self.ts.append(timestamp)
        self.rel.append(rel)
        return _TIME_ENTRY.pack(timestamp, rel)

    def write(self, data: bytes) -> None:
        if self._fd is not None and data:
            os.write(self._fd, data)

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is < target (batches up to it are older)."""
        i = bisect_left(self.ts, timestamp) - 1
        return self.base_offset if i < 0 else self.base_offset + self.rel[i]

    def truncate_to_offset(self, offset: int) -> None:
        i = bisect_left(self.rel, offset - self.base_offset)
        del self.ts[i:]
        del self.rel[i:]

    def clear(self) -> None:
        del self.ts[:]
        del self.rel[:]
