"""The KIP-848 consumer's driver (ConsumerGroupCoordinator) against a scripted coordinator transport:
heartbeat timing, the immediate acknowledgement, commit before revocation (OffsetCommit v9 with the
member epoch), fencing, coordinator moves, leaving, topic ids resolved by Metadata, fatal errors.

The transport stands in for the coordinator's connection only (the broker side is tested with the
real broker and real clients in tests/client/test_consumer_kip848.py); every request is built and
parsed with the real message declarations, every response too.  Time is Trio's autojump clock.
"""

from __future__ import annotations

import uuid
from typing import Any, Awaitable, Callable

import pytest
import trio
import trio.testing
from helpers import wait_until

from minikafka.client.consumer.config import ConsumerConfig
from minikafka.client.consumer.consumer_group_coordinator import ConsumerGroupCoordinator
from minikafka.client.consumer.errors import GroupError
from minikafka.client.consumer.listener import ConsumerRebalanceListener
from minikafka.client.consumer.membership_manager import MemberState
from minikafka.client.consumer.metrics import ConsumerMetrics
from minikafka.client.consumer.subscription import SubscriptionState
from minikafka.client.fetch_session import TopicPartition as TP
from minikafka.client.network import Metadata
from minikafka.common import PartitionMetadata, TopicMetadata
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode

ORDERS = uuid.uuid4()
LATE = uuid.uuid4()
HB = ApiKey.CONSUMER_GROUP_HEARTBEAT

Handler = Callable[[Any], Awaitable[dict] | dict]


class FakeConn:
    """The coordinator connection: requests are recorded with their Trio time and answered by the script."""

    def __init__(self, script: "Script") -> None:
        self.script = script
        self.closed = False

    def pick_version(self, api_key: int, max_version: int | None = None) -> int:
        hi = min(APIS[api_key].max_version, self.script.max_versions.get(api_key, 99))
        return hi if max_version is None else min(hi, max_version)

    async def request(self, api_key: int, body: dict | None = None, *, version: int | None = None) -> Any:
        api = APIS[api_key]
        assert version is not None
        req = api.request.parse(api.request.build(body, version), version)
        self.script.log.append((trio.current_time(), ApiKey(api_key), version, req))
        answer = self.script.handlers[ApiKey(api_key)](req)
        if not isinstance(answer, dict):
            answer = await answer
        return api.response.parse(api.response.build(answer, version), version)

    async def aclose(self) -> None:
        self.closed = True


class FakeClient:
    """What the coordinator uses of NetworkClient: metadata, wanted topics, a nursery, a connection."""

    def __init__(self, script: "Script", nursery: trio.Nursery) -> None:
        self.metadata = Metadata()
        self.nursery = nursery
        self.script = script
        self.wanted: set[str] = set()

    def want_topics(self, topics: list[str]) -> None:
        self.wanted.update(topics)

    async def any_connection(self) -> FakeConn:
        return FakeConn(self.script)

    def invalidate(self, node_id: int | None = None) -> None:
        pass


class Script:
    """A scripted group coordinator: heartbeats answered by ``on_heartbeat``, commits recorded."""

    def __init__(self) -> None:
        self.log: list[tuple[float, ApiKey, int, Any]] = []
        self.max_versions: dict[int, int] = {}
        self.commits: list[Any] = []
        self.handlers: dict[ApiKey, Handler] = {
            HB: self.on_heartbeat, ApiKey.OFFSET_COMMIT: self.on_commit, ApiKey.METADATA: self.on_metadata}
        self.assignment: dict[uuid.UUID, list[int]] | None = None
        self.epoch = 1
        self.topics: dict[uuid.UUID, tuple[str, int]] = {ORDERS: ("orders", 3)}

    def heartbeats(self) -> list[tuple[float, Any]]:
        return [(t, req) for t, key, _, req in self.log if key == HB]

    def on_heartbeat(self, req: Any) -> dict:
        epoch = req.member_epoch if req.member_epoch < 0 else self.epoch
        return hb_response(epoch, self.assignment)

    def on_commit(self, req: Any) -> dict:
        self.commits.append(req)
        return {"topics": [{"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": 0}
                                                            for p in t.partitions]} for t in req.topics]}

    def on_metadata(self, req: Any) -> dict:
        return {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "cluster_id": "c", "controller_id": 1,
                "topics": [{"error_code": 0, "name": name, "topic_id": tid, "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]}
                    for p in range(n)]} for tid, (name, n) in self.topics.items()]}


