"""Classic-protocol members in KIP-848 consumer groups (Kafka 4's mixed groups) and the conversions between
group types: the online upgrade of a classic group by a ConsumerGroupHeartbeat, the downgrade back when the
last KIP-848 member leaves, classic members joining a consumer group (assignment by the broker's assignor),
their heartbeats, leaving, session/join/sync timeouts, and a classic JoinGroup into an empty consumer
group."""

from __future__ import annotations

from typing import Any

import trio

from group_env import ClassicMember, GroupEnv, K, KipMember, assigned, subscription
from minikafka.broker.groups import GroupState
from minikafka.broker.groups.consumer.model import ConsumerGroupState, MemberState
from minikafka.common import OffsetAndMetadata, TopicPartition
from minikafka.protocol.errors import ErrorCode as E

ALL_T = {("t", p) for p in range(4)}


def assert_exclusive(*members: Any) -> None:
    seen: dict[tuple[str, int], Any] = {}
    for m in members:
        for tp in m.partitions():
            assert tp not in seen, f"{tp} owned twice"
            seen[tp] = m


async def settle(env: GroupEnv, kips: list[KipMember], classics: list[ClassicMember], rounds: int = 10) -> None:
    """Every member heartbeats; a classic member told REBALANCE_IN_PROGRESS rejoins and syncs, as clients
    do; until the consumer group is Stable.  No partition is ever owned twice."""
    for _ in range(rounds):
        for k in kips:
            assert (await k.heartbeat()).error_code == E.NONE
            assert_exclusive(*kips, *classics)
        for c in classics:
            err = await c.heartbeat()
            if err == E.REBALANCE_IN_PROGRESS:
                assert (await c.join()).error_code == E.NONE
                r = await c.sync()
                assert r.error_code in (E.NONE, E.REBALANCE_IN_PROGRESS)
            else:
                assert err == E.NONE
            assert_exclusive(*kips, *classics)
        if env.consumer().compute_state() == ConsumerGroupState.STABLE and \
                [await c.heartbeat() for c in classics] == [E.NONE] * len(classics):
            return
    raise AssertionError(f"the group did not settle: {env.consumer()}")


async def classic_group(env: GroupEnv, n: int) -> list[ClassicMember]:
    """A Stable classic group of ``n`` members; the leader splits the partitions of ``t`` round robin.
    (``env`` needs a group.initial.rebalance.delay.ms, so that all join the first generation.)"""
    assert env.config.group_initial_rebalance_delay_ms > 0
    members = [ClassicMember(env, ["t"], client_id=f"classic-{i}") for i in range(n)]
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(m.join)
    assert len({m.generation for m in members}) == 1
    leader = next(m for m in members if m.leader == m.member_id)
    assert len(leader.members) == n
    ids = [x.member_id for x in leader.members]
    from minikafka.client.consumer.protocol import Assignment, encode_assignment
    plan = {mid: encode_assignment(Assignment([TopicPartition("t", p) for p in range(4) if p % n == i]))
            for i, mid in enumerate(ids)}
    async with trio.open_nursery() as nursery:
        for m in members:
            nursery.start_soon(m.sync, plan if m is leader else None)
    assert env.group().state == GroupState.STABLE
    assert all(m.owned for m in members)
    return members


# ------------------------------------------------------------------ online upgrade and downgrade


