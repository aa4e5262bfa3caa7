"""A capture of the six real clients' traffic with causality across connections (issue 17's acceptance capture).

One broker (``capture_dir``) is driven in phases, each client on its own connections, one after the other so
that nothing races (every partition has one writer at a time; readers start after the writers are done):

1. confluent-kafka ``AdminClient`` creates ``six-a`` (3 partitions), ``six-b`` and ``six-c`` (1 each) and alters a
   config of ``six-a`` (IncrementalAlterConfigs); its connection stays open until phase 4;
2. writers: confluent-kafka idempotent ``Producer`` (six-a/0), kafka-python ``KafkaProducer`` (six-a/1), aiokafka
   ``AIOKafkaProducer`` (idempotent, six-a/2), ``kcat -P`` (six-b/0), minikafka's ``KafkaProducer`` (six-c/0);
3. readers: a confluent-kafka ``Consumer`` in group ``six-g1`` (six-a), kafka-python ``KafkaConsumer`` in
   ``six-g2`` (six-b), aiokafka ``AIOKafkaConsumer`` in ``six-g3`` (six-c), ``kcat -C -e`` (six-a) and
   minikafka's ``KafkaConsumer`` in ``six-g4`` (six-b); the group members commit what they read, then leave;
4. the AdminClient deletes ``six-c`` and adds a partition to ``six-b`` (CreatePartitions); kafka-python writes to
   the new partition and a kafka-python consumer in ``six-g2`` reads on from the group's committed offsets.

So topics are created on one connection and used on others, groups resume on new connections from offsets
committed on earlier ones, and producer ids come from InitProducerId before the producers' batches.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import subprocess
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.capture.frames import api_name
from minikafka.testing import BrokerThread
from waiting import wait_for

N = 60  # records per writer
M = 20  # records written to the partition added in phase 4
TOPICS = {"six-a": 3, "six-b": 1, "six-c": 1}
DELETED = "six-c"
TIMEOUT = 30.0
BATCH_BYTES = 400  # small batches and fetches: many Produce and Fetch requests (incremental fetch sessions)
FETCH_BYTES = 500

Watermarks = dict[str, dict[int, tuple[int, int]]]


def _wait(fn: Callable[[], Any], what: str, timeout: float = TIMEOUT, interval: float = 0.05) -> Any:
    return wait_for(fn, timeout, what, interval)


def watermarks(bt: BrokerThread) -> Watermarks:
    """(log start offset, high watermark) of every partition of every non-internal topic ``bt`` hosts, read
    from the broker's state (no client traffic)."""
    assert bt.broker is not None
    rm = bt.broker.replica_manager

    def read() -> Watermarks:
        out: Watermarks = {}
        for (topic, index), part in rm.partitions.items():
            if not topic.startswith("__"):
                out.setdefault(topic, {})[index] = (part.log.log_start_offset, part.log.high_watermark)
        return {t: dict(sorted(ps.items())) for t, ps in sorted(out.items())}

    return bt.call(read)


def _values(tag: str, n: int) -> list[bytes]:
    return [b"%s-%04d:" % (tag.encode(), i) + b"x" * (i % 37) for i in range(n)]


# -- phase 1 and 4: confluent-kafka AdminClient --------------------------------------------------------


def _admin_create(admin: Any) -> None:
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
    )

    futures = admin.create_topics([NewTopic(t, p, 1) for t, p in TOPICS.items()], operation_timeout=10)
    for f in futures.values():
        f.result(TIMEOUT)
    res = ConfigResource(ConfigResource.Type.TOPIC, "six-a", incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for f in admin.incremental_alter_configs([res]).values():
        f.result(TIMEOUT)


def _admin_change(admin: Any) -> None:
    from confluent_kafka.admin import NewPartitions

    admin.delete_topics([DELETED], operation_timeout=10)[DELETED].result(TIMEOUT)
    admin.create_partitions([NewPartitions("six-b", 2)], operation_timeout=10)["six-b"].result(TIMEOUT)


# -- phase 2: writers ------------------------------------------------------------------------------------


def _confluent_produce(bootstrap: str) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                  "batch.num.messages": 10, "client.id": "six-ck-producer"})
    for v in _values("ck", N):
        p.produce("six-a", v, key=b"k", partition=0)
    assert p.flush(TIMEOUT) == 0
    del p


