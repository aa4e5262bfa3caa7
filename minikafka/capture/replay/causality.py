"""Replay progress: per connection, how many of its requests have settled; requests wait on dependencies.

A dependency of the :class:`~.plan.ReplayPlan` says "connection *c* has settled its first *n* requests" (or, as
a negative count, "has sent its first *n* requests").
:class:`Progress` keeps one settled prefix per connection (requests settle out of order now and then: an acks=0
Produce at once, a timeout late), wakes the requests waiting for it, and tells ``on_advance`` when a prefix of a
connection replayed here grows (a Spark task publishes it for the others).  :meth:`Progress.advance` applies
progress made elsewhere (another task's connections).  Resembles a vector clock whose entries only grow.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence

import trio


class Progress:
    """Settled prefixes of every connection of a plan, and the requests waiting on them."""

    def __init__(self, sizes: Sequence[int], on_advance: Callable[[int, int], None] | None = None,
                 on_sent: Callable[[int, int], None] | None = None) -> None:
        self.prefix = [0] * len(sizes)
        self.sent = [0] * len(sizes)
        self._done = [bytearray(n) for n in sizes]
        self._waiters: list[list[tuple[int, int, trio.Event]]] = [[] for _ in sizes]
        self._sent_waiters: list[list[tuple[int, int, trio.Event]]] = [[] for _ in sizes]
        self._seq = itertools.count()
        self.on_advance = on_advance
        self.on_sent = on_sent

    def mark_sent(self, conn: int, pos: int) -> None:
        """Request ``pos`` of connection ``conn`` (replayed here) has been sent (requests are sent in order)."""
        if pos + 1 > self.sent[conn]:
            self._set_sent(conn, pos + 1)
            if self.on_sent is not None:
                self.on_sent(conn, pos + 1)

    def advance_sent(self, conn: int, count: int) -> None:
        """Connection ``conn`` (replayed elsewhere) has sent its first ``count`` requests."""
        if count > self.sent[conn]:
            self._set_sent(conn, count)

    def _set_sent(self, conn: int, n: int) -> None:
        self.sent[conn] = n
        waiters = self._sent_waiters[conn]
        while waiters and waiters[0][0] <= n:
            heapq.heappop(waiters)[2].set()

    def settle(self, conn: int, pos: int) -> None:
        """Request ``pos`` of connection ``conn`` (replayed here) is answered, timed out or given up."""
        done = self._done[conn]
        if done[pos]:
            return
        done[pos] = 1
        n = self.prefix[conn]
        if pos != n:
            return
        while n < len(done) and done[n]:
            n += 1
        self._set(conn, n)
        if self.on_advance is not None:
            self.on_advance(conn, n)

    def advance(self, conn: int, count: int) -> None:
        """Connection ``conn`` (replayed elsewhere) has settled its first ``count`` requests."""
        if count > self.prefix[conn]:
            self._set(conn, count)

    def _set(self, conn: int, n: int) -> None:
        self.prefix[conn] = n
        if n > self.sent[conn]:
            self._set_sent(conn, n)
        waiters = self._waiters[conn]
        while waiters and waiters[0][0] <= n:
            heapq.heappop(waiters)[2].set()

    def _holds(self, conn: int, count: int) -> bool:
        return self.prefix[conn] >= count if count >= 0 else self.sent[conn] >= -count

    def satisfied(self, deps: Sequence[int]) -> bool:
        return all(self._holds(deps[i], deps[i + 1]) for i in range(0, len(deps), 2))

    async def wait(self, deps: Sequence[int]) -> bool:
        """Until every (connection, count) pair of ``deps`` (flat) holds: a positive count is settled requests,
        a negative one sent requests.  True if it waited for a "sent" pair (the caller leaves the target a moment
        to read that request first)."""
        waited_sent = False
        for i in range(0, len(deps), 2):
            conn, count = deps[i], deps[i + 1]
            if self._holds(conn, count):
                continue
            ev = trio.Event()
            if count >= 0:
                heapq.heappush(self._waiters[conn], (count, next(self._seq), ev))
            else:
                heapq.heappush(self._sent_waiters[conn], (-count, next(self._seq), ev))
                waited_sent = True
            await ev.wait()
        return waited_sent

    def blocked_on(self, deps: Sequence[int]) -> list[tuple[int, int]]:
        """The pairs of ``deps`` that do not hold yet (for diagnostics)."""
        return [(deps[i], deps[i + 1]) for i in range(0, len(deps), 2) if not self._holds(deps[i], deps[i + 1])]
