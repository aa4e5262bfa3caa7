"""The replay plan: which requests of other connections each request waits for (see minikafka.capture.replay.plan)."""

from __future__ import annotations

from minikafka.capture import CaptureRecord
from minikafka.capture.replay import build_plan, group_connections
from minikafka.capture.replay.causality import Progress
from minikafka.protocol.api import APIS
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.headers import RequestHeader, is_flexible, request_header_version, response_header_bytes

import trio
import trio.testing


def _rec(conn: str, recv_ms: float, comp_ms: float, key: int, version: int, corr: int, req: dict,
         resp: dict) -> CaptureRecord:
    hv = request_header_version(key, is_flexible(key, version))
    head = RequestHeader.build({"request_api_key": key, "request_api_version": version, "correlation_id": corr,
                                "client_id": conn}, hv)
    return CaptureRecord(int(recv_ms * 1e6), int(comp_ms * 1e6), conn, "peer", 0, "User:ANONYMOUS", conn, key,
                         version, corr, head + APIS[key].request.build(req, version),
                         response_header_bytes(corr, key, version) + APIS[key].response.build(resp, version))


def _create(conn: str, recv: float, comp: float) -> CaptureRecord:
    return _rec(conn, recv, comp, K.CREATE_TOPICS, 5, 1, {
        "topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}],
        "timeout_ms": 1000, "validate_only": False}, {
        "throttle_time_ms": 0, "topics": [{"name": "t", "error_code": 0, "error_message": None, "num_partitions": 1,
                                           "replication_factor": 1, "configs": []}]})