def hb_response(epoch: int, assignment: dict[uuid.UUID, list[int]] | None, error: int = 0,
                interval: int = 2000) -> dict:
    return {"error_code": error, "member_epoch": epoch, "heartbeat_interval_ms": interval,
            "assignment": None if assignment is None else {
                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in assignment.items()]}}


class Harness(ConsumerGroupCoordinator):
    """The coordinator with its connection replaced by the script's (FindCoordinator counted)."""

    script: Script
    lookups = 0

    async def ensure_coordinator_ready(self) -> Any:
        if self._conn is None or self._conn.closed:
            self.lookups += 1
            self._conn = FakeConn(self.script)  # type: ignore[assignment]
        return self._conn


class Recorder(ConsumerRebalanceListener):
    def __init__(self, script: Script) -> None:
        self.script = script
        self.calls: list[tuple[str, set[TP], int]] = []  # (callback, partitions, requests sent before it)

    def on_partitions_revoked(self, partitions: set[TP]) -> None:
        self.calls.append(("revoked", partitions, len(self.script.log)))

    async def on_partitions_assigned(self, partitions: set[TP]) -> None:
        self.calls.append(("assigned", partitions, len(self.script.log)))

    def on_partitions_lost(self, partitions: set[TP]) -> None:
        self.calls.append(("lost", partitions, len(self.script.log)))


def make(nursery: trio.Nursery, script: Script, **settings: Any) -> tuple[Harness, SubscriptionState]:
    cfg = ConsumerConfig(group_id="g", group_protocol="consumer", auto_offset_reset="earliest", **settings)
    subs = SubscriptionState("earliest")
    client = FakeClient(script, nursery)
    client.metadata.topics["orders"] = TopicMetadata("orders", ORDERS, [PartitionMetadata(p, 1) for p in range(3)])
    coord = Harness(client, subs, cfg, ConsumerMetrics("c"))  # type: ignore[arg-type]
    coord.script = script
    return coord, subs


async def start(nursery: trio.Nursery, coord: Harness, subs: SubscriptionState, listener: Any = None,
                topics: tuple[str, ...] = ("orders",), pattern: str | None = None) -> None:
    if pattern is not None:
        subs.subscribe_pattern(pattern)
    else:
        subs.subscribe(topics)
    subs.rebalance_listener = listener
    coord.on_subscription_updated()
    nursery.start_soon(coord.heartbeat_loop)
    await coord.ensure_active_group()  # what poll does: the member joins


async def test_join_ack_at_once_then_heartbeat_at_the_broker_interval(nursery: trio.Nursery,
                                                                      autojump_clock: trio.testing.MockClock) -> None:
    script = Script()
    script.assignment = {ORDERS: [0, 2]}
    coord, subs = make(nursery, script, group_remote_assignor="range")
    rec = Recorder(script)
    t0 = trio.current_time()
    await start(nursery, coord, subs, rec)
    await wait_until(lambda: len(script.heartbeats()) >= 5, timeout=30)
    (t_join, join), (t_ack, ack), (t3, hb3), (t4, _), (t5, _) = script.heartbeats()[:5]
    assert t_join - t0 < 0.01 and join.member_epoch == 0 and join.member_id == coord.member_id
    assert join.subscribed_topic_names == ["orders"] and join.server_assignor == "range"
    assert join.rebalance_timeout_ms == 300000 and join.topic_partitions == []
    # The reconciled assignment is acknowledged at once, not at the next interval...
    assert t_ack - t_join < 0.01
    assert [(t.topic_id, list(t.partitions)) for t in ack.topic_partitions] == [(ORDERS, [0, 2])]
    assert ack.member_epoch == 1 and ack.subscribed_topic_names is None and ack.server_assignor is None
    # ...then heartbeats follow the interval the broker gave (2 s), carrying nothing unchanged.
    assert t3 - t_ack == pytest.approx(2.0, abs=0.01) and t4 - t3 == pytest.approx(2.0, abs=0.01)
    assert hb3.topic_partitions is None and hb3.subscribed_topic_names is None
    assert subs.assigned_partitions() == {TP("orders", 0), TP("orders", 2)}
    assert rec.calls[0][:2] == ("assigned", {TP("orders", 0), TP("orders", 2)})
    assert coord.state == MemberState.STABLE and coord.generation == 1
    assert coord.group_metadata().generation_id == 1 and coord.group_metadata().member_id == coord.member_id


