"""GroupCoordinator driven through the group API handlers with real request/response schemas.

Every request is built with its request declaration and parsed back (so field
names and versions are checked), handed to the handler (built with just the
services it takes: the coordinator and an in-memory metadata store), and the
handler's response is built and parsed with the response declaration of the
same version.
"""

from __future__ import annotations

import itertools
import struct
from pathlib import Path
from typing import Any

import pytest
import trio

from minikafka.broker.config import BrokerConfig
from minikafka.broker.groups import GroupCoordinator, GroupState
from minikafka.broker.handlers import groups as G
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.request import RequestContext
from minikafka.common.clock import SecondsClock
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode as E

WALL0 = 1_700_000_000.0
_corr = itertools.count(1)


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


SUB = subscription("t1")
PROTOCOLS = [("range", SUB), ("roundrobin", SUB)]


class StubBroker:
    """The group handlers over a coordinator and an in-memory metadata store (this broker, node 7 at
    127.0.0.1:9092, is live; ``topics`` name the topics that exist, with their partition counts)."""

    def __init__(self, coordinator: GroupCoordinator, config: BrokerConfig,
                 topics: dict[str, int] | None = None) -> None:
        self.group_coordinator = coordinator
        self.config = config
        metadata = ClusterMetadata([config.node_id])
        metadata.broker_started(config.node_id, config.advertised, config.port)
        for name, partitions in (topics if topics is not None else {"t1": 16, "t2": 16, "t9": 16}).items():
            metadata.create_topic(name, partitions, 1)
        self.handlers = {
            ApiKey.FIND_COORDINATOR: G.FindCoordinatorHandler(metadata).handle,
            ApiKey.JOIN_GROUP: G.JoinGroupHandler(coordinator).handle,
            ApiKey.SYNC_GROUP: G.SyncGroupHandler(coordinator).handle,
            ApiKey.HEARTBEAT: G.HeartbeatHandler(coordinator).handle,
            ApiKey.LEAVE_GROUP: G.LeaveGroupHandler(coordinator).handle,
            ApiKey.OFFSET_COMMIT: G.OffsetCommitHandler(coordinator, metadata).handle,
            ApiKey.OFFSET_FETCH: G.OffsetFetchHandler(coordinator).handle,
            ApiKey.LIST_GROUPS: G.ListGroupsHandler(coordinator).handle,
            ApiKey.DESCRIBE_GROUPS: G.DescribeGroupsHandler(coordinator).handle,
            ApiKey.DELETE_GROUPS: G.DeleteGroupsHandler(coordinator).handle,
        }


def make_config(**kw: Any) -> BrokerConfig:
    kw.setdefault("group_initial_rebalance_delay_ms", 3000)
    return BrokerConfig(host="127.0.0.1", port=9092, node_id=7, **kw)


def make_coordinator(config: BrokerConfig, data_dir: Path | None = None) -> GroupCoordinator:
    return GroupCoordinator(config, data_dir, clock=trio.current_time,
                            wall_clock=SecondsClock(trio.current_time, WALL0))


async def call(b: StubBroker, key: ApiKey, version: int, fields: dict, client_id: str = "client",
               peer: str = "127.0.0.1:50000") -> Any:
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(api_key=int(key), api_version=version, correlation_id=next(_corr),
                         client_id=client_id, connection_id="conn", peer=peer)
    resp = await b.handlers[key](ctx, req)
    return api.response.parse(api.response.build(resp, version), version)


@pytest.fixture
async def broker(nursery: trio.Nursery, autojump_clock: trio.testing.MockClock):
    cfg = make_config()
    coord = make_coordinator(cfg)
    nursery.start_soon(coord.run)
    yield StubBroker(coord, cfg)
    coord.close()


# ------------------------------------------------------------------ helpers


async def join(b: StubBroker, member_id: str = "", *, group: str = "g", version: int = 5, client_id: str = "c1",
               instance: str | None = None, protocols: list = PROTOCOLS, session: int = 10000,
               rebalance: int = 10000, protocol_type: str = "consumer", reason: str | None = None) -> Any:
    fields = {
        "group_id": group, "session_timeout_ms": session, "rebalance_timeout_ms": rebalance,
        "member_id": member_id, "group_instance_id": instance, "protocol_type": protocol_type,
        "protocols": [{"name": n, "metadata": m} for n, m in protocols], "reason": reason,
    }
    return await call(b, ApiKey.JOIN_GROUP, version, fields, client_id=client_id)


async def sync(b: StubBroker, member_id: str, generation: int, assignments: dict[str, bytes] | None = None, *,
               group: str = "g", version: int = 3, instance: str | None = None, **extra: Any) -> Any:
    fields = {
        "group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": instance,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()], **extra,
    }
    return await call(b, ApiKey.SYNC_GROUP, version, fields)


