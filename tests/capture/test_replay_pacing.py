"""The replay's pacing (:class:`~minikafka.capture.replay.pacing.Pacer`) on Trio's mock clock and an injected
:class:`~minikafka.common.clock.Clock` that moves with it."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from minikafka.capture.format import CaptureRecord
from minikafka.capture.replay.pacing import Pacer
from minikafka.common.clock import SecondsClock

FIRST_NS = 5_000_000_000


def _at(receive_ns: int) -> CaptureRecord:
    return CaptureRecord(receive_ns, receive_ns + 1000, "c", "peer", 0, "User:ANONYMOUS", "c", 0, 9, 1, b"", None)


async def test_requests_are_due_at_their_captured_gaps_divided_by_the_speed(
        autojump_clock: trio.testing.MockClock) -> None:
    pacer = Pacer(2.0, FIRST_NS, SecondsClock(trio.current_time, wall0_s=1_700_000_000.0))
    start = trio.current_time()
    pacer.start(0)
    await pacer.wait_due(_at(FIRST_NS))
    assert trio.current_time() == start
    await pacer.wait_due(_at(FIRST_NS + 3_000_000_000))
    assert trio.current_time() - start == pytest.approx(1.5)
    assert pacer.duration_s() == pytest.approx(1.5)


async def test_a_base_time_ahead_is_waited_for_and_not_counted_as_replaying(
        autojump_clock: trio.testing.MockClock) -> None:
    clock = SecondsClock(trio.current_time, wall0_s=1_700_000_000.0)
    pacer = Pacer(1.0, FIRST_NS, clock, base_time_ns=clock.time_ns() + 3_000_000_000)  # a Spark task started early
    start = trio.current_time()
    pacer.start(clock.time_ns())
    await pacer.wait_due(_at(FIRST_NS + 2_000_000_000))
    assert trio.current_time() - start == pytest.approx(5.0)
    assert pacer.duration_s() == pytest.approx(2.0)


async def test_at_max_speed_nothing_waits(autojump_clock: trio.testing.MockClock) -> None:
    pacer = Pacer(None, FIRST_NS, SecondsClock(trio.current_time))
    start = trio.current_time()
    pacer.start(0)
    await pacer.wait_due(_at(FIRST_NS + 60_000_000_000))
    assert trio.current_time() == start
    assert pacer.duration_s() == 0.0
