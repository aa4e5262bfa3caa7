"""Pacing: when each captured request is due in the replay (the ``speed`` of :class:`~.options.ReplayOptions`).

At ``speed`` x, request *i* is due at ``t0 + (receive_ns_i - first_ns) / speed``; at max speed (None) at once.
``t0`` is now, or the Trio time matching a wall-clock base time (Spark tasks share one, and may start early).
Waits use Trio's clock (tests drive it with ``trio.testing.MockClock``); the wall-clock base time and the
replay's duration use the injected :class:`~minikafka.common.clock.Clock`.
"""

from __future__ import annotations

import trio

from ...common.clock import Clock
from ..format import CaptureRecord


class Pacer:
    """The replay's schedule: the captured gaps between requests, divided by the speed."""

    def __init__(self, speed: float | None, first_ns: int, clock: Clock, base_time_ns: int | None = None) -> None:
        self.speed = speed
        self.first_ns = first_ns  # the capture time replayed at t0
        self.base_time_ns = base_time_ns
        self.clock = clock
        self.t0 = 0.0  # Trio time of first_ns
        self._started = 0.0  # Trio time of start()
        self._started_s = 0.0  # the Clock's monotonic seconds at start()

    def start(self, wall_ns: int) -> None:
        """Start the schedule now; ``wall_ns`` is the replay's wall clock now (the shared one of Spark tasks)."""
        now = trio.current_time()
        self._started = now
        self.t0 = now if self.base_time_ns is None else now + (self.base_time_ns - wall_ns) / 1e9
        self._started_s = self.clock.monotonic()

    async def wait_due(self, rec: CaptureRecord) -> None:
        """Until ``rec`` is due (at once at max speed)."""
        if self.speed is not None:
            await trio.sleep_until(self.t0 + (rec.receive_ns - self.first_ns) / 1e9 / self.speed)

    def duration_s(self) -> float:
        """Seconds replayed since :meth:`start`; a base time in the future is waiting, not replaying."""
        return self.clock.monotonic() - self._started_s - max(0.0, self.t0 - self._started)
