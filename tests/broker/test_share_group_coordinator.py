"""Share-group membership (KIP-932): the ShareGroupCoordinator and the simple assignor, on the real
metadata store and group configs, with Trio's MockClock for session timeouts."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter

import pytest
import trio
import trio.testing

from minikafka.broker.config import BrokerConfig
from minikafka.broker.config_ops import OP_SET
from minikafka.broker.groups.group_config import GroupConfigManager
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.share.assignor import simple_assign
from minikafka.broker.share.coordinator import ShareGroupCoordinator
from minikafka.protocol.errors import ErrorCode as E


def make(clock=None, classic: set[str] | None = None, **settings) -> tuple[ShareGroupCoordinator, ClusterMetadata,
                                                                           GroupConfigManager]:
    cfg = BrokerConfig(**settings)
    metadata = ClusterMetadata([0], None)
    configs = GroupConfigManager(cfg)
    taken = classic or set()
    coord = ShareGroupCoordinator(cfg, metadata, configs, clock=clock or (lambda: 0.0),
                                  other_group_exists=lambda gid: gid in taken)
    return coord, metadata, configs


def parts(assignment: dict[uuid.UUID, set[int]] | None) -> set[tuple[uuid.UUID, int]]:
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


# -- the assignor ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("members", "partitions"), list(itertools.product([1, 2, 3, 5, 8], [1, 2, 3, 6, 7])))
def test_simple_assignor_covers_and_balances(members: int, partitions: int) -> None:
    t = uuid.uuid4()
    subs = {f"m{i}": frozenset({t}) for i in range(members)}
    out = simple_assign(subs, {t: partitions}, {})
    per_member = [len(parts(a)) for a in out.values()]
    holders = Counter(tp for a in out.values() for tp in parts(a))
    sharing = -(-members // partitions)
    assert set(holders) == {(t, p) for p in range(partitions)}  # every partition has a member
    assert all(n == sharing for n in holders.values())  # and exactly the desired sharing
    assert max(per_member) - min(per_member) <= 1  # balanced
    assert min(per_member) >= 1


def test_simple_assignor_is_sticky() -> None:
    t = uuid.uuid4()
    subs = {m: frozenset({t}) for m in ("a", "b", "c")}
    first = simple_assign(subs, {t: 6}, {})
    subs["d"] = frozenset({t})
    second = simple_assign(subs, {t: 6}, first)
    moved = sum(len(parts(first[m]) - parts(second[m])) for m in ("a", "b", "c"))
    assert moved == 1  # 6 partitions over 4 members: a single partition moves to d
    assert [len(parts(second[m])) for m in sorted(second)].count(1) == 2


def test_simple_assignor_heterogeneous_balances_per_topic() -> None:
    t1, t2 = uuid.uuid4(), uuid.uuid4()
    subs = {"m1": frozenset({t1}), "m2": frozenset({t2}), "m3": frozenset({t1, t2})}
    out = simple_assign(subs, {t1: 4, t2: 2}, {})
    assert {t for t, _ in parts(out["m1"])} == {t1}
    assert {t for t, _ in parts(out["m2"])} == {t2}
    assert len(out["m3"][t1]) == 2 and len(out["m3"][t2]) == 1
    assert {tp for a in out.values() for tp in parts(a)} == {(t1, p) for p in range(4)} | {(t2, p) for p in range(2)}


# -- heartbeats --------------------------------------------------------------------------------------

def test_join_assign_and_leave() -> None:
    coord, md, _ = make()
    topic = md.create_topic("orders", 4, 1)
    r1 = coord.heartbeat("g", "m1", 0, None, ["orders"], "client-1", "/1.2.3.4")
    assert (r1.error, r1.member_id, r1.member_epoch, r1.heartbeat_interval_ms) == (E.NONE, "m1", 1, 5000)
    assert parts(r1.assignment) == {(topic.topic_id, p) for p in range(4)}
    assert coord.is_member("g", "m1") and coord.exists("g") and coord.list_groups() == [("g", "Stable")]

    r2 = coord.heartbeat("g", "m2", 0, None, ["orders"])
    assert r2.member_epoch == 2 and len(parts(r2.assignment)) == 2
    # m1 learns its smaller share on its next heartbeat, with the new epoch; no revocation phase.
    r1 = coord.heartbeat("g", "m1", 1, None, None)
    assert r1.member_epoch == 2 and len(parts(r1.assignment)) == 2
    assert parts(r1.assignment).isdisjoint(parts(r2.assignment))
    assert coord.assignment("g", "m1") == r1.assignment
    # Nothing changed: no assignment in the answer.
    assert coord.heartbeat("g", "m1", 2, None, None).assignment is None

    left: list[tuple[str, str]] = []
    coord.member_listeners.append(lambda g, m: left.append((g, m)))
    r = coord.heartbeat("g", "m2", -1, None, None)
    assert (r.error, r.member_id, r.member_epoch) == (E.NONE, "m2", -1)
    assert left == [("g", "m2")] and not coord.is_member("g", "m2")
    r1 = coord.heartbeat("g", "m1", 2, None, None)
    assert r1.member_epoch == 3 and len(parts(r1.assignment)) == 4
    coord.heartbeat("g", "m1", -1, None, None)
    assert coord.list_groups() == [("g", "Empty")]


def test_more_members_than_partitions_share_partitions() -> None:
    coord, md, _ = make()
    topic = md.create_topic("t", 2, 1)
    results = {f"m{i}": coord.heartbeat("g", f"m{i}", 0, None, ["t"]) for i in range(5)}
    final = {m: coord.heartbeat("g", m, r.member_epoch, None, None) for m, r in results.items()}
    held = {m: coord.assignment("g", m) for m in final}
    assert all(final[m].member_epoch == 5 for m in final)
    assert all(len(parts(a)) >= 1 for a in held.values())
    counts = Counter(tp for a in held.values() for tp in parts(a))
    assert counts == {(topic.topic_id, 0): 3, (topic.topic_id, 1): 3}


@pytest.mark.parametrize(("args", "code", "message"), [
    (("g", "", 0, None, ["t"]), E.INVALID_REQUEST, "MemberId can't be empty."),
    (("", "m", 0, None, ["t"]), E.INVALID_REQUEST, "GroupId can't be empty."),
    (("g", "m", 0, " ", ["t"]), E.INVALID_REQUEST, "RackId can't be empty."),
    (("g", "m", 0, None, None), E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."),
    (("g", "m", 0, None, []), E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request."),
    (("g", "m", -2, None, None), E.INVALID_REQUEST, "MemberEpoch is invalid."),
    (("g", "m", 3, None, None), E.GROUP_ID_NOT_FOUND, "Share group g not found."),
    (("classic", "m", 0, None, ["t"]), E.GROUP_ID_NOT_FOUND, "Group classic is not a share group."),
])
def test_request_errors(args, code: E, message: str) -> None:
    coord, _, _ = make(classic={"classic"})
    r = coord.heartbeat(*args)
    assert (r.error, r.error_message) == (code, message)
    assert not coord.exists("classic")


def test_member_errors_and_epochs() -> None:
    coord, md, _ = make(group_share_max_size=2)
    md.create_topic("t", 3, 1)
    coord.heartbeat("g", "m1", 0, None, ["t"])
    assert coord.heartbeat("g", "nobody", 1, None, None).error == E.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("g", "nobody", -1, None, None).error == E.UNKNOWN_MEMBER_ID
    assert coord.heartbeat("g", "m1", 2, None, None).error == E.FENCED_MEMBER_EPOCH  # ahead
    coord.heartbeat("g", "m2", 0, None, ["t"])
    r = coord.heartbeat("g", "m1", 1, None, None)  # m1: epoch 2, previous 1
    assert r.member_epoch == 2
    assert coord.heartbeat("g", "m1", 1, None, None).error == E.NONE  # the previous epoch: response lost
    coord.heartbeat("g", "m2", -1, None, None)
    coord.heartbeat("g", "m3", 0, None, ["t"])
    assert coord.heartbeat("g", "m1", 2, None, None).member_epoch == 4
    assert coord.heartbeat("g", "m1", 1, None, None).error == E.FENCED_MEMBER_EPOCH  # behind, not previous
    r = coord.heartbeat("g", "m4", 0, None, ["t"])
    assert r.error == E.GROUP_MAX_SIZE_REACHED
    assert "maximum capacity of 2 members" in (r.error_message or "")
    # A known member rejoining with epoch 0 gets its assignment again.
    again = coord.heartbeat("g", "m1", 0, None, ["t"])
    assert again.error == E.NONE and parts(again.assignment) == parts(coord.assignment("g", "m1"))


def test_topic_created_later_and_partitions_added() -> None:
    coord, md, _ = make()
    md.create_topic("a", 1, 1)
    r = coord.heartbeat("g", "m1", 0, None, ["a", "later"])
    assert r.member_epoch == 1 and len(parts(r.assignment)) == 1
    later = md.create_topic("later", 2, 1)
    r = coord.heartbeat("g", "m1", 1, None, None)
    assert r.member_epoch == 2 and {(later.topic_id, 0), (later.topic_id, 1)} <= parts(r.assignment)
    md.add_partitions("later", 3)
    r = coord.heartbeat("g", "m1", 2, None, None)
    assert r.member_epoch == 3 and (later.topic_id, 2) in parts(r.assignment)
    md.delete_topic("a")
    r = coord.heartbeat("g", "m1", 3, None, None)
    assert r.member_epoch == 4 and {t for t, _ in parts(r.assignment)} == {later.topic_id}
    # Changing the subscription bumps the epoch too.
    r = coord.heartbeat("g", "m1", 4, None, ["later"])
    assert r.member_epoch == 5 and r.assignment is None  # same partitions


def test_describe() -> None:
    coord, md, _ = make(classic={"classic"})
    topic = md.create_topic("t", 2, 1)
    coord.heartbeat("g", "m1", 0, "rack-a", ["t"], "cid", "/10.0.0.1")
    coord.heartbeat("g", "m2", 0, None, ["t"], "cid2", "/10.0.0.2")
    d, missing, classic, empty = coord.describe(["g", "nope", "classic", ""])
    assert (d.error, d.state, d.group_epoch, d.assignment_epoch, d.assignor_name) == (E.NONE, "Stable", 2, 2, "simple")
    m1 = d.members[0]
    assert (m1.member_id, m1.rack_id, m1.client_id, m1.client_host, m1.subscribed_topic_names, m1.member_epoch) == \
        ("m1", "rack-a", "cid", "/10.0.0.1", ["t"], 1)
    assert m1.assignment == [(topic.topic_id, "t", [0, 1])]  # not yet told of m2
    assert d.topic_names() == {"t"}
    assert (missing.error, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert (classic.error, classic.error_message) == (E.GROUP_ID_NOT_FOUND, "Group classic is not a share group.")
    assert empty.error == E.INVALID_GROUP_ID


def test_delete_group() -> None:
    coord, md, _ = make()
    md.create_topic("t", 1, 1)
    coord.heartbeat("g", "m1", 0, None, ["t"])
    deleted: list[str] = []
    coord.group_listeners.append(deleted.append)
    assert coord.delete_group("g") == E.NON_EMPTY_GROUP
    coord.heartbeat("g", "m1", -1, None, None)
    assert coord.delete_group("g") == E.NONE and deleted == ["g"] and not coord.exists("g")
    assert coord.delete_group("g") == E.GROUP_ID_NOT_FOUND


def test_closed_coordinator() -> None:
    coord, _, _ = make()
    coord.close()
    assert coord.heartbeat("g", "m1", 0, None, ["t"]).error == E.COORDINATOR_NOT_AVAILABLE
    assert coord.describe(["g"])[0].error == E.COORDINATOR_NOT_AVAILABLE


async def test_session_timeout_expires_members(autojump_clock: trio.testing.MockClock) -> None:
    coord, md, configs = make(clock=trio.current_time)
    md.create_topic("t", 2, 1)
    configs.alter("g", [("share.session.timeout.ms", OP_SET, "50000")], incremental=True, validate_only=False)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(coord.run)
        r1 = coord.heartbeat("g", "m1", 0, None, ["t"])
        coord.heartbeat("g", "m2", 0, None, ["t"])
        epoch = r1.member_epoch
        # m1 keeps heartbeating every 5 s; m2 goes silent and is fenced after 50 s.
        for _ in range(12):
            await trio.sleep(5)
            r1 = coord.heartbeat("g", "m1", epoch, None, None)
            assert r1.error == E.NONE
            epoch = r1.member_epoch
        assert coord.is_member("g", "m1") and not coord.is_member("g", "m2")
        assert len(parts(coord.assignment("g", "m1"))) == 2
        await trio.sleep(50.001)
        assert coord.list_groups() == [("g", "Empty")]
        coord.close()


def test_a_failing_listener_does_not_break_the_coordinator() -> None:
    coord, md, _ = make()
    md.create_topic("t", 1, 1)

    def broken(group_id: str, member_id: str) -> None:
        raise RuntimeError("listener bug")

    coord.member_listeners.append(broken)
    coord.heartbeat("g", "m1", 0, None, ["t"])
    assert coord.heartbeat("g", "m1", -1, None, None).error == E.NONE
    assert not coord.is_member("g", "m1")
