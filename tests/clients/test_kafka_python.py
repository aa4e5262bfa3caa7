"""kafka-python against the broker (admin, gzip producer with acks=all, consumer
groups with committed offsets), and cross-client traffic with confluent-kafka."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
import kafka.errors as Errors
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.codec import gzip_encode
from kafka.structs import OffsetAndMetadata

from minikafka.protocol.records import BATCH_HEADER_SIZE

from clients_common import CODECS, Msg, by_partition, client_versions, make_messages, stored_batch_headers, wait_for
from clients_common import stored_batches
from clients_common import ck_poll_until, ck_produce_all, ck_read_all, ck_to_msg, delivered
from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]


# -- helpers ------------------------------------------------------------------------------

def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-admin", request_timeout_ms=10000)


def kp_create(bootstrap: str, name: str, partitions: int) -> None:
    a = kp_admin(bootstrap)
    try:
        a.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})
    finally:
        a.close()


def kp_producer(bootstrap: str, **extra) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip", linger_ms=5,
                         **extra)


def kp_send_all(producer: KafkaProducer, topic: str, msgs: list[Msg]) -> list[tuple[int, int]]:
    """Send in order, wait for every ack; ``(partition, offset)`` per message."""
    futures = [producer.send(topic, value=m.value, key=m.key, headers=list(m.headers), partition=m.partition)
               for m in msgs]
    producer.flush(timeout=30)
    out = []
    for f in futures:
        md = f.get(timeout=10)
        out.append((md.partition, md.offset))
    return out


def kp_create_and_send(bootstrap: str, topic: str, partitions: int, msgs: list[Msg]) -> list[tuple[int, int]]:
    """Create ``topic``, send ``msgs`` with a fresh `kp_producer` (closed afterwards); the acks."""
    kp_create(bootstrap, topic, partitions)
    p = kp_producer(bootstrap)
    try:
        return kp_send_all(p, topic, msgs)
    finally:
        p.close()


def kp_to_msg(r) -> Msg:
    return Msg(r.partition, r.key, r.value, tuple((k, v) for k, v in (r.headers or ())))


def kp_group_consumer(bootstrap: str, group: str, **extra) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False, auto_offset_reset="earliest",
        session_timeout_ms=6000, heartbeat_interval_ms=200, fetch_max_wait_ms=100,
        client_id=f"kp-{group}", **extra)


def kp_poll_until(consumer: KafkaConsumer, done, timeout: float = 20) -> list:
    """Poll ``consumer``, collecting records, until ``done(records)``."""
    got: list = []

    def step() -> bool:
        # poll() returns as soon as records arrive; a long timeout matters only while joining:
        # kafka-python 3.0.12 can lose a JoinGroup/SyncGroup round trip that completes after
        # a poll() timed out mid-join (the assignment is never applied, heartbeats stay off
        # and the member's session expires).
        for recs in consumer.poll(timeout_ms=1000).values():
            got.extend(recs)
        return done(got)

    wait_for(step, timeout=timeout, interval=0, what="kafka-python consumer records")
    return got


def kp_read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    """Read the whole topic with a group-less kafka-python consumer."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = kp_poll_until(c, lambda g: len(g) >= expected)
        ends = c.end_offsets(tps)
        assert {tp: c.position(tp) for tp in tps} == ends, "positions not at the end of the partitions"
        assert sum(ends.values()) == expected
        return got
    finally:
        c.close()


# -- kafka-python -------------------------------------------------------------------------

def test_client_versions() -> None:
    v = client_versions()
    print(f"kafka-python {kafka.__version__}")
    assert int(v["kafka-python"].split(".")[0]) >= 2, v


