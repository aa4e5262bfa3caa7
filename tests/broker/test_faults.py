"""Fault injection in the request path: what rules match, what their actions do, how they are counted
and captured.  Raw protocol requests against a broker on the test's Trio loop."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from helpers import batch, create, fetch, produce, values, wait_until
from minikafka.capture.recorder import CAPTURE
from minikafka.analysis.decode import COLUMNS, RecordDecoder
from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.faults import FaultInjector, FaultRule
from minikafka.broker.prometheus import render
from minikafka.capture import read_capture
from minikafka.client.connection import KafkaConnection
from minikafka.common import ManualClock
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E

NOT_LEADER = E.NOT_LEADER_OR_FOLLOWER
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


async def produce_two(conn: KafkaConnection, topic: str, version: int = 9) -> dict[int, int]:
    """Produce one record to partitions 0 and 1 in one request; error code per partition."""
    resp = await conn.request(K.PRODUCE, version, {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch([b"p0"])},
                                           {"index": 1, "records": batch([b"p1"])}]}]})
    return {p.index: p.error_code for t in resp.responses for p in t.partition_responses}


async def connect(broker: Broker, client_id: str = "raw-test") -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", broker.port, client_id=client_id)


# -- matching -------------------------------------------------------------------------------------
async def test_count_faults_the_next_n_requests_then_stops(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "t")
    rule = broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=2)
    codes = [(await produce(conn, "t", batch([b"v%d" % i]))).error_code for i in range(3)]
    assert codes == [NOT_LEADER, NOT_LEADER, 0]
    assert (rule.matched, rule.remaining) == (2, 0)
    assert values((await fetch(conn, "t")).records) == [b"v2"]  # refused batches were not appended
    [listed] = broker.faults.as_json()
    assert listed["remaining"] == 0 and listed["matched"] == 2 and listed["error"] == "NOT_LEADER_OR_FOLLOWER"


async def test_rules_match_api_version_client_and_topic(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "a")
    await create(conn, "b")
    broker.faults.add(api="Produce", min_version=8, max_version=8, error="UNKNOWN_SERVER_ERROR")
    broker.faults.add(api="produce", client_id="slow-*", error="REQUEST_TIMED_OUT")
    broker.faults.add(api=0, topic="b*", error="INVALID_TOPIC_EXCEPTION")
    assert (await produce(conn, "a", batch([b"x"]), version=9)).error_code == 0
    assert (await produce(conn, "a", batch([b"x"]), version=8)).error_code == E.UNKNOWN_SERVER_ERROR
    assert (await produce(conn, "b", batch([b"x"]))).error_code == E.INVALID_TOPIC_EXCEPTION
    slow = await connect(broker, client_id="slow-app")
    async with slow:
        assert (await produce(slow, "a", batch([b"x"]))).error_code == E.REQUEST_TIMED_OUT
    assert [r.matched for r in broker.faults.rules()] == [1, 1, 1]


async def test_a_fetch_by_topic_id_is_matched_by_topic_name(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "named")
    await produce(conn, "named", batch([b"x"]))
    topic_id = broker.metadata.get_topic("named").topic_id
    broker.faults.add(api="Fetch", topic="named", error="FENCED_LEADER_EPOCH", per_partition=True, count=1)
    assert (await fetch(conn, "", version=13, topic_id=topic_id)).error_code == E.FENCED_LEADER_EPOCH
    assert values((await fetch(conn, "", version=13, topic_id=topic_id)).records) == [b"x"]


async def test_time_window_and_probability() -> None:
    clock = ManualClock()
    injector = FaultInjector(clock, rng=random.Random(7))
    window = injector.add(api="Metadata", latency_ms=1, after_ms=100, for_ms=50)
    never = injector.add(api="Metadata", latency_ms=1, probability=0)

    def faulted() -> bool:
        return injector.match(0, K.METADATA, 12, "c", METADATA_ALL) is not None

    assert not faulted()           # before the window opens
    clock.sleep(100)
    assert faulted()               # inside it
    clock.sleep(49)
    assert faulted()
    clock.sleep(1)
    assert not faulted()           # closed
    assert window.matched == 2 and never.matched == 0
    half = injector.add(api="Metadata", latency_ms=1, probability=0.5)
    hits = sum(faulted() for _ in range(400))
    assert 120 < hits < 280 and half.matched == hits


def test_rule_validation() -> None:
    injector = FaultInjector()
    for bad, message in [({"api": "Nope", "error": "NOT_LEADER_OR_FOLLOWER"}, "unknown api"),
                         ({"api": "Produce", "error": "NO_SUCH_ERROR"}, "unknown Kafka error"),
                         ({"api": "Produce"}, "needs an action"),
                         ({"api": "Metadata", "error": 6, "per_partition": True}, "per_partition errors need"),
                         ({"api": "Produce", "drop": "sideways"}, "drop must be"),
                         ({"api": "Produce", "latency_ms": 1, "partition": 0}, "partition needs topic"),
                         ({"api": "Produce", "latency_ms": 1, "probability": 2}, "probability"),
                         ({"api": "Produce", "latency_ms": 1, "count": 0}, "count"),
                         ({"api": "Produce", "latency_ms": 1, "colour": "red"}, "unknown fault rule field"),
                         ({"api": "Produce", "error": 6, "topic": 5}, "topic must be str"),
                         ({"api": "Produce", "latency_ms": "5"}, "latency_ms must be int or float"),
                         ({"api": "Produce", "latency_ms": 1, "count": True}, "count must be int"),
                         ({"api": ["Produce"], "latency_ms": 1}, "api must be str or int")]:
        with pytest.raises(ValueError, match=message):
            injector.add(**bad)
    assert injector.rules() == []
    rule = injector.add(FaultRule(api="22", error="7"))
    assert (rule.api, rule.error) == ("InitProducerId", "REQUEST_TIMED_OUT")


# -- actions --------------------------------------------------------------------------------------
@pytest.mark.parametrize("api, version, body, code_of", [
    ("Metadata", 12, {"topics": [{"name": "t", "topic_id": None}], "allow_auto_topic_creation": False,
                      "include_topic_authorized_operations": False}, lambda r: r.topics[0].error_code),
    ("FindCoordinator", 3, {"key": "g", "key_type": 0}, lambda r: r.error_code),
    ("ListGroups", 4, {"states_filter": []}, lambda r: r.error_code),
    ("ApiVersions", 3, {"client_software_name": "x", "client_software_version": "1"}, lambda r: r.error_code),
    ("InitProducerId", 4, {"transactional_id": None, "transaction_timeout_ms": 1000, "producer_id": -1,
                           "producer_epoch": -1}, lambda r: r.error_code),
    ("ListOffsets", 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
     lambda r: r.topics[0].partitions[0].error_code),
])
async def test_any_api_can_be_answered_with_an_error(broker: Broker, conn: KafkaConnection, api: str, version: int,
                                                     body: dict, code_of) -> None:
    await create(conn, "t")
    broker.faults.add(api=api, error="COORDINATOR_NOT_AVAILABLE", count=1)
    assert code_of(await conn.request(getattr(K, _key(api)), version, body)) == E.COORDINATOR_NOT_AVAILABLE
    assert code_of(await conn.request(getattr(K, _key(api)), version, body)) == 0


def _key(api: str) -> str:
    return "".join("_" + c if c.isupper() else c for c in api).lstrip("_").upper()


async def test_per_partition_error_leaves_other_partitions_handled(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "t", partitions=2)
    broker.faults.add(api="Produce", topic="t", partition=1, error="NOT_LEADER_OR_FOLLOWER", per_partition=True)
    assert await produce_two(conn, "t") == {0: 0, 1: NOT_LEADER}
    assert values((await fetch(conn, "t", partition=0)).records) == [b"p0"]
    assert values((await fetch(conn, "t", partition=1)).records) == []
    # ListOffsets: the faulted partition answers with the error, the other with its offset.
    broker.faults.clear()
    broker.faults.add(api="ListOffsets", topic="t", partition=0, error="OFFSET_NOT_AVAILABLE", per_partition=True)
    resp = await conn.request(K.LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": i, "current_leader_epoch": -1, "timestamp": -1}
                                     for i in (0, 1)]}]})
    got = {p.partition_index: (p.error_code, p.offset) for t in resp.topics for p in t.partitions}
    assert got[0][0] == E.OFFSET_NOT_AVAILABLE and got[1] == (0, 0)


async def test_per_partition_errors_work_on_any_api_whose_declaration_tags_partitions(
        broker: Broker, conn: KafkaConnection) -> None:
    """OffsetDelete was in no hand-kept table: its tagged topic and partition fields are all faults need."""
    await create(conn, "t", partitions=2)
    commit = await conn.request(K.OFFSET_COMMIT, 8, {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": i, "committed_offset": 5,
                                                 "committed_leader_epoch": -1, "committed_metadata": None}
                                                for i in (0, 1)]}]})
    assert [p.error_code for t in commit.topics for p in t.partitions] == [0, 0]
    broker.faults.add(api="OffsetDelete", topic="t", partition=1, error="GROUP_SUBSCRIBED_TO_TOPIC",
                      per_partition=True)
    resp = await conn.request(K.OFFSET_DELETE, 0, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": i} for i in (0, 1)]}]})
    got = {p.partition_index: p.error_code for t in resp.topics for p in t.partitions}
    assert got == {0: 0, 1: E.GROUP_SUBSCRIBED_TO_TOPIC}
    fetched = await conn.request(K.OFFSET_FETCH, 7, {"group_id": "g", "topics": [
        {"name": "t", "partition_indexes": [0, 1]}], "require_stable": False})
    assert {p.partition_index: p.committed_offset for t in fetched.topics for p in t.partitions} == {0: -1, 1: 5}


async def test_latency_delays_the_response(broker: Broker, conn: KafkaConnection) -> None:
    broker.faults.add(api="Metadata", latency_ms=200)
    start = trio.current_time()
    await conn.request(K.METADATA, 12, METADATA_ALL)
    assert trio.current_time() - start >= 0.2
    await conn.request(K.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"})
    assert broker.faults.rules()[0].matched == 1  # ApiVersions was not delayed


async def test_hold_until_the_rule_is_removed(broker: Broker, conn: KafkaConnection, autojump_clock: object) -> None:
    """On Trio's virtual clock (the broker runs in the test's run): 0.2 s pass at once."""
    rule = broker.faults.add(api="Metadata", hold=True)
    answered = trio.Event()

    async def ask() -> None:
        await conn.request(K.METADATA, 12, METADATA_ALL)
        answered.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await wait_until(lambda: rule.matched == 1, what="the request to be held")
        await trio.sleep(0.2)  # (virtual time: nothing may happen meanwhile)
        assert not answered.is_set()
        broker.faults.remove(rule.id)
        with trio.fail_after(10):
            await answered.wait()


async def test_hold_ms_and_another_connection_carries_on(broker: Broker, conn: KafkaConnection) -> None:
    broker.faults.add(api="Metadata", client_id="raw-test", hold_ms=300)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn.request, K.METADATA, 12, METADATA_ALL)
        async with await connect(broker, client_id="other") as other:
            await other.request(K.METADATA, 12, METADATA_ALL)
            other_done = trio.current_time() - start
    assert trio.current_time() - start >= 0.3
    assert other_done < trio.current_time() - start


async def test_drop_before_and_after_handling(broker: Broker) -> None:
    create_body = {"topics": [{"name": "dropped", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 1000}
    broker.faults.add(api="CreateTopics", drop="before", count=1)
    async with await connect(broker) as c:
        with pytest.raises(ConnectionError):
            await c.request(K.CREATE_TOPICS, 7, create_body)
    assert broker.metadata.get_topic("dropped") is None  # not handled
    broker.faults.add(api="CreateTopics", drop="after", count=1)
    async with await connect(broker) as c:
        with pytest.raises(ConnectionError):
            await c.request(K.CREATE_TOPICS, 7, create_body)
    assert broker.metadata.get_topic("dropped") is not None  # handled, but never answered
    async with await connect(broker) as c:  # the broker carries on
        resp = await c.request(K.CREATE_TOPICS, 7, create_body)
        assert resp.topics[0].error_code == E.TOPIC_ALREADY_EXISTS


async def test_acks_0_produce_with_an_error_gets_no_response(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "t")
    broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
    await conn.send(K.PRODUCE, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch([b"lost"])}]}]})
    # The next response is the next request's (request() checks the correlation id).
    assert (await produce(conn, "t", batch([b"kept"]))).error_code == 0
    assert values((await fetch(conn, "t")).records) == [b"kept"]


async def test_broker_filter_in_a_cluster() -> None:
    async with serve_cluster(3, group_initial_rebalance_delay_ms=0) as cluster:
        cluster.faults.add(api="Metadata", broker=1, error="BROKER_NOT_AVAILABLE")
        body = {"topics": [{"name": "x", "topic_id": None}], "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False}
        codes = {}
        for bid, b in sorted(cluster.brokers.items()):
            async with await connect(b) as c:
                codes[bid] = (await c.request(K.METADATA, 12, body)).topics[0].error_code
        assert codes == {0: E.UNKNOWN_TOPIC_OR_PARTITION, 1: E.BROKER_NOT_AVAILABLE,
                         2: E.UNKNOWN_TOPIC_OR_PARTITION}
        assert cluster.brokers[1].metrics()[
            "kafka.server:type=FaultInjector,name=InjectedFaultsTotal,request=Metadata,action=error"] == 1
        assert not any("FaultInjector" in k for k in cluster.brokers[0].metrics())


# -- counted and captured -------------------------------------------------------------------------
async def test_injected_faults_are_counted_in_prometheus_metrics(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "t")
    broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", latency_ms=1, count=2)
    for _ in range(3):
        await produce(conn, "t", batch([b"x"]))
    families = {f.name: f for f in text_string_to_metric_families(render(lambda: {0: broker}).decode())}
    samples = {s.labels["action"]: s.value for s in families["kafka_server_faultinjector_injectedfaults"].samples
               if s.labels["request"] == "Produce"}
    assert samples == {"error": 2, "latency": 2}


async def test_injected_responses_are_captured(tmp_path: Path) -> None:
    cfg = BrokerConfig(port=0, capture_dir=tmp_path / "cap")
    async with serve_broker(cfg, captures=CAPTURE) as broker:
        async with await connect(broker) as conn:
            await create(conn, "t", partitions=2)
            rule = broker.faults.add(api="Produce", topic="t", partition=1, error="NOT_LEADER_OR_FOLLOWER",
                                     per_partition=True, count=1)
            await produce_two(conn, "t")
            await produce_two(conn, "t")
    records = [r for r in read_capture([tmp_path / "cap"]) if r.api_key == K.PRODUCE]
    assert [r.injected for r in records] == [f"#{rule.id} error=NOT_LEADER_OR_FOLLOWER/partition", ""]
    decoder = RecordDecoder("cap")
    names = [name for name, _ in COLUMNS["requests"]]
    rows = [dict(zip(names, decoder.request_row(r, *decoder.parse(r)))) for r in records]
    assert [row["injected"] for row in rows] == [records[0].injected, None]
    assert rows[0]["error_name"] == "NOT_LEADER_OR_FOLLOWER" and rows[1]["error_code"] == 0


async def test_rules_added_from_another_thread_apply(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "t")
    rule = await trio.to_thread.run_sync(lambda: broker.faults.add(api="Produce", error=6, count=1))
    assert (await produce(conn, "t", batch([b"x"]))).error_code == NOT_LEADER
    assert rule.remaining == 0


def test_a_thread_whose_event_loop_ended_says_so_when_called():
    """A BrokerThread whose loop has ended (stopped here; a crash would be the cause) answers a call with an error
    that says so, not trio's bare RunFinishedError."""
    from minikafka.testing import BrokerThread

    bt = BrokerThread()
    bt.start()
    bt.stop()
    with pytest.raises(RuntimeError, match="minikafka-broker is not running: its event loop ended"):
        bt.call(lambda: None)