async def test_revocation_commits_first_then_calls_back_then_acks(nursery: trio.Nursery,
                                                                  autojump_clock: trio.testing.MockClock) -> None:
    script = Script()
    script.assignment = {ORDERS: [0, 1]}
    coord, subs = make(nursery, script)
    rec = Recorder(script)
    await start(nursery, coord, subs, rec)
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    subs.seek(TP("orders", 0), 7)  # what the application consumed
    subs.seek(TP("orders", 1), 11)
    script.epoch, script.assignment = 2, {ORDERS: [0]}
    await wait_until(lambda: subs.assigned_partitions() == {TP("orders", 0)} and coord.state == MemberState.STABLE,
                     timeout=10)
    assert subs.position(TP("orders", 0)) == 7  # a kept partition keeps its position
    # Order on the wire: the heartbeat bringing the revocation, OffsetCommit, then the ack heartbeat.
    keys = [key for _, key, _, _ in script.log]
    first_commit = keys.index(ApiKey.OFFSET_COMMIT)
    _, _, version, commit = script.log[first_commit]
    assert version == 9 and commit.generation_id_or_member_epoch == 2 and commit.member_id == coord.member_id
    assert {(p.partition_index, p.committed_offset) for t in commit.topics for p in t.partitions} == {(0, 7), (1, 11)}
    ack = next(req for key, (_, _, _, req) in zip(keys[first_commit:], script.log[first_commit:]) if key == HB)
    assert [(t.topic_id, list(t.partitions)) for t in ack.topic_partitions] == [(ORDERS, [0])]
    revoked = [c for c in rec.calls if c[0] == "revoked"]
    assert revoked == [("revoked", {TP("orders", 1)}, first_commit + 1)]  # after the commit, before the ack


async def test_fenced_member_loses_partitions_without_commit_and_rejoins(nursery: trio.Nursery,
                                                                         autojump_clock: Any) -> None:
    script = Script()
    script.assignment = {ORDERS: [0, 1, 2]}
    coord, subs = make(nursery, script)
    rec = Recorder(script)
    await start(nursery, coord, subs, rec)
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    subs.seek(TP("orders", 0), 3)
    fenced = {"n": 0}

    def fence_once(req: Any) -> dict:
        if req.member_epoch > 0 and not fenced["n"]:
            fenced["n"] += 1
            return hb_response(req.member_epoch, None, error=ErrorCode.FENCED_MEMBER_EPOCH)
        return script.on_heartbeat(req)

    script.epoch = 5
    script.handlers[HB] = fence_once
    await wait_until(lambda: fenced["n"] == 1 and coord.state == MemberState.STABLE and coord.generation == 5,
                     timeout=10)
    assert [c[:2] for c in rec.calls] == [("assigned", {TP("orders", p) for p in range(3)}),
                                          ("lost", {TP("orders", p) for p in range(3)}),
                                          ("assigned", {TP("orders", p) for p in range(3)})]
    assert script.commits == []  # lost partitions are never committed
    rejoin = [req for _, req in script.heartbeats() if req.member_epoch == 0][1]
    assert rejoin.member_id == coord.member_id and rejoin.subscribed_topic_names == ["orders"]
    assert subs.position(TP("orders", 0)) is None  # new ownership: from the committed offset again


async def test_not_coordinator_rediscovers_and_resends_everything(nursery: trio.Nursery, autojump_clock: Any) -> None:
    script = Script()
    script.assignment = {ORDERS: [1]}
    coord, subs = make(nursery, script)
    await start(nursery, coord, subs)
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    assert coord.lookups == 1
    moved = {"n": 0}

    def move(req: Any) -> dict:
        if not moved["n"]:
            moved["n"] += 1
            return hb_response(-1, None, error=ErrorCode.NOT_COORDINATOR)
        return script.on_heartbeat(req)

    script.handlers[HB] = move
    await wait_until(lambda: moved["n"] == 1 and coord.lookups == 2, timeout=10)
    await wait_until(lambda: len(script.heartbeats()) >= 5, timeout=10)
    (t_err, _), (t_next, resent) = script.heartbeats()[2:4]
    assert t_next - t_err < 0.01  # at once, to the new coordinator
    assert resent.subscribed_topic_names == ["orders"] and resent.rebalance_timeout_ms == 300000
    assert [list(t.partitions) for t in resent.topic_partitions] == [[1]] and resent.member_epoch == 1
    assert coord.state == MemberState.STABLE and subs.assigned_partitions() == {TP("orders", 1)}


