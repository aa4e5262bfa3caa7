"""Captured happens-before: a request waits until what completed before it in the capture is done."""

from __future__ import annotations

import bisect
import heapq
import itertools

import trio

from ..format import CaptureRecord


class _Order:
    """Captured happens-before: wait until every record completed (in the capture) before a time is done."""

    def __init__(self, records: list[tuple[int, CaptureRecord]]) -> None:
        ordered = sorted(records, key=lambda ir: _completion_ns(ir[1]))
        self._comp = [_completion_ns(r) for _, r in ordered]
        self._pos = {rid: i for i, (rid, _) in enumerate(ordered)}
        self._done = bytearray(len(ordered))
        self._prefix = 0
        self._waiters: list[tuple[int, int, trio.Event]] = []
        self._seq = itertools.count()

    def needed(self, rec: CaptureRecord) -> int:
        return bisect.bisect_left(self._comp, rec.receive_ns)

    def done(self, rid: int) -> None:
        pos = self._pos.get(rid)
        if pos is None or self._done[pos]:
            return
        self._done[pos] = 1
        while self._prefix < len(self._done) and self._done[self._prefix]:
            self._prefix += 1
        while self._waiters and self._waiters[0][0] <= self._prefix:
            heapq.heappop(self._waiters)[2].set()

    async def wait(self, needed: int) -> None:
        if self._prefix >= needed:
            return
        ev = trio.Event()
        heapq.heappush(self._waiters, (needed, next(self._seq), ev))
        await ev.wait()


def _completion_ns(r: CaptureRecord) -> int:
    return r.send_ns if r.response is not None else r.receive_ns
