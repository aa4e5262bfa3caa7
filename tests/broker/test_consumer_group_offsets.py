"""KIP-848 consumer groups through the classic group APIs: OffsetCommit/OffsetFetch/TxnOffsetCommit with
member epochs, ListGroups with types, DescribeGroups v6, DeleteGroups, NOT_COORDINATOR for groups another
broker coordinates, and the group type and committed offsets across a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from group_env import GroupEnv, K, KipMember
from minikafka.broker.groups.offset_log import LEGACY_DIR_NAME, LEGACY_FILE_NAME
from minikafka.common import OffsetAndMetadata, TopicPartition
from minikafka.protocol.errors import ErrorCode as E


async def consumer_group(env: GroupEnv, group: str = "g") -> KipMember:
    """A consumer group with one KIP-848 member at epoch 1 owning every partition of ``t``."""
    m = KipMember(env, ["t"], group)
    r = await m.heartbeat()
    assert (r.error_code, m.epoch) == (E.NONE, 1)
    return m


# ------------------------------------------------------------------ OffsetCommit


async def test_commit_validates_member_and_epoch() -> None:
    env = GroupEnv()
    m = await consumer_group(env)
    assert await env.commit(9, m.member_id, 1, {("t", 0): 10, ("t", 1): 11}) == {("t", 0): 0, ("t", 1): 0}
    # A stale or future epoch of a KIP-848 member: STALE_MEMBER_EPOCH.
    assert await env.commit(9, m.member_id, 0, {("t", 0): 12}) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert await env.commit(9, m.member_id, 2, {("t", 0): 12}) == {("t", 0): E.STALE_MEMBER_EPOCH}
    assert await env.commit(9, "stranger", 1, {("t", 0): 12}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # A KIP-848 member must use OffsetCommit v9+.
    assert await env.commit(8, m.member_id, 1, {("t", 0): 12}) == {("t", 0): E.UNSUPPORTED_VERSION}
    # An admin (simple) commit to a group with members is refused...
    assert await env.commit(9, "", -1, {("t", 0): 12}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # ...and accepted once it is empty.
    assert (await m.leave()).error_code == E.NONE
    assert await env.commit(9, "", -1, {("t", 0): 13}) == {("t", 0): 0}
    assert await env.commit(2, "", -1, {("t", 3): 3}) == {("t", 3): 0}
    assert (await env.fetch(8, topics={"t": [0, 1, 3]}))[1] == {("t", 0): 13, ("t", 1): 11, ("t", 3): 3}
    # Unknown partitions still answer UNKNOWN_TOPIC_OR_PARTITION.
    assert await env.commit(9, "", -1, {("t", 99): 1}) == {("t", 99): E.UNKNOWN_TOPIC_OR_PARTITION}


async def test_commit_with_a_generation_to_a_group_that_does_not_exist() -> None:
    env = GroupEnv()
    assert await env.commit(9, "m", 3, {("t", 0): 1}, group="none") == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert await env.commit(8, "m", 3, {("t", 0): 1}, group="none") == {("t", 0): E.ILLEGAL_GENERATION}
    assert "none" not in env.coordinator.groups


async def test_commit_by_topic_id_v10() -> None:
    env = GroupEnv()
    m = await consumer_group(env)
    assert await env.commit(10, m.member_id, 1, {("t", 2): 7, ("u", 0): 4}) == {("t", 2): 0, ("u", 0): 0}
    # An unknown topic id.
    r = await env.call(K.OFFSET_COMMIT, 10, {
        "group_id": "g", "generation_id_or_member_epoch": 1, "member_id": m.member_id,
        "topics": [{"topic_id": __import__("uuid").uuid4(), "partitions": [
            {"partition_index": 0, "committed_offset": 1, "committed_metadata": None}]}]})
    assert [p.error_code for t in r.topics for p in t.partitions] == [E.UNKNOWN_TOPIC_ID]
    # Fetched back by id (v10) and by name (v9), every partition or some.
    assert await env.fetch(10, member_id=m.member_id, epoch=1) == (0, {("t", 2): 7, ("u", 0): 4})
    assert await env.fetch(10, topics={"t": [2, 3]}) == (0, {("t", 2): 7, ("t", 3): -1})
    assert await env.fetch(9, topics={"u": [0]}) == (0, {("u", 0): 4})


# ------------------------------------------------------------------ OffsetFetch and TxnOffsetCommit


async def test_fetch_validates_member_epoch_when_given() -> None:
    env = GroupEnv()
    m = await consumer_group(env)
    await env.commit(9, m.member_id, 1, {("t", 0): 10})
    assert await env.fetch(9, member_id=m.member_id, epoch=1) == (0, {("t", 0): 10})
    assert (await env.fetch(9, member_id=m.member_id, epoch=0))[0] == E.STALE_MEMBER_EPOCH
    assert (await env.fetch(9, member_id="stranger", epoch=1))[0] == E.UNKNOWN_MEMBER_ID
    # Without member id and epoch (admin clients, classic consumers) and before v9: no check.
    assert await env.fetch(9, topics={"t": [0]}) == (0, {("t", 0): 10})
    assert await env.fetch(8, topics={"t": [0]}) == (0, {("t", 0): 10})
    assert await env.fetch(3, topics={"t": [0]}) == (0, {("t", 0): 10})
    # A group that does not exist: no offsets, no error.
    assert await env.fetch(9, group="none", topics={"t": [0]}, member_id="x", epoch=3) == (0, {("t", 0): -1})


async def test_txn_offset_commit_validates_the_member_epoch() -> None:
    env = GroupEnv()
    m = await consumer_group(env)
    c = env.coordinator
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(5, -1, "", 0, None)}
    assert c.txn_commit_offsets("g", 1000, m.member_id, None, 0, offsets) == {("t", 0): E.ILLEGAL_GENERATION}
    assert c.txn_commit_offsets("g", 1000, "stranger", None, 1, offsets) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert c.txn_commit_offsets("g", 1000, m.member_id, None, 1, offsets) == {("t", 0): E.NONE}
    assert c.pending_txn_partitions("g") == {("t", 0)}
    c.complete_txn_partition(c.partition_for("g"), 1000, commit=True)
    assert await env.fetch(8, topics={"t": [0]}) == (0, {("t", 0): 5})


# ------------------------------------------------------------------ ListGroups, DescribeGroups, DeleteGroups


async def classic_group(env: GroupEnv, group: str = "classic") -> None:
    """A classic group (one member, Stable) through JoinGroup/SyncGroup."""
    from group_env import ClassicMember
    c = ClassicMember(env, ["t"], group)
    r = await c.join()
    assert r.error_code == E.NONE and r.leader == c.member_id
    assert (await c.sync({c.member_id: b""})).error_code == E.NONE


async def test_list_groups_with_types_states_and_share_groups(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv(share_groups=lambda: [("sg", "Stable"), ("sg-empty", "Empty")])
    nursery.start_soon(env.coordinator.run)
    await consumer_group(env, "cg")
    await classic_group(env)
    assert await env.commit(2, "", -1, {("t", 0): 1}, group="simple") == {("t", 0): 0}

    async def listed(version: int, **fields: Any) -> set[tuple]:
        r = await env.call(K.LIST_GROUPS, version, fields)
        assert r.error_code == 0
        return {(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in r.groups}

    everything = {("cg", "consumer", "Stable", "consumer"), ("classic", "consumer", "Stable", "classic"),
                  ("simple", "", "Empty", "classic"), ("sg", "share", "Stable", "share"),
                  ("sg-empty", "share", "Empty", "share")}
    assert await listed(5, states_filter=[], types_filter=[]) == everything
    assert await listed(5, states_filter=[], types_filter=["Consumer"]) == {("cg", "consumer", "Stable", "consumer")}
    assert await listed(5, states_filter=[], types_filter=["classic", "share"]) == everything - {
        ("cg", "consumer", "Stable", "consumer")}
    assert await listed(5, states_filter=[" EMPTY"], types_filter=[]) == {
        ("simple", "", "Empty", "classic"), ("sg-empty", "share", "Empty", "share")}
    assert await listed(5, states_filter=[], types_filter=["streams"]) == set()
    # v4 has no types; v0 no states either.
    assert {g[0] for g in await listed(4, states_filter=["Stable"])} == {"cg", "classic", "sg"}
    assert {g[0] for g in await listed(0)} == {"cg", "classic", "simple", "sg", "sg-empty"}
    # The consumer group's state follows its members.
    cg = env.consumer("cg")
    assert cg.state.value == "Stable"


async def test_list_groups_only_the_coordinated_ones() -> None:
    env = GroupEnv(owns_group=lambda g: g.startswith("mine"), share_groups=lambda: [("mine-s", "Empty"),
                                                                                      ("other-s", "Empty")])
    for gid in ("mine-1", "other-1"):
        env.coordinator.commit_offsets(gid, "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(1)})
    r = await env.call(K.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert {g.group_id for g in r.groups} == {"mine-1", "mine-s"}


async def test_describe_groups_reports_consumer_groups_as_not_classic(nursery: trio.Nursery,
                                                                      autojump_clock: Any) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    await consumer_group(env, "cg")
    await classic_group(env)
    d6 = await env.call(K.DESCRIBE_GROUPS, 6, {"groups": ["cg", "classic", "none"],
                                               "include_authorized_operations": False})
    cg, classic, none = d6.groups
    assert (cg.error_code, cg.error_message, cg.group_state, cg.members) == (
        E.GROUP_ID_NOT_FOUND, "Group cg is not a classic group.", "Dead", [])
    assert (classic.error_code, classic.group_state, classic.protocol_data, len(classic.members)) == (
        0, "Stable", "range", 1)
    assert (none.error_code, none.error_message, none.group_state) == (
        E.GROUP_ID_NOT_FOUND, "Group none not found.", "Dead")
    # Before v6 both are just Dead groups.
    d5 = await env.call(K.DESCRIBE_GROUPS, 5, {"groups": ["cg", "none"], "include_authorized_operations": False})
    assert [(g.error_code, g.group_state) for g in d5.groups] == [(0, "Dead"), (0, "Dead")]


async def test_delete_consumer_groups() -> None:
    env = GroupEnv()
    m = await consumer_group(env, "cg")
    await env.commit(9, m.member_id, 1, {("t", 0): 10}, group="cg")
    r = await env.call(K.DELETE_GROUPS, 2, {"groups_names": ["cg", "none"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [("cg", E.NON_EMPTY_GROUP), ("none", E.GROUP_ID_NOT_FOUND)]
    await m.leave()
    r = await env.call(K.DELETE_GROUPS, 2, {"groups_names": ["cg"]})
    assert r.results[0].error_code == 0
    assert "cg" not in env.coordinator.groups
    assert await env.fetch(8, group="cg", topics={"t": [0]}) == (0, {("t", 0): -1})
    # Deleting it again: it is gone.
    r = await env.call(K.DELETE_GROUPS, 2, {"groups_names": ["cg"]})
    assert r.results[0].error_code == E.GROUP_ID_NOT_FOUND


async def test_groups_another_broker_coordinates_are_not_coordinator() -> None:
    env = GroupEnv(owns_group=lambda g: g == "mine")
    m = await consumer_group(env, "mine")
    assert set((await env.commit(9, m.member_id, 1, {("t", 0): 1}, group="elsewhere")).values()) == {
        E.NOT_COORDINATOR}
    r = await env.call(K.OFFSET_FETCH, 9, {"groups": [{"group_id": "mine", "topics": None},
                                                      {"group_id": "elsewhere", "topics": None}]})
    assert [(g.group_id, g.error_code) for g in r.groups] == [("mine", 0), ("elsewhere", E.NOT_COORDINATOR)]
    r = await env.call(K.OFFSET_FETCH, 5, {"group_id": "elsewhere", "topics": None})
    assert r.error_code == E.NOT_COORDINATOR
    r = await env.call(K.DESCRIBE_GROUPS, 6, {"groups": ["elsewhere", "mine"], "include_authorized_operations": False})
    assert [g.error_code for g in r.groups] == [E.NOT_COORDINATOR, E.GROUP_ID_NOT_FOUND]
    r = await env.call(K.DELETE_GROUPS, 2, {"groups_names": ["elsewhere", "mine"]})
    assert [x.error_code for x in r.results] == [E.NOT_COORDINATOR, E.NON_EMPTY_GROUP]
    fields = {"group_id": "elsewhere", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
              "group_instance_id": None, "protocol_type": "consumer", "protocols": []}
    r = await env.call(K.JOIN_GROUP, 5, fields)
    assert (r.error_code, r.member_id) == (E.NOT_COORDINATOR, "")
    r = await env.call(K.SYNC_GROUP, 5, {"group_id": "elsewhere", "generation_id": 1, "member_id": "x",
                                         "group_instance_id": None, "protocol_type": None, "protocol_name": None,
                                         "assignments": []})
    assert r.error_code == E.NOT_COORDINATOR
    r = await env.call(K.HEARTBEAT, 4, {"group_id": "elsewhere", "generation_id": 1, "member_id": "x",
                                        "group_instance_id": None})
    assert r.error_code == E.NOT_COORDINATOR
    r = await env.call(K.LEAVE_GROUP, 5, {"group_id": "elsewhere", "members": []})
    assert r.error_code == E.NOT_COORDINATOR


# ------------------------------------------------------------------ persistence


async def test_a_consumer_group_its_members_and_offsets_survive_a_restart(tmp_path: Path) -> None:
    """Kafka's records of a consumer group (its epoch, members, target and current assignments) bring it back
    after a restart: Stable at its epoch, each member carrying on with its epoch and partitions."""
    env = GroupEnv(tmp_path)
    a, b = KipMember(env, ["t"]), KipMember(env, ["t"])
    for _ in range(3):
        for m in (a, b):
            await m.heartbeat()
    before = env.consumer()
    epoch = before.group_epoch
    assert epoch == 2
    assignments = {mid: m.assigned_partitions for mid, m in before.members.items()}
    targets = before.target_assignment
    assert await env.commit(9, a.member_id, a.epoch, {("t", 0): 42, ("u", 1): 7}) == {("t", 0): 0, ("u", 1): 0}
    env = env.restart()
    g = env.group()
    assert g.group_type == "consumer" and g.consumer.group_epoch == g.consumer.assignment_epoch == epoch
    assert {mid: m.assigned_partitions for mid, m in g.consumer.members.items()} == assignments
    assert g.consumer.target_assignment == targets
    assert {m.member_epoch for m in g.consumer.members.values()} == {epoch}
    assert await env.fetch(9, topics={"t": [0], "u": [1]}) == (0, {("t", 0): 42, ("u", 1): 7})
    r = await env.call(K.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(x.group_id, x.group_type, x.group_state) for x in r.groups] == [("g", "consumer", "Stable")]
    # The members carry on: their heartbeats at their epoch are answered with no new epoch and no rebalance.
    for m in (a, b):
        m.env = env
        r = await m.heartbeat()
        assert (r.error_code, r.member_epoch) == (E.NONE, epoch)
    assert env.consumer().group_epoch == epoch
    # A member leaves: its records go (tombstones), so a second restart has only the other one.
    a.env = env
    assert (await env.consumer_heartbeat(a.member_id, -1)).error_code == E.NONE
    env = env.restart()
    assert set(env.consumer().members) == {b.member_id} and env.consumer().group_epoch == epoch + 1
    b.env = env
    assert (await env.consumer_heartbeat(b.member_id, -1)).error_code == E.NONE
    assert (await env.call(K.DELETE_GROUPS, 2, {"groups_names": ["g"]})).results[0].error_code == 0
    env = env.restart()
    assert env.coordinator.groups == {}


async def test_logs_without_group_types_load_as_classic_groups(tmp_path: Path) -> None:
    """An offsets log of an earlier version (JSON lines) is migrated into ``__consumer_offsets-0``."""
    log_dir = tmp_path / LEGACY_DIR_NAME
    log_dir.mkdir()
    records = [{"t": "g", "g": "old", "pt": "consumer", "gen": 4},
               {"t": "o", "g": "old", "tp": "t", "p": 0, "o": 9, "e": -1, "m": "", "ct": 1, "xt": None}]
    (log_dir / LEGACY_FILE_NAME).write_text("".join(json.dumps(r) + "\n" for r in records))
    env = GroupEnv(tmp_path)
    g = env.group("old")
    assert (g.group_type, g.consumer, g.generation_id) == ("classic", None, 4)
    assert await env.fetch(8, group="old", topics={"t": [0]}) == (0, {("t", 0): 9})
    assert not log_dir.exists() and (tmp_path / "__consumer_offsets-0").is_dir()
    # An unknown group type is skipped like any unreadable record.
    log_dir.mkdir()
    with open(log_dir / LEGACY_FILE_NAME, "a") as f:
        f.write(json.dumps({"t": "g", "g": "weird", "pt": None, "gen": 1, "gt": "martian"}) + "\n")
        f.write(json.dumps({"t": "g", "g": "fine", "pt": None, "gen": 1, "gt": "consumer"}) + "\n")
    env = env.restart()
    assert "weird" not in env.coordinator.groups and env.group("fine").group_type == "consumer"
    assert env.group("old").generation_id == 4  # what the first migration wrote is still there


async def test_retention_spares_offsets_of_subscribed_topics(nursery: trio.Nursery, autojump_clock: Any) -> None:
    env = GroupEnv(offsets_retention_minutes=1)
    m = await consumer_group(env)
    await env.commit(9, m.member_id, 1, {("t", 0): 10, ("u", 0): 3})
    await trio.sleep(61)
    assert env.coordinator.cleanup_group_metadata() == 1
    assert await env.fetch(8, topics={"t": [0], "u": [0]}) == (0, {("t", 0): 10, ("u", 0): -1})
    # Once empty and without offsets the group goes away.
    await m.leave()
    await trio.sleep(61)
    assert env.coordinator.cleanup_group_metadata() == 1
    assert "g" not in env.coordinator.groups