async def heartbeat(b: StubBroker, member_id: str, generation: int, *, group: str = "g",
                    instance: str | None = None, version: int = 3) -> int:
    r = await call(b, ApiKey.HEARTBEAT, version, {"group_id": group, "generation_id": generation,
                                                  "member_id": member_id, "group_instance_id": instance})
    return r.error_code


async def concurrently(*fns: Any) -> list[Any]:
    """Run the zero-argument async callables together; their results in order."""
    results: list[Any] = [None] * len(fns)

    async def run(i: int) -> None:
        results[i] = await fns[i]()

    async with trio.open_nursery() as n:
        for i in range(len(fns)):
            n.start_soon(run, i)
    return results


async def two_member_group(b: StubBroker, group: str = "g") -> tuple[str, str, int]:
    """Join two dynamic members (with the MEMBER_ID_REQUIRED round) and sync: (leader, follower, generation)."""
    r1 = await join(b, group=group, client_id="c1")
    r2 = await join(b, group=group, client_id="c2")
    j1, j2 = await concurrently(lambda: join(b, r1.member_id, group=group, client_id="c1"),
                                lambda: join(b, r2.member_id, group=group, client_id="c2"))
    leader = j1.leader
    follower = j2.member_id if leader == j1.member_id else j1.member_id
    gen = j1.generation_id
    await concurrently(lambda: sync(b, follower, gen, group=group),
                       lambda: sync(b, leader, gen, {leader: b"A", follower: b"B"}, group=group))
    return leader, follower, gen


def state(b: StubBroker, group: str = "g") -> GroupState:
    g = b.group_coordinator.get_group(group)
    return GroupState.DEAD if g is None else g.state


# ------------------------------------------------------------ FindCoordinator


async def test_find_coordinator_all_versions(broker: StubBroker, autojump_clock: Any) -> None:
    r0 = await call(broker, ApiKey.FIND_COORDINATOR, 0, {"key": "g"})
    assert (r0.error_code, r0.node_id, r0.host, r0.port) == (0, 7, "127.0.0.1", 9092)
    r3 = await call(broker, ApiKey.FIND_COORDINATOR, 3, {"key": "txn", "key_type": 1})
    assert (r3.error_code, r3.node_id, r3.port) == (0, 7, 9092)
    bad = await call(broker, ApiKey.FIND_COORDINATOR, 2, {"key": "g", "key_type": 5})
    assert bad.error_code == E.INVALID_REQUEST and bad.node_id == -1
    r4 = await call(broker, ApiKey.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.node_id, c.host, c.port, c.error_code) for c in r4.coordinators] == [
        ("a", 7, "127.0.0.1", 9092, 0), ("b", 7, "127.0.0.1", 9092, 0)]


# ------------------------------------------------------------------ JoinGroup


async def test_two_member_join_with_member_id_required(broker: StubBroker, autojump_clock: Any) -> None:
    r1 = await join(broker, client_id="c1", version=5)
    assert r1.error_code == E.MEMBER_ID_REQUIRED and r1.member_id.startswith("c1-")
    assert r1.generation_id == -1 and r1.members == []
    r2 = await join(broker, client_id="c2", version=7)
    assert r2.error_code == E.MEMBER_ID_REQUIRED and r2.protocol_name is None and r2.protocol_type is None
    t0 = trio.current_time()
    j1, j2 = await concurrently(lambda: join(broker, r1.member_id, client_id="c1", version=5),
                                lambda: join(broker, r2.member_id, client_id="c2", version=7))
    # group.initial.rebalance.delay.ms (3 s), extended once because a second member joined meanwhile
    assert trio.current_time() - t0 == pytest.approx(6.0)
    assert j1.error_code == j2.error_code == 0
    assert j1.generation_id == j2.generation_id == 1
    assert j1.leader == j2.leader and j1.leader in (r1.member_id, r2.member_id)
    assert j1.protocol_name == j2.protocol_name == "range"
    assert j2.protocol_type == "consumer"
    lead, follow = (j1, j2) if j1.leader == j1.member_id else (j2, j1)
    assert sorted((m.member_id, m.metadata) for m in lead.members) == sorted([(r1.member_id, SUB), (r2.member_id, SUB)])
    assert follow.members == []
    assert state(broker) == GroupState.COMPLETING_REBALANCE


async def test_protocol_vote_and_inconsistent_protocol(broker: StubBroker, autojump_clock: Any) -> None:
    # v3: no MEMBER_ID_REQUIRED round.  Both support both protocols; two of three prefer roundrobin.
    rr_first = [("roundrobin", SUB), ("range", SUB)]
    j = await concurrently(lambda: join(broker, version=3, client_id="a", protocols=rr_first),
                           lambda: join(broker, version=3, client_id="b", protocols=rr_first),
                           lambda: join(broker, version=3, client_id="c", protocols=PROTOCOLS))
    assert {r.protocol_name for r in j} == {"roundrobin"}
    assert all(r.member_id.startswith(c + "-") for r, c in zip(j, "abc"))
    # A new member without a common protocol, or with another protocol type, is rejected.
    bad = await join(broker, version=3, client_id="d", protocols=[("sticky", SUB)])
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    bad = await join(broker, version=3, client_id="d", protocol_type="connect")
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # Empty protocol type on a new group is also inconsistent.
    bad = await join(broker, version=3, group="g2", protocol_type="")
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL


