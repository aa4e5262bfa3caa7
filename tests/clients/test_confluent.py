"""confluent-kafka (librdkafka) against the broker: admin, idempotent compressed
producers, acks=all delivery reports, consumer groups with rebalances and
committed-offset resumption."""

from __future__ import annotations

import time

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from clients_common import CODECS, Msg, by_partition, client_versions, make_messages, stored_batch_headers, wait_for
from clients_common import ck_poll_until, ck_produce_all, ck_read_all, ck_to_msg, delivered
from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]


# -- helpers ------------------------------------------------------------------------------

def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    a = admin(bootstrap)  # keep the handle alive until the future resolves
    futures = a.create_topics([NewTopic(name, partitions, 1, config=configs)], operation_timeout=5)
    futures[name].result(timeout=10)


def group_consumer(bootstrap: str, group: str, name: str, **extra) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
        "fetch.wait.max.ms": 100, "partition.assignment.strategy": "range", **extra,
    })


def parts_of(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


# -- tests --------------------------------------------------------------------------------

def test_client_versions() -> None:
    v = client_versions()
    print(f"confluent-kafka {confluent_kafka.version()} librdkafka {confluent_kafka.libversion()}")
    assert tuple(int(x) for x in v["confluent-kafka"].split(".")[:2]) >= (2, 6), v
    assert v["librdkafka"].startswith("2."), v


def test_admin_create_list_delete_topics(broker_thread) -> None:
    bs = broker_thread.bootstrap
    a = admin(bs)
    fs = a.create_topics([
        NewTopic("adm-three", 3, 1),
        NewTopic("adm-configured", 1, 1, config={"retention.ms": "123456", "cleanup.policy": "delete"}),
    ], operation_timeout=5)
    assert set(fs) == {"adm-three", "adm-configured"}
    for f in fs.values():
        assert f.result(timeout=10) is None

    md = a.list_topics(timeout=10)
    assert {"adm-three", "adm-configured"} <= set(md.topics)
    assert sorted(md.topics["adm-three"].partitions) == [0, 1, 2]
    assert all(p.leader == md.orig_broker_id and p.error is None for p in md.topics["adm-three"].partitions.values())
    assert list(md.brokers) == [broker_thread.config.node_id]

    # The topic config is visible through DescribeConfigs.
    res = ConfigResource(ConfigResource.Type.TOPIC, "adm-configured")
    configs = a.describe_configs([res])[res].result(timeout=10)
    assert configs["retention.ms"].value == "123456"
    assert configs["cleanup.policy"].value == "delete"

    # Creating it again: TOPIC_ALREADY_EXISTS.
    again = a.create_topics([NewTopic("adm-three", 3, 1)], operation_timeout=5)["adm-three"]
    with pytest.raises(KafkaException) as exc_info:
        again.result(timeout=10)
    assert exc_info.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    # validate_only creates nothing.
    a.create_topics([NewTopic("adm-dry", 2, 1)], validate_only=True)["adm-dry"].result(timeout=10)
    assert "adm-dry" not in a.list_topics(timeout=10).topics

    # Delete one; list_topics shows the change, the other topic stays.
    dfs = a.delete_topics(["adm-three"], operation_timeout=5)
    assert dfs["adm-three"].result(timeout=10) is None
    wait_for(lambda: "adm-three" not in a.list_topics(timeout=10).topics, what="adm-three to disappear")
    assert "adm-configured" in a.list_topics(timeout=10).topics

    # Deleting a missing topic fails with UNKNOWN_TOPIC_OR_PART.
    with pytest.raises(KafkaException) as exc_info:
        a.delete_topics(["adm-three"], operation_timeout=5)["adm-three"].result(timeout=10)
    assert exc_info.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # The name can be reused.
    create_topic(bs, "adm-three", 2)
    def recreated() -> bool:
        t = a.list_topics(timeout=10).topics.get("adm-three")
        return t is not None and sorted(t.partitions) == [0, 1]

    wait_for(recreated, what="adm-three re-created with 2 partitions")


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_idempotent_compressed_producer_exactly_once(broker_thread, codec: str) -> None:
    bs = broker_thread.bootstrap
    topic = f"idem-{codec}"
    partitions = 4
    create_topic(bs, topic, partitions)
    msgs = make_messages(4000, partitions, seed={"lz4": 4, "zstd": 5}[codec], tag=codec)

    p = Producer({
        "bootstrap.servers": bs, "enable.idempotence": True, "compression.type": codec,
        "linger.ms": 20, "batch.num.messages": 400, "acks": "all",
    })
    reports = ck_produce_all(p, topic, msgs)

    # Delivery reports: each partition's offsets are 0..n-1 in produce order.
    per_part: dict[int, list[int]] = {}
    for m, (part, off) in zip(msgs, reports):
        assert part == m.partition
        per_part.setdefault(part, []).append(off)
    for part, offs in per_part.items():
        assert offs == list(range(len(offs))), f"partition {part}: offsets not dense and ordered"

    # On the broker: idempotent (producer id, contiguous sequences) and compressed batches.
    expected = by_partition(msgs)
    for part in range(partitions):
        headers = stored_batch_headers(broker_thread, topic, part)
        assert sum(h.record_count for h in headers) == len(expected[part])
        assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
        seq = 0
        for h in headers:
            assert h.base_sequence == seq, f"partition {part}: sequence gap at offset {h.base_offset}"
            seq = h.last_sequence + 1
        assert any(h.compression == CODECS[codec] for h in headers), f"no {codec} batch stored"
        assert all(h.compression in (0, CODECS[codec]) for h in headers)

    # Consumed back: every message exactly once, same key/value/headers, per-partition order.
    got = ck_read_all(bs, topic, partitions, len(msgs))
    assert len(got) == len(msgs)
    got_parts = by_partition(ck_to_msg(m) for m in got)
    for part in range(partitions):
        assert got_parts[part] == expected[part], f"partition {part} differs"
        offsets = [m.offset() for m in got if m.partition() == part]
        assert offsets == list(range(len(expected[part])))


def test_acks_all_delivery_reports(broker_thread) -> None:
    bs = broker_thread.bootstrap
    topic = "acks-all"
    create_topic(bs, topic, 2)
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "enable.idempotence": False})

    first = [Msg(0, b"k%d" % i, b"first-%d" % i, ()) for i in range(5)]
    assert ck_produce_all(p, topic, first) == [(0, i) for i in range(5)]

    second = [Msg(i % 2, b"k%d" % i, b"second-%d" % i, (("n", b"%d" % i),)) for i in range(14)]
    reports = ck_produce_all(p, topic, second)
    assert [off for part, off in reports if part == 0] == list(range(5, 12))
    assert [off for part, off in reports if part == 1] == list(range(0, 7))

    # Delivery reports carry the message itself, and its timestamp.
    seen = []
    p.produce(topic, value=b"last", key=b"kl", partition=1, on_delivery=lambda err, m: seen.append((err, m)))
    p.flush(10)
    [(err, m)] = seen
    assert err is None and (m.topic(), m.partition(), m.offset(), m.key(), m.value()) == (topic, 1, 7, b"kl", b"last")
    ts_type, ts = m.timestamp()
    assert ts_type == confluent_kafka.TIMESTAMP_CREATE_TIME and abs(ts - time.time() * 1000) < 60_000

    c = Consumer({"bootstrap.servers": bs, "group.id": "wm"})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 12)
        assert c.get_watermark_offsets(TopicPartition(topic, 1), timeout=10) == (0, 8)
    finally:
        c.close()
    got = ck_read_all(bs, topic, 2, 20)
    assert [m.value() for m in got if m.partition() == 0] == [m.value for m in first] + [
        m.value for m in second if m.partition == 0]


