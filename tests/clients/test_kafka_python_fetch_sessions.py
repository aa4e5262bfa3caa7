"""kafka-python's consumer through incremental fetch sessions (KIP-227).

kafka-python 3 sends Fetch up to v12 and keeps a ``FetchSessionHandler`` per
broker (``enable_incremental_fetch_sessions`` defaults to True).  The test
produces several rounds into an 8-partition topic with pauses in between, and
checks from the broker's own observations that the consumer's fetches went
incremental (session_epoch > 0, partitions named only when their position
moved, no session errors), and that every record arrived exactly once, in
order per partition.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import pytest

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.headers import parse_request_header_prefix, parse_response_frame, skip_header_tags
from minikafka.testing import BrokerThread
from minikafka.broker.request import ResponseObserver

pytestmark = pytest.mark.clients

TOPIC = "sessions"
PARTITIONS = 8
ROUNDS = 4
PER_ROUND = 800  # records per round, spread over the partitions


@dataclass(frozen=True)
class SeenFetch:
    """A fetch request and its response as the broker handled them."""

    version: int
    client_id: str | None
    body_size: int
    session_id: int
    epoch: int
    request_partitions: int
    forgotten_partitions: int
    response_error: int
    response_session_id: int
    response_partitions: int
    response_partition_errors: tuple[int, ...]


def fetch_observer(into: list[SeenFetch]):
    """A broker request observer recording every fetch (parsed from the frames themselves)."""
    api = APIS[ApiKey.FETCH]

    def observe(ctx, frame, response) -> None:
        if ctx.api_key != ApiKey.FETCH or response is None:
            return
        version = ctx.api_version
        flexible = api.is_flexible(version)
        hdr = parse_request_header_prefix(frame)
        off = skip_header_tags(frame, hdr.body_offset) if flexible else hdr.body_offset
        req = api.request.parse(memoryview(frame)[off:], version)
        resp = parse_response_frame(b"".join(bytes(seg) for seg in response), ApiKey.FETCH, version)[1]
        parts = [p for t in resp.responses for p in t.partitions]
        into.append(SeenFetch(
            version=version,
            client_id=ctx.client_id,
            body_size=ctx.body_size,
            session_id=req.session_id,
            epoch=req.session_epoch,
            request_partitions=sum(len(t.partitions) for t in req.topics),
            forgotten_partitions=sum(len(t.partitions) for t in req.forgotten_topics_data),
            response_error=resp.error_code,
            response_session_id=resp.session_id,
            response_partitions=len(parts),
            response_partition_errors=tuple(p.error_code for p in parts),
        ))

    return observe


def consume_until(consumer: KafkaConsumer, got: dict[int, list[tuple[int, bytes]]], total: int,
                  timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while sum(len(v) for v in got.values()) < total:
        if time.monotonic() > deadline:
            pytest.fail(f"consumed {sum(len(v) for v in got.values())} of {total} records")
        for tp, records in consumer.poll(timeout_ms=200).items():
            got.setdefault(tp.partition, []).extend((r.offset, r.value) for r in records)


def produce_and_consume(b: BrokerThread, **consumer_config) -> list[SeenFetch]:
    """Produce ROUNDS rounds, consume each fully, idle in between; check every record arrived
    exactly once and in order; return the consumer's fetches as the broker saw them."""
    seen: list[SeenFetch] = []
    b.call(b.broker.observe, ResponseObserver(fetch_observer(seen)))
    b.call(b.broker.create_topic, TOPIC, PARTITIONS)

    producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all", linger_ms=5, client_id="kp-producer")
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, client_id="kp-consumer", group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                             max_partition_fetch_bytes=4096, **consumer_config)
    produced: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    got: dict[int, list[tuple[int, bytes]]] = {}
    try:
        consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
        consumer.seek_to_beginning()
        total = 0
        for rnd in range(ROUNDS):
            for i in range(PER_ROUND):
                p = (i * 3 + rnd) % PARTITIONS
                value = b"r%d-p%d-%05d-" % (rnd, p, i) + b"x" * (i % 50)
                produced[p].append(value)
                producer.send(TOPIC, value=value, partition=p)
            producer.flush(timeout=30)
            total += PER_ROUND
            consume_until(consumer, got, total)
            # Idle (kafka-python fetches inside poll only): empty incremental fetches, nothing arrives.
            assert not any(consumer.poll(timeout_ms=500).values())
    finally:
        consumer.close()
        producer.close()

    # Every record exactly once, in order per partition, at consecutive offsets.
    for p in range(PARTITIONS):
        offsets = [o for o, _ in got.get(p, [])]
        assert offsets == list(range(len(produced[p]))), f"partition {p}"
        assert [v for _, v in got[p]] == produced[p], f"partition {p}"

    fetches = b.call(lambda: [f for f in seen if f.client_id == "kp-consumer"])
    print("fetches (epoch, partitions sent, forgotten, partitions back, body bytes):",
          [(f.epoch, f.request_partitions, f.forgotten_partitions, f.response_partitions, f.body_size)
           for f in fetches])
    assert fetches and all(f.version == 12 for f in fetches)
    # No session errors, no partition errors.
    assert all(f.response_error == 0 for f in fetches)
    assert all(set(f.response_partition_errors) <= {0} for f in fetches)
    return fetches


def test_kafka_python_consumer_uses_incremental_fetch_sessions(broker_thread: BrokerThread):
    b = broker_thread
    fetches = produce_and_consume(b)
    sessions = b.call(lambda: b.broker.fetch_manager.cache.num_incremental_fetch_sessions)

    full = [f for f in fetches if f.epoch == 0]
    incremental = [f for f in fetches if f.epoch > 0]
    assert full and full[0] is fetches[0] and full[0].session_id == 0
    assert full[0].request_partitions == PARTITIONS and full[0].response_session_id != 0
    session_id = full[0].response_session_id
    assert len(incremental) >= 10
    assert all(f.session_id == session_id == f.response_session_id for f in incremental)
    # One session throughout: epochs 1, 2, 3, ... in order.
    assert [f.epoch for f in incremental] == list(range(1, len(incremental) + 1))
    # Idle fetches name no partitions and get none back; moving positions are sent as altered.
    assert any(f.request_partitions == 0 and f.response_partitions == 0 for f in incremental)
    assert any(0 < f.request_partitions for f in incremental)
    idle = [f.body_size for f in incremental if f.request_partitions == 0 and f.forgotten_partitions == 0]
    assert idle and max(idle) < full[0].body_size
    # The consumer closed its connection, but the broker keeps the session until evicted (as Kafka does).
    assert sessions == 1


def test_kafka_python_consumer_without_sessions(broker_thread: BrokerThread):
    b = broker_thread
    fetches = produce_and_consume(b, enable_incremental_fetch_sessions=False)
    assert all((f.session_id, f.epoch, f.response_session_id) == (0, -1, 0) for f in fetches)
    # Each request names every fetchable partition (those with records still buffered in the
    # consumer are left out, as in Java) and forgets nothing.
    assert all(0 < f.request_partitions <= PARTITIONS and f.forgotten_partitions == 0 for f in fetches)
    assert sum(f.request_partitions == PARTITIONS for f in fetches) > len(fetches) // 2
    assert b.call(lambda: b.broker.fetch_manager.cache.num_incremental_fetch_sessions) == 0
