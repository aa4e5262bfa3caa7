"""Wire replay of KIP-848 consumer-group and KIP-932 share-group traffic: member epochs mapped per member,
client-made member ids ordering a member's requests after the heartbeat that made it, and what is an
expected difference (membership timing, acquisition race) -- on synthetic captures replayed against a
scripted target that answers as a coordinator would, with its own epochs and acquisitions."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from minikafka.capture import CaptureRecord
from minikafka.capture.replay import ReplayOptions, ReplayReport, replay_records
from minikafka.capture.replay.compare import (
    ACQUISITION_RACE,
    MEMBERSHIP_TIMING,
    _Comparison,
)
from minikafka.capture.replay.report import ApiStats
from minikafka.capture.replay.rewrite import _Ctx, _Mapper
from minikafka.capture.replay.runner import _Replayer
from minikafka.client.connection import read_frame
from minikafka.protocol.api import APIS
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.framing import FrameDecoder, encode_frame
from minikafka.protocol.headers import (
    RequestHeader,
    is_flexible,
    parse_request_frame,
    request_header_version,
    response_header_bytes,
)
from minikafka.protocol.records import Record, build_batch

TOPIC_ID = uuid.UUID("0b0b0b0b-0000-4000-8000-000000000002")
A, B, S = "member-a", "member-b", "share-s"


def _request(key: int, version: int, corr: int, body: dict) -> bytes:
    hv = request_header_version(key, is_flexible(key, version))
    head = RequestHeader.build({"request_api_key": key, "request_api_version": version, "correlation_id": corr,
                                "client_id": "c"}, hv)
    return head + APIS[key].request.build(body, version)


def _response(key: int, version: int, corr: int, body: dict) -> bytes:
    return response_header_bytes(corr, key, version) + APIS[key].response.build(body, version)


def _rec(conn: str, t_ms: int, key: int, version: int, corr: int, req: dict, resp: dict) -> CaptureRecord:
    recv = t_ms * 1_000_000
    return CaptureRecord(recv, recv + 500_000, conn, "peer", 0, "User:ANONYMOUS", "c", key, version, corr,
                         _request(key, version, corr, req), _response(key, version, corr, resp))


def _assignment(parts: list[int] | None) -> dict | None:
    return None if parts is None else {"topic_partitions": [{"topic_id": TOPIC_ID, "partitions": parts}]}


def _heartbeat_resp(member: str, epoch: int, parts: list[int] | None, error: int = 0) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "member_id": member,
            "member_epoch": epoch, "heartbeat_interval_ms": 5000, "assignment": _assignment(parts)}


def _cg_heartbeat(conn: str, t_ms: int, corr: int, member: str, epoch: int, new_epoch: int,
                  parts: list[int] | None) -> CaptureRecord:
    req = {"group_id": "cg", "member_id": member, "member_epoch": epoch, "rebalance_timeout_ms": -1,
           "subscribed_topic_names": ["t"] if epoch == 0 else None}
    return _rec(conn, t_ms, K.CONSUMER_GROUP_HEARTBEAT, 1, corr, req, _heartbeat_resp(member, new_epoch, parts))


def _commit(conn: str, t_ms: int, corr: int, member: str, epoch: int) -> CaptureRecord:
    req = {"group_id": "cg", "generation_id_or_member_epoch": epoch, "member_id": member, "group_instance_id": None,
           "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5,
                                                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    resp = {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "error_code": 0}]}]}
    return _rec(conn, t_ms, K.OFFSET_COMMIT, 9, corr, req, resp)


Answer = Callable[[int, int, Any], dict]


class ScriptedTarget:
    """A broker stand-in on a TCP port: ``answer(api_key, version, body)`` makes each response body; ``log``
    keeps (api key, member id) in the order requests arrived."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.log: list[tuple[int, str | None]] = []
        self.port = 0

    async def _serve(self, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        while (frame := await read_frame(stream, decoder)) is not None:
            hdr, body = parse_request_frame(frame)
            self.log.append((hdr.api_key, body.get("member_id")))
            resp = self.answer(hdr.api_key, hdr.api_version, body)
            await stream.send_all(encode_frame(_response(hdr.api_key, hdr.api_version, hdr.correlation_id, resp)))

    async def replay(self, conns: dict, **options: Any) -> ReplayReport:
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(trio.serve_tcp, self._serve, 0)
            self.port = listeners[0].socket.getsockname()[1]
            with trio.fail_after(20):
                report = await replay_records(conns, ReplayOptions("127.0.0.1", self.port, speed=None,
                                                                   timeout_s=5, **options))
            nursery.cancel_scope.cancel()
        return report


class Coordinator:
    """Member epochs as a KIP-848 coordinator hands them out, from its own group epoch (10 on): a join gets a
    new group epoch, a heartbeat with the member's epoch may get the next one, any other epoch is fenced;
    OffsetCommit v9 checks the member epoch (STALE_MEMBER_EPOCH)."""

    def __init__(self, assignments: dict[str, list[list[int] | None]]) -> None:
        self.group_epoch = 10
        self.epochs: dict[str, int] = {}
        self.assignments = assignments  # per member, the assignment of each of its heartbeats in turn

    def __call__(self, key: int, version: int, body: Any) -> dict:
        member = body.get("member_id")
        if key == K.CONSUMER_GROUP_HEARTBEAT:
            epoch = body["member_epoch"]
            if not member:  # v0: the coordinator names the member
                member = f"replayed-{len(self.epochs)}"
                self.assignments[member] = self.assignments.pop("")
            parts = self.assignments[member].pop(0)
            if epoch == -1:
                return _heartbeat_resp(member, -1, None)
            if epoch == 0:
                self.group_epoch += 1
                self.epochs[member] = self.group_epoch
            elif epoch != self.epochs.get(member):
                return _heartbeat_resp(member, -1, None, E.FENCED_MEMBER_EPOCH)
            elif parts is not None:  # a new assignment comes with a new epoch
                self.group_epoch += 1
                self.epochs[member] = self.group_epoch
            return _heartbeat_resp(member, self.epochs[member], parts)
        if key == K.OFFSET_COMMIT:
            ok = body["generation_id_or_member_epoch"] == self.epochs.get(member)
            return {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
                {"partition_index": 0, "error_code": 0 if ok else E.STALE_MEMBER_EPOCH}]}]}
        raise AssertionError(f"unexpected api {key}")


