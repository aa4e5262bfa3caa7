"""The broker driven with raw protocol requests: dispatch, bad input, produce/fetch semantics."""

from __future__ import annotations

import struct
import time

import pytest
import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import APIS, CONTROLLER_API_KEYS, ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.headers import RequestHeader
from minikafka.protocol.records import decode_records, iter_batches

from helpers import batch, create, fetch, produce, wait_until

K = ApiKey


async def closed_by_broker(conn: KafkaConnection) -> bool:
    with trio.fail_after(5):
        return await conn.receive_frame() is None


# -- ApiVersions and dispatch -------------------------------------------------

@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_api_versions_lists_every_api(conn, version):
    resp = await conn.request(K.API_VERSIONS, version)
    assert resp.error_code == 0
    got = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    # (the controller's APIs are served on a controller's listener only)
    expected = {k: (a.min_version, a.max_version) for k, a in APIS.items() if k not in CONTROLLER_API_KEYS}
    expected[K.PRODUCE] = (0, 13)  # advertised from v0 as Kafka 4 does (KAFKA-18659); v0-2 still refused
    assert got == expected
    assert got[K.FETCH] == (4, 18) and got[K.METADATA] == (0, 13) and got[K.LIST_OFFSETS] == (0, 11)


async def test_unknown_api_versions_version_gets_v0_error_body(conn):
    header = RequestHeader.build({"request_api_key": 18, "request_api_version": 9, "correlation_id": 77,
                                  "client_id": "future"}, 2)
    await conn.send_raw(header + b"\x00\x00\x00")  # whatever a v9 body would be
    frame = await conn.receive_frame()
    corr = struct.unpack_from(">i", frame)[0]
    body = APIS[K.API_VERSIONS].response.parse(frame[4:], 0)  # response header v0, body v0
    assert corr == 77
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {a.api_key for a in body.api_keys} == set(APIS) - CONTROLLER_API_KEYS


async def test_pipelined_requests_answered_in_order(conn):
    corrs = [await conn.send(K.METADATA, 12, {"topics": []}) for _ in range(3)]
    corrs.append(await conn.send(K.API_VERSIONS, 3))
    got = []
    for i in range(4):
        frame = await conn.receive_frame()
        got.append(struct.unpack_from(">i", frame)[0])
    assert got == corrs


# -- bad input never takes the broker down -------------------------------------

async def _still_serving(port: int) -> None:
    async with await KafkaConnection.connect("127.0.0.1", port) as other:
        resp = await other.request(K.API_VERSIONS, 3)
        assert resp.error_code == 0


async def test_unknown_api_key_closes_connection(broker, conn):
    header = RequestHeader.build({"request_api_key": 999, "request_api_version": 0, "correlation_id": 1,
                                  "client_id": "x"}, 1)
    await conn.send_raw(header)
    assert await closed_by_broker(conn)
    await _still_serving(broker.port)


async def test_unsupported_version_closes_connection(broker, conn):
    # Produce v2 is below our range (3-9): Kafka fails to parse it and closes the connection.
    header = RequestHeader.build({"request_api_key": 0, "request_api_version": 2, "correlation_id": 1,
                                  "client_id": "old"}, 1)
    await conn.send_raw(header + b"\x00" * 10)
    assert await closed_by_broker(conn)
    await _still_serving(broker.port)


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x05ab",
                                     b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xff\x00\x00\x01\x00\x00\x05"])
async def test_malformed_frames_close_connection(broker, conn, payload):
    await conn.send_raw(payload)
    assert await closed_by_broker(conn)
    await _still_serving(broker.port)


async def test_frame_over_socket_request_max_bytes():
    async with serve_broker(BrokerConfig(port=0, socket_request_max_bytes=1000)) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await c.stream.send_all(struct.pack(">i", 1001) + b"\x00" * 100)
            assert await closed_by_broker(c)
        await _still_serving(b.port)


async def test_negative_frame_size_closes(broker, conn):
    await conn.stream.send_all(struct.pack(">i", -5))
    assert await closed_by_broker(conn)
    await _still_serving(broker.port)


