"""The KIP-848 consumer group engine of the GroupCoordinator, without sockets.

Members are simulated the way a KIP-848 client behaves: it heartbeats with its member epoch and the
partitions it owns; when an assignment arrives it gives up the partitions no longer in it and takes the
new ones, and tells the coordinator on its next heartbeat.  Timers run on the coordinator's timer loop
under trio's MockClock (autojump), so session and rebalance timeouts take no real time.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from minikafka.broker.config import BrokerConfig
from minikafka.broker.groups import GroupCoordinator
from minikafka.broker.groups.consumer.model import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    ConsumerGroupState,
)
from minikafka.broker.groups.consumer.subscription import (
    InvalidRegexError,
    compile_topic_regex,
)
from minikafka.broker.groups.metadata import GROUP_TYPE_CONSUMER
from minikafka.broker.metadata import ClusterMetadata
from minikafka.common import OffsetAndMetadata, TopicPartition
from minikafka.common.clock import SecondsClock
from minikafka.protocol.errors import ErrorCode as E

WALL0 = 1_700_000_000.0
SESSION_MS = 45000


def make_coordinator(data_dir: Path | None = None, **kw: Any) -> GroupCoordinator:
    cfg = BrokerConfig(host="127.0.0.1", port=9092, node_id=0, **kw)
    return GroupCoordinator(cfg, data_dir, clock=trio.current_time, wall_clock=SecondsClock(trio.current_time, WALL0))


def make_metadata(**topics: int) -> ClusterMetadata:
    md = ClusterMetadata([0])
    md.broker_started(0, "127.0.0.1", 9092)
    for name, n in topics.items():
        md.create_topic(name, n, 1)
    return md


class Member:
    """A simulated KIP-848 consumer (what librdkafka's and the Java client's membership managers do)."""

    def __init__(self, coord: GroupCoordinator, md: ClusterMetadata, group: str = "g", *,
                 topics: list[str] | None = None, regex: str | None = None, instance_id: str | None = None,
                 member_id: str | None = None, assignor: str | None = None, rebalance_ms: int = 30000) -> None:
        self.coord, self.md, self.group = coord, md, group
        self.topics, self.regex, self.instance_id, self.assignor = topics, regex, instance_id, assignor
        self.member_id = member_id or uuid.uuid4().hex
        self.rebalance_ms = rebalance_ms
        self.epoch = 0
        self.owned: Assignment = {}
        self.target: Assignment = {}  # the last assignment the coordinator sent
        self.last: ConsumerGroupHeartbeatResult | None = None
        self.revoke = True  # False: keep partitions it is asked to give up (a slow or stuck consumer)

    def heartbeat(self, **override: Any) -> ConsumerGroupHeartbeatResult:
        joining = self.epoch == 0
        if self.revoke:  # give up what the last assignment no longer has
            self.owned = {t: set(p) for t, p in self.target.items() if p}
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch, instance_id=self.instance_id,
            rebalance_timeout_ms=self.rebalance_ms if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            subscribed_topic_regex=self.regex if joining else None,
            server_assignor=self.assignor if joining else None,
            owned_partitions={t: set(p) for t, p in self.owned.items()} if not joining else {},
            client_id="sim", client_host="/127.0.0.1")
        for k, v in override.items():
            setattr(req, k, v)
        r = self.coord.consumer_group_heartbeat(req, self.md, session_timeout_ms=SESSION_MS,
                                                heartbeat_interval_ms=5000)
        self.last = r
        if r.error == E.NONE:
            assert r.member_id is not None
            self.member_id = r.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.target = {t: set(p) for t, p in r.assignment.items() if p}
                if self.revoke:
                    self.owned = {t: set(p) for t, p in self.target.items()}
                else:  # keep what it has, take the new ones
                    for t, p in self.target.items():
                        self.owned.setdefault(t, set()).update(p)
        elif r.error in (E.FENCED_MEMBER_EPOCH, E.UNKNOWN_MEMBER_ID):
            self.owned, self.target, self.epoch = {}, {}, 0
        return r

    def leave(self, epoch: int = -1) -> ConsumerGroupHeartbeatResult:
        req = ConsumerGroupHeartbeatRequest(group_id=self.group, member_id=self.member_id, member_epoch=epoch,
                                            instance_id=self.instance_id)
        r = self.coord.consumer_group_heartbeat(req, self.md)
        self.owned, self.target = {}, {}
        return r

    def partitions(self) -> set[tuple[str, int]]:
        out = set()
        for t, ps in self.owned.items():
            topic = self.md.get_topic_by_id(t)
            assert topic is not None
            out |= {(topic.name, p) for p in ps}
        return out


def assert_exclusive(members: list[Member]) -> None:
    """No partition owned by two members at once."""
    seen: dict[tuple[str, int], str] = {}
    for m in members:
        for tp in m.partitions():
            assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.member_id}"
            seen[tp] = m.member_id


def converge(members: list[Member], rounds: int = 20) -> None:
    """Heartbeat everyone in turns until the group is stable, checking exclusivity after every heartbeat."""
    for _ in range(rounds):
        for m in members:
            r = m.heartbeat()
            assert r.error == E.NONE, (r.error, r.error_message)
            assert_exclusive(members)
        cg = members[0].coord.groups[members[0].group].consumer
        assert cg is not None
        if cg.compute_state() == ConsumerGroupState.STABLE:
            return
    raise AssertionError("the group did not stabilize")


def state(coord: GroupCoordinator, group: str = "g") -> Any:
    cg = coord.groups[group].consumer
    assert cg is not None
    return cg


# ------------------------------------------------------------------ join, balance, leave


async def test_single_member_joins_and_gets_everything() -> None:
    coord, md = make_coordinator(), make_metadata(t=4)
    m = Member(coord, md, topics=["t"])
    r = m.heartbeat()
    assert r.error == E.NONE and r.member_epoch == 1 and r.heartbeat_interval_ms == 5000
    assert m.partitions() == {("t", p) for p in range(4)}
    cg = state(coord)
    assert cg.group_epoch == cg.assignment_epoch == 1
    assert cg.compute_state() == ConsumerGroupState.STABLE
    assert coord.groups["g"].group_type == GROUP_TYPE_CONSUMER
    # A plain heartbeat with the owned partitions gets no assignment (nothing changed).
    assert m.heartbeat().assignment is None


async def test_three_members_share_partitions_without_overlap() -> None:
    coord, md = make_coordinator(), make_metadata(t=7)
    members = [Member(coord, md, topics=["t"]) for _ in range(3)]
    for m in members:
        assert m.heartbeat().error == E.NONE
        assert_exclusive(members)
    converge(members)
    sizes = sorted(len(m.partitions()) for m in members)
    assert sizes == [2, 2, 3]
    assert set().union(*(m.partitions() for m in members)) == {("t", p) for p in range(7)}
    epochs = {m.epoch for m in members}
    assert epochs == {state(coord).assignment_epoch}


async def test_revoke_before_assign_across_members() -> None:
    """A partition moving from one member to another is withheld from the newcomer until its owner
    reports it revoked: the newcomer waits in UNRELEASED_PARTITIONS, the owner in UNREVOKED_PARTITIONS."""
    coord, md = make_coordinator(), make_metadata(t=4)
    a = Member(coord, md, topics=["t"])
    a.heartbeat()
    assert len(a.partitions()) == 4
    b = Member(coord, md, topics=["t"])
    r = b.heartbeat()
    assert r.error == E.NONE and r.assignment == {}  # its target partitions are still a's
    cg = state(coord)
    assert cg.members[b.member_id].state.value == "unreleased_partitions"
    # a is asked to give two up: its assignment shrinks, it stays at its epoch until it has revoked.
    a.revoke = False
    r = a.heartbeat()
    assert r.member_epoch == 1 and len(r.assignment or {}) == 1 and sum(map(len, r.assignment.values())) == 2
    assert cg.members[a.member_id].state.value == "unrevoked_partitions"
    assert len(a.partitions()) == 4  # not revoked yet
    b.heartbeat()
    assert b.partitions() == set()
    assert_exclusive([a, b])
    # Now a revokes and reports it; then b gets them.
    a.revoke = True
    a.owned = {t: set(ps) for t, ps in cg.members[a.member_id].assigned_partitions.items()}
    r = a.heartbeat()
    assert r.member_epoch == 2
    assert b.heartbeat().error == E.NONE
    assert_exclusive([a, b])
    assert len(b.partitions()) == 2 and len(a.partitions()) == 2
    assert cg.compute_state() == ConsumerGroupState.STABLE


async def test_leave_gives_partitions_to_the_others() -> None:
    coord, md = make_coordinator(), make_metadata(t=6)
    members = [Member(coord, md, topics=["t"]) for _ in range(3)]
    converge(members)
    epoch = state(coord).group_epoch
    leaving = members.pop(1)
    r = leaving.leave()
    assert r.error == E.NONE and r.member_epoch == -1
    assert state(coord).group_epoch == epoch + 1
    converge(members)
    assert sorted(len(m.partitions()) for m in members) == [3, 3]
    # Leaving again: the member is gone.
    assert leaving.leave().error == E.UNKNOWN_MEMBER_ID


async def test_group_becomes_empty_when_the_last_member_leaves() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    m = Member(coord, md, topics=["t"])
    m.heartbeat()
    m.leave()
    cg = state(coord)
    assert cg.compute_state() == ConsumerGroupState.EMPTY and not cg.partition_epochs


# ------------------------------------------------------------------ epochs and fencing


async def test_fencing_on_wrong_member_epochs() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    m = Member(coord, md, topics=["t"])
    m.heartbeat()
    r = m.heartbeat(member_epoch=m.epoch + 1)
    assert r.error == E.FENCED_MEMBER_EPOCH and "greater member epoch" in (r.error_message or "")
    # Rejoining with epoch 0 and the same id gets the assignment back.
    r = m.heartbeat()
    assert r.error == E.NONE and r.assignment is not None and len(m.partitions()) == 2
    # An older epoch is accepted only as the previous epoch with a subset of the assignment.
    other = Member(coord, md, topics=["t"])
    converge([m, other])
    cg = state(coord)
    mm = cg.members[m.member_id]
    assert 0 < mm.previous_member_epoch < mm.member_epoch
    r = m.heartbeat(member_epoch=mm.previous_member_epoch)  # the response with the new epoch was lost
    assert r.error == E.NONE and r.member_epoch == mm.member_epoch
    r = m.heartbeat(member_epoch=mm.previous_member_epoch,  # ... but it may not own more than it has
                    owned_partitions={t: {0, 1} for t in mm.assigned_partitions})
    assert r.error == E.FENCED_MEMBER_EPOCH
    m.heartbeat()  # rejoin
    converge([m, other, Member(coord, md, topics=["t"])])
    mm = cg.members[m.member_id]
    stale = next(e for e in range(1, mm.member_epoch) if e != mm.previous_member_epoch)
    r = m.heartbeat(member_epoch=stale)
    assert r.error == E.FENCED_MEMBER_EPOCH and "smaller member epoch" in (r.error_message or "")


async def test_unknown_member_and_unknown_group() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    m = Member(coord, md, topics=["t"])
    m.epoch = 3
    assert m.heartbeat().error == E.GROUP_ID_NOT_FOUND
    Member(coord, md, topics=["t"]).heartbeat()
    r = m.heartbeat(member_epoch=3)
    assert r.error == E.UNKNOWN_MEMBER_ID


async def test_request_validation() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)

    def hb(**kw: Any) -> ConsumerGroupHeartbeatResult:
        fields = {"group_id": "g", "member_id": "m1", "member_epoch": 0, "rebalance_timeout_ms": 1000,
                      "subscribed_topic_names": ["t"], "owned_partitions": {}}
        fields.update(kw)
        return coord.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(**fields), md)

    cases = [
        ({"group_id": "  "}, E.INVALID_REQUEST, "GroupId can't be empty."),
        ({"member_id": ""}, E.INVALID_REQUEST, "MemberId can't be empty."),
        ({"instance_id": ""}, E.INVALID_REQUEST, "InstanceId can't be empty."),
        ({"rack_id": " "}, E.INVALID_REQUEST, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
        ({"owned_partitions": None}, E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
        ({"owned_partitions": {uuid.uuid4(): set()}}, E.INVALID_REQUEST,
         "TopicPartitions must be empty when (re-)joining."),
        ({"subscribed_topic_names": None}, E.INVALID_REQUEST,
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        ({"member_epoch": -2}, E.INVALID_REQUEST, "InstanceId can't be null."),
        ({"member_epoch": -3}, E.INVALID_REQUEST, "MemberEpoch is invalid."),
        ({"server_assignor": "sticky"}, E.UNSUPPORTED_ASSIGNOR,
         "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
        ({"subscribed_topic_regex": "(a"}, E.INVALID_REGULAR_EXPRESSION, None),
        ({"subscribed_topic_regex": "(?=x)t"}, E.INVALID_REGULAR_EXPRESSION, None),
    ]
    for kw, code, message in cases:
        r = hb(**kw)
        assert r.error == code, (kw, r)
        if message is not None:
            assert r.error_message == message
    assert "g" not in coord.groups  # nothing was created by a failed join
    # v0: the coordinator generates the member id.
    r = hb(member_id="", api_version=0)
    assert r.error == E.NONE and r.member_id and len(r.member_id) == 22


async def test_group_max_size() -> None:
    coord, md = make_coordinator(group_consumer_max_size=2), make_metadata(t=2)
    a, b, c = (Member(coord, md, topics=["t"]) for _ in range(3))
    assert a.heartbeat().error == E.NONE and b.heartbeat().error == E.NONE
    r = c.heartbeat()
    assert r.error == E.GROUP_MAX_SIZE_REACHED
    assert r.error_message == "The consumer group has reached its maximum capacity of 2 members."
    assert a.heartbeat().error == E.NONE  # members already in still heartbeat


async def test_closed_coordinator_is_not_available() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    coord.close()
    assert Member(coord, md, topics=["t"]).heartbeat().error == E.COORDINATOR_NOT_AVAILABLE


async def test_classic_group_in_the_way() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    # An empty classic group holding offsets is converted on the first heartbeat, offsets kept.
    coord.commit_offsets("g", "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(5, -1, "", 0, None)})
    assert coord.groups["g"].consumer is None
    m = Member(coord, md, topics=["t"])
    assert m.heartbeat().error == E.NONE
    assert coord.groups["g"].group_type == GROUP_TYPE_CONSUMER
    assert coord.groups["g"].offsets[TopicPartition("t", 0)].offset == 5


# ------------------------------------------------------------------ static members


async def test_static_member_temporary_leave_and_rejoin_keeps_assignment() -> None:
    coord, md = make_coordinator(), make_metadata(t=6)
    s = Member(coord, md, topics=["t"], instance_id="inst-1")
    others = [Member(coord, md, topics=["t"]) for _ in range(2)]
    converge([s, *others])
    mine = s.partitions()
    theirs = [o.partitions() for o in others]
    epoch = state(coord).group_epoch
    assert s.leave(-2).member_epoch == -2
    cg = state(coord)
    assert cg.group_epoch == epoch  # a temporary leave does not rebalance
    assert cg.members[s.member_id].member_epoch == -2
    for o in others:
        o.heartbeat()
    assert [o.partitions() for o in others] == theirs
    # The instance comes back under a new member id and gets the same partitions.
    back = Member(coord, md, topics=["t"], instance_id="inst-1")
    r = back.heartbeat()
    assert r.error == E.NONE and back.partitions() == mine
    assert s.member_id not in cg.members and cg.static_members["inst-1"] == back.member_id
    converge([back, *others])
    assert [o.partitions() for o in others] == theirs and back.partitions() == mine


async def test_static_member_errors() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    s = Member(coord, md, topics=["t"], instance_id="i")
    s.heartbeat()
    # Another process with the same instance id while the first has not left.
    r = Member(coord, md, topics=["t"], instance_id="i").heartbeat()
    assert r.error == E.UNRELEASED_INSTANCE_ID
    # A heartbeat naming the instance with a different member id is fenced.
    r = s.heartbeat(member_id="someone-else", member_epoch=s.epoch)
    assert r.error == E.FENCED_INSTANCE_ID
    r = s.heartbeat(instance_id="unknown", member_epoch=s.epoch)
    assert r.error == E.UNKNOWN_MEMBER_ID and r.error_message == "Instance id unknown is unknown."


async def test_static_member_gone_for_its_session_loses_its_partitions(nursery: trio.Nursery,
                                                                       autojump_clock: Any) -> None:
    coord, md = make_coordinator(), make_metadata(t=4)
    nursery.start_soon(coord.run)
    s = Member(coord, md, topics=["t"], instance_id="i")
    o = Member(coord, md, topics=["t"])
    converge([s, o])
    s.leave(-2)
    for _ in range(12):  # o keeps heartbeating every 5 s; s never comes back
        await trio.sleep(5)
        o.heartbeat()
    assert s.member_id not in state(coord).members
    assert len(o.partitions()) == 4
    coord.close()


# ------------------------------------------------------------------ timeouts


async def test_session_expiry_removes_member_and_bumps_epoch(nursery: trio.Nursery, autojump_clock: Any) -> None:
    coord, md = make_coordinator(), make_metadata(t=4)
    nursery.start_soon(coord.run)
    a, b = Member(coord, md, topics=["t"]), Member(coord, md, topics=["t"])
    converge([a, b])
    epoch = state(coord).group_epoch
    t0 = trio.current_time()
    while b.member_id in state(coord).members:
        await trio.sleep(5)
        a.heartbeat()
    assert SESSION_MS / 1000 <= trio.current_time() - t0 <= SESSION_MS / 1000 + 5
    assert state(coord).group_epoch == epoch + 1
    converge([a])
    assert len(a.partitions()) == 4
    assert b.heartbeat().error == E.UNKNOWN_MEMBER_ID
    coord.close()


async def test_member_not_revoking_within_rebalance_timeout_is_fenced(nursery: trio.Nursery,
                                                                      autojump_clock: Any) -> None:
    coord, md = make_coordinator(), make_metadata(t=4)
    nursery.start_soon(coord.run)
    stuck = Member(coord, md, topics=["t"], rebalance_ms=10000)
    stuck.heartbeat()
    stuck.revoke = False
    newcomer = Member(coord, md, topics=["t"])
    newcomer.heartbeat()
    stuck.heartbeat()  # asked to revoke two partitions; it does not
    assert state(coord).members[stuck.member_id].state.value == "unrevoked_partitions"
    for _ in range(3):
        await trio.sleep(4)
        stuck.heartbeat()
        newcomer.heartbeat()
    assert stuck.member_id not in state(coord).members
    assert stuck.last is not None and stuck.last.error == E.UNKNOWN_MEMBER_ID
    converge([newcomer])
    assert len(newcomer.partitions()) == 4
    coord.close()


# ------------------------------------------------------------------ subscriptions and metadata


async def test_regex_subscription_picks_up_a_new_topic() -> None:
    coord, md = make_coordinator(), make_metadata(**{"prefix-a": 2, "other": 2})
    m = Member(coord, md, regex="prefix-.*")
    m.heartbeat()
    assert m.partitions() == {("prefix-a", 0), ("prefix-a", 1)}
    epoch = state(coord).group_epoch
    md.create_topic("prefix-b", 3, 1)
    md.create_topic("xprefix-c", 1, 1)  # full match: not this one
    r = m.heartbeat()
    assert r.assignment is not None
    assert m.partitions() == {("prefix-a", 0), ("prefix-a", 1), ("prefix-b", 0), ("prefix-b", 1), ("prefix-b", 2)}
    assert state(coord).group_epoch == epoch + 1
    # Deleting a topic takes its partitions away.
    md.delete_topic("prefix-a")
    m.heartbeat()
    m.heartbeat()
    assert m.partitions() == {("prefix-b", 0), ("prefix-b", 1), ("prefix-b", 2)}


async def test_regex_and_names_mixed_in_one_group() -> None:
    coord, md = make_coordinator(), make_metadata(a1=2, a2=2, b=2)
    r = Member(coord, md, regex="a[0-9]")
    n = Member(coord, md, topics=["b", "a1"])
    converge([r, n])
    assert set().union(r.partitions(), n.partitions()) == {(t, p) for t in ("a1", "a2", "b") for p in (0, 1)}
    assert {t for t, _ in r.partitions()} <= {"a1", "a2"} and {t for t, _ in n.partitions()} <= {"a1", "b"}


async def test_partition_count_change_rebalances() -> None:
    coord, md = make_coordinator(), make_metadata(t=2)
    a, b = Member(coord, md, topics=["t"]), Member(coord, md, topics=["t"])
    converge([a, b])
    epoch = state(coord).group_epoch
    md.add_partitions("t", 6)
    converge([a, b])
    assert state(coord).group_epoch == epoch + 1
    assert sorted(len(m.partitions()) for m in (a, b)) == [3, 3]


async def test_subscription_change_revokes_unsubscribed_topics() -> None:
    coord, md = make_coordinator(), make_metadata(x=2, y=2)
    m = Member(coord, md, topics=["x", "y"])
    m.heartbeat()
    assert len(m.partitions()) == 4
    r = m.heartbeat(subscribed_topic_names=["y"])
    assert r.error == E.NONE
    m.heartbeat()
    assert m.partitions() == {("y", 0), ("y", 1)}


async def test_range_assignor_chosen_by_members() -> None:
    coord, md = make_coordinator(), make_metadata(t1=4, t2=4)
    members = [Member(coord, md, topics=["t1", "t2"], assignor="range") for _ in range(2)]
    converge(members)
    for m in members:
        parts = m.partitions()
        assert {p for t, p in parts if t == "t1"} == {p for t, p in parts if t == "t2"}
    assert coord.consumer_group_describe(["g"])[0].assignor_name == "range"


async def test_describe() -> None:
    coord, md = make_coordinator(), make_metadata(t=3)
    m = Member(coord, md, topics=["t"], instance_id="i1")
    m.heartbeat()
    coord.commit_offsets("classic", "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(1, -1, "", 0, None)})
    d, missing, classic = coord.consumer_group_describe(["g", "nope", "classic"])
    assert d.error == E.NONE and d.group_state == "Stable" and d.group_epoch == 1 and d.assignment_epoch == 1
    assert d.assignor_name == "uniform"
    (dm,) = d.members
    assert dm.member_id == m.member_id and dm.instance_id == "i1" and dm.member_epoch == 1
    assert dm.subscribed_topic_names == ["t"] and dm.member_type == 1
    t = md.get_topic("t")
    assert t is not None and dm.assignment == dm.target_assignment == {t.topic_id: {0, 1, 2}}
    assert missing.error == E.GROUP_ID_NOT_FOUND and missing.error_message == "Group nope not found."
    assert classic.error == E.GROUP_ID_NOT_FOUND
    assert classic.error_message == "Group classic is not a consumer group."


@pytest.mark.parametrize("pattern,names,matched", [
    ("prefix.*", ["prefix", "prefix-1", "xprefix"], {"prefix", "prefix-1"}),
    ("^prefix.*", ["prefix-1", "a-prefix"], {"prefix-1"}),
    (r"\Qa.b\E.*", ["a.bc", "axbc"], {"a.bc"}),
    ("[[:digit:]]+", ["123", "12a"], {"123"}),
    ("t(?i:OPIC)", ["tOpic", "Topic"], {"tOpic"}),
    (r"a\z", ["a"], {"a"}),
    (r"\pL+", ["abc", "ab1"], {"abc"}),  # Unicode classes: RE2 has them
    ("(?U)a+", ["aaa", "b"], {"aaa"}),
    ("(.|.)*#", ["payments-service-producer-07" * 4, "x#"], {"x#"}),  # linear time, not backtracking
])
def test_re2_patterns(pattern: str, names: list[str], matched: set[str]) -> None:
    compiled = compile_topic_regex(pattern)
    assert {n for n in names if compiled.fullmatch(n)} == matched


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)a", "(?!a)b", "(?<=a)b", "(?<!a)b", "(?>a)", "a*+",
                                     "(?P<x>a)(?P=x)", "("])
def test_re2_refuses(pattern: str) -> None:
    with pytest.raises(InvalidRegexError):
        compile_topic_regex(pattern)


async def test_describe_on_a_closed_coordinator() -> None:
    coord = make_coordinator()
    coord.close()
    (d,) = coord.consumer_group_describe(["g"])
    assert d.error == E.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("seed", range(8))
async def test_random_membership_changes_never_share_a_partition(seed: int) -> None:
    """Members join, leave, change subscriptions and heartbeat in random order (some lag behind); at no
    point do two members own the same partition, and once everyone heartbeats the group settles with
    every subscribed partition owned exactly once."""
    import random

    rnd = random.Random(seed)
    coord, md = make_coordinator(), make_metadata(a=5, b=3, c=4)
    live: list[Member] = []
    for step in range(300):
        action = rnd.random()
        if action < 0.08 or not live:
            live.append(Member(coord, md, topics=rnd.sample(["a", "b", "c"], rnd.randrange(1, 4)),
                               assignor=rnd.choice([None, "uniform", "range"])))
        elif action < 0.12 and len(live) > 1:
            live.pop(rnd.randrange(len(live))).leave()
        elif action < 0.15:
            m = rnd.choice(live)
            if m.epoch > 0:
                m.topics = rnd.sample(["a", "b", "c"], rnd.randrange(1, 4))
                m.heartbeat(subscribed_topic_names=m.topics)
        elif action < 0.17 and step < 250:
            md.add_partitions("c", md.topics["c"].num_partitions + 1)
        else:
            m = rnd.choice(live)
            m.revoke = rnd.random() < 0.8
            r = m.heartbeat()
            assert r.error in (E.NONE, E.FENCED_MEMBER_EPOCH), (r.error, r.error_message)
        assert_exclusive(live)
    for m in live:
        m.revoke = True
    converge(live, rounds=40)
    subscribed = {t for m in live for t in (m.topics or [])}
    owned = [tp for m in live for tp in m.partitions()]
    assert len(owned) == len(set(owned))
    assert set(owned) == {(t, p) for t in subscribed for p in range(md.topics[t].num_partitions)}