def test_admin_create_list_describe_delete(broker_thread) -> None:
    bs = broker_thread.bootstrap
    a = kp_admin(bs)
    try:
        result = a.create_topics({
            "kp-one": {"num_partitions": 3, "replication_factor": 1},
            "kp-two": {"num_partitions": 1, "replication_factor": 1,
                       "configs": {"retention.ms": "3600000", "max.message.bytes": "200000"}},
        })
        assert sorted((t["name"], t["error_code"]) for t in result["topics"]) == [("kp-one", 0), ("kp-two", 0)]
        assert {"kp-one", "kp-two"} <= set(a.list_topics())
        [one] = a.describe_topics(["kp-one"])
        assert sorted(p["partition_index"] for p in one["partitions"]) == [0, 1, 2]
        assert all(p["leader_id"] == broker_thread.config.node_id for p in one["partitions"])

        # Already there: TopicAlreadyExistsError (or the error code with raise_errors=False).
        with pytest.raises(Errors.TopicAlreadyExistsError):
            a.create_topics({"kp-one": {"num_partitions": 3, "replication_factor": 1}})
        res = a.create_topics({"kp-one": {"num_partitions": 3, "replication_factor": 1}}, raise_errors=False)
        assert res["topics"][0]["error_code"] == Errors.TopicAlreadyExistsError.errno

        # DescribeConfigs: the topic's own settings (default filter: modified only) and defaults.
        configs = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-two")])
        mine = configs["topic"]["kp-two"]
        assert {k: v["value"] for k, v in mine.items()} == {"retention.ms": "3600000", "max.message.bytes": "200000"}
        assert all(v["config_source"] == "DYNAMIC_TOPIC_CONFIG" for v in mine.values())
        every = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-two")], config_filter="all")
        every = every["topic"]["kp-two"]
        assert every["retention.ms"]["value"] == "3600000"
        assert every["cleanup.policy"]["value"] == "delete"
        assert every["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"
        # Only the keys asked for.
        some = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-one", ["segment.bytes"])],
                                  config_filter="all")
        assert list(some["topic"]["kp-one"]) == ["segment.bytes"]
        broker_cfg = a.describe_configs([ConfigResource(ConfigResourceType.BROKER,
                                                        str(broker_thread.config.node_id))], config_filter="all")
        assert broker_cfg["broker"][str(broker_thread.config.node_id)]

        # Delete: gone from list_topics; deleting again is UnknownTopicOrPartitionError.
        result = a.delete_topics(["kp-one"])
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("kp-one", 0)]
        wait_for(lambda: "kp-one" not in a.list_topics(), what="kp-one to disappear")
        assert "kp-two" in a.list_topics()
        with pytest.raises(Errors.UnknownTopicOrPartitionError):
            a.delete_topics(["kp-one"])
    finally:
        a.close()


def test_gzip_producer_acks_all_with_headers(broker_thread) -> None:
    bs = broker_thread.bootstrap
    topic, partitions = "kp-gzip", 3
    msgs = make_messages(900, partitions, seed=7, tag="kp")
    reports = kp_create_and_send(bs, topic, partitions, msgs)
    expected = by_partition(msgs)
    for part in range(partitions):
        assert [off for pt, off in reports if pt == part] == list(range(len(expected[part])))
        batches = stored_batches(broker_thread, topic, part)
        headers = [h for h, _ in batches]
        assert sum(h.record_count for h in headers) == len(expected[part])
        # Gzip'd, or sent as they were when gzip did not make the records smaller (kafka-python's
        # _maybe_compress: a batch of one small record, as the machine's speed may leave one).
        assert all(h.compression == CODECS["gzip"] or len(gzip_encode(raw[BATCH_HEADER_SIZE:])) >= len(
            raw) - BATCH_HEADER_SIZE for h, raw in batches), [(h.compression, h.record_count) for h in headers]
        assert any(h.compression == CODECS["gzip"] for h in headers)
    assert any(h.record_count > 1 for h in headers), "linger_ms should have batched records"

    got = kp_read_all(bs, topic, partitions, len(msgs))
    got_parts = by_partition(kp_to_msg(r) for r in got)
    for part in range(partitions):
        assert got_parts[part] == expected[part]
        assert [r.offset for r in got if r.partition == part] == list(range(len(expected[part])))