async def test_member_epochs_are_mapped_per_member_and_sent_as_the_client_would() -> None:
    """Captured: A joins (epoch 1), B joins (2) and takes partition 1, A heartbeats (1 -> 2, keeps
    partition 0) and commits with epoch 2.  The target's epochs are 11, 12 and 13: every request goes
    out with the epoch the target gave its member (nothing fenced, the commit is not stale), epochs
    map per member (A: 1 -> 11, 2 -> 13; B: 2 -> 12), and B's assignment, which the target made
    otherwise, is an expected difference of a group with two members."""
    conns = {
        (0, "a"): [_cg_heartbeat("a", 0, 1, A, 0, 1, [0, 1]), _cg_heartbeat("a", 20, 2, A, 1, 2, [0]),
                   _commit("a", 30, 3, A, 2), _cg_heartbeat("a", 40, 4, A, 2, 2, None)],
        (0, "b"): [_cg_heartbeat("b", 10, 1, B, 0, 2, [1]), _cg_heartbeat("b", 35, 2, B, 2, 2, None)],
    }
    target = ScriptedTarget(Coordinator({A: [[0, 1], [0], None], B: [[0], None]}))
    report = await target.replay(conns)
    hb, commit = report.by_name("ConsumerGroupHeartbeat"), report.by_name("OffsetCommit")
    assert hb.received == 5 and hb.differing == 0 and not hb.error_changes, hb.to_dict()
    assert commit.received == 1 and commit.differing == 0 and commit.rewritten == 1, commit.to_dict()
    assert hb.expected_differences == {"assignment" + MEMBERSHIP_TIMING: 1}
    assert hb.rewritten == 3  # the three heartbeats with an epoch
    examples = set(report.mappings["mepoch"]["examples"])
    assert examples == {"1 -> 11", "2 -> 13", "2 -> 12"} and report.mappings["mepoch"]["mapped"] == 3


