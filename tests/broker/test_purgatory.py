"""The delayed-operation purgatory's expiration reaper (Kafka's ``ExpirationReaper``): waits park their task and
are woken directly by ``check_and_complete``, one reaper task expires them at their deadline (Trio's MockClock,
so deadlines are exact), a cancelled wait leaves nothing behind, finished waits' deadlines are purged, and
without a reaper (or once it stopped) each wait times out by itself.  Also a long-polling Fetch through the
handler with the reaper running: answered on the append, or empty at its max wait."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest
import trio
import trio.testing

from minikafka.broker.purgatory import PURGE_INTERVAL, DelayedOperationPurgatory
from minikafka.protocol.api import ApiKey
from test_handlers import Env, batch, call, fetch_fields, produce_fields, values


async def _wait(purgatory: DelayedOperationPurgatory, keys: list[Hashable], timeout: float,
                out: list[tuple[float, set[Hashable]]]) -> None:
    with purgatory.watch(keys) as watch:
        fired = await watch.wait(trio.current_time() + timeout)
        out.append((trio.current_time(), fired))


async def test_a_wait_is_woken_by_its_key_at_once(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    out: list[tuple[float, set[Hashable]]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        nursery.start_soon(_wait, purgatory, ["a", "b"], 30.0, out)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.parked() == 1 and purgatory.watched() == 2
        assert purgatory.check_and_complete("other") == 0
        start = trio.current_time()
        assert purgatory.check_and_complete("b") == 1
        await trio.testing.wait_all_tasks_blocked()
        assert out == [(start, {"b"})]  # woken on the change, no time passed
        assert purgatory.parked() == 0 and purgatory.watched() == 0 and purgatory.expirations == 0
        nursery.cancel_scope.cancel()


async def test_many_waits_expire_from_the_one_reaper_at_their_deadlines(
        autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    out: list[tuple[float, set[Hashable]]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        start = trio.current_time()
        for i in range(50):
            nursery.start_soon(_wait, purgatory, [i], 1.0 + (49 - i) * 0.1, out)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.parked() == 50
        while len(out) < 50:
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert purgatory.expirations == 50 and purgatory.parked() == 0 and purgatory.watched() == 0
    times = sorted(t - start for t, fired in out if not fired)
    assert times == pytest.approx([1.0 + i * 0.1 for i in range(50)])  # each at its own deadline


async def test_a_cancelled_wait_is_removed(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    out: list[tuple[float, set[Hashable]]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        async with trio.open_nursery() as connection:  # the connection's task, cancelled as when it closes
            connection.start_soon(_wait, purgatory, ["a"], 10.0, out)
            await trio.testing.wait_all_tasks_blocked()
            assert purgatory.parked() == 1
            connection.cancel_scope.cancel()
        assert not out and purgatory.parked() == 0 and purgatory.watched() == 0
        assert purgatory.check_and_complete("a") == 0
        await trio.sleep(20)  # its deadline passes: nothing to expire
        assert purgatory.expirations == 0
        nursery.cancel_scope.cancel()


async def test_try_complete_runs_in_the_firing_task_and_wakes_only_a_complete_wait(
        autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    calls: list[tuple[set[Hashable], bool]] = []  # (keys given, whether the waiting task was still parked)
    out: list[tuple[float, set[Hashable], bool]] = []
    enough = 2

    async def wait() -> None:
        with purgatory.watch(["a", "b"]) as watch:
            def try_complete(fired: set[Hashable]) -> bool:
                calls.append((fired, not out))
                return len(calls) >= enough
            watch.try_complete = try_complete
            fired = await watch.wait(trio.current_time() + 30.0)
            out.append((trio.current_time(), fired, watch.completed))

    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        assert purgatory.check_and_complete("a") == 1
        assert calls == [({"a"}, True)]  # called at once, by this task
        await trio.testing.wait_all_tasks_blocked()
        assert not out and purgatory.parked() == 1  # not complete: not woken, still waiting
        await trio.sleep(1)
        assert purgatory.check_and_complete("b") == 1
        assert calls[-1] == ({"b"}, True)  # only the keys fired since
        await trio.testing.wait_all_tasks_blocked()
        assert out == [(start + 1, set(), True)]  # complete: woken, the keys already consumed
        assert purgatory.parked() == 0 and purgatory.watched() == 0 and purgatory.expirations == 0
        nursery.cancel_scope.cancel()


async def test_a_failing_try_complete_wakes_the_task_with_its_keys(autojump_clock: trio.testing.MockClock,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    purgatory = DelayedOperationPurgatory()
    out: list[tuple[set[Hashable], bool]] = []

    async def wait() -> None:
        with purgatory.watch(["a"]) as watch:
            def try_complete(fired: set[Hashable]) -> bool:
                raise RuntimeError("broken")
            watch.try_complete = try_complete
            fired = await watch.wait(trio.current_time() + 30.0)
            out.append((fired, watch.completed))

    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.check_and_complete("a") == 1  # the firing task carries on
        await trio.testing.wait_all_tasks_blocked()
        assert out == [({"a"}, False)]  # the waiting task re-reads by itself
        assert "completing a delayed Fetch" in caplog.text
        nursery.cancel_scope.cancel()


async def test_finished_waits_deadlines_are_purged(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        out: list[tuple[float, set[Hashable]]] = []
        for _ in range(10 * PURGE_INTERVAL):  # a long poll answered by each append, a heap entry each
            nursery.start_soon(_wait, purgatory, ["a"], 60.0, out)
            await trio.testing.wait_all_tasks_blocked()
            purgatory.check_and_complete("a")
            await trio.testing.wait_all_tasks_blocked()
        assert len(out) == 10 * PURGE_INTERVAL and purgatory.expirations == 0
        await trio.sleep(61)  # the reaper wakes once, at the first deadline, and drops them all
        assert purgatory.parked() == 0 and len(purgatory._deadlines) == 0
        nursery.cancel_scope.cancel()


async def test_finished_waits_behind_a_parked_one_are_purged(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    async with trio.open_nursery() as nursery:
        await nursery.start(purgatory.run_reaper)
        out: list[tuple[float, set[Hashable]]] = []
        nursery.start_soon(_wait, purgatory, ["idle"], 3600.0, out)  # the earliest deadline, parked for an hour
        for _ in range(10 * PURGE_INTERVAL):  # acks=all answered at once, each a later deadline behind it
            nursery.start_soon(_wait, purgatory, ["a"], 7200.0, out)
            await trio.testing.wait_all_tasks_blocked()
            purgatory.check_and_complete("a")
            await trio.testing.wait_all_tasks_blocked()
            assert len(purgatory._deadlines) <= 2 * PURGE_INTERVAL + 3  # the heap stays small meanwhile
        assert purgatory.parked() == 1 and len(out) == 10 * PURGE_INTERVAL
        nursery.cancel_scope.cancel()


async def test_without_the_reaper_each_wait_times_out_by_itself(autojump_clock: trio.testing.MockClock) -> None:
    purgatory = DelayedOperationPurgatory()
    out: list[tuple[float, set[Hashable]]] = []
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        reaper = trio.CancelScope()

        async def reap(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with reaper:
                await purgatory.run_reaper(task_status=task_status)

        await nursery.start(reap)
        nursery.start_soon(_wait, purgatory, ["a"], 5.0, out)
        await trio.testing.wait_all_tasks_blocked()
        assert purgatory.parked() == 1
        await trio.sleep(1)
        reaper.cancel()  # the broker's reaper stops first: the parked wait carries on by itself
    assert out == [(pytest.approx(start + 5.0), set())]
    await _wait(purgatory, ["b"], 2.0, out)  # and a purgatory without a reaper
    assert out[-1] == (pytest.approx(start + 7.0), set())


async def test_long_poll_with_the_reaper_is_answered_on_the_append_or_at_max_wait(
        autojump_clock: trio.testing.MockClock) -> None:
    env = Env()
    env.metadata.create_topic("t", 1, 1)
    produce, fetch = env.produce_handler(), env.fetch_handler()
    result: list[Any] = []

    async def poll() -> None:
        result.append((await call(fetch, ApiKey.FETCH, 12, fetch_fields("t", {0: 0}, max_wait_ms=500)),
                       trio.current_time()))

    async with trio.open_nursery() as nursery:
        await nursery.start(env.delayed_fetch.run_reaper)
        start = trio.current_time()
        await poll()  # nothing comes: empty at max_wait_ms, expired by the reaper
        assert result[0][1] - start == pytest.approx(0.5) and env.delayed_fetch.expirations == 1
        assert not result[0][0].responses[0].partitions[0].records
        nursery.start_soon(poll)
        await trio.testing.wait_all_tasks_blocked()
        assert env.delayed_fetch.parked() == 1
        await trio.sleep(0.2)
        await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"v"])))
        await trio.testing.wait_all_tasks_blocked()
        assert result[1][1] - start == pytest.approx(0.7)  # answered on the append, 0.2 s into its wait
        assert values(bytes(result[1][0].responses[0].partitions[0].records)) == [b"v"]
        assert env.delayed_fetch.parked() == 0 and env.delayed_fetch.expirations == 1
        nursery.cancel_scope.cancel()