async def test_join_validation_errors(broker: StubBroker, autojump_clock: Any) -> None:
    r = await join(broker, session=1000)
    assert r.error_code == E.INVALID_SESSION_TIMEOUT
    r = await join(broker, session=3_600_000)
    assert r.error_code == E.INVALID_SESSION_TIMEOUT
    r = await join(broker, group="")
    assert r.error_code == E.INVALID_GROUP_ID
    r = await join(broker, "nobody-123", group="missing")
    assert r.error_code == E.UNKNOWN_MEMBER_ID and r.member_id == "nobody-123"
    # v0: no rebalance timeout, protocol_name is "" (non-null) on errors.
    r = await join(broker, "nobody", version=0)
    assert r.error_code == E.UNKNOWN_MEMBER_ID and r.protocol_name == ""


async def test_group_max_size(nursery: trio.Nursery, autojump_clock: Any) -> None:
    cfg = make_config(group_max_size=1)
    coord = make_coordinator(cfg)
    nursery.start_soon(coord.run)
    b = StubBroker(coord, cfg)
    first = await join(b, version=3)
    assert first.error_code == 0 and first.generation_id == 1
    second = await join(b, version=3, client_id="c2")
    assert second.error_code == E.GROUP_MAX_SIZE_REACHED and second.member_id == ""


async def test_initial_rebalance_delay_extends_while_members_arrive(broker: StubBroker, autojump_clock: Any) -> None:
    t0 = trio.current_time()
    results: dict[str, Any] = {}

    async def member(name: str, after: float) -> None:
        await trio.sleep(after)
        results[name] = await join(broker, version=3, client_id=name)
        results[name + "_t"] = trio.current_time() - t0

    async with trio.open_nursery() as n:
        n.start_soon(member, "a", 0)
        n.start_soon(member, "b", 2)
        n.start_soon(member, "c", 4)
    # delay 3 s, remaining 7 s: +3 s at t=3 (b joined), +3 s at t=6 (c joined), done at t=9.
    assert results["a_t"] == results["b_t"] == results["c_t"] == pytest.approx(9.0)
    assert {results[x].generation_id for x in "abc"} == {1}
    assert len(results["a"].members) == 3


# --------------------------------------------------------- SyncGroup / Heartbeat


async def test_sync_distributes_assignments(broker: StubBroker, autojump_clock: Any) -> None:
    r1 = await join(broker, client_id="c1")
    r2 = await join(broker, client_id="c2")
    j1, j2 = await concurrently(lambda: join(broker, r1.member_id, client_id="c1"),
                                lambda: join(broker, r2.member_id, client_id="c2"))
    leader, gen = j1.leader, j1.generation_id
    follower = j2.member_id if leader == j1.member_id else j1.member_id
    # Heartbeats while CompletingRebalance are fine.
    assert await heartbeat(broker, follower, gen) == 0
    done: dict[str, Any] = {}

    async def follower_sync() -> None:
        done["f"] = await sync(broker, follower, gen, version=5, protocol_type="consumer", protocol_name="range")
        done["f_t"] = trio.current_time()

    async with trio.open_nursery() as n:
        n.start_soon(follower_sync)
        await trio.sleep(1)
        assert "f" not in done  # the follower waits for the leader
        lead = await sync(broker, leader, gen, {leader: b"LA", follower: b"FA"}, version=5,
                          protocol_type="consumer", protocol_name="range")
    assert lead.error_code == 0 and lead.assignment == b"LA"
    assert (lead.protocol_type, lead.protocol_name) == ("consumer", "range")
    assert done["f"].error_code == 0 and done["f"].assignment == b"FA"
    assert done["f"].protocol_name == "range"
    assert state(broker) == GroupState.STABLE
    # A SyncGroup in Stable returns the current assignment.
    again = await sync(broker, follower, gen, version=0)
    assert again.assignment == b"FA"
    # SyncGroup v5 protocol checks, generation and member checks.
    assert (await sync(broker, follower, gen, version=5, protocol_name="roundrobin")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await sync(broker, follower, gen, version=5, protocol_type="connect")).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await sync(broker, follower, gen + 1)).error_code == E.ILLEGAL_GENERATION
    assert (await sync(broker, "who", gen)).error_code == E.UNKNOWN_MEMBER_ID
    assert (await sync(broker, "who", gen, group="nogroup")).error_code == E.UNKNOWN_MEMBER_ID