async def test_epoch_mismatch_in_a_group_of_one_is_a_difference() -> None:
    """With one member, epochs and assignments follow from its own requests: a replayed epoch other than
    the one mapped is a difference, not membership timing."""
    conns = {(0, "a"): [_cg_heartbeat("a", 0, 1, A, 0, 1, [0]), _cg_heartbeat("a", 10, 2, A, 1, 1, None),
                        _cg_heartbeat("a", 20, 3, A, 1, 1, None)]}
    # The target bumps A's epoch on its second heartbeat (a new assignment): 11, then 12 where 1 -> 11 was mapped.
    target = ScriptedTarget(Coordinator({A: [[0], [0, 1], None]}))
    report = await target.replay(conns)
    hb = report.by_name("ConsumerGroupHeartbeat")
    assert hb.received == 3 and hb.differing == 2 and not hb.expected_differences, hb.to_dict()
    assert hb.differing_fields == {"member_epoch": 2, "assignment": 1}
    # The third heartbeat carried the epoch A last got in the capture (1): sent with 12, not fenced.
    assert not hb.error_changes


async def test_a_coordinator_made_member_id_is_mapped() -> None:
    """ConsumerGroupHeartbeat v0 leaves the member id to the coordinator: the one the target makes is mapped
    and the member's later heartbeats and commits are sent with it (and its epochs)."""
    join = _rec("a", 0, K.CONSUMER_GROUP_HEARTBEAT, 0, 1, {
        "group_id": "cg", "member_id": "", "member_epoch": 0, "rebalance_timeout_ms": 300000,
        "subscribed_topic_names": ["t"]}, _heartbeat_resp("captured-0", 1, [0]))
    again = _rec("a", 10, K.CONSUMER_GROUP_HEARTBEAT, 0, 2, {
        "group_id": "cg", "member_id": "captured-0", "member_epoch": 1, "rebalance_timeout_ms": -1},
        _heartbeat_resp("captured-0", 1, None))
    conns = {(0, "a"): [join, again, _commit("a", 20, 3, "captured-0", 1)]}
    report = await ScriptedTarget(Coordinator({"": [[0], None]})).replay(conns)
    hb, commit = report.by_name("ConsumerGroupHeartbeat"), report.by_name("OffsetCommit")
    assert (hb.received, hb.differing, commit.differing) == (2, 0, 0), (hb.to_dict(), commit.to_dict())
    assert report.mappings["member"]["examples"] == ["captured-0 -> replayed-0"]
    assert set(report.mappings["mepoch"]["examples"]) == {"1 -> 11"}


def _share_heartbeat(conn: str, t_ms: int, corr: int, member: str, epoch: int, new_epoch: int) -> CaptureRecord:
    req = {"group_id": "sg", "member_id": member, "member_epoch": epoch, "rack_id": None,
           "subscribed_topic_names": ["t"] if epoch == 0 else None}
    resp = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": member,
            "member_epoch": new_epoch, "heartbeat_interval_ms": 5000, "assignment": _assignment([0, 1])}
    return _rec(conn, t_ms, K.SHARE_GROUP_HEARTBEAT, 1, corr, req, resp)


def _share_fetch_body(member: str, epoch: int, acks: dict[int, list]) -> dict:
    return {"group_id": "sg", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 100, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "acknowledgement_batches": [
                    {"first_offset": f, "last_offset": last, "acknowledge_types": [1]} for f, last in acks.get(p, [])]}
                for p in (0, 1)]}],
            "forgotten_topics_data": []}