def test_consumer_group_rebalance_and_resume(broker_thread) -> None:
    bs = broker_thread.bootstrap
    topic, group, partitions = "grp-topic", "grp-1", 4
    all_parts = set(range(partitions))
    create_topic(bs, topic, partitions)
    events: list[tuple[str, str, list[int]]] = []

    def listeners(name: str) -> dict:
        return {
            "on_assign": lambda c, tps: events.append((name, "assign", sorted(tp.partition for tp in tps))),
            "on_revoke": lambda c, tps: events.append((name, "revoke", sorted(tp.partition for tp in tps))),
        }

    c1 = group_consumer(bs, group, "c1")
    c2 = group_consumer(bs, group, "c2")
    c3 = None
    try:
        # One member: it gets every partition.
        c1.subscribe([topic], **listeners("c1"))

        def c1_has_all() -> bool:
            assert c1.poll(0.05) is None  # nothing produced yet
            return parts_of(c1) == all_parts

        wait_for(c1_has_all, what="c1 to own all partitions")
        assert ("c1", "assign", sorted(all_parts)) in events

        # Second member: the partitions are shared, disjointly.
        c2.subscribe([topic], **listeners("c2"))

        def shared() -> bool:
            for c in (c1, c2):
                assert c.poll(0.05) is None
            a1, a2 = parts_of(c1), parts_of(c2)
            return bool(a1) and bool(a2) and not (a1 & a2) and a1 | a2 == all_parts

        wait_for(shared, what="c1 and c2 to share the partitions")
        owned = {"c1": parts_of(c1), "c2": parts_of(c2)}
        assert any(e[:2] == ("c2", "assign") and e[2] for e in events)

        # Produce 10 per partition; each member consumes its own partitions and commits
        # up to offset 5 (committed offset 6); offsets 6..9 are consumed but not committed.
        msgs = [Msg(i % partitions, b"k%d" % i, b"v%d" % i, (("i", b"%d" % i),)) for i in range(40)]
        ck_produce_all(Producer({"bootstrap.servers": bs, "acks": "all"}), topic, msgs)
        got: dict[str, list] = {"c1": [], "c2": []}

        def consume_shared() -> bool:
            for name, c in (("c1", c1), ("c2", c2)):
                m = c.poll(0.05)
                if m is None:
                    continue
                assert m.error() is None, m.error()
                assert m.partition() in owned[name], f"{name} got a message of a partition it does not own"
                got[name].append(m)
                if m.offset() == 5:
                    c.commit(message=m, asynchronous=False)
            return len(got["c1"]) + len(got["c2"]) == len(msgs)

        wait_for(consume_shared, what="the group to consume all messages")
        seen = sorted((m.partition(), m.offset()) for ms in got.values() for m in ms)
        assert seen == sorted((p, o) for p in all_parts for o in range(10))
        expected = by_partition(msgs)
        for name in ("c1", "c2"):
            for part in owned[name]:
                assert [ck_to_msg(m) for m in got[name] if m.partition() == part] == expected[part]
        committed = c1.committed([TopicPartition(topic, p) for p in sorted(all_parts)], timeout=10)
        assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(p, 6, None) for p in sorted(all_parts)]

        # c2 leaves: c1 gets every partition and resumes c2's from the committed offset 6.
        c2.close()
        after = ck_poll_until(c1, lambda got: parts_of(c1) == all_parts and owned["c2"] <= delivered(got, 9),
                              what="c1 to take over c2's partitions")
        # Eager ("range") protocol: every rebalance revokes everything, then assigns.
        full = sorted(all_parts)
        assert [e[1:] for e in events if e[0] == "c1"] == [
            ("assign", full), ("revoke", full), ("assign", sorted(owned["c1"])),
            ("revoke", sorted(owned["c1"])), ("assign", full)]
        assert [e[1:] for e in events if e[0] == "c2"][:1] == [("assign", sorted(owned["c2"]))]
        assert all(m.offset() >= 6 for m in after), "a partition was re-read from before its committed offset"
        for part in owned["c2"]:
            assert [m.offset() for m in after if m.partition() == part] == [6, 7, 8, 9]

        # c1 commits offset 8 everywhere explicitly, then leaves; more messages arrive.
        result = c1.commit(offsets=[TopicPartition(topic, p, 8) for p in sorted(all_parts)], asynchronous=False)
        assert all(tp.error is None for tp in result)
        c1.close()
        more = [Msg(i % partitions, b"k%d" % i, b"v%d" % i, (("i", b"%d" % i),)) for i in range(40, 48)]
        ck_produce_all(Producer({"bootstrap.servers": bs, "acks": "all"}), topic, more)

        # A brand-new member resumes at 8 (auto.offset.reset=earliest would show 0 otherwise).
        c3 = group_consumer(bs, group, "c3")
        c3.subscribe([topic], **listeners("c3"))
        fresh = ck_poll_until(c3, lambda got: delivered(got, 11) == all_parts, what="c3 to consume up to offset 11")
        assert parts_of(c3) == all_parts
        expected = by_partition(msgs + more)
        for part in all_parts:
            assert [m.offset() for m in fresh if m.partition() == part] == [8, 9, 10, 11]
            assert [ck_to_msg(m) for m in fresh if m.partition() == part] == expected[part][8:]
        committed = c3.committed([TopicPartition(topic, p) for p in sorted(all_parts)], timeout=10)
        assert [tp.offset for tp in committed] == [8] * partitions
    finally:
        for c in (c1, c2, c3):
            if c is not None:
                try:
                    c.close()
                except RuntimeError:  # already closed
                    pass