async def test_heartbeat_errors_and_rebalance_in_progress(broker: StubBroker, autojump_clock: Any) -> None:
    leader, follower, gen = await two_member_group(broker)
    assert await heartbeat(broker, follower, gen) == 0
    assert await heartbeat(broker, follower, gen - 1) == E.ILLEGAL_GENERATION
    assert await heartbeat(broker, "stranger", gen) == E.UNKNOWN_MEMBER_ID
    assert await heartbeat(broker, follower, gen, group="other") == E.UNKNOWN_MEMBER_ID
    # A third member joins: the group rebalances and existing members learn it from heartbeats.
    async with trio.open_nursery() as n:
        results: dict[str, Any] = {}

        async def newcomer() -> None:
            results["c"] = await join(broker, version=3, client_id="c3")

        n.start_soon(newcomer)
        await trio.sleep(0.1)
        assert state(broker) == GroupState.PREPARING_REBALANCE
        assert await heartbeat(broker, follower, gen) == E.REBALANCE_IN_PROGRESS
        assert await heartbeat(broker, leader, gen) == E.REBALANCE_IN_PROGRESS
        # Commits are still allowed while PreparingRebalance.
        c = await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen, follower))
        assert commit_errors(c) == {("t1", 0): 0}
        jl, jf = await concurrently(lambda: join(broker, leader), lambda: join(broker, follower))
    assert jl.generation_id == jf.generation_id == results["c"].generation_id == gen + 1
    assert jl.leader == leader and len(jl.members) == 3
    assert state(broker) == GroupState.COMPLETING_REBALANCE


