"""Clocks: the one place time is read (Kafka's ``org.apache.kafka.common.utils.Time``).

Components take a :class:`Clock` instead of calling ``time.time()``, so tests
can drive them with a :class:`ManualClock`.  Deadlines of Trio waits use
Trio's own clock (``trio.current_time``), which tests replace with
``trio.testing.MockClock``; this clock is for timestamps and rates.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Wall-clock and monotonic time."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (timestamps, retention, quotas)."""
        ...

    def time_ns(self) -> int:
        """Wall-clock nanoseconds since the epoch."""
        ...

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds (durations and latencies)."""
        ...


class SystemClock:
    """The real clock (Kafka's ``Time.SYSTEM``)."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def time_ns(self) -> int:
        return time.time_ns()

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()


class ManualClock:
    """A clock that moves only when told to (Kafka's ``MockTime``)."""

    def __init__(self, time_ms: int = 1_700_000_000_000, monotonic_ns: int = 0) -> None:
        self._time_ms = time_ms
        self._monotonic_ns = monotonic_ns

    def time_ms(self) -> int:
        return self._time_ms

    def time_ns(self) -> int:
        return self._time_ms * 1_000_000

    def monotonic_ns(self) -> int:
        return self._monotonic_ns

    def sleep(self, ms: float) -> None:
        """Advance both clocks by ``ms`` milliseconds."""
        self._time_ms += int(ms)
        self._monotonic_ns += int(ms * 1_000_000)


SYSTEM_CLOCK = SystemClock()
