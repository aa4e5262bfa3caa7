"""A rich progress display on stderr for long work (perf-test, replay, analyze, capture export).

Shown only when stderr is a terminal and the caller did not switch it off; otherwise every call
is a no-op, so output that is piped or captured stays what it was::

    with ProgressDisplay("replaying", total=n, enabled=progress_enabled()) as bar:
        ...
        bar.advance()
        bar.update(status="12 differing")
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def progress_enabled(no_progress: bool = False, stream: TextIO | None = None) -> bool:
    """Whether to show progress: ``stream`` (default stderr) is a terminal and not ``no_progress``."""
    stream = stream if stream is not None else sys.stderr
    try:
        return not no_progress and stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class ProgressDisplay:
    """One task's progress bar (count done of ``total``, or a count alone when None), with a status text."""

    def __init__(self, description: str, total: float | None = None, *, enabled: bool = True) -> None:
        self._description = description
        self._total = total
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if enabled:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[status]}"),
                console=Console(file=sys.stderr, markup=False, highlight=False), transient=False)

    @property
    def enabled(self) -> bool:
        return self._progress is not None

    def __enter__(self) -> "ProgressDisplay":
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task(self._description, total=self._total, status="")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, n: float = 1) -> None:
        """``n`` more units done."""
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, *, completed: float | None = None, total: float | None = None,
               description: str | None = None, status: str | None = None) -> None:
        """Set the count done, the total, the description or the status text."""
        if self._progress is None or self._task is None:
            return
        if status is None:
            self._progress.update(self._task, completed=completed, total=total, description=description)
        else:
            self._progress.update(self._task, completed=completed, total=total, description=description,
                                  status=status)