async def test_member_leaving_triggers_rebalance(broker: StubBroker, autojump_clock: Any) -> None:
    leader, follower, gen = await two_member_group(broker)
    r = await call(broker, ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": follower, "group_instance_id": None}, {"member_id": "ghost", "group_instance_id": None}]})
    assert r.error_code == 0
    assert [(m.member_id, m.error_code) for m in r.members] == [(follower, 0), ("ghost", E.UNKNOWN_MEMBER_ID)]
    assert state(broker) == GroupState.PREPARING_REBALANCE
    assert await heartbeat(broker, leader, gen) == E.REBALANCE_IN_PROGRESS
    assert await heartbeat(broker, follower, gen) == E.UNKNOWN_MEMBER_ID
    j = await join(broker, leader)  # the only member: completes at once
    assert j.error_code == 0 and j.generation_id == gen + 1 and j.leader == leader
    assert [m.member_id for m in j.members] == [leader]
    # The last member leaving (v0: single member) empties the group; generation moves on.
    r0 = await call(broker, ApiKey.LEAVE_GROUP, 0, {"group_id": "g", "member_id": leader})
    assert r0.error_code == 0
    assert state(broker) == GroupState.EMPTY
    assert broker.group_coordinator.get_group("g").generation_id == gen + 2
    r0 = await call(broker, ApiKey.LEAVE_GROUP, 1, {"group_id": "g", "member_id": leader})
    assert r0.error_code == E.UNKNOWN_MEMBER_ID


async def test_session_timeout_removes_member(broker: StubBroker, autojump_clock: Any) -> None:
    leader, follower, gen = await two_member_group(broker)
    t0 = trio.current_time()
    # The leader heartbeats every 3 s; the follower goes silent (session timeout 10 s).
    while trio.current_time() - t0 < 9:
        await trio.sleep(3)
        assert await heartbeat(broker, leader, gen) == 0
    await trio.sleep(2)
    assert state(broker) == GroupState.PREPARING_REBALANCE
    assert follower not in broker.group_coordinator.get_group("g").members
    assert await heartbeat(broker, leader, gen) == E.REBALANCE_IN_PROGRESS
    j = await join(broker, leader)
    assert j.generation_id == gen + 1 and [m.member_id for m in j.members] == [leader]


async def test_rebalance_timeout_removes_member_that_does_not_rejoin(broker: StubBroker, autojump_clock: Any) -> None:
    leader, follower, gen = await two_member_group(broker)
    result: dict[str, Any] = {}

    async def leader_rejoin() -> None:
        result["j"] = await join(broker, leader)  # a leader rejoin forces a rebalance
        result["t"] = trio.current_time()

    t0 = trio.current_time()
    async with trio.open_nursery() as n:
        n.start_soon(leader_rejoin)
        # The follower keeps heartbeating but never rejoins.
        while "j" not in result:
            await trio.sleep(3)
            if "j" not in result:
                assert await heartbeat(broker, follower, gen) == E.REBALANCE_IN_PROGRESS
    assert result["t"] - t0 == pytest.approx(10.0)  # the rebalance timeout
    assert result["j"].generation_id == gen + 1
    assert [m.member_id for m in result["j"].members] == [leader]
    assert await heartbeat(broker, follower, gen) == E.UNKNOWN_MEMBER_ID


async def test_pending_sync_expiry_removes_member(broker: StubBroker, autojump_clock: Any) -> None:
    r1 = await join(broker, client_id="c1")
    r2 = await join(broker, client_id="c2")
    j1, j2 = await concurrently(lambda: join(broker, r1.member_id, client_id="c1"),
                                lambda: join(broker, r2.member_id, client_id="c2"))
    leader = j1.leader
    follower = j2.member_id if leader == j1.member_id else j1.member_id
    # Only the leader syncs; the follower heartbeats but never sends SyncGroup.
    lead = await sync(broker, leader, 1, {leader: b"x", follower: b"y"})
    assert lead.error_code == 0
    for _ in range(5):
        await trio.sleep(2.5)
        await heartbeat(broker, follower, 1)
        await heartbeat(broker, leader, 1)
    g = broker.group_coordinator.get_group("g")
    assert follower not in g.members and leader in g.members
    assert state(broker) == GroupState.PREPARING_REBALANCE


# --------------------------------------------------------------- static members


async def static_group(b: StubBroker, version: int = 5) -> tuple[Any, Any]:
    """Static members ia (joins first, so it leads) and ib, synced: their JoinGroup results."""
    out: dict[str, Any] = {}

    async def member(inst: str, delay: float) -> None:
        await trio.sleep(delay)
        out[inst] = await join(b, instance=inst, client_id="c" + inst, version=version)

    async with trio.open_nursery() as n:
        n.start_soon(member, "ia", 0)
        n.start_soon(member, "ib", 0.5)
    ja, jb = out["ia"], out["ib"]
    assert ja.error_code == jb.error_code == 0  # static members skip MEMBER_ID_REQUIRED
    assert ja.member_id.startswith("ia-") and jb.member_id.startswith("ib-")
    assert ja.leader == ja.member_id
    await concurrently(lambda: sync(b, jb.member_id, jb.generation_id, instance="ib"),
                       lambda: sync(b, ja.member_id, ja.generation_id, {ja.member_id: b"AA", jb.member_id: b"BB"},
                                    instance="ia"))
    return ja, jb


async def test_static_member_rejoin_without_rebalance(broker: StubBroker, autojump_clock: Any) -> None:
    ja, jb = await static_group(broker)
    gen = ja.generation_id
    assert ja.leader == ja.member_id
    # The follower restarts: unknown member id, same instance id, same metadata.
    t0 = trio.current_time()
    jb2 = await join(broker, instance="ib", client_id="cb")
    assert trio.current_time() == t0  # answered at once
    assert jb2.error_code == 0 and jb2.member_id != jb.member_id and jb2.member_id.startswith("ib-")
    assert jb2.generation_id == gen and jb2.leader == ja.member_id and jb2.members == []
    assert state(broker) == GroupState.STABLE
    # It keeps its assignment under the new id; the old id is fenced.
    assert (await sync(broker, jb2.member_id, gen, instance="ib")).assignment == b"BB"
    assert await heartbeat(broker, jb2.member_id, gen, instance="ib") == 0
    assert await heartbeat(broker, jb.member_id, gen, instance="ib") == E.FENCED_INSTANCE_ID
    assert (await join(broker, jb.member_id, instance="ib")).error_code == E.FENCED_INSTANCE_ID
    assert (await sync(broker, jb.member_id, gen, instance="ib")).error_code == E.FENCED_INSTANCE_ID
    commit = await call(broker, ApiKey.OFFSET_COMMIT, 7, {
        "group_id": "g", "generation_id_or_member_epoch": gen, "member_id": jb.member_id,
        "group_instance_id": "ib", "topics": [{"name": "t1", "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}]}]})
    assert commit.topics[0].partitions[0].error_code == E.FENCED_INSTANCE_ID
    # An unknown instance id with a member id is unknown.
    assert await heartbeat(broker, jb2.member_id, gen, instance="iz") == E.UNKNOWN_MEMBER_ID


async def test_static_leader_rejoin_v9_skips_assignment(broker: StubBroker, autojump_clock: Any) -> None:
    ja, jb = await static_group(broker, version=9)
    ja2 = await join(broker, instance="ia", client_id="ca", version=9, reason="restart")
    assert ja2.error_code == 0 and ja2.generation_id == ja.generation_id
    assert ja2.skip_assignment is True and ja2.leader == ja2.member_id
    assert {m.group_instance_id for m in ja2.members} == {"ia", "ib"}
    assert state(broker) == GroupState.STABLE
    # Before v9 the old leader id is returned so the client does not run the assignor.
    ja3 = await join(broker, instance="ia", client_id="ca", version=8)
    assert ja3.leader == ja2.member_id and ja3.members == [] and ja3.skip_assignment is False


async def test_static_member_leave_by_instance_id(broker: StubBroker, autojump_clock: Any) -> None:
    ja, jb = await static_group(broker)
    r = await call(broker, ApiKey.LEAVE_GROUP, 5, {"group_id": "g", "members": [
        {"member_id": "", "group_instance_id": "ib", "reason": "admin"},
        {"member_id": "", "group_instance_id": "nope"},
        {"member_id": ja.member_id, "group_instance_id": "ib"}]})
    assert [(m.group_instance_id, m.error_code) for m in r.members] == [
        ("ib", 0), ("nope", E.UNKNOWN_MEMBER_ID), ("ib", E.UNKNOWN_MEMBER_ID)]
    assert state(broker) == GroupState.PREPARING_REBALANCE


# --------------------------------------------------------------- offsets


def commit_fields(version: int, generation: int = -1, member: str = "", offsets: dict | None = None, **extra: Any) -> dict:
    offsets = offsets or {("t1", 0): 10}
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                         "committed_metadata": extra.pop("metadata", "m"),
                                         "committed_leader_epoch": 3, "commit_timestamp": extra.get("ts", -1)})
    extra.pop("ts", None)
    return {"group_id": extra.pop("group", "g"), "generation_id_or_member_epoch": generation, "member_id": member,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], **extra}


def commit_errors(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


async def fetch(b: StubBroker, version: int, group: str = "g", topics: dict[str, list[int]] | None = None) -> Any:
    tl = None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
    if version >= 8:
        return await call(b, ApiKey.OFFSET_FETCH, version, {"groups": [{"group_id": group, "topics": tl}]})
    return await call(b, ApiKey.OFFSET_FETCH, version, {"group_id": group, "topics": tl})


def fetched(resp_topics: Any) -> dict[tuple[str, int], tuple]:
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in resp_topics for p in t.partitions}


async def test_offset_commit_generation_checks(broker: StubBroker, autojump_clock: Any) -> None:
    leader, follower, gen = await two_member_group(broker)
    ok = await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen, follower, {("t1", 0): 11, ("t1", 1): 12}))
    assert set(commit_errors(ok).values()) == {0}
    bad = await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen + 5, follower))
    assert commit_errors(bad) == {("t1", 0): E.ILLEGAL_GENERATION}
    bad = await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen, "stranger"))
    assert commit_errors(bad) == {("t1", 0): E.UNKNOWN_MEMBER_ID}
    # A standalone commit to a group with members is refused.
    bad = await call(broker, ApiKey.OFFSET_COMMIT, 2, commit_fields(2, -1, ""))
    assert commit_errors(bad) == {("t1", 0): E.UNKNOWN_MEMBER_ID}
    # Metadata over 4096 characters.
    big = await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen, leader, metadata="x" * 4097))
    assert commit_errors(big) == {("t1", 0): E.OFFSET_METADATA_TOO_LARGE}
    r = await fetch(broker, 3, topics={"t1": [0, 1, 2]})
    assert r.error_code == 0
    assert fetched(r.topics) == {("t1", 0): (11, "m", 0), ("t1", 1): (12, "m", 0), ("t1", 2): (-1, "", 0)}
    r5 = await fetch(broker, 5, topics={"t1": [0]})
    assert r5.topics[0].partitions[0].committed_leader_epoch == 3
    # During CompletingRebalance a member commit gets REBALANCE_IN_PROGRESS.
    async with trio.open_nursery() as n:
        n.start_soon(join, broker, leader)  # the leader's rejoin starts a rebalance...
        await trio.sleep(0.1)
        n.start_soon(join, broker, follower)  # ...which the follower joins
    assert state(broker) == GroupState.COMPLETING_REBALANCE
    mid = await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen + 1, follower))
    assert commit_errors(mid) == {("t1", 0): E.REBALANCE_IN_PROGRESS}


