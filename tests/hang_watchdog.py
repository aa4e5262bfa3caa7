"""A pytest plugin: a test still running after :data:`HUNG_TEST_S` seconds is hung, and fails.

Its process prints every thread's stack to stderr and exits, which fails the test (pytest-xdist reports that
its worker crashed and starts another) instead of stalling the run.  Python-level timeouts cannot do this
when a real client deadlocks while holding the GIL, as confluent-kafka's ``Consumer.assignment()`` does on
librdkafka 2.16's lock-order deadlock of a partition whose leader became unreachable while an
``OffsetForLeaderEpoch`` was in flight (librdkafka issue 5476); faulthandler's watchdog is a C thread.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from collections.abc import Generator
from typing import IO

import pytest

#: Seconds a test (setup, call and teardown) may run: ``MINIKAFKA_TEST_HANG_S``, default 900.
HUNG_TEST_S = float(os.environ.get("MINIKAFKA_TEST_HANG_S", "900"))
_report: IO[str] | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Keep the real stderr, as pytest's faulthandler plugin does (a test's captured output dies with it)."""
    global _report
    _report = os.fdopen(os.dup(sys.stderr.fileno()), "w")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    """The watchdog armed around the test."""
    if _report is not None:
        faulthandler.dump_traceback_later(HUNG_TEST_S, exit=True, file=_report)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
