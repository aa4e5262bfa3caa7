"""How long each Trio task has actually run: the request-handler time that request quotas measure.

Kafka charges a request-percentage quota with the time a request spent on
request-handler threads, not the time it waited in purgatory.  Here every
connection is one Trio task, so a Trio instrument that sums the duration of
each task step gives the same figure: :meth:`TaskTimeInstrument.task_ns`
read before and after a handler is that handler's own run time.  Run time is real: the broker keeps
the system clock here even when its own clock is a ``ManualClock``.

The instrument is installed in the Trio run only when first read (the request path reads it only while
some entity has a request quota), so a broker without request quotas pays nothing per task step.  Run time
counts from the installation: a reading taken before it is 0.
"""

from __future__ import annotations

import trio

from ..common.clock import SYSTEM_CLOCK, Clock


class TaskTimeInstrument(trio.abc.Instrument):
    """Accumulates the run time of every task step, per task, once installed (see :meth:`task_ns`)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._totals: dict[trio.lowlevel.Task, int] = {}
        self._started = 0
        self.installed = False

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._started = self._clock.monotonic_ns()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self._totals[task] = self._totals.get(task, 0) + self._clock.monotonic_ns() - self._started

    def task_exited(self, task: trio.lowlevel.Task) -> None:
        self._totals.pop(task, None)

    def task_ns(self, task: trio.lowlevel.Task | None = None) -> int:
        """Run time so far of ``task`` (default: the current task), including the step in progress; the first
        reading installs the instrument in the current Trio run (the step in progress counts from then)."""
        if not self.installed:
            self._started = self._clock.monotonic_ns()
            trio.lowlevel.add_instrument(self)
            self.installed = True
        task = task or trio.lowlevel.current_task()
        return self._totals.get(task, 0) + self._clock.monotonic_ns() - self._started

    def uninstall(self) -> None:
        """Leave the Trio run (the broker stops); the next reading installs it again."""
        if self.installed:
            self.installed = False
            self._totals.clear()
            try:
                trio.lowlevel.remove_instrument(self)
            except (KeyError, ValueError, RuntimeError):  # not in this run (or outside any run)
                pass