async def test_standalone_commits_and_fetch_versions(broker: StubBroker, autojump_clock: Any) -> None:
    # Unknown group with a generation: the commit comes from an old generation.
    bad = await call(broker, ApiKey.OFFSET_COMMIT, 3, commit_fields(3, 4, "m-1", group="simple"))
    assert commit_errors(bad) == {("t1", 0): E.ILLEGAL_GENERATION}
    assert state(broker, "simple") == GroupState.DEAD
    # v0 (no generation/member) and v1 with an explicit commit timestamp create a simple group.
    r = await call(broker, ApiKey.OFFSET_COMMIT, 0, commit_fields(0, group="simple", offsets={("t1", 0): 1, ("t2", 0): 2}))
    assert set(commit_errors(r).values()) == {0}
    r = await call(broker, ApiKey.OFFSET_COMMIT, 1, commit_fields(1, group="simple", offsets={("t1", 1): 7}, ts=1234))
    assert set(commit_errors(r).values()) == {0}
    assert broker.group_coordinator.get_group("simple").offsets[("t1", 1)].commit_timestamp == 1234
    r = await call(broker, ApiKey.OFFSET_COMMIT, 4, commit_fields(4, group="simple", offsets={("t2", 1): 9},
                                                                   retention_time_ms=60000))
    om = broker.group_coordinator.get_group("simple").offsets[("t2", 1)]
    assert om.expire_timestamp == om.commit_timestamp + 60000
    assert state(broker, "simple") == GroupState.EMPTY
    everything = {("t1", 0): (1, "m", 0), ("t1", 1): (7, "m", 0), ("t2", 0): (2, "m", 0), ("t2", 1): (9, "m", 0)}
    # v1: explicit partitions; v2+: null topics means all; v8: groups form.
    r1 = await fetch(broker, 1, "simple", {"t1": [0, 5]})
    assert fetched(r1.topics) == {("t1", 0): (1, "m", 0), ("t1", 5): (-1, "", 0)}
    r2 = await fetch(broker, 2, "simple")
    assert r2.error_code == 0 and fetched(r2.topics) == everything
    r7 = await fetch(broker, 7, "simple")
    assert fetched(r7.topics) == everything
    r8 = await call(broker, ApiKey.OFFSET_FETCH, 8, {"groups": [
        {"group_id": "simple", "topics": None},
        {"group_id": "simple", "topics": [{"name": "t2", "partition_indexes": [1]}]},
        {"group_id": "unknown", "topics": [{"name": "t1", "partition_indexes": [0]}]},
        {"group_id": "unknown", "topics": None}], "require_stable": True})
    assert [g.group_id for g in r8.groups] == ["simple", "simple", "unknown", "unknown"]
    assert fetched(r8.groups[0].topics) == everything
    assert fetched(r8.groups[1].topics) == {("t2", 1): (9, "m", 0)}
    assert fetched(r8.groups[2].topics) == {("t1", 0): (-1, "", 0)}
    assert r8.groups[3].topics == [] and r8.groups[3].error_code == 0