async def test_client_vanishing_mid_request(broker):
    c = await KafkaConnection.connect("127.0.0.1", broker.port)
    await c.stream.send_all(struct.pack(">i", 5000) + b"\x00\x00\x00")  # 3 of 5000 bytes
    await c.aclose()
    c2 = await KafkaConnection.connect("127.0.0.1", broker.port)
    frame = c2.encode_request(K.PRODUCE, 9, {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "vanish", "partition_data": [{"index": 0, "records": batch([b"x" * 100000])}]}]}, 1)
    await c2.stream.send_all(struct.pack(">i", len(frame)) + frame[: len(frame) // 2])
    await c2.aclose()
    await wait_until(lambda: broker.server.open_connections == 0, what="the broker to drop both connections")
    await _still_serving(broker.port)
    assert broker.metadata.get_topic("vanish") is None  # half a request never reached a handler


async def test_bad_crc_is_corrupt_message(conn):
    await create(conn, "crc")
    data = bytearray(batch([b"hello"]))
    data[-1] ^= 0xFF
    p = await produce(conn, "crc", bytes(data))
    assert p.error_code == ErrorCode.CORRUPT_MESSAGE
    ok = await produce(conn, "crc", batch([b"fine"]))
    assert ok.error_code == 0 and ok.base_offset == 0


async def test_truncated_batch_is_corrupt_message(conn):
    await create(conn, "trunc")
    data = batch([b"hello", b"world"])
    p = await produce(conn, "trunc", data[:-3])
    assert p.error_code == ErrorCode.CORRUPT_MESSAGE


async def test_record_over_message_max_bytes():
    async with serve_broker(BrokerConfig(port=0, message_max_bytes=2000)) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "big")
            p = await produce(c, "big", batch([b"x" * 5000]))
            assert p.error_code == ErrorCode.MESSAGE_TOO_LARGE
            p = await produce(c, "big", batch([b"x" * 500]))
            assert p.error_code == 0


async def test_topic_max_message_bytes_override(conn):
    await create(conn, "small", configs=[{"name": "max.message.bytes", "value": "300"}])
    assert (await produce(conn, "small", batch([b"x" * 1000]))).error_code == ErrorCode.MESSAGE_TOO_LARGE


# -- produce and fetch --------------------------------------------------------

async def test_produce_fetch_roundtrip_assigns_offsets(conn):
    await create(conn, "rt")
    p1 = await produce(conn, "rt", batch([b"a", b"b", b"c"]))
    p2 = await produce(conn, "rt", batch([b"d"]))
    assert (p1.base_offset, p2.base_offset) == (0, 3)
    part = await fetch(conn, "rt", 0)
    assert part.error_code == 0 and part.high_watermark == 4
    records = [r for _, view in iter_batches(part.records) for r in decode_records(view)]
    assert [(r.offset, r.value) for r in records] == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    part = await fetch(conn, "rt", 3)
    assert [r.value for _, v in iter_batches(part.records) for r in decode_records(v)] == [b"d"]


async def test_fetch_out_of_range_and_unknown(conn):
    await create(conn, "oor")
    await produce(conn, "oor", batch([b"a"]))
    assert (await fetch(conn, "oor", 5)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (await fetch(conn, "nope", 0)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await fetch(conn, "oor", 0, partition=7)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_fetch_by_topic_id_v13(conn):
    await create(conn, "byid")
    md = await conn.request(K.METADATA, 12, {"topics": [{"name": "byid"}]})
    tid = md.topics[0].topic_id
    await produce(conn, "byid", batch([b"x"]))
    part = await fetch(conn, "", 0, version=13, topic_id=tid)
    assert part.error_code == 0 and part.high_watermark == 1
    import uuid
    part = await fetch(conn, "", 0, version=13, topic_id=uuid.uuid4())
    assert part.error_code == ErrorCode.UNKNOWN_TOPIC_ID


async def test_fetch_long_poll_woken_by_produce(broker):
    async with await KafkaConnection.connect("127.0.0.1", broker.port) as c1, \
            await KafkaConnection.connect("127.0.0.1", broker.port) as c2:
        await create(c1, "poll")
        result = {}

        async def poller():
            t0 = trio.current_time()
            result["part"] = await fetch(c1, "poll", 0, max_wait_ms=10000)
            result["waited"] = trio.current_time() - t0

        async with trio.open_nursery() as n:
            n.start_soon(poller)
            await wait_until(lambda: broker.delayed_fetch.watched() == 1, what="the fetch to wait in the purgatory")
            assert not result  # the fetch waits for data (min_bytes 1) ...
            await produce(c2, "poll", batch([b"wake"]))
        assert result["waited"] < 5  # ... and the produce wakes it long before max_wait_ms
        assert result["part"].high_watermark == 1 and len(result["part"].records) > 0


async def test_fetch_waits_max_wait_when_no_data(conn):
    await create(conn, "idle")
    t0 = time.monotonic()
    part = await fetch(conn, "idle", 0, max_wait_ms=300)
    assert 0.25 < time.monotonic() - t0 < 3
    assert part.error_code == 0 and part.records == b""


async def test_acks_zero_gets_no_response(conn):
    await create(conn, "acks0")
    await conn.send(K.PRODUCE, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "acks0", "partition_data": [{"index": 0, "records": batch([b"fire-and-forget"])}]}]})
    corr = await conn.send(K.API_VERSIONS, 3)
    frame = await conn.receive_frame()
    assert struct.unpack_from(">i", frame)[0] == corr  # the next response is ApiVersions'
    assert (await fetch(conn, "acks0", 0)).high_watermark == 1


