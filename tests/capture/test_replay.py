"""Wire replay: a capture of real client traffic replayed against a fresh broker answers the same."""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest
import trio
from waiting import wait_for_no_connections

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.capture import CaptureRecord, read_capture
from minikafka.capture.replay import (
    ReplayOptions,
    ReplayReport,
    parse_speed,
    replay_capture,
    replay_records,
    rewrite_producer_ids,
    run_replay,
)
from minikafka.cli import main as cli_main
from minikafka.client.connection import KafkaConnection, read_frame
from minikafka.protocol.api import APIS
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.framing import FrameDecoder, encode_frame
from minikafka.protocol.records import Record, build_batch, iter_batches
from minikafka.testing import BrokerThread
from minikafka.common.clock import SYSTEM_CLOCK

N = 200
TOPIC = "rt"


def _target() -> BrokerThread:
    return BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0))


async def _session_fetches(port: int) -> None:
    """Fetch v13 in an incremental fetch session (KIP-227), topics by id: what librdkafka does not do."""
    async with await KafkaConnection.connect("127.0.0.1", port, client_id="session-fetcher") as conn:
        await conn.negotiate()
        md = await conn.request(K.METADATA, 12, {"topics": [{"name": TOPIC}]})
        topic_id = md.topics[0].topic_id
        sid, epoch, offset = 0, 0, 0
        for _ in range(4):
            parts = [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 600}]
            resp = await conn.request(K.FETCH, 13, {
                "max_wait_ms": 10, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": sid, "session_epoch": epoch,
                "topics": [{"topic_id": topic_id, "partitions": parts}]})
            assert resp.error_code == 0 and resp.session_id != 0
            batches = list(iter_batches(resp.responses[0].partitions[0].records, allow_truncated_tail=True))
            offset = batches[-1][0].next_offset
            sid, epoch = resp.session_id, epoch + 1


