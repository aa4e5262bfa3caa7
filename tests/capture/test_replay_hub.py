"""The replay hub: values and progress fan out to the other tasks in publication order, coalesced; late and
lost tasks; one clock."""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.lowlevel

from minikafka.capture.replay.hub.client import HubClient, connect_hub
from minikafka.capture.replay.hub.codec import HubMessageError, decode_value, encode_value, frame
from minikafka.capture.replay.hub.threaded import ReplayHub
from minikafka.common import ManualClock


class _Task:
    """What one in-process task was told by the hub."""

    def __init__(self) -> None:
        self.values: dict[tuple, Any] = {}
        self.epochs: dict[str, tuple[int, int]] = {}
        self.progress: dict[int, int] = {}
        self.sent: dict[int, int] = {}
        self.progress_calls = 0
        self.lost: list[tuple[str, list[int]]] = []
        self.violations: list[str] = []
        self.check: Callable[[int, int], None] | None = None
        self._changed = trio.Event()

    def on_value(self, key: tuple, value: Any) -> None:
        self.values.setdefault(key, value)
        self._changed.set()

    def on_member_epoch(self, member: str, captured: int, replayed: int) -> None:
        self.epochs[member] = (captured, replayed)
        self._changed.set()

    def on_progress(self, conn: int, count: int) -> None:
        self.progress_calls += 1
        if count < self.progress.get(conn, 0):
            self.violations.append(f"conn {conn} went back from {self.progress[conn]} to {count}")
        if self.check is not None:
            self.check(conn, count)
        self.progress[conn] = max(count, self.progress.get(conn, 0))
        self._changed.set()

    def on_sent(self, conn: int, count: int) -> None:
        self.sent[conn] = max(count, self.sent.get(conn, 0))
        self._changed.set()

    def on_lost(self, task: str, conns: list[int]) -> None:
        self.lost.append((task, conns))
        self._changed.set()

    def callbacks(self) -> dict[str, Any]:
        return {"on_value": self.on_value, "on_member_epoch": self.on_member_epoch,
                "on_progress": self.on_progress, "on_lost": self.on_lost,
                "on_sent": self.on_sent}

    async def until(self, condition: Callable[[], bool], timeout: float = 10) -> None:
        with trio.fail_after(timeout):
            while not condition():
                self._changed = trio.Event()
                await self._changed.wait()


@pytest.fixture
def hub():
    with ReplayHub(host="127.0.0.1") as h:
        yield h


def test_wire_encoding_keeps_tuples_uuids_and_bytes() -> None:
    import json

    tid = uuid.uuid4()
    for v in [("pid", 1000), ("session", 0, 123), ("topic", tid), ("member", "rdkafka-1"), ("mepoch", "m", 3),
              ("gen", "group", 1), tid, b"\x00\xff", [1, ("a", (2, b"x"))], {"k": (1, 2)}, None, 1.5, "s"]:
        assert decode_value(json.loads(json.dumps(encode_value(v)))) == v


def test_values_no_peer_could_have_encoded_are_hub_message_errors() -> None:
    for bad in [{"x": 1}, {"u": "zz"}, {"b": "abc"}, {"d": [1]}, {"t": 5}, [{"t": [{"u": 7}]}]]:
        with pytest.raises(HubMessageError):
            decode_value(bad)


async def test_a_malformed_message_ends_only_its_connection(hub: ReplayHub) -> None:
    """A task sending what is not a hub message is dropped as lost; the others are told and carry on."""
    a, b = _Task(), _Task()
    async with connect_hub(hub.address, task="a", conns=[0], **a.callbacks()) as ca, \
            connect_hub(hub.address, task="b", conns=[1], **b.callbacks()):
        stream = await trio.open_tcp_stream(*hub.address)
        async with stream:
            await stream.send_all(frame({"op": "hello", "task": "bad", "conns": [5]}) + struct.pack(">I", 3) + b"{{{")
            await a.until(lambda: a.lost == [("bad", [5])])
        ca.publish_progress(0, 1)
        await b.until(lambda: b.progress == {0: 1})
    assert hub.stats.clients == 3 and hub.stats.clients_lost == 1


async def test_values_and_progress_fan_out_in_publication_order(hub: ReplayHub) -> None:
    """Every value a task published before a progress count is applied by every other task before that count."""
    a, b, c = _Task(), _Task(), _Task()
    for t in (b, c):
        def check(conn: int, count: int, t: _Task = t) -> None:
            if conn == 0 and ("pid", 1000 + count - 1) not in t.values:
                t.violations.append(f"count {count} before its value")
        t.check = check
    topic = uuid.uuid4()
    async with connect_hub(hub.address, task="a", conns=[0], **a.callbacks()) as ca, \
            connect_hub(hub.address, task="b", conns=[1], **b.callbacks()) as cb, \
            connect_hub(hub.address, task="c", conns=[2], **c.callbacks()):
        for i in range(300):
            ca.publish_value(("pid", 1000 + i), 2000 + i)
            ca.publish_progress(0, i + 1)
            if i % 7 == 0:
                await trio.lowlevel.checkpoint()  # batches of different sizes
        ca.publish_value(("topic", topic), uuid.UUID(int=1))
        ca.publish_value(("session", 0, 123), 456)
        ca.publish_member_epoch("consumer-1", 3, 5)
        ca.publish_member_epoch("consumer-1", 4, 7)
        cb.publish_value(("member", "rdkafka-x"), "rdkafka-y")
        cb.publish_sent(1, 12)
        cb.publish_progress(1, 9)
        for t in (b, c):
            await t.until(lambda t=t: t.epochs.get("consumer-1") == (4, 7))
        await a.until(lambda: a.progress.get(1) == 9)
        await c.until(lambda: c.progress.get(1) == 9)
        assert a.sent == c.sent == {1: 12}  # "sent" counts travel apart from settled ones
    for t in (b, c):
        assert t.violations == []
        assert t.progress[0] == 300 and t.values[("pid", 1299)] == 2299
        assert t.values[("topic", topic)] == uuid.UUID(int=1) and t.values[("session", 0, 123)] == 456
    # Nothing comes back to its publisher.
    assert ("pid", 1000) not in a.values and 0 not in a.progress and a.values == {("member", "rdkafka-x"): "rdkafka-y"}
    assert ("member", "rdkafka-x") not in b.values and c.values[("member", "rdkafka-x")] == "rdkafka-y"
    assert hub.stats.clients == 3 and hub.stats.clients_lost == 0


