"""Our producer against our broker (same Trio loop): acks, compression, idempotent retries after injected
faults, delivery.timeout.ms, max.block.ms, flush/close, callbacks, metrics."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from helpers import stored_batches
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.producer import (BufferExhaustedError, KafkaProducer, KafkaProducerError, KafkaTimeoutError,
                                       ProducerClosedError, RecordMetadata, partition_for_key)
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode


async def read_all(port: int, topic: str, partition: int = 0) -> list[tuple[Any, Any]]:
    """Every (batch header, record) stored in the partition."""
    return [(h, r) for h, records in await stored_batches(port, topic, partition) for r in records]


def bootstrap(broker) -> str:
    return f"127.0.0.1:{broker.port}"


@pytest.mark.parametrize("acks", [0, 1, "all"])
async def test_acks(broker, acks) -> None:
    async with KafkaProducer(bootstrap(broker), acks=acks, linger_ms=1) as p:
        futs = [await p.send("acks", b"v%d" % i) for i in range(200)]
        await p.flush()
        metas = [await f.get() for f in futs]
    if acks == 0:
        assert all(m.offset == -1 for m in metas)
    else:
        assert [m.offset for m in metas] == list(range(200))
    assert [r.value for _, r in await read_all(broker.port, "acks")] == [b"v%d" % i for i in range(200)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compression(broker, codec) -> None:
    topic = f"comp-{codec}"
    async with KafkaProducer(bootstrap(broker), compression_type=codec, linger_ms=5) as p:
        for i in range(500):
            await p.send(topic, b"value-%d " % i * 5, key=b"k")
        await p.flush()
        assert p.metrics()["compression-rate-avg"] < 0.8
    stored = await read_all(broker.port, topic)
    assert [r.value for _, r in stored] == [b"value-%d " % i * 5 for i in range(500)]
    codes = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert {h.compression for h, _ in stored} == {codes[codec]}


async def test_keys_headers_timestamps_and_partitioning(broker) -> None:
    broker.create_topic("keyed", 5, 1)
    sent = []
    async with KafkaProducer(bootstrap(broker)) as p:
        assert await p.partitions_for("keyed") == [0, 1, 2, 3, 4]
        for i in range(100):
            key = b"key-%d" % (i % 17)
            fut = await p.send("keyed", b"v%d" % i, key=key, headers=[("h", b"%d" % i), ("n", None)],
                               timestamp_ms=1_600_000_000_000 + i)
            sent.append((key, i, fut))
        await p.send("keyed", "text value", key="text key", partition=3, headers={"s": "x"})
        await p.flush()
    for key, i, fut in sent:
        meta = await fut.get()
        assert meta.partition == partition_for_key(key, 5)
        assert meta.timestamp == 1_600_000_000_000 + i
    for part in range(5):
        stored = [r for _, r in await read_all(broker.port, "keyed", part)]
        expected = [(k, i) for k, i, _ in sent if partition_for_key(k, 5) == part]
        if part == 3:
            assert stored[-1].value == b"text value" and stored[-1].headers == [("s", b"x")]
            stored = stored[:-1]
        assert [(r.key, r.value, r.headers, r.timestamp) for r in stored] == [
            (k, b"v%d" % i, [("h", b"%d" % i), ("n", None)], 1_600_000_000_000 + i) for k, i in expected]


async def test_null_keys_are_sticky(broker) -> None:
    broker.create_topic("sticky", 4, 1)
    async with KafkaProducer(bootstrap(broker), batch_size=4096, linger_ms=1000) as p:
        futs = [await p.send("sticky", b"x" * 100) for _ in range(30)]
        await p.flush()
        parts = [(await f.get()).partition for f in futs]
    # about batch.size bytes go to one partition before switching
    assert len(set(parts[:30])) <= 2
    switches = sum(1 for a, b in zip(parts, parts[1:]) if a != b)
    assert switches <= 1


async def test_callbacks_and_send_callback(broker) -> None:
    got: list[tuple[Any, Any]] = []
    async with KafkaProducer(bootstrap(broker)) as p:
        await p.send("cb", b"a", callback=lambda m, e: got.append((m, e)))
        await p.send_callback("cb", b"b", callback=lambda m, e: got.append((m, e)))
        await p.flush()
    assert [(m.offset, e) for m, e in got] == [(0, None), (1, None)]
    assert all(isinstance(m, RecordMetadata) for m, _ in got)


async def test_close_and_flush_lose_nothing(broker) -> None:
    futs = []
    async with KafkaProducer(bootstrap(broker), linger_ms=50, batch_size=2048) as p:
        for i in range(3000):
            futs.append(await p.send("closing", b"%d" % i))
        # leave without flush: close() must send everything accepted
    assert all(f.done() for f in futs)
    assert [r.value for _, r in await read_all(broker.port, "closing")] == [b"%d" % i for i in range(3000)]
    with pytest.raises(ProducerClosedError):
        await p.send("closing", b"late")


def inject_faults(broker, monkeypatch, code: ErrorCode, times: int, after_append: bool, topic: str) -> list[int]:
    """Answer ``code`` to the first ``times`` produce requests for ``topic`` (appending first when asked)."""
    real = broker.apis.handlers[ApiKey.PRODUCE]
    calls = [0]
    topic_id = broker.metadata.get_topic(topic).topic_id

    async def faulty(ctx, req):
        # Produce v13 (the producer's newest) names topics by id.
        if any(td.name == topic or td.topic_id == topic_id for td in req.topic_data) and calls[0] < times:
            calls[0] += 1
            if after_append:
                await real(ctx, req)
            return {"responses": [{"name": td.name, "topic_id": td.topic_id, "partition_responses": [
                {"index": pd.index, "error_code": code} for pd in td.partition_data]} for td in req.topic_data],
                "throttle_time_ms": 0}
        return await real(ctx, req)

    monkeypatch.setitem(broker.apis.handlers, ApiKey.PRODUCE, faulty)
    return calls


@pytest.mark.parametrize("code,after_append", [
    (ErrorCode.NOT_LEADER_OR_FOLLOWER, False),
    (ErrorCode.REQUEST_TIMED_OUT, True),
    (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True),
])
async def test_retries_without_duplicates(broker, monkeypatch, code, after_append) -> None:
    topic = f"retry-{code.name.lower()}"
    broker.create_topic(topic, 3, 1)
    async with KafkaProducer(bootstrap(broker), retry_backoff_ms=10, linger_ms=2, batch_size=1024) as p:
        await (await p.send(topic, b"warm", partition=0)).get()
        calls = inject_faults(broker, monkeypatch, code, 6, after_append, topic)
        futs = []
        for i in range(600):
            futs.append(await p.send(topic, b"%d" % i, key=b"%d" % (i % 3)))
        await p.flush()
        for f in futs:
            await f.get()
        m = p.metrics()
        assert m["record-retry-total"] > 0
        assert m["record-error-total"] == 0
    assert calls[0] == 6
    by_part: dict[int, list[bytes]] = {}
    for i in range(600):
        by_part.setdefault(partition_for_key(b"%d" % (i % 3), 3), []).append(b"%d" % i)
    by_part[0].insert(0, b"warm")
    for part, values in by_part.items():
        stored = await read_all(broker.port, topic, part)
        assert [r.value for _, r in stored] == values  # exactly once, in order
        assert all(h.producer_id >= 0 for h, _ in stored)
    # offsets reported to the application match the log
    for f in futs:
        meta = f.value()
        stored = await read_all(broker.port, topic, meta.partition)
        assert stored[meta.offset][1].value == b"%d" % futs.index(f)
        break


async def test_out_of_order_sequence_after_lost_batch_is_retried(broker, monkeypatch) -> None:
    """The broker loses a batch (answers NOT_LEADER without appending) while later batches are in
    flight: those get OUT_OF_ORDER_SEQUENCE_NUMBER and are retried after it, in order."""
    topic = "ooo"
    async with KafkaProducer(bootstrap(broker), retry_backoff_ms=5, linger_ms=0, batch_size=512,
                             max_in_flight_requests_per_connection=5) as p:
        await (await p.send(topic, b"warm")).get()
        inject_faults(broker, monkeypatch, ErrorCode.NOT_LEADER_OR_FOLLOWER, 1, False, topic)
        futs = [await p.send(topic, b"r%04d" % i + b"." * 60) for i in range(300)]
        await p.flush()
        for f in futs:
            await f.get()
    stored = [r.value for _, r in await read_all(broker.port, topic)]
    assert stored == [b"warm"] + [b"r%04d" % i + b"." * 60 for i in range(300)]


async def test_delivery_timeout_expires_batches(broker, monkeypatch) -> None:
    topic = "never"
    async with KafkaProducer(bootstrap(broker), delivery_timeout_ms=600, request_timeout_ms=200, linger_ms=0,
                             retry_backoff_ms=20) as p:
        await (await p.send(topic, b"warm")).get()
        inject_faults(broker, monkeypatch, ErrorCode.NOT_LEADER_OR_FOLLOWER, 10**9, False, topic)
        t0 = trio.current_time()
        fut = await p.send(topic, b"lost")
        with pytest.raises(KafkaTimeoutError, match="Expiring 1 record"):
            await fut.get()
        assert 0.55 <= trio.current_time() - t0 < 3
        assert p.metrics()["record-error-total"] == 1


async def test_non_retriable_error_fails_the_send(broker, monkeypatch) -> None:
    async with KafkaProducer(bootstrap(broker)) as p:
        await (await p.send("bad", b"warm")).get()
        inject_faults(broker, monkeypatch, ErrorCode.INVALID_RECORD, 1, False, "bad")
        fut = await p.send("bad", b"x")
        with pytest.raises(KafkaProducerError) as info:
            await fut.get()
        assert info.value.code == ErrorCode.INVALID_RECORD


async def test_buffer_exhaustion_blocks_then_fails(broker, monkeypatch) -> None:
    async def stuck(ctx, req):
        await trio.sleep_forever()

    async with KafkaProducer(bootstrap(broker), buffer_memory=4096, batch_size=1024, max_block_ms=300,
                             linger_ms=0, request_timeout_ms=60000, acks=1) as p:
        await (await p.send("stuck", b"warm")).get()
        monkeypatch.setitem(broker.apis.handlers, ApiKey.PRODUCE, stuck)
        t0 = trio.current_time()
        with pytest.raises(BufferExhaustedError):
            for _ in range(100):
                await p.send("stuck", b"x" * 900)
        assert 0.25 <= trio.current_time() - t0 < 3
        m = p.metrics()
        assert m["buffer-exhausted-total"] == 1 and m["buffer-available-bytes"] == 0
        assert m["bufferpool-wait-time-ns-total"] > 0
        await p.close(timeout=0)  # abort what is stuck


async def test_metadata_wait_times_out() -> None:
    async with serve_broker(BrokerConfig(port=0, auto_create_topics_enable=False)) as b:
        async with KafkaProducer(bootstrap(b), max_block_ms=300) as p:
            with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
                await p.send("missing", b"x")


async def test_metrics_have_java_names(broker) -> None:
    async with KafkaProducer(bootstrap(broker), client_id="m1") as p:
        for i in range(100):
            await p.send("metrics", b"x" * 100)
        await p.flush()
        m = p.metrics()
    for name in ["record-send-rate", "record-send-total", "batch-size-avg", "batch-size-max",
                 "records-per-request-avg", "record-queue-time-avg", "record-queue-time-max",
                 "request-latency-avg", "request-latency-max", "buffer-available-bytes", "buffer-total-bytes",
                 "produce-throttle-time-avg", "produce-throttle-time-max", "record-retry-rate", "record-error-rate",
                 "record-size-avg", "record-size-max", "compression-rate-avg", "bufferpool-wait-ratio",
                 "outgoing-byte-rate", "request-rate", "requests-in-flight"]:
        assert name in m, name
    assert m["record-send-total"] == 100
    assert m["batch-size-avg"] > 100
    assert m["buffer-available-bytes"] == m["buffer-total-bytes"] == 33554432
    assert str(next(iter(p.metrics_registry.registry.metrics))).startswith("producer-metrics")


async def test_idempotent_producer_sets_producer_id_and_sequences(broker) -> None:
    async with KafkaProducer(bootstrap(broker), batch_size=512, linger_ms=0) as p:
        for i in range(50):
            await p.send("idem", b"%02d" % i + b"-" * 40)
        await p.flush()
        pid, epoch = p.producer_id
    assert pid >= 0 and epoch == 0
    stored = await read_all(broker.port, "idem")
    seqs = sorted({(h.base_sequence, h.record_count) for h, _ in stored})
    expect = 0
    for base, count in seqs:
        assert base == expect
        expect += count
    assert expect == 50 and all(h.producer_id == pid for h, _ in stored)


async def test_request_timeout_retries_on_the_same_connection(broker) -> None:
    """A produce response held past request.timeout.ms: the Sender expires the request itself (Java's
    ``handleTimedOutRequests``: no task waits per request), retries the batch with REQUEST_TIMED_OUT without
    closing the connection, and drops the late response; with idempotence the retry is a duplicate, not a
    second copy."""
    topic = "held"
    async with KafkaProducer(bootstrap(broker), request_timeout_ms=300, delivery_timeout_ms=30000, linger_ms=0,
                             retry_backoff_ms=10) as p:
        await (await p.send(topic, b"warm")).get()
        conn = p._nc._connections[broker.config.node_id]  # noqa: SLF001 - the leader's connection
        broker.faults.add(api="Produce", topic=topic, hold_ms=450, count=1)
        t0 = trio.current_time()
        meta = await (await p.send(topic, b"held")).get()
        assert 0.3 <= trio.current_time() - t0 < 5
        assert meta.offset == 1
        m = p.metrics()
        assert m["record-retry-total"] >= 1 and m["record-error-total"] == 0  # a retry queued behind it may expire too
        assert p._nc._connections[broker.config.node_id] is conn and not conn.closed  # noqa: SLF001
    assert [r.value for _, r in await read_all(broker.port, topic)] == [b"warm", b"held"]