def _share_fetch_resp(parts: list[tuple[int, list[tuple[int, int, int]], int]], error: int = 0) -> dict:
    """``parts``: (partition, acquired (first, last, delivery count), acknowledge error code)."""
    def records(acquired: list) -> bytes | None:
        if not acquired:
            return None
        first, last = acquired[0][0], acquired[-1][1]
        return build_batch([Record(offset_delta=i, value=b"v%d" % (first + i)) for i in range(last - first + 1)],
                           base_offset=first, base_timestamp=1_700_000_000_000)

    return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "acquisition_lock_timeout_ms": 30000,
            "responses": [{"topic_id": TOPIC_ID, "partitions": [
                {"partition_index": p, "error_code": 0, "error_message": None, "acknowledge_error_code": ack_err,
                 "acknowledge_error_message": None, "current_leader": {"leader_id": 0, "leader_epoch": 0},
                 "records": records(acquired),
                 "acquired_records": [{"first_offset": f, "last_offset": last, "delivery_count": dc}
                                      for f, last, dc in acquired]} for p, acquired, ack_err in parts]}],
            "node_endpoints": []}


def _share_ack(conn: str, t_ms: int, corr: int, member: str, epoch: int, acks: dict[int, list],
               errors: dict[int, int]) -> CaptureRecord:
    req = {"group_id": "sg", "member_id": member, "share_session_epoch": epoch, "topics": [
        {"topic_id": TOPIC_ID, "partitions": [
            {"partition_index": p, "acknowledgement_batches": [
                {"first_offset": f, "last_offset": last, "acknowledge_types": [1]} for f, last in batches]}
            for p, batches in acks.items()]}]}
    resp = {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
        {"topic_id": TOPIC_ID, "partitions": [
            {"partition_index": p, "error_code": errors.get(p, 0), "error_message": None,
             "current_leader": {"leader_id": 0, "leader_epoch": 0}} for p in acks]}], "node_endpoints": []}
    return _rec(conn, t_ms, K.SHARE_ACKNOWLEDGE, 1, corr, req, resp)


def _describe_offsets(conn: str, t_ms: int, corr: int, start: int) -> CaptureRecord:
    req = {"groups": [{"group_id": "sg", "topics": [{"topic_name": "t", "partitions": [0]}]}]}
    return _rec(conn, t_ms, K.DESCRIBE_SHARE_GROUP_OFFSETS, 1, corr, req, _describe_offsets_resp(start))


def _describe_offsets_resp(start: int, error: int = 0) -> dict:
    return {"throttle_time_ms": 0, "groups": [{"group_id": "sg", "topics": [
        {"topic_name": "t", "topic_id": TOPIC_ID, "partitions": [
            {"partition_index": 0, "start_offset": start, "leader_epoch": 0, "lag": 0, "error_code": error,
             "error_message": None}]}], "error_code": 0, "error_message": None}]}


def _share_capture() -> dict:
    """S joins share group "sg"; its first ShareFetch acquires p0 0-4 (p1 1-2), the second accepts p0 0-4 and
    acquires p0 5-9 (p1 nothing), a ShareAcknowledge accepts p0 5-9; the group's start offset is then 10."""
    fetch1 = _rec("f", 10, K.SHARE_FETCH, 1, 1, _share_fetch_body(S, 0, {}),
                  _share_fetch_resp([(0, [(0, 4, 1)], 0), (1, [(1, 2, 1)], 0)]))
    fetch2 = _rec("f", 20, K.SHARE_FETCH, 1, 2, _share_fetch_body(S, 1, {0: [(0, 4)]}),
                  _share_fetch_resp([(0, [(5, 9, 1)], 0), (1, [], 0)]))
    return {(0, "c"): [_share_heartbeat("c", 0, 1, S, 0, 1), _describe_offsets("c", 50, 2, 10)],
            (0, "f"): [fetch1, fetch2, _share_ack("f", 30, 3, S, 2, {0: [(5, 9)]}, {})]}


