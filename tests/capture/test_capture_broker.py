"""A broker with capture on: the capture holds exactly the requests clients sent, with their responses."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from pathlib import Path

import trio
from capture_helpers import parse_request, parse_response
from helpers import batch, create, fetch, produce, wait_until

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.capture import ReadStats, read_capture
from minikafka.capture.cli import summarize
from minikafka.cli import main as cli_main
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.records import iter_batches
from minikafka.testing import BrokerThread


async def test_raw_client_requests_captured_exactly(tmp_path: Path) -> None:
    async with serve_broker(capture_dir=tmp_path, captures=CAPTURE) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="cap-test") as conn:
            await conn.negotiate()
            await create(conn, "t")
            for i in range(5):
                await produce(conn, "t", batch([b"v%d" % i]))
            await conn.send(K.PRODUCE, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": [
                {"name": "t", "partition_data": [{"index": 0, "records": batch([b"fire-and-forget"])}]}]})
            await fetch(conn, "t")
        port = broker.port
        assert broker.capture is not None
    stats = ReadStats()
    recs = list(read_capture([tmp_path], stats))
    assert stats.corrupt_blocks == 0 and stats.torn_bytes == 0
    assert [(r.api_key, r.correlation_id) for r in recs] == [
        (K.API_VERSIONS, 1), (K.CREATE_TOPICS, 2), *[(K.PRODUCE, c) for c in range(3, 9)], (K.FETCH, 9)]
    assert len({r.connection_id for r in recs}) == 1
    for r in recs:
        assert r.client_id == "cap-test" and r.broker_id == 0 and r.principal == "User:ANONYMOUS"
        assert r.server == f"127.0.0.1:{port}" and r.peer.startswith("127.0.0.1:")
        assert r.receive_ns <= r.send_ns and abs(r.receive_ns / 1e9 - time.time()) < 60
        parse_request(r)
    # Produce batches as the client sent them, not as the broker stamped them in place (offsets 0..5).
    for r in recs[2:8]:
        (h, _), = iter_batches(parse_request(r).topic_data[0].partition_data[0].records)
        assert h.base_offset == 0 and h.partition_leader_epoch == -1
    acks0 = recs[7]
    assert acks0.response is None and parse_request(acks0).acks == 0
    for r in recs[:7] + recs[8:]:
        parse_response(r)
    fetched = parse_response(recs[-1]).responses[0].partitions[0].records
    assert sum(h.record_count for h, _ in iter_batches(fetched)) == 6


def test_confluent_client_capture_matches_broker_and_client(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    n = 300
    with BrokerThread(BrokerConfig(port=0, capture_dir=tmp_path / "cap")) as bt:
        p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 2, "client.id": "cap-producer"})
        for i in range(n):
            p.produce("ct", b"value-%d" % i)
            if i % 50 == 0:
                p.flush()
        assert p.flush(10) == 0
        del p  # destroyed: its last requests (a terminating PushTelemetry, KIP-714) answered before it returns
        c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "g", "client.id": "cap-consumer",
                      "enable.auto.commit": False})
        c.assign([TopicPartition("ct", 0, 0)])
        got = 0
        deadline = time.time() + 20
        while got < n and time.time() < deadline:
            got += len([m for m in c.consume(100, timeout=1) if m.error() is None])
        c.close()
        assert got == n
    # Counted once the broker stopped: no client is left, every request it received was answered and captured.
    broker_counts = {k: v[0] for k, v in bt.broker.request_stats.items()}
    recs = list(read_capture([tmp_path / "cap"]))
    assert Counter(r.api_key for r in recs) == broker_counts
    produced = sum(h.record_count for r in recs if r.api_key == K.PRODUCE
                   for td in parse_request(r).topic_data for pd in td.partition_data
                   for h, _ in iter_batches(pd.records))
    assert produced == n
    by_conn: dict[str, list[int]] = defaultdict(list)
    for r in recs:
        by_conn[r.connection_id].append(r.correlation_id)
        parse_request(r)
        assert r.response is not None
        parse_response(r)
    assert all(ids == sorted(ids) and len(set(ids)) == len(ids) for ids in by_conn.values())
    assert {r.client_id for r in recs} == {"cap-producer", "cap-consumer"}
    summary, _ = summarize([str(tmp_path / "cap")])
    assert summary["per_api"][K.PRODUCE][0] == broker_counts[K.PRODUCE]
    assert summary["per_api"][K.PRODUCE][1] == bt.broker.request_stats[K.PRODUCE][1]
    assert summary["per_api"][K.PRODUCE][2] == bt.broker.request_stats[K.PRODUCE][2]


def test_capture_show_cli(tmp_path: Path, capsys) -> None:
    async def run() -> None:
        async with serve_broker(capture_dir=tmp_path, captures=CAPTURE) as broker:
            async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
                await conn.negotiate()
                await conn.request(K.METADATA, 12, {"topics": None})

    trio.run(run)
    assert cli_main(["capture", "show", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "2 request(s)" in out and "ApiVersions" in out and "Metadata" in out


async def test_throttled_response_captured_when_it_left_not_after_the_mute(tmp_path: Path) -> None:
    """KIP-219: a throttled response goes out at once and the connection is muted afterwards; the
    capture's send time is when the response left, so its latency does not include the mute."""
    async with serve_broker(capture_dir=tmp_path, captures=CAPTURE,
                            client_quotas=["client-id=<default>:producer_byte_rate=10000"],
                            quota_window_num=2) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="throttled") as conn:
            await conn.negotiate()
            await create(conn, "t")
            for _ in range(3):
                await produce(conn, "t", batch([b"x" * 20000]))
    recs = [r for r in read_capture([tmp_path]) if r.api_key == K.PRODUCE]
    throttles = [parse_response(r).throttle_time_ms for r in recs]
    assert max(throttles) >= 500
    for r, t in zip(recs, throttles):
        if t:
            assert (r.send_ns - r.receive_ns) / 1e6 < t / 2
    # ... while the next request on the connection arrived only after the mute ended.
    t_idx = next(i for i, t in enumerate(throttles) if t >= 500)
    if t_idx + 1 < len(recs):
        assert (recs[t_idx + 1].receive_ns - recs[t_idx].send_ns) / 1e6 >= throttles[t_idx] * 0.9


async def test_a_response_still_leaving_when_the_broker_stops_is_captured(tmp_path: Path) -> None:
    """The capture writer stops only after the server: a Fetch answered but still being sent to a client that
    does not read (its response larger than the socket buffers) is in the capture once the broker stopped."""
    value = b"x" * 900_000
    async with serve_broker(capture_dir=tmp_path, captures=CAPTURE) as broker:
        conn = await KafkaConnection.connect("127.0.0.1", broker.port, client_id="slow-reader")
        await create(conn, "big")
        for _ in range(24):
            await produce(conn, "big", batch([value]))
        await conn.send(K.FETCH, 12, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 64 << 20,
                                      "topics": [{"topic": "big", "partitions": [
                                          {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 64 << 20}]}]})
        # Answered (counted as its response is made) and not read: the broker is stuck sending it.
        await wait_until(lambda: broker.request_stats.get(K.FETCH, [0])[0] == 1, what="the fetch to be answered")
        # serve_broker's exit stops the broker while the client is still connected and the response leaving.
    await conn.aclose()
    fetches = [r for r in read_capture([tmp_path]) if r.api_key == K.FETCH]
    assert [r.client_id for r in fetches] == ["slow-reader"]
