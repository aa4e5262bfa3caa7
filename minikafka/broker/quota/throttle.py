"""Muting throttled connections (KIP-219): Kafka's ``ThrottledChannel`` and ``ThrottledChannelReaper``.

A response that violated a quota is sent at once with ``throttle_time_ms``
set, then the connection is muted (nothing more is read from it) until the
throttle time has passed.  As in Kafka, the quota owns the muting: a quota
manager's ``throttle`` puts a :class:`ThrottledChannel` in the reaper's delay
queue and calls the network side's :class:`ThrottleCallback` —
``start_throttling`` at once, ``end_throttling`` when due.  The reaper is a
pure delay queue (its size is the ``queue-size`` metric); the broker drives it
with a small Trio task (:func:`~minikafka.broker.network.run_reaper`), so the
quota code runs anywhere, Spark executors included.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ...common.clock import SYSTEM_CLOCK
from ...protocol.throttling import client_throttles_itself

__all__ = ["ThrottleCallback", "ThrottledChannel", "ThrottledChannelReaper", "client_throttles_itself"]

log = logging.getLogger(__name__)


class ThrottleCallback(Protocol):
    """What the network side does for a throttled channel (Kafka's ``ThrottleCallback``)."""

    def start_throttling(self) -> None:
        """Mute the channel: read no more requests from it."""
        ...

    def end_throttling(self) -> None:
        """Unmute it."""
        ...


@dataclass(order=True)
class ThrottledChannel:
    """A muted channel and when it may be read again (``due``, in the reaper's clock's seconds)."""

    due: float
    seq: int
    callback: ThrottleCallback = field(compare=False)
    quota_type: str = field(compare=False)
    on_done: Callable[[], None] | None = field(default=None, compare=False)

    def notify_throttling_done(self) -> None:
        self.callback.end_throttling()
        if self.on_done is not None:
            self.on_done()


class ThrottledChannelReaper:
    """The delay queue that unmutes throttled channels when their time is up.

    ``clock`` gives seconds: a delay queue is for waiting, so the broker passes Trio's clock (tests under a
    ``MockClock`` see throttles pass in virtual time); the default is the system clock's monotonic reading.
    ``on_schedule`` is called when a channel was added, so a driver sleeping until the next due time can look
    again.
    """

    def __init__(self, clock: Callable[[], float] = SYSTEM_CLOCK.monotonic) -> None:
        self.clock = clock
        self._queue: list[ThrottledChannel] = []
        self._seq = itertools.count()
        self.queue_sizes: dict[str, int] = {}
        self.on_schedule: Callable[[], None] | None = None

    @property
    def size(self) -> int:
        return len(self._queue)

    def add(self, callback: ThrottleCallback, quota_type: str, throttle_ms: int,
            on_done: Callable[[], None] | None = None) -> ThrottledChannel:
        """Mute a channel for ``throttle_ms``: ``callback.start_throttling()`` now, ``end_throttling()`` when due."""
        ch = ThrottledChannel(self.clock() + throttle_ms / 1000, next(self._seq), callback, quota_type, on_done)
        callback.start_throttling()
        heapq.heappush(self._queue, ch)
        self.queue_sizes[quota_type] = self.queue_sizes.get(quota_type, 0) + 1
        if self.on_schedule is not None:
            self.on_schedule()
        return ch

    def expire(self) -> float | None:
        """Unmute every channel that is due; returns the next due time (None: queue empty)."""
        now = self.clock()
        while self._queue and self._queue[0].due <= now:
            self._done(heapq.heappop(self._queue))
        return self._queue[0].due if self._queue else None

    def _done(self, ch: ThrottledChannel) -> None:
        self.queue_sizes[ch.quota_type] -= 1
        try:
            ch.notify_throttling_done()
        except Exception:  # a closed channel must not stop the reaper
            log.exception("unmuting a throttled channel failed")

    def release_all(self) -> None:
        """Unmute everything (shutdown)."""
        while self._queue:
            self._done(heapq.heappop(self._queue))
