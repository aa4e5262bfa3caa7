"""The fused Produce path answers byte for byte what the general path answers.

KafkaApis answers the common Produce (one topic, one partition, no authorizer, no transaction, no quota, no
fault rule) through ``ProduceHandler.handle_single`` and a template of the response bytes; everything else
goes through ``ProduceHandler.handle``.  Two brokers with the same clock get the same requests: one as it
is, one whose Produce handler is wrapped (so the general path always runs).  Every response frame, body and
error, the request metrics and the stored logs must be equal, over Produce v3 to the latest, acks 0/1/-1,
idempotent and plain batches, and the errors the fused path hands back or answers itself.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.broker.request import RequestContext
from minikafka.common.clock import ManualClock
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.records import Record, build_batch
from test_request_path import Channel, request_frame

VERSIONS = range(APIS[ApiKey.PRODUCE].min_version, APIS[ApiKey.PRODUCE].max_version + 1)
NOW_MS = 1_700_000_000_000


def records(n: int = 1, *, size: int = 10, **kw: Any) -> bytes:
    return build_batch([Record(offset_delta=i, key=b"k", value=b"v" * size) for i in range(n)],
                       base_timestamp=NOW_MS, **kw)


def corrupt(batch: bytes) -> bytes:
    raw = bytearray(batch)
    raw[-1] ^= 0xFF  # the CRC no longer matches
    return bytes(raw)


def produce(version: int, topic: str, data: Any, *, acks: int = 1, index: int = 0, topic_id: Any = None,
            transactional_id: str | None = None, partitions: int = 1) -> dict:
    parts = [{"index": index + i, "records": data} for i in range(partitions)]
    return {"acks": acks, "timeout_ms": 1000, "transactional_id": transactional_id,
            "topic_data": [{"name": topic, "topic_id": topic_id, "partition_data": parts}]}


def general_path(broker: Broker) -> None:
    """Route Produce through the general handler (a replaced handler is never fused)."""
    real = broker.apis.handlers[ApiKey.PRODUCE]

    async def general(ctx: RequestContext, body: Any) -> Any:
        return await real(ctx, body)

    broker.apis.handlers[ApiKey.PRODUCE] = general


def setup(broker: Broker) -> None:
    broker.create_topic("plain", 1, 1, {})
    broker.create_topic("small", 1, 1, {"max.message.bytes": "100"})
    broker.create_topic("appendtime", 1, 1, {"message.timestamp.type": "LogAppendTime"})
    broker.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"})


def cases(topic_id: Any) -> list[tuple[str, dict]]:
    """(name, request body) for each version: plain and idempotent successes, duplicates, errors, fallbacks."""
    out: list[tuple[str, dict]] = []
    for v in VERSIONS:
        pid = 1000 + v
        for acks in (1, 0, -1):
            out.append((f"v{v} acks={acks}", produce(v, "plain", records(), acks=acks)))
        out += [
            (f"v{v} 3 records", produce(v, "plain", records(3))),
            (f"v{v} idempotent", produce(v, "plain", records(2, producer_id=pid, producer_epoch=0, base_sequence=0))),
            (f"v{v} duplicate", produce(v, "plain", records(2, producer_id=pid, producer_epoch=0, base_sequence=0))),
            (f"v{v} next", produce(v, "plain", records(1, producer_id=pid, producer_epoch=0, base_sequence=2))),
            (f"v{v} out of order", produce(v, "plain", records(1, producer_id=pid, producer_epoch=0,
                                                                       base_sequence=9))),
            (f"v{v} corrupt", produce(v, "plain", corrupt(records()))),
            (f"v{v} too large", produce(v, "small", records(size=200))),
            (f"v{v} log append time", produce(v, "appendtime", records())),
            (f"v{v} keyless on compacted", produce(v, "compacted", build_batch(
                [Record(offset_delta=0, key=None, value=b"x")], base_timestamp=NOW_MS))),
            (f"v{v} not hosted", produce(v, "plain", records(), index=3)),
            (f"v{v} unknown topic", produce(v, f"unknown-{v}", records())),
            (f"v{v} two partitions", produce(v, "plain", records(), partitions=2)),
            (f"v{v} invalid acks", produce(v, "plain", records(), acks=2)),
            (f"v{v} transactional id", produce(v, "plain", records(), transactional_id="tx")),
            (f"v{v} empty records", produce(v, "plain", b"")),
        ]
        if v >= 13:
            out.append((f"v{v} by topic id", produce(v, "", records(), topic_id=topic_id)))
    return out


async def test_fused_produce_answers_what_the_general_path_answers() -> None:
    def config() -> BrokerConfig:
        return BrokerConfig(port=0, auto_create_topics_enable=False)

    async with serve_broker(config(), clock=ManualClock(NOW_MS)) as fused, \
            serve_broker(config(), clock=ManualClock(NOW_MS)) as general:
        for broker in (fused, general):
            setup(broker)
        general_path(general)
        ids = [b.metadata.get_topic("plain").topic_id for b in (fused, general)]
        for correlation_id, (name, body) in enumerate(cases(None)):
            answers = []
            for broker, topic_id in zip((fused, general), ids):
                version = int(name.split()[0][1:])
                if "by topic id" in name:
                    body["topic_data"][0]["topic_id"] = topic_id
                frame = request_frame(ApiKey.PRODUCE, version, body, correlation_id=correlation_id)
                response = await broker.apis.handle(broker.apis.parse(frame, "c-1"), Channel())
                response.sent_ns = broker.clock.monotonic_ns()
                broker.apis.response_sent(response)
                wire = None if response.segments is None else b"".join(bytes(s) for s in response.segments)
                answers.append((wire, response.body, response.error, response.size))
            if "by topic id" in name:  # the brokers' topic ids differ: compare all but the id's 16 bytes
                (a, *rest_a), (b, *rest_b) = answers
                assert a is not None and b is not None and len(a) == len(b), name
                assert sum(x != y for x, y in zip(a, b)) <= 16, name
                continue
            assert answers[0] == answers[1], name
        templates = fused.apis._produce_templates  # what the fused path answered from a template
        assert {key[0] for key, t in templates.items() if t is not None} == set(range(3, 13))
        assert general.apis._produce_templates == {}
        for topic in ("plain", "small", "appendtime", "compacted"):
            logs = [b.replica_manager.get(topic, 0).log for b in (fused, general)]
            assert logs[0].log_end_offset == logs[1].log_end_offset, topic
            assert logs[0].log_end_offset > 0 or topic in ("small", "compacted"), topic
            read = [b"".join(bytes(c) for c in lg.read(0, 1 << 20).chunks) for lg in logs]
            assert read[0] == read[1], topic
        metrics = [{k: v for k, v in b.metrics().items() if "RequestMetrics" in k or "BrokerTopicMetrics" in k
                    and "TimeMs" not in k} for b in (fused, general)]
        metrics = [{k: v for k, v in m.items() if "TimeMs" not in k} for m in metrics]
        assert metrics[0] == metrics[1]


async def test_a_matching_fault_rule_takes_the_general_path() -> None:
    """With a fault rule that matches nothing the fused path still answers; a rule that matches is applied."""
    async with serve_broker(BrokerConfig(port=0)) as broker:
        setup(broker)
        apis = broker.apis
        frame = request_frame(ApiKey.PRODUCE, 9, produce(9, "plain", records()))
        broker.faults.add(api="Fetch", error="NOT_LEADER_OR_FOLLOWER")
        response = await apis.handle(apis.parse(bytearray(frame), "c-1"), Channel())
        assert response.body["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert apis._produce_templates
        broker.faults.add(api="Produce", error="REQUEST_TIMED_OUT")
        assert broker.faults.active
        response = await apis.handle(apis.parse(bytearray(frame), "c-1"), Channel())
        assert response.body["responses"][0]["partition_responses"][0]["error_code"] == 7
        assert response.injected
        broker.faults.clear()
        assert not broker.faults.active
        response = await apis.handle(apis.parse(bytearray(frame), "c-1"), Channel())
        assert response.body["responses"][0]["partition_responses"][0]["error_code"] == 0


async def test_the_task_time_instrument_is_installed_only_once_a_request_quota_is_read() -> None:
    """Without request quotas no request reads the handler time, so no Trio instrument runs per task step;
    with one, the first request installs it, its run time is charged, and the broker's stop removes it."""
    frame = request_frame(ApiKey.PRODUCE, 9, produce(9, "plain", records()), client_id="cli")
    async with serve_broker(BrokerConfig(port=0)) as broker:
        setup(broker)
        for _ in range(3):
            response = await broker.apis.handle(broker.apis.parse(bytearray(frame), "c-1"), Channel())
        assert response.request.context.handler_started_ns == 0 and not broker.task_time.installed
        assert broker.apis._produce_templates  # answered on the fused path
    quotas = BrokerConfig(port=0, client_quotas=["client-id=cli:request_percentage=1000"])
    async with serve_broker(quotas) as broker:
        setup(broker)
        response = await broker.apis.handle(broker.apis.parse(bytearray(frame), "c-1"), Channel())
        assert response.body["responses"][0]["partition_responses"][0]["error_code"] == 0
        assert broker.task_time.installed and response.request.context.handler_started_ns >= 0
        assert not broker.apis._produce_templates  # a request quota: the general path charges it
        instrument = broker.task_time
    assert not instrument.installed