def _kafka_python_produce(bootstrap: str, topic: str, partition: int, tag: str, n: int) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, client_id=f"six-kp-producer-{tag}", acks="all", linger_ms=5,
                      batch_size=BATCH_BYTES)
    try:
        futures = [p.send(topic, value=v, partition=partition) for v in _values(tag, n)]
        p.flush(TIMEOUT)
        assert all(f.get(TIMEOUT).partition == partition for f in futures)
    finally:
        p.close(TIMEOUT)


def _aiokafka_produce(bootstrap: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id="six-aio-producer", enable_idempotence=True,
                             linger_ms=5, max_batch_size=BATCH_BYTES)
        await p.start()
        try:
            futures = [await p.send("six-a", v, partition=2) for v in _values("aio", N)]
            await p.flush()
            for f in futures:
                await f
        finally:
            await p.stop()

    asyncio.run(run())


def _kcat(*args: str, input: bytes | None = None) -> bytes:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat not on PATH"
    r = subprocess.run([kcat, *args], input=input, capture_output=True, timeout=60, check=False)
    assert r.returncode == 0, f"kcat {' '.join(args)}: {r.stderr.decode(errors='replace')}"
    return r.stdout


def _minikafka_produce(bootstrap: str) -> None:
    import trio

    from minikafka.client.producer import KafkaProducer

    async def run() -> None:
        async with KafkaProducer(bootstrap, client_id="six-mk-producer", linger_ms=5,
                                 batch_size=BATCH_BYTES) as p:
            futures = [await p.send("six-c", v, partition=0) for v in _values("mk", N)]
            await p.flush()
            for f in futures:
                await f.get()

    trio.run(run)


# -- phase 3: readers ------------------------------------------------------------------------------------


def _confluent_consume(bootstrap: str) -> int:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "six-g1", "client.id": "six-ck-consumer",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                  "fetch.max.bytes": 1000, "message.max.bytes": 1000, "max.partition.fetch.bytes": FETCH_BYTES})
    try:
        c.subscribe(["six-a"])
        got: list = []

        def step() -> bool:
            for m in c.consume(100, 0.2):
                assert m.error() is None, m.error()
                got.append(m)
            return len(got) >= 3 * N

        _wait(step, "confluent-kafka consumer: six-a", interval=0)
        c.commit(asynchronous=False)
        return len(got)
    finally:
        c.close()


def _kafka_python_consume(bootstrap: str, topic: str, expected: int, tag: str) -> int:
    from kafka import KafkaConsumer

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="six-g2", client_id=f"six-kp-consumer-{tag}",
                      auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
                      max_partition_fetch_bytes=FETCH_BYTES)
    try:
        got = 0

        def step() -> bool:
            nonlocal got
            got += sum(len(v) for v in c.poll(timeout_ms=200).values())
            return got >= expected

        _wait(step, f"kafka-python consumer: {topic}", interval=0)
        c.commit()
        return got
    finally:
        c.close()


def _aiokafka_consume(bootstrap: str) -> int:
    from aiokafka import AIOKafkaConsumer

    async def run() -> int:
        c = AIOKafkaConsumer("six-c", bootstrap_servers=bootstrap, group_id="six-g3", client_id="six-aio-consumer",
                             auto_offset_reset="earliest", enable_auto_commit=False, fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=FETCH_BYTES)
        await c.start()
        try:
            got = 0
            async with asyncio.timeout(TIMEOUT):
                while got < N:
                    got += sum(len(v) for v in (await c.getmany(timeout_ms=200)).values())
            await c.commit()
            return got
        finally:
            await c.stop()

    return asyncio.run(run())