def test_group_commit_and_resume(broker_thread) -> None:
    bs = broker_thread.bootstrap
    topic, group, partitions = "kp-group-topic", "kp-group", 3
    kp_create(bs, topic, partitions)
    first = make_messages(60, partitions, seed=3, tag="first")
    p = kp_producer(bs)
    kp_send_all(p, topic, first)
    tps = [TopicPartition(topic, i) for i in range(partitions)]

    c1 = kp_group_consumer(bs, group)
    try:
        c1.subscribe([topic])
        assert all(c1.committed(tp) is None for tp in tps)
        got = kp_poll_until(c1, lambda g: len(g) >= len(first))
        assert c1.assignment() == set(tps)
        assert len(got) == len(first)
        expected = by_partition(first)
        for part in range(partitions):
            assert [kp_to_msg(r) for r in got if r.partition == part] == expected[part]
        c1.commit()
        assert {tp: c1.committed(tp) for tp in tps} == {tp: len(expected[tp.partition]) for tp in tps}
    finally:
        c1.close(autocommit=False)

    second = [Msg(i % partitions, b"s%d" % i, b"second-%d" % i, (("n", b"%d" % i),)) for i in range(12)]
    kp_send_all(p, topic, second)
    p.close()

    # A new consumer in the same group resumes at the committed offsets.
    c2 = kp_group_consumer(bs, group)
    try:
        c2.subscribe([topic])
        got = kp_poll_until(c2, lambda g: len(g) >= len(second))
        expected2 = by_partition(second)
        for part in range(partitions):
            offs = [r.offset for r in got if r.partition == part]
            base = len(by_partition(first)[part])
            assert offs == list(range(base, base + len(expected2[part]))), f"partition {part} did not resume"
            assert [kp_to_msg(r) for r in got if r.partition == part] == expected2[part]
        # Nothing else arrives (no re-delivery of the first round).
        assert not any(c2.poll(timeout_ms=300).values())

        # Explicit offsets with metadata.
        c2.commit({tps[0]: OffsetAndMetadata(5, "checkpoint-a", -1)})
        om = c2.committed(tps[0], metadata=True)
        assert (om.offset, om.metadata) == (5, "checkpoint-a")
        assert c2.committed(tps[1]) == len(by_partition(first)[1])  # not committed by c2: unchanged
    finally:
        c2.close(autocommit=False)


# -- cross-client -------------------------------------------------------------------------

@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_confluent_to_kafka_python(broker_thread, compression: str) -> None:
    bs = broker_thread.bootstrap
    topic, partitions = f"x-ck-kp-{compression}", 3
    kp_create(bs, topic, partitions)
    msgs = make_messages(600, partitions, seed=11, tag="ck")
    ck_produce_all(Producer({"bootstrap.servers": bs, "acks": "all", "compression.type": compression,
                             "enable.idempotence": True, "linger.ms": 5}), topic, msgs)
    for part in range(partitions):
        assert {h.compression for h in stored_batch_headers(broker_thread, topic, part)} == {CODECS[compression]}
    got = kp_read_all(bs, topic, partitions, len(msgs))
    got_parts, expected = by_partition(kp_to_msg(r) for r in got), by_partition(msgs)
    for part in range(partitions):
        assert got_parts[part] == expected[part]
        assert [r.offset for r in got if r.partition == part] == list(range(len(expected[part])))


def test_kafka_python_to_confluent(broker_thread) -> None:
    bs = broker_thread.bootstrap
    topic, partitions = "x-kp-ck", 3
    msgs = make_messages(600, partitions, seed=12, tag="kp")
    kp_create_and_send(bs, topic, partitions, msgs)
    got = ck_read_all(bs, topic, partitions, len(msgs), timeout=20)
    assert len(got) == len(msgs)
    got_parts, expected = by_partition(ck_to_msg(m) for m in got), by_partition(msgs)
    for part in range(partitions):
        assert got_parts[part] == expected[part]
        assert [m.offset() for m in got if m.partition() == part] == list(range(len(expected[part])))


def test_group_offsets_shared_across_clients(broker_thread) -> None:
    """Offsets committed by a kafka-python group member are resumed by a confluent-kafka one."""
    bs = broker_thread.bootstrap
    topic, group, partitions = "x-group", "x-group", 2
    kp_create(bs, topic, partitions)
    msgs = [Msg(i % partitions, b"k%d" % i, b"v%d" % i, ()) for i in range(20)]
    ck_produce_all(Producer({"bootstrap.servers": bs, "acks": "all"}), topic, msgs)

    kc = kp_group_consumer(bs, group)
    try:
        kc.subscribe([topic])
        kp_poll_until(kc, lambda g: len(g) >= len(msgs))
        kc.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1),
                   TopicPartition(topic, 1): OffsetAndMetadata(8, "", -1)})
    finally:
        kc.close(autocommit=False)

    cc = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                   "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
                   "fetch.wait.max.ms": 100})
    try:
        cc.subscribe([topic])
        got = ck_poll_until(cc, lambda got: delivered(got, 9) == {0, 1}, what="confluent consumer to catch up")
        assert [m.offset() for m in got if m.partition() == 0] == list(range(3, 10))
        assert [m.offset() for m in got if m.partition() == 1] == [8, 9]
        assert [m.value() for m in got if m.partition() == 1] == [b"v17", b"v19"]
    finally:
        cc.close()