def _share_target(first_acquired: list[tuple[int, int, int]], describe_error: int = 0) -> ScriptedTarget:
    """A share-group broker whose first ShareFetch acquires ``first_acquired`` of p0 (p1 as captured) and
    answers the rest as if it acquired p0 in one go from there; partitions in reverse order."""
    state = {"fetches": 0}

    def answer(key: int, version: int, body: Any) -> dict:
        if key == K.SHARE_GROUP_HEARTBEAT:
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": body["member_id"],
                    "member_epoch": 5, "heartbeat_interval_ms": 5000, "assignment": _assignment([0, 1])}
        if key == K.SHARE_FETCH:
            state["fetches"] += 1
            if state["fetches"] == 1:
                return _share_fetch_resp([(1, [(1, 2, 1)], 0), (0, first_acquired, 0)])
            next_first = first_acquired[-1][1] + 1
            diverged = next_first != 5
            return _share_fetch_resp([(1, [], 0), (0, [(next_first, 9, 1)], E.INVALID_RECORD_STATE if diverged else 0)])
        if key == K.SHARE_ACKNOWLEDGE:
            return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
                {"topic_id": TOPIC_ID, "partitions": [{"partition_index": 0, "error_code": 0, "error_message": None,
                                                       "current_leader": {"leader_id": 0, "leader_epoch": 0}}]}],
                    "node_endpoints": []}
        if key == K.DESCRIBE_SHARE_GROUP_OFFSETS:
            return _describe_offsets_resp(10, describe_error)
        raise AssertionError(f"unexpected api {key}")

    return ScriptedTarget(answer)


async def test_share_fetch_as_captured_is_equal_whatever_the_partition_order() -> None:
    target = _share_target([(0, 4, 1)])
    report = await target.replay(_share_capture())
    fetch = report.by_name("ShareFetch")
    assert (fetch.received, fetch.equal, fetch.differing) == (2, 2, 0), fetch.to_dict()
    assert not any(ACQUISITION_RACE in k for k in fetch.expected_differences)
    assert report.by_name("DescribeShareGroupOffsets").equal == 1


async def test_share_fetch_acquisition_race_is_an_expected_difference() -> None:
    """The target's first ShareFetch acquires p0 0-2 where the capture's acquired 0-4: the acquisitions and
    records differ as expected, the captured acknowledgement of 0-4 then fails INVALID_RECORD_STATE (expected:
    S's acquisitions diverged); everything else is compared, and a real difference is still one."""
    target = _share_target([(0, 2, 1)], describe_error=E.GROUP_ID_NOT_FOUND)
    report = await target.replay(_share_capture())
    fetch = report.by_name("ShareFetch")
    assert (fetch.received, fetch.differing) == (2, 0), fetch.to_dict()
    race = {k: v for k, v in fetch.expected_differences.items() if k.endswith(ACQUISITION_RACE)}
    assert race == {
        "responses[].partitions[].acquired_records" + ACQUISITION_RACE: 2,
        "responses[].partitions[].records" + ACQUISITION_RACE: 2,
        "responses[].partitions[].acknowledge_error_code NONE -> INVALID_RECORD_STATE" + ACQUISITION_RACE: 1}
    assert not fetch.error_changes and fetch.replayed_errors == {"INVALID_RECORD_STATE": 1}
    assert report.by_name("ShareAcknowledge").equal == 1
    # The describe's error is a real difference; its start offset (equal here) would have been expected.
    describe = report.by_name("DescribeShareGroupOffsets")
    assert describe.differing == 1 and describe.error_changes == {"NONE -> GROUP_ID_NOT_FOUND": 1}