def _minikafka_consume(bootstrap: str) -> int:
    import trio

    from minikafka.client.consumer import KafkaConsumer

    async def run() -> int:
        async with KafkaConsumer("six-b", bootstrap_servers=bootstrap, group_id="six-g4",
                                 client_id="six-mk-consumer", auto_offset_reset="earliest",
                                 enable_auto_commit=False, fetch_max_wait_ms=100,
                                 max_partition_fetch_bytes=FETCH_BYTES) as c:
            got = 0
            with trio.fail_after(TIMEOUT):
                while got < N:
                    got += sum(len(v) for v in (await c.poll(200)).values())
            await c.commit()
            return got

    return trio.run(run)


# -- the capture -----------------------------------------------------------------------------------------


def make_six_client_capture(cap_dir: Path) -> dict:
    """Run the six clients against a capturing broker; what the capture holds, for the tests to check:

    ``requests`` (all captured requests), ``per_api`` (api name -> requests), ``connections``, ``client_ids``,
    ``consumed`` (reader -> records read), ``watermarks`` (topic -> partition -> (log start, high watermark)
    at the end), ``seconds`` (how long making it took)."""
    from confluent_kafka.admin import AdminClient

    started = time.monotonic()
    consumed: dict[str, int] = {}
    config = BrokerConfig(port=0, capture_dir=cap_dir, group_initial_rebalance_delay_ms=0)
    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka  # noqa: F401
    with BrokerThread(config) as bt:
        bs = bt.bootstrap
        admin = AdminClient({"bootstrap.servers": bs, "client.id": "six-admin"})
        _admin_create(admin)
        _confluent_produce(bs)
        _kafka_python_produce(bs, "six-a", 1, "kp", N)
        _aiokafka_produce(bs)
        _kcat("-P", "-b", bs, "-t", "six-b", "-p", "0", "-X", "client.id=six-kcat-producer",
              "-X", "batch.num.messages=10",
              input=b"".join(v + b"\n" for v in _values("kcat", N)))
        _minikafka_produce(bs)
        consumed["confluent-kafka"] = _confluent_consume(bs)
        consumed["kafka-python"] = _kafka_python_consume(bs, "six-b", N, "1")
        consumed["aiokafka"] = _aiokafka_consume(bs)
        lines = _kcat("-C", "-b", bs, "-t", "six-a", "-o", "beginning", "-e", "-q",
                      "-X", "client.id=six-kcat-consumer",
                      "-X", "fetch.max.bytes=1000", "-X", "message.max.bytes=1000",
                      "-X", f"max.partition.fetch.bytes={FETCH_BYTES}").splitlines()
        consumed["kcat"] = len(lines)
        consumed["minikafka"] = _minikafka_consume(bs)
        _admin_change(admin)
        del admin
        _kafka_python_produce(bs, "six-b", 1, "kp-new", M)
        consumed["kafka-python (resumed)"] = _kafka_python_consume(bs, "six-b", M, "2")
        gc.collect()  # librdkafka handles close their connections when destroyed
        assert bt.broker is not None
        server = bt.broker.server
        _wait(lambda: bt.call(lambda: server.open_connections == 0), "every client connection closed")
        marks = watermarks(bt)
    assert consumed == {"confluent-kafka": 3 * N, "kafka-python": N, "aiokafka": N, "kcat": 3 * N, "minikafka": N,
                        "kafka-python (resumed)": M}, consumed
    recs = list(read_capture([cap_dir]))
    return {
        "requests": len(recs),
        "per_api": dict(Counter(api_name(r.api_key) for r in recs)),
        "connections": len({(r.broker_id, r.connection_id) for r in recs}),
        "client_ids": sorted({r.client_id or "" for r in recs}),
        "consumed": consumed,
        "watermarks": marks,
        "seconds": time.monotonic() - started,
    }