def test_committed_offsets_survive_restart(persistent_broker_thread) -> None:
    """Offsets committed by a group are still there after the broker restarts (data dir)."""
    b = persistent_broker_thread
    topic, group = "durable", "durable-group"
    create_topic(b.bootstrap, topic, 2)
    msgs = [Msg(i % 2, b"k%d" % i, b"v%d" % i, ()) for i in range(20)]
    ck_produce_all(Producer({"bootstrap.servers": b.bootstrap, "acks": "all"}), topic, msgs)

    c = group_consumer(b.bootstrap, group, "before")
    c.subscribe([topic])
    try:
        wait_for(lambda: c.poll(0.05) is None and parts_of(c) == {0, 1}, what="assignment")
        c.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 7)], asynchronous=False)
    finally:
        c.close()

    b.restart()

    c = group_consumer(b.bootstrap, group, "after")
    c.subscribe([topic])
    try:
        got = ck_poll_until(c, lambda got: delivered(got, 9) == {0, 1}, what="consumption after restart")
        assert [m.offset() for m in got if m.partition() == 0] == list(range(4, 10))
        assert [m.offset() for m in got if m.partition() == 1] == list(range(7, 10))
        assert [m.value() for m in got if m.partition() == 1] == [b"v%d" % i for i in (15, 17, 19)]
    finally:
        c.close()
