"""A corpus of request frames captured, at test time, from real clients talking to a minikafka broker,
and the mutations the fuzz tests apply to them.

The clients: confluent-kafka (librdkafka 2.x: admin, idempotent producer, group consumer), kcat (the
Debian build, an older librdkafka), kafka-python (admin, producer, group consumer), aiokafka (producer,
group consumer) and minikafka's own producer, consumer and quota tool.  The broker captures every frame
(``capture_dir``); nothing is kept in the repository.
"""

from __future__ import annotations

import random
import shutil
import subprocess
import time
import warnings
from collections import defaultdict
from pathlib import Path

from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.protocol.api import APIS
from minikafka.testing import BrokerThread

# Values that break lengths and counts: huge, negative, zero, just past a boundary.
EXTREMES_16 = [0x7FFF, 0xFFFF, 0x8000, 0x0000, 0x0101]
EXTREMES_32 = [0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0x00000000, 0x00FFFFFF, 0x04000003]
VARINT_HUGE = b"\xff\xff\xff\xff\x0f"


def _confluent_session(bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions,
                                       NewTopic, OffsetSpec)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("fz-a", 3, 1, config={"retention.ms": "600000"}),
                                  NewTopic("fz-b", 1, 1)]).values():
        f.result(20)
    admin.create_partitions([NewPartitions("fz-b", 2)])["fz-b"].result(20)
    topic = ConfigResource(ConfigResource.Type.TOPIC, "fz-a")
    for f in admin.describe_configs([topic, ConfigResource(ConfigResource.Type.BROKER, "0")]).values():
        f.result(20)
    with warnings.catch_warnings():  # deprecated in favour of incremental_alter_configs, still sent by users
        warnings.simplefilter("ignore", DeprecationWarning)
        for f in admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, "fz-b",
                                                     set_config={"retention.ms": "700000"})]).values():
            f.result(20)
    topic_inc = ConfigResource(ConfigResource.Type.TOPIC, "fz-a", incremental_configs=[
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([topic_inc]).values():
        f.result(20)
    admin.describe_cluster().result(20)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "compression.type": "lz4"})
    for i in range(200):
        p.produce("fz-a", key=b"k%d" % i, value=b"v" * (i % 50), partition=i % 3, headers=[("h", b"x")])
    assert p.flush(20) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fz-group", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["fz-a"])
    got, deadline = 0, time.monotonic() + 30
    while got < 200 and time.monotonic() < deadline:
        msgs = c.consume(100, 0.5)
        got += len(msgs)
        if msgs:
            c.commit(asynchronous=False)
    c.committed([TopicPartition("fz-a", 0)], 10)
    c.close()
    admin.list_offsets({TopicPartition("fz-a", 0): OffsetSpec.latest()})[TopicPartition("fz-a", 0)].result(20)
    admin.delete_records([TopicPartition("fz-a", 1, 2)])
    admin.list_consumer_groups().result(20)
    admin.describe_consumer_groups(["fz-group"])["fz-group"].result(20)
    admin.delete_consumer_groups(["fz-group"])["fz-group"].result(20)
    admin.delete_topics(["fz-b"])["fz-b"].result(20)


def _kafka_python_session(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("fz-kp", 2, 1)])
    admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "fz-kp")])
    prod = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(50):
        prod.send("fz-kp", key=b"k", value=b"value-%d" % i)
    prod.flush(20)
    prod.close()
    cons = KafkaConsumer("fz-kp", bootstrap_servers=bootstrap, group_id="fz-kp-group",
                         auto_offset_reset="earliest", consumer_timeout_ms=3000)
    for n, _ in enumerate(cons):
        if n >= 49:
            break
    cons.commit()
    cons.close()
    admin.list_groups()
    admin.describe_groups(["fz-kp-group"])
    admin.delete_topics(["fz-kp"])
    admin.close()


def _kcat_session(bootstrap: str) -> None:
    kcat = shutil.which("kcat")
    if kcat is None:
        return
    subprocess.run([kcat, "-P", "-b", bootstrap, "-t", "fz-kcat", "-z", "gzip"], input=b"a\nb\nc\n",
                   capture_output=True, timeout=60, check=True)
    subprocess.run([kcat, "-C", "-b", bootstrap, "-t", "fz-kcat", "-o", "beginning", "-e"],
                   capture_output=True, timeout=60, check=True)
    subprocess.run([kcat, "-L", "-b", bootstrap], capture_output=True, timeout=60, check=True)