async def test_invalid_acks(conn):
    await create(conn, "acks")
    assert (await produce(conn, "acks", batch([b"x"]), acks=2)).error_code == ErrorCode.INVALID_REQUIRED_ACKS


async def test_produce_auto_creates_topic(conn):
    p = await produce(conn, "autoproduce", batch([b"x"]))
    assert p.error_code == 0


async def test_idempotent_producer_sequences(conn):
    await create(conn, "idem")
    init = await conn.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
    pid, epoch = init.producer_id, init.producer_epoch
    assert init.error_code == 0 and pid >= 0 and epoch == 0

    def b(seq, n=2):
        return batch([b"v%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=epoch,
                     base_sequence=seq)

    assert (await produce(conn, "idem", b(0))).base_offset == 0
    assert (await produce(conn, "idem", b(2))).base_offset == 2
    dup = await produce(conn, "idem", b(2))  # a retry of the last batch
    assert dup.error_code == 0 and dup.base_offset == 2
    dup0 = await produce(conn, "idem", b(0))  # an older retry still in the last five
    assert dup0.error_code == 0 and dup0.base_offset == 0
    gap = await produce(conn, "idem", b(7))
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await fetch(conn, "idem", 0)).high_watermark == 4  # duplicates were not re-appended
    # A producer id the partition has no state for (Kafka: its records deleted by retention) starts anywhere,
    # and goes on in sequence from there.
    unknown = await produce(conn, "idem", batch([b"x"], producer_id=pid + 100, producer_epoch=0, base_sequence=5))
    assert unknown.error_code == 0 and unknown.base_offset == 4
    after = await produce(conn, "idem", batch([b"y"], producer_id=pid + 100, producer_epoch=0, base_sequence=7))
    assert after.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await produce(conn, "idem", batch([b"y"], producer_id=pid + 100, producer_epoch=0,
                                              base_sequence=6))).base_offset == 5
    bumped = await conn.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1,
                                                        "producer_id": pid, "producer_epoch": epoch})
    assert bumped.producer_id == pid and bumped.producer_epoch == 1
    assert (await produce(conn, "idem", batch([b"e1"], producer_id=pid, producer_epoch=1,
                                              base_sequence=0))).error_code == 0
    stale = await produce(conn, "idem", batch([b"e0"], producer_id=pid, producer_epoch=0, base_sequence=4))
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


# -- offsets ------------------------------------------------------------------

