"""Wire replay routing on a cluster target: leaders, coordinators, splitting and merging, metadata refresh."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from minikafka.capture.replay.routing import (
    Route,
    TargetCluster,
    fetch_in_session,
    merge_responses,
    parse_bootstrap,
    split_request,
)
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import APIS
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import ClusterThread
from minikafka.common.clock import SYSTEM_CLOCK

TOPIC = "routed"


def _parsed(api_key: int, version: int, body: dict) -> Any:
    """A request body as the replay has it: built and parsed back (construct Containers, defaults filled)."""
    msg = APIS[api_key].request
    return msg.parse(msg.build(body, version), version)


def _produce(parts: list[tuple[str, int]]) -> dict:
    batch = build_batch([Record(value=b"v")], base_timestamp=SYSTEM_CLOCK.time_ms())
    topics: dict[str, list] = {}
    for t, p in parts:
        topics.setdefault(t, []).append({"index": p, "records": batch})
    return {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}


async def _connect(host: str, port: int) -> trio.abc.Stream:
    return await trio.open_tcp_stream(host, port)


async def _send(tc: TargetCluster, node: int, api_key: int, version: int, body: Any) -> Any:
    host, port = tc.address(node)
    async with await KafkaConnection.connect(host, port, client_id="routing-test") as conn:
        return await conn.request(api_key, version, body)


@pytest.fixture(scope="module")
def cluster() -> Any:
    with ClusterThread(3) as c:
        c.create_topic(TOPIC, partitions=6)
        yield c


async def _leader(cluster: ClusterThread, topic: str, partition: int) -> int:
    return await trio.to_thread.run_sync(cluster.leader, topic, partition)


def _run(afn: Any, *args: Any) -> Any:
    return trio.run(afn, *args)


# -- pure ---------------------------------------------------------------------------------------


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("h1:1, h2:2,[::1]:3") == [("h1", 1), ("h2", 2), ("::1", 3)]
    with pytest.raises(ValueError):
        parse_bootstrap("h1")


def test_fetch_session_semantics() -> None:
    assert not fetch_in_session(6, {"session_id": 5, "session_epoch": 3})  # no sessions before v7
    assert not fetch_in_session(13, {"session_id": 0, "session_epoch": -1})  # a full fetch without session
    assert fetch_in_session(13, {"session_id": 0, "session_epoch": 0})  # creates one
    assert fetch_in_session(13, {"session_id": 7, "session_epoch": 2})  # incremental
    assert fetch_in_session(13, {"session_id": 7, "session_epoch": -1})  # closes session 7


def test_split_and_merge_keep_the_captured_order() -> None:
    body = _parsed(K.PRODUCE, 9, _produce([("a", 0), ("a", 1), ("b", 0), ("a", 2)]))
    leaders = {("a", 0): 1, ("a", 1): 2, ("b", 0): 2, ("a", 2): 1}
    parts = split_request(K.PRODUCE, 9, body, leaders)
    assert list(parts) == [1, 2]
    assert [(t.name, [p.index for p in t.partition_data]) for t in parts[1].topic_data] == [("a", [0, 2])]
    assert [(t.name, [p.index for p in t.partition_data]) for t in parts[2].topic_data] == [("a", [1]), ("b", [0])]
    assert parts[1].acks == parts[2].acks == -1
    assert [p.index for t in body.topic_data for p in t.partition_data] == [0, 1, 2, 0]  # not modified

    def answer(part: Any, throttle: int) -> dict:
        return {"throttle_time_ms": throttle, "responses": [
            {"name": t.name, "partition_responses": [{"index": p.index, "error_code": 0, "base_offset": p.index * 10}
                                                     for p in t.partition_data]} for t in part.topic_data]}

    merged = merge_responses(K.PRODUCE, 9, {1: answer(parts[1], 5), 2: answer(parts[2], 9)}, body)
    assert [(t["name"], [p["index"] for p in t["partition_responses"]]) for t in merged["responses"]] == \
        [("a", [0, 1, 2]), ("b", [0])]
    assert merged["throttle_time_ms"] == 9


def test_split_sessionless_fetch_by_topic_id() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    body = _parsed(K.FETCH, 13, {
        "max_wait_ms": 500, "min_bytes": 1, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": a, "partitions": [{"partition": i, "fetch_offset": 0, "partition_max_bytes": 1}
                                                  for i in range(3)]},
                   {"topic_id": b, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1}]}]})
    parts = split_request(K.FETCH, 13, body, {(a, 0): 0, (a, 1): 1, (a, 2): 2, (b, 0): 0})
    assert {n: [(t.topic_id, [p.partition for p in t.partitions]) for t in part.topics] for n, part in parts.items()} \
        == {0: [(a, [0]), (b, [0])], 1: [(a, [1])], 2: [(a, [2])]}
    resp = {n: {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [
        {"topic_id": t.topic_id, "partitions": [{"partition_index": p.partition, "error_code": n}
                                                for p in t.partitions]} for t in part.topics]}
            for n, part in parts.items()}
    merged = merge_responses(K.FETCH, 13, resp, body)
    assert [(t["topic_id"], [(p["partition_index"], p["error_code"]) for p in t["partitions"]])
            for t in merged["responses"]] == [(a, [(0, 0), (1, 1), (2, 2)]), (b, [(0, 0)])]


# -- against a 3-broker cluster -----------------------------------------------------------------


def test_partitions_route_to_their_leaders(cluster: ClusterThread) -> None:
    bootstrap = parse_bootstrap(cluster.bootstrap)

    async def main() -> None:
        async with TargetCluster(bootstrap, _connect) as tc:
            assert tc.nodes == sorted(cluster.broker_ids)
            seen = set()
            for p in range(6):
                body = _parsed(K.PRODUCE, 9, _produce([(TOPIC, p)]))
                node = await tc.route(K.PRODUCE, body, 9)
                assert node == await _leader(cluster, TOPIC, p)
                seen.add(node)
                resp = await _send(tc, node, K.PRODUCE, 9, body)
                assert resp.responses[0].partition_responses[0].error_code == 0
                other = next(n for n in tc.nodes if n != node)
                resp = await _send(tc, other, K.PRODUCE, 9, body)
                assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert seen == set(tc.nodes)
            # by the (replayed) topic id: ListOffsets has names, Fetch v13 ids
            tid = next(k for k in tc.topic_names)
            fetch = _parsed(K.FETCH, 13, {"max_wait_ms": 0, "min_bytes": 0, "session_id": 0, "session_epoch": -1,
                                          "topics": [{"topic_id": tid, "partitions": [
                                              {"partition": 4, "fetch_offset": 0, "partition_max_bytes": 100}]}]})
            assert await tc.route(K.FETCH, fetch, 13) == await _leader(cluster, TOPIC, 4)
            assert await tc.route(K.METADATA, _parsed(K.METADATA, 12, {"topics": None}), 12) is None

    _run(main)


def test_a_request_spanning_leaders_is_split_and_merged(cluster: ClusterThread) -> None:
    async def main() -> None:
        async with TargetCluster(parse_bootstrap(cluster.bootstrap), _connect) as tc:
            body = _parsed(K.PRODUCE, 9, _produce([(TOPIC, p) for p in (5, 0, 1, 2, 3, 4)]))
            route = await tc.plan(K.PRODUCE, 9, body)
            assert route.parts is not None and set(route.parts) == set(tc.nodes)
            answers = {n: await _send(tc, n, K.PRODUCE, 9, part) for n, part in route.parts.items()}
            merged = merge_responses(K.PRODUCE, 9, answers, body)
            got = [(p.index, p.error_code) for t in merged.responses for p in t.partition_responses]
            assert got == [(p, 0) for p in (5, 0, 1, 2, 3, 4)]
            tc.count(K.PRODUCE, route, route.node or -1)
            assert tc.stats.split == 1 and dict(tc.stats.routed["Produce"]) == {n: 1 for n in tc.nodes}
            assert tc.stats.to_dict()["routed"]["Produce"] == {str(n): 1 for n in tc.nodes}
            lo = _parsed(K.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": p, "timestamp": -1} for p in range(6)]}]})
            route = await tc.plan(K.LIST_OFFSETS, 7, lo)
            assert route.parts is not None
            answers = {n: await _send(tc, n, K.LIST_OFFSETS, 7, part) for n, part in route.parts.items()}
            merged = merge_responses(K.LIST_OFFSETS, 7, answers, lo)
            assert [(p.partition_index, p.error_code) for p in merged.topics[0].partitions] == \
                [(p, 0) for p in range(6)]
            assert all(p.offset >= 1 for p in merged.topics[0].partitions)

    _run(main)


def test_group_and_transaction_requests_go_to_their_coordinators(cluster: ClusterThread) -> None:
    async def main() -> None:
        async with TargetCluster(parse_bootstrap(cluster.bootstrap), _connect) as tc:
            nodes_seen = set()
            for g in (f"group-{i}" for i in range(6)):
                commit = _parsed(K.OFFSET_COMMIT, 8, {"group_id": g, "generation_id_or_member_epoch": -1,
                                                      "member_id": "", "topics": [{"name": TOPIC, "partitions": [
                                                          {"partition_index": 0, "committed_offset": 1,
                                                           "committed_metadata": None}]}]})
                node = await tc.route(K.OFFSET_COMMIT, commit, 8)
                assert node is not None
                nodes_seen.add(node)
                resp = await _send(tc, node, K.OFFSET_COMMIT, 8, commit)
                assert resp.topics[0].partitions[0].error_code == 0
                for other in (n for n in tc.nodes if n != node):
                    resp = await _send(tc, other, K.OFFSET_COMMIT, 8, commit)
                    assert resp.topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
                heartbeat = _parsed(K.HEARTBEAT, 4, {"group_id": g, "generation_id": 1, "member_id": "m"})
                assert await tc.route(K.HEARTBEAT, heartbeat, 4) == node  # cached
            assert len(nodes_seen) > 1
            lookups = tc.stats.coordinator_lookups
            init = _parsed(K.INIT_PRODUCER_ID, 4, {"transactional_id": "tx-1", "transaction_timeout_ms": 60000})
            node = await tc.route(K.INIT_PRODUCER_ID, init, 4)
            assert node is not None and tc.stats.coordinator_lookups == lookups + 1
            resp = await _send(tc, node, K.INIT_PRODUCER_ID, 4, init)
            assert resp.error_code == 0 and resp.producer_id >= 0
            idempotent = _parsed(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1})
            assert await tc.route(K.INIT_PRODUCER_ID, idempotent, 4) is None
            end = _parsed(K.END_TXN, 3, {"transactional_id": "tx-1", "producer_id": resp.producer_id,
                                         "producer_epoch": resp.producer_epoch, "committed": False})
            assert await tc.route(K.END_TXN, end, 3) == node

    _run(main)


def test_metadata_is_refreshed_after_topic_changes_and_stale_leaders(cluster: ClusterThread) -> None:
    async def main() -> None:
        async with TargetCluster(parse_bootstrap(cluster.bootstrap), _connect, refresh_backoff_s=0.01) as tc:
            # a topic the target does not have: one refresh, then no more until metadata changes
            missing = _parsed(K.PRODUCE, 9, _produce([("nowhere", 0)]))
            refreshes = tc.stats.metadata_refreshes
            assert await tc.route(K.PRODUCE, missing, 9) is None
            assert await tc.route(K.PRODUCE, missing, 9) is None
            assert tc.stats.metadata_refreshes == refreshes + 1
            # created after start (by another connection of the replay): found
            await trio.to_thread.run_sync(cluster.create_topic, "later", 3)
            tc.observe(K.CREATE_TOPICS, None, {"topics": [{"name": "later", "error_code": 0}]})
            later = _parsed(K.PRODUCE, 9, _produce([("later", 2)]))
            assert await tc.route(K.PRODUCE, later, 9) == await _leader(cluster, "later", 2)
            # leadership moves: the old leader answers NOT_LEADER_OR_FOLLOWER, the route follows
            body = _parsed(K.PRODUCE, 9, _produce([(TOPIC, 1)]))
            old = await tc.route(K.PRODUCE, body, 9)
            assert old is not None
            new = next(n for n in tc.nodes if n != old)
            # sent to a node that is not the leader on purpose (a session fetch spanning leaders): not stale
            resp = await _send(tc, new, K.PRODUCE, 9, body)
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            refreshes = tc.stats.metadata_refreshes
            tc.observe(K.PRODUCE, body, resp, new)
            assert await tc.route(K.PRODUCE, body, 9) == old and tc.stats.metadata_refreshes == refreshes
            await trio.to_thread.run_sync(cluster.move_leader, TOPIC, 1, new)
            resp = await _send(tc, old, K.PRODUCE, 9, body)
            assert resp.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            tc.observe(K.PRODUCE, body, resp, old)
            assert await tc.route(K.PRODUCE, body, 9) == new
            resp = await _send(tc, new, K.PRODUCE, 9, body)
            assert resp.responses[0].partition_responses[0].error_code == 0

    _run(main)


def test_a_fetch_session_stays_on_its_node(cluster: ClusterThread) -> None:
    async def main() -> None:
        async with TargetCluster(parse_bootstrap(cluster.bootstrap), _connect) as tc:
            def fetch(sid: int, epoch: int, parts: list[int]) -> Any:
                return _parsed(K.FETCH, 12, {"max_wait_ms": 0, "min_bytes": 0, "session_id": sid,
                                             "session_epoch": epoch, "topics": [{"topic": TOPIC, "partitions": [
                                                 {"partition": p, "fetch_offset": 0, "partition_max_bytes": 10}
                                                 for p in parts]}] if parts else []})
            start = fetch(0, 0, [0, 1, 2])
            route = await tc.plan(K.FETCH, 12, start, conn="c1")
            assert route == Route(await _leader(cluster, TOPIC, 0), None, unsplittable=True)
            resp = await _send(tc, route.node or 0, K.FETCH, 12, start)
            assert resp.session_id != 0
            codes = {p.partition_index: p.error_code for t in resp.responses for p in t.partitions}
            assert codes[0] == 0 and ErrorCode.NOT_LEADER_OR_FOLLOWER in codes.values()
            # incremental fetches (nothing changed, or another partition) stay on the session's node
            assert await tc.route(K.FETCH, fetch(resp.session_id, 1, []), 12, conn="c1") == route.node
            assert await tc.route(K.FETCH, fetch(resp.session_id, 2, [1]), 12, conn="c1") == route.node
            # another connection's session starts where its first partition is led
            assert await tc.route(K.FETCH, fetch(0, 0, [1]), 12, conn="c2") == await _leader(cluster, TOPIC, 1)
            # a sessionless fetch spanning leaders is split
            assert (await tc.plan(K.FETCH, 12, fetch(0, -1, [0, 1, 2]), conn="c1")).parts is not None

    _run(main)


# -- a replay routed on a cluster ----------------------------------------------------------------

SPREAD, GROUP, MESSAGES = "spread", "spread-group", 90


@pytest.fixture(scope="module")
def one_broker_capture(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """confluent-kafka on one broker: a 3-partition topic created, produced to and consumed in a group."""
    import time

    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from minikafka.broker.config import BrokerConfig
    from minikafka.testing import BrokerThread

    cap = tmp_path_factory.mktemp("routing") / "cap"
    with BrokerThread(BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0)) as bt:
        admin = AdminClient({"bootstrap.servers": bt.bootstrap})
        admin.create_topics([NewTopic(SPREAD, 3, 1)])[SPREAD].result(10)
        p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 5, "client.id": "spread-producer"})
        for i in range(MESSAGES):
            p.produce(SPREAD, b"value-%d" % i, partition=i % 3)
            if i % 10 == 9:
                p.poll(0)
        assert p.flush(10) == 0
        c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": GROUP, "client.id": "spread-consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 50})
        c.subscribe([SPREAD])
        got, deadline = 0, time.monotonic() + 20
        while got < MESSAGES and time.monotonic() < deadline:
            got += len([m for m in c.consume(100, timeout=0.5) if m.error() is None])
        c.commit(asynchronous=False)
        c.close()
        assert got == MESSAGES
        del p
    return cap


def _count(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "count"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(SPREAD, p), timeout=10)[1] for p in range(3))
    finally:
        c.close()


def _options(cluster: ClusterThread, **kw: Any) -> Any:
    from minikafka.capture.replay import ReplayOptions

    bootstrap = parse_bootstrap(cluster.bootstrap)
    return ReplayOptions(*bootstrap[0], bootstrap=bootstrap, speed=None, **kw)


def test_replay_on_a_cluster_goes_to_leaders_and_coordinators(one_broker_capture: Any) -> None:
    from minikafka.capture.replay import run_replay

    with ClusterThread(3, group_initial_rebalance_delay_ms=0) as target:
        report = run_replay([one_broker_capture], _options(target))
        assert _count(target.bootstrap) == MESSAGES
    produce = report.by_name("Produce")
    assert produce.sent > 0 and produce.differing == 0 and not produce.replayed_errors, produce.to_dict()
    assert set(report.routed["Produce"]) == {0, 1, 2}, report.routed
    for name in ("JoinGroup", "SyncGroup", "OffsetCommit", "OffsetFetch", "LeaveGroup"):
        st = report.by_name(name)
        assert st.sent > 0 and st.differing == 0, (name, st.to_dict())
        assert len(report.routed[name]) == 1  # the group's coordinator, always
    fetch = report.by_name("Fetch")
    assert fetch.sent > 0 and not any("NOT_LEADER" in k for k in fetch.replayed_errors), fetch.to_dict()
    assert report.split > 0 and report.failed == 0 and report.connections_failed == 0
    assert "routed" in report.summary() and report.to_dict()["routed"]["Produce"]


def test_replay_reconnects_when_the_target_closes_a_connection(one_broker_capture: Any) -> None:
    from minikafka.capture.replay import run_replay

    with ClusterThread(3, group_initial_rebalance_delay_ms=0) as target:
        # Closes the connection the first consumer Fetch came on (not a follower's of __consumer_offsets).
        rule = target.faults.add(api="Fetch", topic=SPREAD, drop="before", count=1)
        report = run_replay([one_broker_capture], _options(target))
        assert _count(target.bootstrap) == MESSAGES
    assert rule.matched == 1
    fetch = report.by_name("Fetch")
    assert fetch.lost == 1 and fetch.received == fetch.sent - 1 >= 3, fetch.to_dict()
    assert report.reconnects >= 1  # the consumer's next fetches to that broker went on a new connection
    assert report.sent == report.requests and report.failed == 1
    assert all(st.received == st.sent for st in report.per_api.values() if st.name != "Fetch")
    assert report.to_dict()["reconnects"] == report.reconnects and "reconnects" in report.summary()