async def test_online_upgrade_then_downgrade(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv(group_initial_rebalance_delay_ms=3000)
    nursery.start_soon(env.coordinator.run)
    classics = await classic_group(env, 2)
    generation = classics[0].generation
    assert set().union(*(c.partitions() for c in classics)) == ALL_T
    await env.commit(8, classics[0].member_id, generation, {("t", 0): 5})

    # A KIP-848 consumer joins the non-empty classic group: the group is upgraded.
    kip = KipMember(env, ["t"])
    r = await kip.heartbeat()
    assert r.error_code == E.NONE
    g = env.group()
    assert g.group_type == "consumer" and not g.members
    cg = env.consumer()
    assert cg.group_epoch == generation + 1
    for c in classics:
        member = cg.members[c.member_id]
        assert member.uses_classic_protocol and member.previous_member_epoch == generation
    # Everything the classic members own is still theirs until they give it up.
    assert kip.partitions() == set()
    await settle(env, [kip], classics)
    owned = [kip.partitions(), *(c.partitions() for c in classics)]
    assert set().union(*owned) == ALL_T and all(owned)
    # The committed offset stayed; classic members commit with their member epoch as the generation.
    c0 = classics[0]
    assert await env.fetch(8, topics={"t": [0]}) == (0, {("t", 0): 5})
    assert await env.commit(8, c0.member_id, c0.generation, {("t", 1): 6}) == {("t", 1): 0}
    assert await env.commit(8, c0.member_id, c0.generation - 1, {("t", 1): 6}) == {("t", 1): E.ILLEGAL_GENERATION}
    # ConsumerGroupDescribe shows them as classic members (type 0).
    d = await env.call(K.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"], "include_authorized_operations": False})
    assert sorted(m.member_type for m in d.groups[0].members) == [0, 0, 1]

    # The KIP-848 member leaves: only classic members remain, the group goes back to classic and rebalances.
    assert (await kip.leave()).error_code == E.NONE
    g = env.group()
    assert g.group_type == "classic" and g.consumer is None
    assert g.state == GroupState.PREPARING_REBALANCE and set(g.members) == {c.member_id for c in classics}
    assert [await c.heartbeat() for c in classics] == [E.REBALANCE_IN_PROGRESS] * 2
    async with trio.open_nursery() as n:
        for c in classics:
            n.start_soon(c.join)
    leader = next(c for c in classics if c.leader == c.member_id)
    assert {m.member_id for m in leader.members} == {c.member_id for c in classics}
    plan = {c.member_id: b"" for c in classics}
    async with trio.open_nursery() as n:
        for c in classics:
            n.start_soon(c.sync, plan if c is leader else None)
    assert env.group().state == GroupState.STABLE
    r = await env.call(K.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(x.group_type, x.group_state) for x in r.groups] == [("classic", "Stable")]
    assert await env.fetch(8, topics={"t": [0, 1]}) == (0, {("t", 0): 5, ("t", 1): 6})


async def test_upgrade_refused_by_policy_or_protocol_type(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv(group_consumer_migration_policy="downgrade", group_initial_rebalance_delay_ms=3000)
    nursery.start_soon(env.coordinator.run)
    await classic_group(env, 1)
    r = await KipMember(env, ["t"]).heartbeat()
    assert r.error_code == E.GROUP_ID_NOT_FOUND and env.group().group_type == "classic"

    env2 = GroupEnv()
    nursery.start_soon(env2.coordinator.run)
    other = ClassicMember(env2, ["t"])
    fields = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
              "group_instance_id": None, "protocol_type": "connect",
              "protocols": [{"name": "v1", "metadata": b"x"}]}
    r = await env2.call(K.JOIN_GROUP, 3, fields)
    assert r.error_code == E.NONE
    assert other is not None
    r = await KipMember(env2, ["t"]).heartbeat()
    assert r.error_code == E.GROUP_ID_NOT_FOUND and env2.group().group_type == "classic"


async def test_downgrade_disabled_keeps_the_consumer_group(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv(group_consumer_migration_policy="upgrade", group_initial_rebalance_delay_ms=3000)
    nursery.start_soon(env.coordinator.run)
    classics = await classic_group(env, 1)
    kip = KipMember(env, ["t"])
    assert (await kip.heartbeat()).error_code == E.NONE
    await settle(env, [kip], classics)
    await kip.leave()
    assert env.group().group_type == "consumer"
    await settle(env, [], classics)
    assert classics[0].partitions() == ALL_T


# ------------------------------------------------------------------ classic members joining a consumer group


async def test_classic_member_joins_a_consumer_group(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    kip = KipMember(env, ["t"])
    await kip.heartbeat()
    assert kip.partitions() == ALL_T
    classic = ClassicMember(env, ["t"])
    # JoinGroup v7 without a member id: MEMBER_ID_REQUIRED, then answered at once (no rebalance barrier).
    r = await classic.join(version=7)
    assert r.error_code == E.NONE
    assert (r.protocol_type, r.protocol_name, r.leader, r.members) == ("consumer", "range", "", [])
    cg = env.consumer()
    member = cg.members[classic.member_id]
    assert member.uses_classic_protocol and r.generation_id == member.member_epoch
    # The KIP-848 member still owns everything: the classic member waits for its partitions.
    assert member.state == MemberState.UNRELEASED_PARTITIONS
    r = await classic.sync()
    assert r.error_code == E.NONE and assigned(r.assignment) == set()
    await settle(env, [kip], [classic])
    assert kip.partitions() | classic.partitions() == ALL_T
    assert len(kip.partitions()) == len(classic.partitions()) == 2
    # Heartbeats keep it; a wrong generation or an unknown member are refused.
    assert await classic.heartbeat() == E.NONE
    classic.generation -= 1
    assert await classic.heartbeat() == E.ILLEGAL_GENERATION
    classic.generation += 1
    r = await env.call(K.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": kip.member_id,
                                        "group_instance_id": None})
    assert r.error_code == E.UNKNOWN_MEMBER_ID  # a KIP-848 member cannot use the classic heartbeat
    r = await env.call(K.SYNC_GROUP, 5, {"group_id": "g", "generation_id": classic.generation,
                                         "member_id": classic.member_id, "group_instance_id": None,
                                         "protocol_type": "consumer", "protocol_name": "roundrobin",
                                         "assignments": []})
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # A member speaking another protocol type cannot join.
    r = await env.call(K.JOIN_GROUP, 5, {"group_id": "g", "session_timeout_ms": 10000,
                                         "rebalance_timeout_ms": 10000, "member_id": "", "group_instance_id": None,
                                         "protocol_type": "connect", "protocols": [{"name": "v1", "metadata": b""}]})
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # It leaves with LeaveGroup: the KIP-848 member gets everything back.
    r = await classic.leave()
    assert r.error_code == E.NONE and [m.error_code for m in r.members] == [0]
    assert classic.member_id not in env.consumer().members
    for _ in range(3):
        await kip.heartbeat()
    assert kip.partitions() == ALL_T
    r = await env.call(K.LEAVE_GROUP, 5, {"group_id": "g", "members": [
        {"member_id": "nobody", "group_instance_id": None, "reason": None}]})
    assert [m.error_code for m in r.members] == [E.UNKNOWN_MEMBER_ID]


async def test_classic_member_subscription_change_triggers_a_rebalance(nursery: trio.Nursery,
                                                                       autojump_clock: Any) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    kip = KipMember(env, ["t", "u"])
    await kip.heartbeat()
    classic = ClassicMember(env, ["t"])
    await classic.join()
    await classic.sync()
    await settle(env, [kip], [classic])
    epoch = env.consumer().group_epoch
    classic.topics = ["t", "u"]
    await classic.join()
    assert env.consumer().group_epoch == epoch + 1
    await classic.sync()
    await settle(env, [kip], [classic])
    assert kip.partitions() | classic.partitions() == ALL_T | {("u", 0), ("u", 1)}
    assert len(kip.partitions()) == len(classic.partitions()) == 3


async def test_classic_member_timeouts(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    kip = KipMember(env, ["t"])
    await kip.heartbeat()
    # Joins but never sends SyncGroup: fenced after its rebalance timeout.
    silent = ClassicMember(env, ["t"], rebalance_ms=3000, session_ms=30000)
    await silent.join()
    assert silent.member_id in env.consumer().members
    await trio.sleep(3.1)
    assert silent.member_id not in env.consumer().members
    # Joins and syncs but stops heartbeating: fenced after its session timeout.
    quiet = ClassicMember(env, ["t"], rebalance_ms=60000, session_ms=6000)
    await quiet.join()
    await quiet.sync()
    for _ in range(3):
        await trio.sleep(4)
        await kip.heartbeat()
        assert await quiet.heartbeat() in (E.NONE, E.REBALANCE_IN_PROGRESS)
    await trio.sleep(6.1)
    assert quiet.member_id not in env.consumer().members
    # Told to rejoin (REBALANCE_IN_PROGRESS) but never does: fenced after its rebalance timeout.
    lazy = ClassicMember(env, ["t"], rebalance_ms=5000, session_ms=60000)
    await lazy.join()
    await lazy.sync()
    await kip.heartbeat()
    KipMember(env, ["t"])  # another member joining bumps the group epoch
    assert (await KipMember(env, ["t"]).heartbeat()).error_code == E.NONE
    assert await lazy.heartbeat() == E.REBALANCE_IN_PROGRESS
    await trio.sleep(5.1)
    assert lazy.member_id not in env.consumer().members


async def test_classic_join_into_an_empty_consumer_group_makes_it_classic(nursery: trio.Nursery,
                                                                         autojump_clock: Any) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    kip = KipMember(env, ["t"])
    await kip.heartbeat()
    assert await env.commit(9, kip.member_id, kip.epoch, {("t", 3): 33}) == {("t", 3): 0}
    await kip.leave()
    assert env.group().group_type == "consumer"
    classic = ClassicMember(env, ["t"])
    r = await classic.join()
    assert r.error_code == E.NONE and r.leader == classic.member_id
    assert env.group().group_type == "classic"
    assert (await classic.sync({classic.member_id: b""})).error_code == E.NONE
    assert env.group().state == GroupState.STABLE
    assert await env.fetch(8, topics={"t": [3]}) == (0, {("t", 3): 33})


async def test_mixed_group_malformed_subscription_is_refused(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    await KipMember(env, ["t"]).heartbeat()
    fields = {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "m-1",
              "group_instance_id": None, "protocol_type": "consumer",
              "protocols": [{"name": "range", "metadata": b"\x00\x03\xff"}]}
    r = await env.call(K.JOIN_GROUP, 5, fields)
    assert r.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert "m-1" not in env.consumer().members
    # A well-formed one with the same member id joins.
    fields["protocols"] = [{"name": "range", "metadata": subscription("t", version=0)}]
    r = await env.call(K.JOIN_GROUP, 5, fields)
    assert r.error_code == E.NONE and "m-1" in env.consumer().members
    # ...and its SyncGroup answer is in its subscription's version (0).
    r = await env.call(K.SYNC_GROUP, 5, {"group_id": "g", "generation_id": r.generation_id, "member_id": "m-1",
                                         "group_instance_id": None, "protocol_type": None, "protocol_name": None,
                                         "assignments": []})
    assert r.error_code == E.NONE and bytes(r.assignment)[:2] == b"\x00\x00"


async def test_consumer_group_offsets_kept_through_upgrade_of_an_empty_classic_group() -> None:
    env = GroupEnv()
    env.coordinator.commit_offsets("g", "", None, -1, {TopicPartition("t", 1): OffsetAndMetadata(8)})
    kip = KipMember(env, ["t"])
    assert (await kip.heartbeat()).error_code == E.NONE
    assert env.group().group_type == "consumer"
    assert await env.fetch(9, topics={"t": [1]}, member_id=kip.member_id, epoch=kip.epoch) == (0, {("t", 1): 8})


async def test_static_classic_member_replacing_the_last_kip848_member_downgrades(nursery: trio.Nursery,
                                                                                autojump_clock: Any) -> None:
    """Kafka's ``validateOnlineDowngradeWithReplacedMember``: a classic JoinGroup with the instance id of
    the group's only KIP-848 member takes its place and, every member now being classic, the group turns
    classic (keeping the replaced member's assignment)."""
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    kip = KipMember(env, ["t"], instance_id="inst-1")
    await kip.heartbeat()
    classic = ClassicMember(env, ["t"])
    await classic.join()
    await classic.sync()
    await settle(env, [kip], [classic])
    kept = kip.partitions()
    r = await env.call(K.JOIN_GROUP, 7, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": "inst-1", "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": subscription("t")}]})
    assert r.error_code == E.NONE and r.member_id != kip.member_id
    g = env.group()
    assert g.group_type == "classic" and g.state == GroupState.STABLE
    assert set(g.members) == {r.member_id, classic.member_id} and g.static_members == {"inst-1": r.member_id}
    assert assigned(g.members[r.member_id].assignment) == kept
    # The replaced KIP-848 member is fenced.
    assert (await kip.heartbeat()).error_code == E.GROUP_ID_NOT_FOUND


async def test_delete_groups_reaches_share_groups() -> None:
    deleted: list[str] = []

    def delete_share_group(group_id: str) -> int:
        deleted.append(group_id)
        return E.NONE if group_id == "sg" else E.GROUP_ID_NOT_FOUND

    env = GroupEnv()
    from minikafka.broker.handlers.groups import DeleteGroupsHandler
    env.handlers[K.DELETE_GROUPS] = DeleteGroupsHandler(env.coordinator,
                                                        delete_share_group=delete_share_group).handle
    await KipMember(env, ["t"]).heartbeat()
    r = await env.call(K.DELETE_GROUPS, 2, {"groups_names": ["g", "sg", "none"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [
        ("g", E.NON_EMPTY_GROUP), ("sg", 0), ("none", E.GROUP_ID_NOT_FOUND)]
    assert deleted == ["sg", "none"]