async def test_a_member_request_waits_for_the_heartbeat_that_made_its_member() -> None:
    """A client-made member id is introduced by the heartbeat joining with it: the member's ShareFetch (on
    another connection, with causality per connection) waits for that heartbeat's answer, as a SyncGroup
    waits for its JoinGroup's; the heartbeat itself does not wait for itself."""
    conns = _share_capture()
    recs = [r for rs in conns.values() for r in rs]
    replayer = _Replayer(conns, ReplayOptions("127.0.0.1", 1, speed=None, causality="connection", timeout_s=30))
    plan = replayer.plan
    rids = {(plan.keys[c][1], r.correlation_id): plan.rid(c, i) for c, rs in replayer.conns.items()
            for i, r in enumerate(rs)}
    join = rids[("c", 1)]
    # It introduces the member, the member epoch it gets, and (no Metadata in this capture) the topic id.
    assert set(replayer.dependencies.introduced_by(join)) == {("member", S), ("mepoch", S, 1), ("topic", TOPIC_ID)}
    assert len(recs) == replayer.total
    rec_of = {plan.rid(c, i): r for c, rs in replayer.conns.items() for i, r in enumerate(rs)}
    # The plan orders the ShareFetch after the joining heartbeat (the value it needs), across connections.
    hb_conn, hb_pos = plan.conn_of(join)
    assert (hb_conn, hb_pos + 1) in zip(plan.deps[rids[("f", 1)]][::2], plan.deps[rids[("f", 1)]][1::2])
    done: list[str] = []

    async def prepare(name: str, rid: int) -> None:
        await replayer.rewriter.prepare(rid, rec_of[rid], 99)
        done.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(prepare, "heartbeat", join)
        nursery.start_soon(prepare, "fetch", rids[("f", 1)])
        await trio.testing.wait_all_tasks_blocked()
        assert done == ["heartbeat"]  # the ShareFetch is held
        replayer.mapper.learn(("topic", TOPIC_ID), TOPIC_ID)
        await trio.testing.wait_all_tasks_blocked()
        assert done == ["heartbeat"]  # still: its member is not known yet
        replayer.mapper.learn(("member", S), S)  # the heartbeat's answer names the member
        await trio.testing.wait_all_tasks_blocked()
    assert done == ["heartbeat", "fetch"]


async def test_share_fetch_reaches_the_target_after_the_join_heartbeat_is_answered() -> None:
    conns = _share_capture()
    target = _share_target([(0, 4, 1)])
    report = await target.replay(conns, causality="connection")
    assert report.failed == 0
    order = [k for k, m in target.log if m == S]
    assert order.index(K.SHARE_GROUP_HEARTBEAT) < order.index(K.SHARE_FETCH)


def test_describe_members_compare_as_a_set_and_timing_counts_only_in_shared_groups() -> None:
    def describe(members: list[tuple[str, int]], state: str = "Stable", host: str = "/10.0.0.1") -> dict:
        return {"throttle_time_ms": 0, "groups": [{
            "error_code": 0, "error_message": None, "group_id": "g", "group_state": state,
            "group_epoch": 3, "assignment_epoch": 3, "assignor_name": "simple",
            "members": [{"member_id": m, "rack_id": None, "member_epoch": e, "client_id": "c",
                         "client_host": host, "subscribed_topic_names": ["t"],
                         "assignment": {"topic_partitions": []}} for m, e in members],
            "authorized_operations": -2147483648}]}

    def compare(cap: dict, rep: dict, shared: bool) -> tuple[_Comparison, ApiStats]:
        mapper = _Mapper()
        if shared:
            mapper.shared_groups.add("g")
        stats = ApiStats(K.SHARE_GROUP_DESCRIBE)
        raw = APIS[K.SHARE_GROUP_DESCRIBE].response
        cap_body, rep_body = (raw.parse(raw.build(b, 1), 1) for b in (cap, rep))
        cmp = _Comparison(mapper, _Ctx(0, None, {"m1", "m2"}, K.SHARE_GROUP_DESCRIBE), stats)
        cmp.compare_body(cap_body, rep_body)
        return cmp, stats

    # Listed in another order, another client host: equal.
    cmp, stats = compare(describe([("m1", 3), ("m2", 3)]), describe([("m2", 3), ("m1", 3)], host="/10.0.0.2"),
                         shared=False)
    assert not cmp.diffs and stats.expected_differences == {"groups[].members[].client_host": 2}
    # A member missing and another state: differences in a group of one member, expected in a shared one.
    cmp, _ = compare(describe([("m1", 3), ("m2", 3)]), describe([("m1", 3)], "Reconciling"), shared=False)
    assert {d[0] for d in cmp.diffs} == {"groups[0].group_state", "groups[0].members.length"}
    cmp, stats = compare(describe([("m1", 3), ("m2", 3)]), describe([("m1", 3)], "Reconciling"), shared=True)
    assert not cmp.diffs
    assert stats.expected_differences == {"groups[].members" + MEMBERSHIP_TIMING: 1,
                                          "groups[].group_state" + MEMBERSHIP_TIMING: 1}
