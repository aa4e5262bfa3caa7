"""Records produced by confluent-kafka (librdkafka) and by kafka-python, read back by our consumer:
keys, values, headers, order per partition, each exactly once (compressed batches included)."""

from __future__ import annotations

import warnings

import pytest
import trio

from minikafka.broker.broker import Broker
from minikafka.client.consumer import KafkaConsumer, TopicPartition

from clients.clients_common import Msg, by_partition, make_messages

pytestmark = pytest.mark.clients

PARTITIONS = 3
N = 600


def produce_confluent(bootstrap: str, topic: str, msgs: list[Msg]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5,
                  "enable.idempotence": True})
    for m in msgs:
        p.produce(topic, key=m.key, value=m.value, partition=m.partition, headers=list(m.headers) or None)
    assert p.flush(15) == 0


def produce_kafka_python(bootstrap: str, topic: str, msgs: list[Msg]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, compression_type="gzip", linger_ms=5)
    for m in msgs:
        p.send(topic, key=m.key, value=m.value, partition=m.partition, headers=list(m.headers))
    p.flush(15)
    p.close()


async def consume_all(bootstrap: str, topic: str, total: int) -> dict[int, list]:
    got: dict[int, list] = {}
    async with KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             max_partition_fetch_bytes=16384) as c:
        c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        n = 0
        with trio.fail_after(20):
            while n < total:
                for tp, recs in (await c.poll(500)).items():
                    got.setdefault(tp.partition, []).extend(recs)
                    n += len(recs)
        assert await c.poll(300) == {}  # nothing more: exactly once
    return got


@pytest.mark.parametrize("producer", [produce_confluent, produce_kafka_python], ids=["confluent", "kafka-python"])
async def test_their_producer_our_consumer(broker: Broker, producer) -> None:
    topic = f"from-{producer.__name__}"
    broker.create_topic(topic, PARTITIONS, 1)
    msgs = make_messages(N, PARTITIONS, tag=producer.__name__)
    bootstrap = f"127.0.0.1:{broker.port}"
    await trio.to_thread.run_sync(producer, bootstrap, topic, msgs)
    got = await consume_all(bootstrap, topic, N)
    for partition, expected in by_partition(msgs).items():
        recs = got[partition]
        assert [r.offset for r in recs] == list(range(len(expected)))
        assert [Msg(partition, r.key, r.value, tuple(r.headers)) for r in recs] == expected
