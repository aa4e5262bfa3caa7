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
* `SparseIndex` (Kafka ``AbstractIndex``) holds the file and the two columns;
  each subclass states its entry format, its columns and its lookups.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import ClassVar

_LITTLE = sys.byteorder == "little"


class IndexCorruptError(Exception):
    """Index file failed its sanity check; the caller rebuilds it from the log."""


class SparseIndex:
    """Entries of two fixed-size fields kept as two parallel ``array`` columns and
    persisted as an append-only file of big-endian entries (Kafka ``AbstractIndex``).

    A subclass names its ``ENTRY`` struct and its ``COLUMNS``: for each field the
    attribute holding the column, its ``array`` typecode and whether the column must
    be strictly increasing on load (else non-decreasing).
    """

    __slots__ = ("base_offset", "path", "_fd")

    ENTRY: ClassVar[struct.Struct]
    COLUMNS: ClassVar[tuple[tuple[str, str, bool], tuple[str, str, bool]]]

    def __init__(self, base_offset: int, path: Path | None) -> None:
        self.base_offset = base_offset
        self.path = path
        self._fd: int | None = None
        for name, typecode, _ in self.COLUMNS:
            setattr(self, name, array(typecode))

    def _columns(self) -> tuple[array, array]:
        (a, _, _), (b, _, _) = self.COLUMNS
        return getattr(self, a), getattr(self, b)

    # -- persistence ------------------------------------------------------------------
    def _decode(self, data: bytes) -> tuple[array, array]:
        """Both columns of a file's bytes (its size is a multiple of the entry size)."""
        (_, ta, _), (_, tb, _) = self.COLUMNS
        fa, fb = tuple(zip(*self.ENTRY.iter_unpack(data))) or ((), ())
        return array(ta, fa), array(tb, fb)

    def load(self) -> None:
        assert self.path is not None
        data = self.path.read_bytes() if self.path.exists() else b""
        size = self.ENTRY.size
        if len(data) % size:
            raise IndexCorruptError(f"{self.path}: size {len(data)} not a multiple of {size}")
        cols = self._decode(data)
        for col, (_, _, strict) in zip(cols, self.COLUMNS):
            for i in range(1, len(col)):
                if col[i] < col[i - 1] or (strict and col[i] == col[i - 1]):
                    raise IndexCorruptError(f"{self.path}: entries not increasing at {i}")
        for (name, _, _), col in zip(self.COLUMNS, cols):
            setattr(self, name, col)

    def open_for_append(self) -> None:
        if self.path is not None and self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def rewrite(self) -> None:
        """Write all in-memory entries to the file (after a rebuild or truncation)."""
        if self.path is None:
            return
        self.close()
        data = b"".join(map(self.ENTRY.pack, *self._columns()))
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, self.path)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- operations -------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Append encoded entries (as returned by the subclass's append) to the file."""
        if self._fd is not None and data:
            os.write(self._fd, data)

    def _truncate_from(self, i: int) -> None:
        for col in self._columns():
            del col[i:]

    def clear(self) -> None:
        self._truncate_from(0)


class OffsetIndex(SparseIndex):
    """Sparse ``relative offset -> file position`` map of one segment."""

    __slots__ = ("rel", "pos")
    rel: array
    pos: array

    ENTRY = struct.Struct(">ii")
    COLUMNS = (("rel", "i", True), ("pos", "i", True))

    def _decode(self, data: bytes) -> tuple[array, array]:
        # Both fields are int32: one array, byte-swapped and split (much faster than unpacking).
        both = array("i")
        both.frombytes(data)
        if _LITTLE:
            both.byteswap()
        return both[0::2], both[1::2]

    def append(self, offset: int, position: int) -> bytes:
        """Add an entry; returns its encoding for the caller to write in one go."""
        rel = offset - self.base_offset
        self.rel.append(rel)
        self.pos.append(position)
        return self.ENTRY.pack(rel, position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry with offset <= target, else (base, 0)."""
        i = bisect_right(self.rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel[i], self.pos[i]

    def truncate_to_position(self, size: int) -> None:
        self._truncate_from(bisect_left(self.pos, size))


class TimeIndex(SparseIndex):
    """Sparse ``max timestamp so far -> relative offset`` map of one segment."""

    __slots__ = ("ts", "rel")
    ts: array
    rel: array

    ENTRY = struct.Struct(">qi")
    COLUMNS = (("ts", "q", True), ("rel", "i", False))

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
        return self.ENTRY.pack(timestamp, rel)

    def lookup_before(self, timestamp: int) -> int:
        """Offset of the last entry whose timestamp is < target (batches up to it are older)."""
        i = bisect_left(self.ts, timestamp) - 1
        return self.base_offset if i < 0 else self.base_offset + self.rel[i]

    def truncate_to_offset(self, offset: int) -> None:
        self._truncate_from(bisect_left(self.rel, offset - self.base_offset))