def _produce(conn: str, recv: float, comp: float, corr: int) -> CaptureRecord:
    return _rec(conn, recv, comp, K.PRODUCE, 8, corr, {
        "transactional_id": None, "acks": 1, "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b""}]}]}, {
        "responses": [{"name": "t", "partition_responses": [{
            "index": 0, "error_code": 0, "base_offset": corr - 1, "log_append_time_ms": -1, "log_start_offset": 0,
            "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0})


def _fetch(conn: str, recv: float, comp: float, corr: int, hw: int = 0) -> CaptureRecord:
    return _rec(conn, recv, comp, K.FETCH, 11, corr, {
        "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1000, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "topics": [{"topic": "t", "partitions": [{
            "partition": 0, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
            "partition_max_bytes": 1000}]}], "forgotten_topics_data": [], "rack_id": ""}, {
        "throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [{
            "partition_index": 0, "error_code": 0, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": 0, "aborted_transactions": [], "preferred_read_replica": -1, "records": b""}]}]})


def _join(conn: str, recv: float, comp: float, member: str) -> CaptureRecord:
    return _rec(conn, recv, comp, K.JOIN_GROUP, 5, 1, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]}, {
        "throttle_time_ms": 0, "error_code": 0, "generation_id": 1, "protocol_name": "range", "leader": member,
        "member_id": member, "members": []})


def _heartbeat(conn: str, recv: float, comp: float) -> CaptureRecord:
    return _rec(conn, recv, comp, K.HEARTBEAT, 3, 1, {
        "group_id": "g", "generation_id": 0, "member_id": "old", "group_instance_id": None},
        {"throttle_time_ms": 0, "error_code": 27})


def _capture(second_fetch_saw: int = 2) -> list[CaptureRecord]:
    return [
        _create("admin", 0, 1),
        _produce("prod", 2, 3, 1), _produce("prod", 10, 11, 2),
        _fetch("cons", 4, 8, 1, hw=1), _fetch("cons", 9, 12, 2, hw=second_fetch_saw),
        _join("m1", 20, 40, "m1-x"), _join("m2", 30, 40, "m2-x"), _heartbeat("m3", 35, 36),
    ]


def _deps(plan, conn: str, pos: int) -> dict:
    """A request's dependencies by connection name: name -> count (settled) or ("sent", count)."""
    c = [k[1] for k in plan.keys].index(conn)
    d = plan.deps[plan.rid(c, pos)]
    return {plan.keys[d[i]][1]: d[i + 1] if d[i + 1] >= 0 else ("sent", -d[i + 1]) for i in range(0, len(d), 2)}


def test_topic_data_and_group_dependencies_across_connections() -> None:
    plan = build_plan(group_connections(_capture()))
    # Topic created on one connection before it is written on another.
    assert _deps(plan, "prod", 0) == {"admin": 1}
    # A fetch waits for the produce received before it (and for the topic); a produce for the fetch answered
    # before it, and for its own connection's earlier request, answered before it was received.
    assert _deps(plan, "cons", 0) == {"admin": 1, "prod": 1}
    assert _deps(plan, "prod", 1) == {"admin": 1, "cons": 1, "prod": 1}
    # The second fetch was received before the second produce: it does not wait for it at a paced speed.
    assert _deps(plan, "cons", 1) == {"admin": 1, "prod": 1, "cons": 1}
    # Group order: the second JoinGroup and the heartbeat go out after the earlier joins were *sent* (they were
    # still waiting for the rebalance when the next request was received: waiting for their answers would
    # change the rebalance).
    assert _deps(plan, "m1", 0) == {}
    assert _deps(plan, "m2", 0) == {"m1": ("sent", 1)}
    assert _deps(plan, "m3", 0) == {"m1": ("sent", 1), "m2": ("sent", 1)}
    assert plan.cross_dependencies == 10
    assert [sorted(plan.keys[c][1] for c in comp) for comp in plan.components()] == \
        [["admin", "cons", "prod"], ["m1", "m2", "m3"]]


def test_at_max_speed_a_long_poll_is_sent_after_what_its_answer_saw() -> None:
    plan = build_plan(group_connections(_capture()), max_speed=True)
    c = [k[1] for k in plan.keys].index("cons")
    # The first fetch saw only what was there when it was received: answered at once (MaxWaitMs 0), later.
    assert plan.long_poll[plan.rid(c, 0)] == 1
    # The second was woken by the second produce (received while it waited, from one connection): it goes out
    # right after that produce was sent, with its MaxWaitMs, and is answered with it as in the capture.
    assert plan.long_poll[plan.rid(c, 1)] == 0
    assert _deps(plan, "cons", 1) == {"admin": 1, "prod": ("sent", 2), "cons": 1}
    assert _deps(plan, "prod", 1) == {"admin": 1, "cons": 1, "prod": 1}
    # Had its answer not seen that produce (high watermark 1), the produce would wait for it instead.
    plan = build_plan(group_connections(_capture(second_fetch_saw=1)), max_speed=True)
    assert _deps(plan, "cons", 1) == {"admin": 1, "prod": 1, "cons": 1}
    assert _deps(plan, "prod", 1) == {"admin": 1, "cons": 2, "prod": 1}


def test_connection_causality_keeps_only_each_connections_order() -> None:
    plan = build_plan(group_connections(_capture()), causality="connection")
    assert plan.cross_dependencies == 0
    assert _deps(plan, "prod", 1) == {"prod": 1}  # its own first request, answered before it was received


async def test_progress_wakes_settled_and_sent_waiters() -> None:
    progress = Progress([3, 2])
    woke: list[str] = []

    async def waiter(name: str, deps: tuple[int, ...]) -> None:
        await progress.wait(deps)
        woke.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "settled 2", (0, 2))
        nursery.start_soon(waiter, "sent 1", (1, -1))
        await trio.testing.wait_all_tasks_blocked()
        progress.settle(0, 1)  # out of order: the prefix stays 0
        progress.mark_sent(1, 0)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == ["sent 1"] and progress.prefix[0] == 0
        progress.settle(0, 0)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == ["sent 1", "settled 2"] and progress.prefix[0] == 2
    progress.advance(1, 2)  # remote progress
    assert progress.satisfied((1, 2, 0, -2)) and progress.blocked_on((0, 3)) == [(0, 3)]