async def test_commit_to_unknown_topic_with_metadata(autojump_clock: Any) -> None:
    cfg = make_config()
    b = StubBroker(make_coordinator(cfg), cfg, {"t1": 2})
    r = await call(b, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, offsets={("t1", 0): 1, ("t1", 2): 1, ("zz", 0): 1}))
    assert commit_errors(r) == {("t1", 0): 0, ("t1", 2): E.UNKNOWN_TOPIC_OR_PARTITION,
                                ("zz", 0): E.UNKNOWN_TOPIC_OR_PARTITION}


async def test_offsets_survive_restart_and_torn_last_line(tmp_path: Path, autojump_clock: Any) -> None:
    cfg = make_config(data_dir=tmp_path)
    b = StubBroker(make_coordinator(cfg, tmp_path), cfg)
    r = await call(b, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, group="g1", offsets={("t1", 0): 42, ("t1", 1): 43}))
    assert set(commit_errors(r).values()) == {0}
    await call(b, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, group="g1", offsets={("t1", 0): 44}))
    await call(b, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, group="gone", offsets={("t1", 0): 1}))
    assert (await call(b, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["gone"]})).results[0].error_code == 0
    b.group_coordinator.close()
    segment = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    whole = segment.stat().st_size
    with open(segment, "ab") as f:
        f.write(segment.read_bytes()[:30])  # crash mid-write: half a batch header

    b2 = StubBroker(make_coordinator(cfg, tmp_path), cfg)
    r = await fetch(b2, 6, "g1")
    assert fetched(r.topics) == {("t1", 0): (44, "m", 0), ("t1", 1): (43, "m", 0)}
    assert b2.group_coordinator.get_group("gone") is None
    # The torn tail was cut: new commits append cleanly and survive another restart.
    assert segment.stat().st_size == whole
    await call(b2, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, group="g1", offsets={("t1", 1): 50}))
    b2.group_coordinator.close()
    b3 = StubBroker(make_coordinator(cfg, tmp_path), cfg)
    r = await fetch(b3, 8, "g1")
    assert fetched(r.groups[0].topics) == {("t1", 0): (44, "m", 0), ("t1", 1): (50, "m", 0)}
    b3.group_coordinator.close()


async def test_a_classic_groups_members_and_assignments_survive_a_restart(tmp_path: Path, nursery: trio.Nursery,
                                                                          autojump_clock: Any) -> None:
    """Kafka's classic groups keep their members in the GroupMetadata record written when the leader's assignment
    comes in: after a restart the group is Stable at its generation, its members carry on where they were (their
    assignments included), and one that does not heartbeat within its session leaves through a rebalance."""
    cfg = make_config(data_dir=tmp_path)
    coord = make_coordinator(cfg, tmp_path)
    nursery.start_soon(coord.run)
    b = StubBroker(coord, cfg)
    leader, follower, gen = await two_member_group(b)
    coord.close()
    coord2 = make_coordinator(cfg, tmp_path)
    nursery.start_soon(coord2.run)
    b2 = StubBroker(coord2, cfg)
    g = coord2.get_group("g")
    assert g is not None and g.state == GroupState.STABLE and g.generation_id == gen and g.protocol_type == "consumer"
    assert g.leader_id == leader and {m: g.get(m).assignment for m in g.members} == {leader: b"A", follower: b"B"}
    assert await heartbeat(b2, leader, gen) == E.NONE  # no rejoin: the member carries on
    r = await sync(b2, follower, gen)
    assert r.error_code == E.NONE and r.assignment == b"B"  # its assignment, as the record held it
    # The follower falls silent: once its session expires the group rebalances without it.
    for _ in range(12):
        await trio.sleep(1)
        assert await heartbeat(b2, leader, gen) in (E.NONE, E.REBALANCE_IN_PROGRESS)
    assert follower not in g.members and g.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE)
    coord2.close()


