"""Where an in-memory segment keeps large batches: copied into regions of anonymous memory mapped with
``MAP_POPULATE`` (no equivalent in Kafka, whose log is always a file).

A Produce request's frame is a fresh ``bytearray`` (the socket reads straight into it).  Kept as the stored
batch, every megabyte of it is memory the process never touched before: 256 page faults, each costlier in a
virtual machine than the copy itself.  Copying a large batch into a region whose pages are populated by one
``mmap`` call costs less (one system call per region, the copy at memory speed), and the frame is then freed,
so the next frame reuses its memory instead of faulting in more.  Small batches are kept as given (their
frame is small and reused by the allocator anyway).

Regions belong to one segment (:class:`Arena`) and grow with it: a new region is as large as what the
segment already copied (at least ``MIN_REGION`` and the batch, at most ``MAX_REGION``), so a partition that
receives little holds little; when the segment stops taking appends (rolled, deleted) the unused pages of its
last region are given back.  A region is unmapped when the last view into it goes (the segment deleted, or
truncated, and the fetch responses still sending its batches gone).
"""

from __future__ import annotations

import mmap

#: batches at least this large are copied into a region; smaller ones are stored as given
MIN_ARENA_BATCH = 64 * 1024
MIN_REGION = 256 * 1024
MAX_REGION = 16 << 20
_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)


class Arena:
    """The populated memory regions one in-memory segment copies its large batches into."""

    __slots__ = ("_map", "_region", "_pos", "_stored")

    def __init__(self) -> None:
        self._map: mmap.mmap | None = None
        self._region: memoryview | None = None
        self._pos = 0
        self._stored = 0  # bytes copied into regions so far

    def store(self, batch: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
        """``batch`` itself when small, else a view of a copy of it in a region (never written again)."""
        n = len(batch)
        if n < MIN_ARENA_BATCH:
            return batch
        region = self._region
        if region is None or self._pos + n > len(region):
            self.release()
            size = max(n, min(max(self._stored, MIN_REGION), MAX_REGION))
            self._map = mmap.mmap(-1, size, flags=_FLAGS)
            region = self._region = memoryview(self._map)
        pos = self._pos
        end = pos + n
        region[pos:end] = batch
        self._pos = end
        self._stored += n
        return region[pos:end]

    def release(self) -> None:
        """Stop filling the current region and give its unused whole pages back (the region stays mapped
        while views into it remain)."""
        m = self._map
        if m is not None:
            start = -(-self._pos // mmap.PAGESIZE) * mmap.PAGESIZE
            if start < len(m) and hasattr(mmap, "MADV_DONTNEED"):
                m.madvise(mmap.MADV_DONTNEED, start, len(m) - start)
        self._map = self._region = None
        self._pos = 0
