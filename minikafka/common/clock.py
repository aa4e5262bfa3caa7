"""Clocks: the one place time is read (Kafka's ``org.apache.kafka.common.utils.Time``).

No module of minikafka but this one reads the time (``tests/common/test_one_clock.py`` checks it): components
take a :class:`Clock` -- defaulting to :data:`SYSTEM_CLOCK` -- so tests drive them all with one
:class:`ManualClock`.  A clock gives

* wall-clock time (:meth:`Clock.time_ms`, :meth:`Clock.time_ns`, :meth:`Clock.time`): record timestamps,
  retention, quota windows, expiry times -- anything that is compared with another process's time;
* monotonic time (:meth:`Clock.monotonic_ns`, :meth:`Clock.monotonic`): durations, latencies and rates
  measured inside one process (what ``time.perf_counter`` measured before);
* :meth:`Clock.sleep`, a *blocking* sleep for code running in a thread of its own (the log cleaner, command-line
  tools); a :class:`ManualClock` just moves forward.

Trio code never sleeps on this clock: deadlines and waits (``trio.sleep``, ``trio.move_on_at``, timeouts of
delayed operations) use Trio's own clock, ``trio.current_time()``, which tests replace with
``trio.testing.MockClock``.  A Clock is for timestamps, durations and rates, Trio's clock for waiting; a Trio
component whose rates must follow its waits (the producer's metrics and linger) reads Trio's clock through a
:class:`SecondsClock`.
"""

from __future__ import annotations

import time as _time
from typing import Callable, Protocol


class Clock(Protocol):
    """Wall-clock and monotonic time (Kafka's ``Time``)."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (timestamps, retention, quotas)."""
        ...

    def time_ns(self) -> int:
        """Wall-clock nanoseconds since the epoch."""
        ...

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds (durations and latencies)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (durations and latencies)."""
        ...

    def sleep(self, ms: float) -> None:
        """Block the calling thread for ``ms`` milliseconds (never from Trio code: use ``trio.sleep``)."""
        ...


class SystemClock:
    """The real clock (Kafka's ``Time.SYSTEM``)."""

    def time_ms(self) -> int:
        return _time.time_ns() // 1_000_000

    def time_ns(self) -> int:
        return _time.time_ns()

    def time(self) -> float:
        return _time.time()

    def monotonic_ns(self) -> int:
        return _time.perf_counter_ns()

    def monotonic(self) -> float:
        return _time.perf_counter()

    def sleep(self, ms: float) -> None:
        _time.sleep(ms / 1000)


class ManualClock:
    """A clock that moves only when told to (Kafka's ``MockTime``)."""

    def __init__(self, time_ms: int = 1_700_000_000_000, monotonic_ns: int = 0) -> None:
        self._time_ms = time_ms
        self._monotonic_ns = monotonic_ns

    def time_ms(self) -> int:
        return self._time_ms

    def time_ns(self) -> int:
        return self._time_ms * 1_000_000

    def time(self) -> float:
        return self._time_ms / 1000

    def monotonic_ns(self) -> int:
        return self._monotonic_ns

    def monotonic(self) -> float:
        return self._monotonic_ns / 1e9

    def sleep(self, ms: float) -> None:
        """Advance both clocks by ``ms`` milliseconds."""
        self._time_ms += int(ms)
        self._monotonic_ns += int(ms * 1_000_000)

    def set_time_ms(self, time_ms: int) -> None:
        """Set the wall clock (the monotonic clock moves by as much, never backwards)."""
        self._monotonic_ns += max(0, time_ms - self._time_ms) * 1_000_000
        self._time_ms = time_ms


class SecondsClock:
    """A clock reading a source of seconds: Trio's (``SecondsClock(trio.current_time, wall0_s)``) for a Trio
    component whose metric windows and deadlines must move with a ``trio.testing.MockClock``.

    Its monotonic time is the source; its wall time is ``wall0_s`` plus the source.  It cannot block a thread.
    """

    def __init__(self, seconds: Callable[[], float], wall0_s: float = 0.0) -> None:
        self.seconds = seconds
        self.wall0_s = wall0_s

    def time_ms(self) -> int:
        return int(self.time() * 1000)

    def time_ns(self) -> int:
        return int(self.time() * 1e9)

    def time(self) -> float:
        return self.wall0_s + self.seconds()

    def monotonic_ns(self) -> int:
        return int(self.seconds() * 1e9)

    def monotonic(self) -> float:
        return self.seconds()

    def sleep(self, ms: float) -> None:
        raise RuntimeError("a clock of seconds (Trio's) is waited on with trio.sleep")


SYSTEM_CLOCK = SystemClock()