async def test_progress_is_coalesced_per_connection(hub: ReplayHub) -> None:
    """A burst of counts goes out as the latest per connection: the receiver does not see them one by one."""
    b = _Task()
    async with connect_hub(hub.address, task="b", **b.callbacks()) as cb, \
            connect_hub(hub.address, task="a") as ca:
        for i in range(1, 50_001):  # one burst: ~50k settled requests with no scheduling point in between
            ca.publish_progress(i % 4, i)
        await ca.flush()
        await b.until(lambda: b.progress.get(0) == 50_000 and b.progress.get(3) == 49_999)
        assert cb.received_progress == b.progress_calls == 4
        assert ca.batches_sent == 1 and hub.stats.progress_in == 4
        # Spread over scheduling points: still far fewer messages than counts, never going back.
        for i in range(50_001, 60_001):
            ca.publish_progress(0, i)
            if i % 100 == 0:
                await trio.lowlevel.checkpoint()
        await b.until(lambda: b.progress.get(0) == 60_000)
        assert ca.batches_sent <= 101 and b.violations == []


async def test_late_task_starts_from_a_snapshot_and_lost_task_is_announced(hub: ReplayHub) -> None:
    a, b, late = _Task(), _Task(), _Task()
    async with connect_hub(hub.address, task="a", conns=[0], **a.callbacks()) as ca:
        ca.publish_value(("pid", 1), 11)
        ca.publish_value(("pid", 1), 12)  # first value wins, as in the replay's own map
        ca.publish_member_epoch("m", 1, 2)
        ca.publish_member_epoch("m", 2, 4)
        ca.publish_progress(0, 5)
        ca.publish_progress(0, 6)
        await ca.flush()
        with pytest.raises(RuntimeError, match="task failed"):
            async with connect_hub(hub.address, task="doomed", conns=[3, 4], **b.callbacks()) as cd:
                await b.until(lambda: b.progress.get(0) == 6)  # the snapshot
                cd.publish_progress(3, 1)
                await cd.flush()
                await a.until(lambda: a.progress.get(3) == 1)
                raise RuntimeError("task failed")
        await a.until(lambda: bool(a.lost))
        assert a.lost == [("doomed", [3, 4])] and hub.stats.clients_lost == 1
        # The hub carries on: a task connecting now gets everything, in one snapshot.
        async with connect_hub(hub.address, task="late", **late.callbacks()) as cl:
            await late.until(lambda: late.progress == {0: 6, 3: 1})
            assert late.values == {("pid", 1): 11} and late.epochs == {"m": (2, 4)}
            assert cl.received_progress == 2 and late.lost == []
            cl.publish_value(("gen", "g", 1), 2)
            await a.until(lambda: ("gen", "g", 1) in a.values)
    assert hub.stats.clients == 3 and hub.stats.clients_lost == 1


async def test_clock_offset_to_the_hub(hub: ReplayHub) -> None:
    """A task whose clock is an hour behind the hub's converts the hub's base time to its own clock."""
    hour = 3600 * 10**9
    task_clock = ManualClock()
    hub.server.clock = ManualClock(time_ms=task_clock.time_ms() + hour // 10**6)
    async with connect_hub(hub.address, clock=task_clock, clock_samples=5) as client:
        assert isinstance(client, HubClient) and client.rtt_ns == 0  # the manual clocks stand still
        assert client.offset_ns == hour
        base = hub.now_ns() + 2 * 10**9  # the driver picks a base time in hub time
        assert client.to_local_ns(base) == task_clock.time_ns() + 2 * 10**9
        task_clock.sleep(1000)  # the task's clock moves on, the hub's does not: a new exchange sees it
        assert await client.sync_clock(3) == client.offset_ns == hour - 10**9


async def test_hub_stopping_ends_the_tasks_connections(caplog: pytest.LogCaptureFixture) -> None:
    a = _Task()
    hub = ReplayHub(host="127.0.0.1")
    host, port = hub.start()
    with caplog.at_level(logging.WARNING, "minikafka.capture.replay.hub.client"):
        async with connect_hub(f"{host}:{port}", task="a", **a.callbacks()) as ca:
            await trio.to_thread.run_sync(hub.stop)
            with trio.fail_after(10):
                await ca.wait_closed()
            # Logged: "replay hub closed the connection" (or "... connection lost: <error>").
            lost = [r.getMessage() for r in caplog.records if r.name == "minikafka.capture.replay.hub.client"]
            assert len(lost) == 1 and lost[0].startswith("replay hub c"), lost
            ca.publish_progress(0, 1)  # the connection is gone: the task carries on ...
            with trio.fail_after(10):
                await ca.finish()  # ... and its writer ends without raising (the publication goes nowhere)
    assert a.progress == {} and a.lost == [] and a.values == {}  # a stopped hub told the task nothing
