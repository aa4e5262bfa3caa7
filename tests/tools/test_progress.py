"""The progress display of long work: shown on a terminal only, and never when switched off."""

from __future__ import annotations

import io
import sys

from minikafka.capture.cli import _counted
from minikafka.tools.progress import ProgressDisplay, progress_enabled


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_only_on_a_terminal() -> None:
    assert progress_enabled(stream=Terminal())
    assert not progress_enabled(no_progress=True, stream=Terminal())
    assert not progress_enabled(stream=io.StringIO())


def test_display_on_a_terminal(monkeypatch) -> None:
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with ProgressDisplay("replaying requests", enabled=progress_enabled()) as bar:
        assert bar.enabled
        bar.update(total=4)
        bar.advance(3)
        bar.update(completed=4, status="all answered")
    shown = term.getvalue()
    assert "replaying requests" in shown and "4/4" in shown and "all answered" in shown


def test_disabled_display_writes_nothing(monkeypatch) -> None:
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    with ProgressDisplay("work", total=2, enabled=False) as bar:
        bar.advance()
        bar.update(completed=2, status="done")
    assert term.getvalue() == ""


def test_counted_records_advance_in_steps() -> None:
    steps: list[int] = []
    assert list(_counted(range(5), steps.append, every=2)) == [0, 1, 2, 3, 4]
    assert steps == [2, 2, 1]
