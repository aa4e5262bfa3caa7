"""One Trio task that fires due deadlines and sleeps until the next one, or until poked.

Kafka's coordinators hand their timeouts to purgatories and timing wheels; minikafka's group coordinator,
share-group coordinator and share-partition lock timer each keep deadlines on their own objects and run
one :class:`DeadlineLoop` instead, and so does each delayed-operation purgatory's expiration reaper.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import trio


class DeadlineLoop:
    """Runs ``fire()`` then sleeps until ``next_deadline()`` (seconds on ``clock``, which must advance with
    Trio's clock) or until :meth:`schedule` is given an earlier deadline; :meth:`close` ends it."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.closed = False
        self._wake = trio.Event()
        self._wakeup_at = -math.inf  # nothing planned until run() computes it: every poke wakes

    def schedule(self, deadline: float) -> None:
        """Wake the loop if ``deadline`` is earlier than its planned wake-up."""
        if deadline < self._wakeup_at:
            self._wake.set()

    async def run(self, fire: Callable[[], object], next_deadline: Callable[[], float]) -> None:
        try:
            while not self.closed:
                fire()
                nxt = next_deadline()
                self._wakeup_at = nxt
                self._wake = trio.Event()
                with trio.move_on_at(trio.current_time() + max(0.0, nxt - self.clock())):
                    await self._wake.wait()
        finally:
            self._wakeup_at = -math.inf

    def close(self) -> None:
        self.closed = True
        self._wake.set()