async def test_offset_retention_for_empty_groups(broker: StubBroker, autojump_clock: Any) -> None:
    coord = broker.group_coordinator
    await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, group="simple"))
    leader, follower, gen = await two_member_group(broker, "live")
    await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen, leader, group="live", offsets={("t1", 0): 3, ("t9", 0): 3}))
    week = 7 * 24 * 3600  # offsets.retention.minutes default
    await trio.sleep(week - 700)
    assert coord.get_group("simple") is not None and coord.get_group("live") is not None
    await trio.sleep(1400)  # the timer loop's retention check runs every 600 s
    # ...the simple group's offsets expired and the empty group is gone.  The live group lost
    # its members to session timeouts long ago; it went Empty then, so its offsets expired too.
    assert coord.get_group("simple") is None
    assert coord.get_group("live") is None


async def test_stable_group_keeps_subscribed_offsets(autojump_clock: Any) -> None:
    cfg = make_config(offsets_retention_minutes=1)
    coord = make_coordinator(cfg)
    b = StubBroker(coord, cfg)
    async with trio.open_nursery() as n:
        n.start_soon(coord.run)
        leader, follower, gen = await two_member_group(b)
        await call(b, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, gen, leader, offsets={("t1", 0): 3, ("t9", 0): 3}))
        for _ in range(7):
            await trio.sleep(9)
            assert await heartbeat(b, leader, gen) == 0
            assert await heartbeat(b, follower, gen) == 0
        coord.cleanup_group_metadata()
        # Stable consumer group: offsets of subscribed topics stay, others expire.
        assert set(coord.get_group("g").offsets) == {("t1", 0)}
        coord.close()


# ---------------------------------------------------------- List / Describe / Delete


async def test_list_describe_delete_groups(broker: StubBroker, autojump_clock: Any) -> None:
    leader, follower, gen = await two_member_group(broker)
    await call(broker, ApiKey.OFFSET_COMMIT, 8, commit_fields(8, group="simple"))
    lg = await call(broker, ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    assert {(g.group_id, g.protocol_type, g.group_state) for g in lg.groups} == {
        ("g", "consumer", "Stable"), ("simple", "", "Empty")}
    lg = await call(broker, ApiKey.LIST_GROUPS, 4, {"states_filter": ["Empty"]})
    assert [g.group_id for g in lg.groups] == ["simple"]
    lg0 = await call(broker, ApiKey.LIST_GROUPS, 0, {})
    assert {g.group_id for g in lg0.groups} == {"g", "simple"}

    d = await call(broker, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g", "nope"], "include_authorized_operations": True})
    g, nope = d.groups
    assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (0, "Stable", "consumer", "range")
    members = {m.member_id: m for m in g.members}
    assert members[leader].member_assignment == b"A" and members[follower].member_assignment == b"B"
    assert members[leader].member_metadata == SUB
    assert {members[leader].client_id, members[follower].client_id} == {"c1", "c2"}
    assert members[leader].client_host == "/127.0.0.1"
    assert g.authorized_operations > 0
    assert (nope.error_code, nope.group_state, nope.members) == (0, "Dead", [])
    d0 = await call(broker, ApiKey.DESCRIBE_GROUPS, 0, {"groups": ["simple"]})
    assert (d0.groups[0].group_state, d0.groups[0].protocol_type) == ("Empty", "")

    r = await call(broker, ApiKey.DELETE_GROUPS, 0, {"groups_names": ["g", "simple", "nope"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("g", E.NON_EMPTY_GROUP), ("simple", 0), ("nope", E.GROUP_ID_NOT_FOUND)]
    assert (await fetch(broker, 7, "simple")).topics == []
    # Once everyone leaves, the group can be deleted.
    await call(broker, ApiKey.LEAVE_GROUP, 3, {"group_id": "g", "members": [
        {"member_id": leader}, {"member_id": follower}]})
    assert state(broker) == GroupState.EMPTY
    r = await call(broker, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert r.results[0].error_code == 0
    assert (await call(broker, ApiKey.LIST_GROUPS, 3, {})).groups == []


async def test_close_answers_pending_joins(nursery: trio.Nursery, autojump_clock: Any) -> None:
    cfg = make_config()
    coord = make_coordinator(cfg)
    nursery.start_soon(coord.run)
    b = StubBroker(coord, cfg)
    out: dict[str, Any] = {}

    async def joiner() -> None:
        out["r"] = await join(b, version=3)

    async with trio.open_nursery() as n:
        n.start_soon(joiner)
        await trio.sleep(1)  # still inside the initial rebalance delay
        coord.close()
    assert out["r"].error_code == E.NOT_COORDINATOR
    assert (await join(b, version=3)).error_code == E.COORDINATOR_NOT_AVAILABLE
