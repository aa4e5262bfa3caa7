"""How long each Trio task has actually run: the request-handler time that request quotas measure.

Kafka charges a request-percentage quota with the time a request spent on
request-handler threads, not the time it waited in purgatory.  Here every
connection is one Trio task, so a Trio instrument that sums the duration of
each task step gives the same figure: :meth:`TaskTimeInstrument.task_ns`
read before and after a handler is that handler's own run time.  Run time is real: the broker keeps
the system clock here even when its own clock is a ``ManualClock``.
"""

from __future__ import annotations

import trio

from ..common.clock import SYSTEM_CLOCK, Clock


class TaskTimeInstrument(trio.abc.Instrument):
    """Accumulates the run time of every task step, per task."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._totals: dict[trio.lowlevel.Task, int] = {}
        self._started = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = self._clock.monotonic_ns()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self._totals[task] = self._totals.get(task, 0) + self._clock.monotonic_ns() - self._started

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._totals.pop(task, None)

    def task_ns(self, task: trio.lowlevel.Task | None = None) -> int:
        """Run time so far of ``task`` (default: the current task), including the step in progress."""
        task = task or trio.lowlevel.current_task()
        return self._totals.get(task, 0) + self._clock.monotonic_ns() - self._started
