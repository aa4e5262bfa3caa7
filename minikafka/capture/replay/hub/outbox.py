"""What waits to go out on one replay hub connection (either end): publications in order, progress counts
coalesced per connection, clock pings and pongs; taken as one batch of wire bytes at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from ....common import Clock
from .codec import frame

#: The least time between two publication batches on one connection (a lone publication goes out at once).  0:
#: a batch is whatever accumulated while the previous one was being written -- a replay waits on other tasks'
#: progress hop by hop, so latency costs more than messages (100k requests at max speed on 2 tasks: 26.5 s
#: with 0, 64 s with 1 ms).
DEFAULT_BATCH_INTERVAL_S = 0.0


class Outbox:
    """What waits to go out on one connection: events in order, progress coalesced per connection, pongs.

    A batch is ``{"op": "pub", "ev": [...], "s": [conn, count ...], "p": [conn, count, conn, count ...]}``:
    events (``["v", key, value]``, ``["e", member, captured, replayed]``, already encoded), then "sent" counts,
    then settled counts, so nothing published before a count arrives after it.  Pongs are stamped with
    ``clock``'s wall time in nanoseconds."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.events: list[list] = []
        self.progress: dict[int, int] = {}
        self.sent: dict[int, int] = {}
        self.pongs: list[Any] = []
        self.pings: list[int] = []
        self.batches = 0  # publication batches taken
        self._wake = trio.Event()
        self._urgent = trio.Event()  # a ping or pong: not held back by the batch interval

    def add_events(self, events: Iterable[list]) -> None:
        self.events.extend(events)
        self._wake.set()

    def add_progress(self, conn: int, count: int) -> None:
        if count > self.progress.get(conn, -1):
            self.progress[conn] = count
            self._wake.set()

    def add_sent(self, conn: int, count: int) -> None:
        if count > self.sent.get(conn, -1):
            self.sent[conn] = count
            self._wake.set()

    def add_pong(self, n: Any) -> None:
        self.pongs.append(n)
        self._wake.set()
        self._urgent.set()

    def add_ping(self, n: int) -> None:
        self.pings.append(n)
        self._wake.set()
        self._urgent.set()

    def wake(self) -> None:
        self._wake.set()

    def pending(self) -> bool:
        return bool(self.events or self.progress or self.sent or self.pongs or self.pings)

    async def wait(self, not_before: float = 0.0) -> None:
        """Until something is pending; publications (not pings/pongs) no earlier than Trio time ``not_before``."""
        await self._wake.wait()
        if trio.current_time() < not_before and not self._urgent.is_set():
            with trio.move_on_at(not_before):
                await self._urgent.wait()

    def take(self) -> bytes:
        """Everything pending as wire bytes (pongs stamped now), and empty again."""
        self._wake = trio.Event()
        self._urgent = trio.Event()
        out = b"".join(frame({"op": "pong", "n": n, "t": self._clock.time_ns()}) for n in self.pongs)
        out += b"".join(frame({"op": "ping", "n": n}) for n in self.pings)
        if self.events or self.progress or self.sent:
            out += frame({"op": "pub", "ev": self.events, "s": [x for kv in self.sent.items() for x in kv],
                          "p": [x for kv in self.progress.items() for x in kv]})
            self.batches += 1
        self.events, self.progress, self.sent, self.pongs, self.pings = [], {}, {}, [], []
        return out