@pytest.fixture(scope="module")
def client_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An idempotent confluent producer, a consumer in a group, and raw session fetches, captured."""
    from confluent_kafka import Consumer, Producer

    cap = tmp_path_factory.mktemp("replay") / "cap"
    with BrokerThread(BrokerConfig(port=0, capture_dir=cap, group_initial_rebalance_delay_ms=0)) as bt:
        p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 1, "batch.num.messages": 25,
                      "enable.idempotence": True, "client.id": "replay-producer"})
        for i in range(N):
            p.produce(TOPIC, b"value-%d" % i)
            if i % 25 == 24:
                assert p.flush(10) == 0  # 25 values a request
        assert p.flush(10) == 0
        c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "replay-group", "client.id": "replay-consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True, "auto.commit.interval.ms": 100,
                      "fetch.max.bytes": 1000, "message.max.bytes": 1000, "max.partition.fetch.bytes": 500,
                      "fetch.wait.max.ms": 50})
        c.subscribe([TOPIC])
        got = 0
        deadline = time.time() + 20
        while got < N and time.time() < deadline:
            got += len([m for m in c.consume(100, timeout=0.5) if m.error() is None])
        c.commit(asynchronous=False)
        c.close()
        assert got == N
        trio.run(_session_fetches, bt.port)
        del p
        wait_for_no_connections(bt)
    return cap


def _watermarks(bootstrap: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    finally:
        c.close()


async def _init_producer_id(port: int) -> None:
    async with await KafkaConnection.connect("127.0.0.1", port) as conn:
        resp = await conn.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert resp.error_code == 0


def test_replay_at_max_speed_answers_the_same(client_capture: Path) -> None:
    recs = list(read_capture([client_capture]))
    with _target() as target:
        trio.run(_init_producer_id, target.port)  # so the replayed producer gets another producer id
        report = run_replay([client_capture], ReplayOptions("127.0.0.1", target.port, speed=None))
        assert _watermarks(target.bootstrap) == (0, N)
    assert report.requests == len(recs) and report.failed == 0 and report.connections_failed == 0
    assert report.received + sum(s.no_response_expected for s in report.per_api.values()) == len(recs)
    for name in ("Produce", "Metadata", "ApiVersions", "InitProducerId", "JoinGroup", "SyncGroup", "Heartbeat",
                 "OffsetCommit", "FindCoordinator"):
        st = report.by_name(name)
        assert st.sent > 0 and st.differing == 0, (name, st.to_dict())
    # Producer id rewritten in every batch (CRC recomputed, or the target would answer CORRUPT_MESSAGE).
    assert report.mappings["pid"]["changed"] == 1
    assert report.by_name("Produce").rewritten == report.by_name("Produce").sent
    # Fetch sessions and topic ids mapped: incremental fetches find their session.
    fetch = report.by_name("Fetch")
    assert report.mappings["session"]["changed"] >= 1 and report.mappings["topic"]["changed"] >= 1
    assert fetch.rewritten >= 4 and fetch.differing == 0, fetch.to_dict()
    assert not any("FETCH_SESSION_ID_NOT_FOUND" in k for k in (*fetch.error_changes, *fetch.replayed_errors))
    assert report.mappings["member"]["mapped"] >= 1 and report.by_name("LeaveGroup").differing == 0
    d = json.loads(json.dumps(report.to_dict()))
    assert d["per_api"]["Produce"]["latency"]["replayed"]["p50_ms"] is not None
    assert "Produce" in report.summary()


async def _paced_capture(cap: Path) -> None:
    async with serve_broker(BrokerConfig(port=0, capture_dir=cap), captures=CAPTURE) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await conn.negotiate()
            for i in range(6):
                if i:
                    await trio.sleep(0.2)  # fixed wait: the capture's pace (what the 1x replay must reproduce)
                await conn.request(K.METADATA, 12, {"topics": None})


@pytest.fixture(scope="module")
def paced_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """7 requests spread over ~1 s on one connection."""
    cap = tmp_path_factory.mktemp("paced") / "cap"
    trio.run(_paced_capture, cap)
    recs = list(read_capture([cap]))
    assert 0.95 < (recs[-1].receive_ns - recs[0].receive_ns) / 1e9 < 1.5
    return cap


async def test_replay_keeps_pacing_at_1x(paced_capture: Path) -> None:
    async with serve_broker(BrokerConfig(port=0)) as target:
        timings = {}
        for speed in ("1x", "2x", "max"):
            t = time.perf_counter()
            report = await replay_capture([paced_capture], ReplayOptions("127.0.0.1", target.port,
                                                                         speed=parse_speed(speed)))
            timings[speed] = time.perf_counter() - t
            assert report.received == 7 and report.by_name("Metadata").differing == 0
    assert 0.8 < timings["1x"] < 2.5
    assert 0.4 < timings["2x"] < 1.25
    assert timings["max"] < 0.4 * timings["1x"]


async def test_target_dropping_or_refusing_connections(paced_capture: Path) -> None:
    async def drop(stream: trio.SocketStream) -> None:
        await stream.receive_some(10)
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, drop, 0)
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(10):
            report = await replay_capture([paced_capture], ReplayOptions("127.0.0.1", port, speed=None, timeout_s=5))
        nursery.cancel_scope.cancel()
    assert report.connections == 1 and report.connections_failed == 1 and report.received == 0
    assert report.failed == 7
    assert any(w in report.connection_errors[0]["error"] for w in ("closed", "reset", "broken"))
    # A target that reads but never answers: every request times out, the replay still ends.
    async def silent(stream: trio.SocketStream) -> None:
        while await stream.receive_some(4096):
            pass

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, silent, 0)
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(10):
            report = await replay_capture([paced_capture], ReplayOptions("127.0.0.1", port, speed=None, timeout_s=0.2))
        nursery.cancel_scope.cancel()
    assert report.sent == 7 and report.received == 0 and report.failed == 7
    assert report.by_name("Metadata").timeouts == 6 and report.connections_failed == 0
    # Nothing listens on a port we just closed: the connect is refused.
    with trio.socket.socket() as s:
        await s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    report = await replay_capture([paced_capture], ReplayOptions("127.0.0.1", free, speed=None))
    assert report.connections_failed == 1 and report.sent == 0 and report.by_name("Metadata").not_sent == 6
    assert "connect failed" in report.connection_errors[0]["error"]


def _frame(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    return struct.pack(">hhih", api_key, version, corr, 1) + b"x" + body


def _record(conn: str, t_ms: int, api_key: int, version: int, corr: int, request: bytes,
            response: bytes | None) -> CaptureRecord:
    return CaptureRecord(t_ms * 1_000_000, t_ms * 1_000_000 + 100, conn, "peer", 0, "User:ANONYMOUS", "x",
                         api_key, version, corr, request, response)


async def test_acks0_produce_and_unknown_api_keys() -> None:
    """No response is awaited for acks=0; frames of api keys minikafka does not know are compared raw."""

    async def echo(stream: trio.SocketStream) -> None:  # answers api key 99 with "world", nothing else
        decoder = FrameDecoder()
        while (frame := await read_frame(stream, decoder)) is not None:
            if int.from_bytes(frame[:2], "big") == 99:
                await stream.send_all(encode_frame(frame[4:8] + b"world"))

    produce = APIS[K.PRODUCE].request.build({"acks": 0, "timeout_ms": 100, "topic_data": [
        {"name": "t", "partition_data": [{"index": 0, "records": build_batch([Record(offset_delta=0, value=b"v")],
                                                                          base_timestamp=SYSTEM_CLOCK.time_ms())}]}]}, 9)
    conns = {(0, "c1"): [
        _record("c1", 0, K.PRODUCE, 9, 1, _frame(K.PRODUCE, 9, 1, b"\x00" + produce), None),
        _record("c1", 1, 99, 0, 2, _frame(99, 0, 2, b"hello"), struct.pack(">i", 2) + b"world"),
        _record("c1", 2, 99, 0, 3, _frame(99, 0, 3, b"hello"), struct.pack(">i", 3) + b"other"),
    ]}
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(trio.serve_tcp, echo, 0)
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(10):
            report = await replay_records(conns, ReplayOptions("127.0.0.1", port, speed=None, timeout_s=5))
        nursery.cancel_scope.cancel()
    assert report.by_name("Produce").no_response_expected == 1 and report.by_name("Produce").sent == 1
    unknown = report.per_api[99]
    assert (unknown.name, unknown.sent, unknown.received, unknown.equal, unknown.differing) == ("Unknown99", 2, 2, 1, 1)
    assert unknown.examples[0]["path"] == "<raw>" and report.failed == 0


def test_cli_replay_writes_json_report(paced_capture: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "out.json"
    with _target() as target:
        rc = cli_main(["replay", str(paced_capture), "--to", target.bootstrap, "--speed", "max",
                       "--report", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["received"] == 7 and d["per_api"]["Metadata"]["equal"] == 6 and d["speed"] == "max"
    assert "Metadata" in capsys.readouterr().out


def test_rewrite_producer_ids_recomputes_crc() -> None:
    recs = [Record(offset_delta=0, value=b"a"), Record(offset_delta=1, value=b"b")]
    now = SYSTEM_CLOCK.time_ms()
    data = build_batch(recs, producer_id=7, producer_epoch=0, base_sequence=0, base_timestamp=now) + \
        build_batch(recs, producer_id=8, producer_epoch=1, base_sequence=0, base_timestamp=now)
    out = rewrite_producer_ids(data, {(7, 0): (1007, 3)})
    assert out is not None
    hs = [h for h, _ in iter_batches(out)]  # CRCs check
    assert [(h.producer_id, h.producer_epoch) for h in hs] == [(1007, 3), (8, 1)]
    assert rewrite_producer_ids(data, {(9, 0): (1, 1)}) is None
    assert parse_speed("max") is None and parse_speed("2x") == 2.0 and parse_speed("0.5") == 0.5
    with pytest.raises(ValueError):
        parse_speed("0x")


@pytest.mark.slow
def test_spark_replay_matches_local_replay(client_capture: Path) -> None:
    pytest.importorskip("pyspark")
    from minikafka.analysis.replay_job import run_spark_replay

    with _target() as target:
        local = run_replay([client_capture], ReplayOptions("127.0.0.1", target.port, speed=None))
    with _target() as target:
        spark = run_spark_replay([client_capture], ReplayOptions("127.0.0.1", target.port, speed=None),
                                 master="local[2]", partitions=2)
        assert _watermarks(target.bootstrap) == (0, N)
    assert isinstance(spark, ReplayReport) and spark.tasks == 2
    assert spark.connections == local.connections and spark.connections_failed == 0
    assert {k: (s.sent, s.received) for k, s in spark.per_api.items()} == \
        {k: (s.sent, s.received) for k, s in local.per_api.items()}
    assert spark.failed == 0 and spark.received == local.received
    differing = {s.name: s.differing for s in spark.per_api.values() if s.differing}
    assert not differing, (differing, spark.summary())
    assert sum(s.equal for s in spark.per_api.values()) == spark.received
    assert spark.cross_dependencies > 0 and spark.mappings["pid"]["changed"] == 0