@pytest.mark.parametrize("instance_id,epoch", [(None, -1), ("static-a", -2)])
async def test_leave_on_close_revokes_then_sends_the_leave_epoch(nursery: trio.Nursery, autojump_clock: Any,
                                                                 instance_id: str | None, epoch: int) -> None:
    script = Script()
    script.assignment = {ORDERS: [0]}
    coord, subs = make(nursery, script, group_instance_id=instance_id)
    rec = Recorder(script)
    await start(nursery, coord, subs, rec)
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    subs.seek(TP("orders", 0), 4)
    await coord.maybe_auto_commit()
    await coord.leave_group()
    last = script.heartbeats()[-1][1]
    assert (last.member_epoch, last.instance_id) == (epoch, instance_id)
    assert script.commits and script.commits[-1].generation_id_or_member_epoch == 1
    assert rec.calls[-1][:2] == ("revoked", {TP("orders", 0)}) and rec.calls[-1][2] < len(script.log)
    assert coord.state == MemberState.UNSUBSCRIBED and not subs.assigned_partitions()


async def test_unsubscribe_leaves_and_subscribe_joins_again(nursery: trio.Nursery, autojump_clock: Any) -> None:
    script = Script()
    script.assignment = {ORDERS: [0]}
    coord, subs = make(nursery, script)
    await start(nursery, coord, subs)
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    coord.on_unsubscribe()
    subs.unsubscribe()
    await wait_until(lambda: coord.state == MemberState.UNSUBSCRIBED, timeout=10)
    assert script.heartbeats()[-1][1].member_epoch == -1
    subs.subscribe(["orders"])
    coord.on_subscription_updated()
    await coord.ensure_active_group()
    await wait_until(lambda: coord.state == MemberState.STABLE and subs.assigned_partitions() == {TP("orders", 0)},
                     timeout=10)
    assert [req.member_epoch for _, req in script.heartbeats()].count(0) == 2


async def test_regex_assignment_of_an_unknown_topic_id_is_named_by_metadata(nursery: trio.Nursery,
                                                                            autojump_clock: Any) -> None:
    script = Script()
    script.topics[LATE] = ("late-topic", 2)
    script.assignment = {LATE: [0, 1]}
    coord, subs = make(nursery, script)
    await start(nursery, coord, subs, pattern="late-.*")
    await wait_until(lambda: bool(script.heartbeats()))
    join = script.heartbeats()[0][1]
    assert join.subscribed_topic_regex == "late-.*" and join.subscribed_topic_names == []
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    assert any(key == ApiKey.METADATA and req.topics is None for _, key, _, req in script.log)  # all topics
    assert subs.assigned_partitions() == {TP("late-topic", 0), TP("late-topic", 1)}
    assert "late-topic" in coord.client.wanted  # type: ignore[attr-defined]


async def test_fatal_error_is_raised_from_poll(nursery: trio.Nursery, autojump_clock: Any) -> None:
    script = Script()
    script.handlers[HB] = lambda req: hb_response(0, None, error=ErrorCode.UNSUPPORTED_ASSIGNOR)
    coord, subs = make(nursery, script, group_remote_assignor="sticky")
    await start(nursery, coord, subs)
    await wait_until(lambda: coord.state == MemberState.FATAL, timeout=10)
    with pytest.raises(GroupError) as info:
        await coord.ensure_active_group()
    assert info.value.code == ErrorCode.UNSUPPORTED_ASSIGNOR and not info.value.retriable
    sent = len(script.heartbeats())
    await trio.sleep(30)  # virtual time: a fatal member sends nothing more
    assert len(script.heartbeats()) == sent == 1


async def test_broker_without_the_api_is_a_clear_fatal_error(nursery: trio.Nursery, autojump_clock: Any) -> None:
    script = Script()
    coord, subs = make(nursery, script)

    class NoApi(FakeConn):
        def pick_version(self, api_key: int, max_version: int | None = None) -> int:
            from minikafka.client.network import KafkaClientError
            raise KafkaClientError("broker 1 does not support ConsumerGroupHeartbeat", retriable=False)

    async def ready() -> Any:
        return NoApi(script)

    coord.ensure_coordinator_ready = ready  # type: ignore[method-assign]
    await start(nursery, coord, subs)
    await wait_until(lambda: coord.state == MemberState.FATAL, timeout=10)
    with pytest.raises(GroupError, match="consumer group protocol"):
        await coord.ensure_active_group()


async def test_callback_exception_surfaces_from_poll(nursery: trio.Nursery, autojump_clock: Any) -> None:
    script = Script()
    script.assignment = {ORDERS: [0]}
    coord, subs = make(nursery, script)

    class Boom(ConsumerRebalanceListener):
        def on_partitions_assigned(self, partitions: set[TP]) -> None:
            raise RuntimeError("application bug")

    await start(nursery, coord, subs, Boom())
    await wait_until(lambda: coord.state == MemberState.STABLE, timeout=10)
    with pytest.raises(RuntimeError, match="application bug"):
        await coord.ensure_active_group()
    await coord.ensure_active_group()  # raised once
    assert subs.assigned_partitions() == {TP("orders", 0)}