async def test_list_offsets(conn):
    await create(conn, "lo")
    now = int(time.time() * 1000)
    for i, ts in enumerate([now - 3000, now - 2000, now - 1000]):
        await produce(conn, "lo", batch([b"a%d" % i, b"b%d" % i], base_timestamp=ts))

    async def q(ts, version=7):
        r = await conn.request(K.LIST_OFFSETS, version, {"replica_id": -1, "topics": [
            {"name": "lo", "partitions": [{"partition_index": 0, "timestamp": ts}]}]})
        return r.topics[0].partitions[0]

    assert (await q(-2)).offset == 0
    assert (await q(-1)).offset == 6
    mx = await q(-3)
    assert mx.timestamp == now - 1000 and mx.offset in (4, 5)
    by_ts = await q(now - 2000)
    assert by_ts.offset == 2 and by_ts.timestamp == now - 2000
    assert (await q(now + 10_000)).offset == -1
    v0 = await q(-1, version=0)
    assert list(v0.old_style_offsets) == [6]


async def test_offset_for_leader_epoch(conn):
    await create(conn, "ofle")
    await produce(conn, "ofle", batch([b"a", b"b"]))
    r = await conn.request(K.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -2, "topics": [
        {"topic": "ofle", "partitions": [{"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0}]}]})
    p = r.topics[0].partitions[0]
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 2)
    r = await conn.request(K.OFFSET_FOR_LEADER_EPOCH, 4, {"replica_id": -2, "topics": [
        {"topic": "ofle", "partitions": [{"partition": 0, "current_leader_epoch": 5, "leader_epoch": 0}]}]})
    assert r.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_delete_records(conn):
    await create(conn, "dr")
    for i in range(3):
        await produce(conn, "dr", batch([b"x%d" % i]))
    r = await conn.request(K.DELETE_RECORDS, 2, {"topics": [
        {"name": "dr", "partitions": [{"partition_index": 0, "offset": 2}]}], "timeout_ms": 1000})
    assert r.topics[0].partitions[0].low_watermark == 2
    assert (await fetch(conn, "dr", 0)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    part = await fetch(conn, "dr", 2)
    assert part.log_start_offset == 2
    assert [r.value for _, v in iter_batches(part.records) for r in decode_records(v)] == [b"x2"]


# -- metadata and admin -------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 13))
async def test_metadata_every_version(conn, version):
    if version >= 1:
        await conn.request(K.METADATA, version, {"topics": [{"name": f"md{version}"}],
                                                  "allow_auto_topic_creation": True})
    resp = await conn.request(K.METADATA, version, {"topics": None if version >= 1 else []})
    assert [b.node_id for b in resp.brokers] == [0]
    names = {t.name for t in resp.topics}
    if version >= 1:
        assert f"md{version}" in names
    if version >= 2:
        assert resp.cluster_id


async def test_metadata_auto_create_disabled():
    async with serve_broker(BrokerConfig(port=0, auto_create_topics_enable=False)) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            r = await c.request(K.METADATA, 12, {"topics": [{"name": "ghost"}]})
            assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            r = await c.request(K.METADATA, 12, {"topics": [{"name": "bad name!"}]})
            assert r.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


async def test_metadata_no_auto_create_when_client_says_no(conn):
    r = await conn.request(K.METADATA, 12, {"topics": [{"name": "nocreate"}], "allow_auto_topic_creation": False})
    assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_create_topics_errors_and_validate_only(conn):
    async def ct(name, n=1, rf=1, validate=False):
        r = await conn.request(K.CREATE_TOPICS, 7, {"topics": [
            {"name": name, "num_partitions": n, "replication_factor": rf}], "timeout_ms": 1000,
            "validate_only": validate})
        return r.topics[0]

    ok = await ct("admin1", 4)
    assert ok.error_code == 0 and ok.num_partitions == 4 and ok.topic_id.int != 0
    assert (await ct("admin1")).error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert (await ct("bad/name")).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert (await ct("rf3", rf=3)).error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert (await ct("zero", n=0)).error_code == ErrorCode.INVALID_PARTITIONS
    assert (await ct("dry", validate=True)).error_code == 0
    md = await conn.request(K.METADATA, 12, {"topics": None})
    assert "dry" not in {t.name for t in md.topics}


async def test_create_partitions_and_delete_topics(conn):
    await create(conn, "grow", 2)
    r = await conn.request(K.CREATE_PARTITIONS, 3, {"topics": [{"name": "grow", "count": 5, "assignments": None}],
                                                    "timeout_ms": 1000, "validate_only": False})
    assert r.results[0].error_code == 0
    r = await conn.request(K.CREATE_PARTITIONS, 3, {"topics": [{"name": "grow", "count": 3, "assignments": None}],
                                                    "timeout_ms": 1000, "validate_only": False})
    assert r.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert (await produce(conn, "grow", batch([b"p4"]), partition=4)).error_code == 0
    for version in (0, 6):
        name = f"gone{version}"
        await create(conn, name)
        body = {"topic_names": [name], "topics": [{"name": name}], "timeout_ms": 1000}
        r = await conn.request(K.DELETE_TOPICS, version, body)
        assert r.responses[0].error_code == 0
        r = await conn.request(K.DELETE_TOPICS, version, body)
        assert r.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_describe_configs_and_cluster(conn):
    await create(conn, "cfg", configs=[{"name": "retention.ms", "value": "1234"}])
    r = await conn.request(K.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": "cfg", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "0", "configuration_keys": ["num.partitions"]}]})
    topic_cfg = {c.name: c for c in r.results[0].configs}
    assert topic_cfg["retention.ms"].value == "1234" and topic_cfg["retention.ms"].config_source == 1
    assert topic_cfg["segment.bytes"].config_source == 5
    assert [c.name for c in r.results[1].configs] == ["num.partitions"]
    bad = await conn.request(K.CREATE_TOPICS, 7, {"topics": [{"name": "badcfg", "num_partitions": 1,
        "replication_factor": 1, "configs": [{"name": "no.such.config", "value": "1"}]}], "timeout_ms": 1})
    assert bad.topics[0].error_code == ErrorCode.INVALID_CONFIG
    dc = await conn.request(K.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False})
    assert dc.error_code == 0 and [b.broker_id for b in dc.brokers] == [0] and dc.controller_id == 0


async def test_a_failing_handler_answers_with_an_error_and_keeps_the_connection(broker, conn, caplog) -> None:
    """Kafka's handleError: the request gets UNKNOWN_SERVER_ERROR on every partition it named, the error is
    logged once, and the same connection goes on serving."""
    from helpers import batch

    async def broken(ctx, req):
        raise RuntimeError("handler bug")

    broker.apis.handlers[ApiKey.PRODUCE] = broken
    resp = await conn.request(ApiKey.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": batch([b"x"])},
                                         {"index": 1, "records": batch([b"y"])}]}]})
    assert [(p.index, p.error_code) for p in resp.responses[0].partition_responses] == [
        (0, ErrorCode.UNKNOWN_SERVER_ERROR), (1, ErrorCode.UNKNOWN_SERVER_ERROR)]
    assert (await conn.request(ApiKey.API_VERSIONS, 3, {})).error_code == 0
    assert len([r for r in caplog.records if "error handling Produce v9" in r.getMessage()]) == 1


async def test_a_server_held_back_accepts_no_connection_until_request_processing_is_enabled():
    """A broker process binds its listeners, registers and catches up with the metadata log before it serves
    (Kafka's ``enableRequestProcessing``): until then a client's connection waits, unaccepted."""
    from trio.testing import wait_all_tasks_blocked

    from minikafka.broker.server import SocketServer
    from minikafka.protocol.framing import MemoryPool

    async with serve_broker(port=0) as b:
        held = SocketServer(BrokerConfig(port=0), b.apis, MemoryPool(1 << 20), processing=False)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(held.serve)
            conn = await KafkaConnection.connect("127.0.0.1", port)
            async with conn:
                await wait_all_tasks_blocked()
                assert held.open_connections == 0
                held.enable_request_processing()
                resp = await conn.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                                   "client_software_version": "1"})
                assert resp["error_code"] == 0 and held.open_connections == 1
            nursery.cancel_scope.cancel()