def _aiokafka_session(bootstrap: str) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(20):
                await producer.send_and_wait("fz-aio", b"value-%d" % i, key=b"k")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("fz-aio", bootstrap_servers=bootstrap, group_id="fz-aio-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            got = 0
            while got < 20:
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 30)
                got += sum(len(v) for v in batches.values())
            await consumer.commit()
        finally:
            await consumer.stop()

    asyncio.run(main())


def _minikafka_session(bootstrap: str) -> None:
    import trio

    from minikafka.client.consumer import KafkaConsumer
    from minikafka.client.producer import KafkaProducer
    from minikafka.client.quotas_cli import alter, describe

    async def main() -> None:
        async with KafkaProducer(bootstrap, linger_ms=1) as p:
            for i in range(20):
                await p.send("fz-mk", b"v%d" % i)
            await p.flush()
        async with KafkaConsumer("fz-mk", bootstrap_servers=bootstrap, group_id="fz-mk-group",
                                 auto_offset_reset="earliest") as c:
            got = 0
            with trio.fail_after(30):
                while got < 20:
                    got += sum(len(v) for v in (await c.poll(500)).values())
            await c.commit()
        await alter(bootstrap, "client-id=fz", ["producer_byte_rate=1e9"], [], False)
        await describe(bootstrap, None)

    trio.run(main)


def capture_corpus(directory: Path) -> list[tuple[int, int, bytes]]:
    """(api key, api version, request frame) of every request the real clients sent."""
    config = BrokerConfig(port=0, capture_dir=directory, group_initial_rebalance_delay_ms=0)
    with BrokerThread(config) as broker:
        for session in (_confluent_session, _kcat_session, _kafka_python_session, _aiokafka_session,
                        _minikafka_session):
            session(broker.bootstrap)
    return [(r.api_key, r.api_version, bytes(r.request)) for r in read_capture([directory])]


def sample(corpus: list[tuple[int, int, bytes]], per_version: int = 6, seed: int = 7) -> list[bytes]:
    """Up to ``per_version`` distinct frames of each (api key, version), so that chatty APIs do not
    drown the rest."""
    by: dict[tuple[int, int], list[bytes]] = defaultdict(list)
    for key, version, frame in corpus:
        if frame not in by[(key, version)]:
            by[(key, version)].append(frame)
    rng = random.Random(seed)
    out: list[bytes] = []
    for frames in by.values():
        rng.shuffle(frames)
        out += frames[:per_version]
    return out


def apis_of(corpus: list[tuple[int, int, bytes]]) -> set[str]:
    return {APIS[k].name for k, _, _ in corpus if k in APIS}


def mutate(frame: bytes, others: list[bytes], rng: random.Random) -> bytes:
    """One random mutation: bit flips, truncation, a corrupted length or count, a splice with another
    frame, inserted or duplicated bytes, or a header with another api version."""
    b = bytearray(frame)
    kind = rng.randrange(8)
    if kind == 0:  # bit flips
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncation
        del b[rng.randrange(len(b)):]
    elif kind == 2 and len(b) > 12:  # a 16-bit length or count
        i = rng.randrange(10, len(b) - 1)
        b[i:i + 2] = rng.choice(EXTREMES_16).to_bytes(2, "big")
    elif kind == 3 and len(b) > 14:  # a 32-bit length, count, partition count, timeout...
        i = rng.randrange(10, len(b) - 3)
        b[i:i + 4] = rng.choice(EXTREMES_32).to_bytes(4, "big")
    elif kind == 4 and len(b) > 11:  # a compact (varint) length or count
        i = rng.randrange(10, len(b))
        b[i:i + 1] = VARINT_HUGE
    elif kind == 5:  # splice with another frame
        other = rng.choice(others)
        b = b[:rng.randrange(len(b) + 1)] + other[rng.randrange(len(other) + 1):]
    elif kind == 6:  # inserted or duplicated bytes
        i = rng.randrange(len(b) + 1)
        if rng.random() < 0.5:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:
            j = rng.randrange(i, len(b) + 1)
            b[i:i] = b[i:j]
    else:  # another api version (unsupported ones included)
        if len(b) >= 4:
            b[2:4] = rng.randrange(-1, 20).to_bytes(2, "big", signed=True)
    return bytes(b)
