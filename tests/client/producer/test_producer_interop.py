"""Records from our producer, read back by real clients: confluent-kafka (librdkafka) and kafka-python."""

from __future__ import annotations

import time

import pytest
import trio

from minikafka.client.producer import KafkaProducer, partition_for_key

pytestmark = pytest.mark.clients

N = 400


def produce_with_ours(bootstrap: str, topic: str, compression: str = "none") -> list[tuple[bytes, bytes, list]]:
    sent = []

    async def run() -> None:
        async with KafkaProducer(bootstrap, compression_type=compression, linger_ms=2, batch_size=4096) as p:
            for i in range(N):
                key = b"key-%d" % (i % 11)
                value = b"value-%d-" % i + b"z" * (i % 50)
                headers = [("i", b"%d" % i), ("empty", b""), ("none", None)]
                await p.send(topic, value, key=key, headers=headers)
                sent.append((key, value, headers))
            await p.flush()

    trio.run(run)
    return sent


def expected_by_partition(sent, partitions: int) -> dict[int, list]:
    out: dict[int, list] = {}
    for key, value, headers in sent:
        out.setdefault(partition_for_key(key, partitions), []).append((key, value, headers))
    return out


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_confluent_kafka_reads_our_records(broker_thread, compression) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka import OFFSET_BEGINNING

    topic = f"interop-ck-{compression}"
    broker_thread.call(lambda: broker_thread.broker.create_topic(topic, 3, 1))
    sent = produce_with_ours(broker_thread.bootstrap, topic, compression)
    c = Consumer({"bootstrap.servers": broker_thread.bootstrap, "group.id": "ck-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    got: dict[int, list] = {}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
        eof: set[int] = set()
        deadline = time.monotonic() + 20
        while len(eof) < 3 or sum(map(len, got.values())) < N:
            assert time.monotonic() < deadline
            for m in c.consume(500, 0.2):
                if m.error():
                    assert m.error().code() == KafkaError._PARTITION_EOF
                    eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                headers = [(k, v) for k, v in (m.headers() or [])]
                got.setdefault(m.partition(), []).append((m.key(), m.value(), headers))
    finally:
        c.close()
    assert got == expected_by_partition(sent, 3)


def test_kafka_python_reads_our_records(broker_thread) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = "interop-kp"
    broker_thread.call(lambda: broker_thread.broker.create_topic(topic, 3, 1))
    sent = produce_with_ours(broker_thread.bootstrap, topic, "gzip")
    c = KafkaConsumer(bootstrap_servers=broker_thread.bootstrap, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=2000, fetch_max_wait_ms=50)
    try:
        c.assign([TopicPartition(topic, p) for p in range(3)])
        c.seek_to_beginning()
        got: dict[int, list] = {}
        deadline = time.monotonic() + 20
        while sum(map(len, got.values())) < N and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=200).items():
                for m in msgs:
                    got.setdefault(tp.partition, []).append((m.key, m.value, list(m.headers)))
    finally:
        c.close()
    assert got == expected_by_partition(sent, 3)
