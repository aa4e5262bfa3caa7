"""Scatter-gather output (``writev``/``sendmsg``) of many buffers, resuming after short writes."""

from __future__ import annotations

import os
from typing import Iterable

IOV_MAX = 1024  # the most buffers one writev/sendmsg call takes (Linux's UIO_MAXIOV)


def byte_views(buffers: Iterable) -> list[memoryview]:
    """Non-empty buffers as byte-format memoryviews (no copies)."""
    views = []
    for b in buffers:
        v = memoryview(b)
        if v.nbytes:
            views.append(v if v.format == "B" and v.ndim == 1 else v.cast("B"))
    return views


def advance(views: list[memoryview], i: int, n: int) -> int:
    """After ``n`` bytes went out starting at ``views[i]``: the index of the first unsent view
    (a partly sent one is trimmed in place)."""
    while n:
        first = views[i]
        if n >= first.nbytes:
            n -= first.nbytes
            i += 1
        else:
            views[i] = first[n:]
            n = 0
    return i


def joined_or_views(buffers: list, nbytes: int, coalesce: int) -> list[memoryview]:
    """``buffers`` (``nbytes`` in all) to write: joined into one when ``nbytes`` is at most ``coalesce`` (one
    small copy saves a system call per buffer), else their views, uncopied."""
    return [memoryview(b"".join(buffers))] if nbytes <= coalesce else byte_views(buffers)


def frame_views(segments: list, coalesce: int) -> list[memoryview]:
    """A size-prefixed frame made of ``segments``, as :func:`joined_or_views` gives it."""
    total = sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in segments)
    return joined_or_views([total.to_bytes(4, "big"), *segments], total + 4, coalesce)


def write_nowait(fd: int, views: list[memoryview], i: int = 0) -> int:
    """Write ``views[i:]`` to the non-blocking ``fd`` as far as it takes them now: the index of the first view
    not (wholly) written, ``len(views)`` when all went (``OSError`` other than a full buffer is raised)."""
    while i < len(views):
        try:
            i = advance(views, i, os.writev(fd, views[i:i + IOV_MAX]))
        except BlockingIOError:
            break
    return i


def writev_all(fd: int, buffers: Iterable) -> None:
    """Write every buffer to ``fd`` in order."""
    views = byte_views(buffers)
    i = 0
    while i < len(views):
        i = advance(views, i, os.writev(fd, views[i:i + IOV_MAX]))
