"""Produce validation of Kafka's ``LogValidator`` per-record checks (KIP-467 record errors), handler-level.

A compacted topic refuses batches holding keyless records (INVALID_RECORD), a CreateTime topic with
``message.timestamp.{before,after}.max.ms`` refuses out-of-range timestamps (INVALID_TIMESTAMP), a
LogAppendTime topic refuses batches marked LogAppendTime by the producer; the response names each
failing record with Kafka's texts, nothing is appended, and the other partitions of the request are
unaffected.  Ordinary topics never decode their records.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers import HandlerEnv
from minikafka.broker.handlers.produce import ProduceHandler
from minikafka.broker.log import LogConfig, validator
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.compression import CODEC_NAMES
from minikafka.common.clock import SYSTEM_CLOCK
from minikafka.protocol.records import LOG_APPEND_TIME, Record, build_batch
from test_handlers import call

INT64_MAX = (1 << 63) - 1
CODEC_IDS = {name: codec for codec, name in CODEC_NAMES.items()}


class Env(HandlerEnv):
    def produce_handler(self) -> ProduceHandler:
        return ProduceHandler(self.log, self.topics, self.delayed_produce, self.quotas.produce, self.config,
                              self.clock)

    def leo(self, topic: str, partition: int = 0) -> int:
        part = self.log.get(topic, partition)
        assert part is not None
        return part.log.log_end_offset


def keyed(keys: list[bytes | None], *, base_timestamp: int | None = None, deltas: list[int] | None = None,
          **kw: Any) -> bytes:
    """One batch with a record per key (None: keyless), values v0, v1, ..."""
    deltas = deltas or [0] * len(keys)
    ts = SYSTEM_CLOCK.time_ms() if base_timestamp is None else base_timestamp
    return build_batch([Record(offset_delta=i, timestamp_delta=d, key=k, value=b"v%d" % i)
                        for i, (k, d) in enumerate(zip(keys, deltas))], base_timestamp=ts, **kw)


def request(*parts: tuple[str, int, bytes], acks: int = 1) -> dict:
    topics: dict[str, list[dict]] = {}
    for topic, index, records in parts:
        topics.setdefault(topic, []).append({"index": index, "records": records})
    return {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": t, "partition_data": pd} for t, pd in topics.items()]}


async def produce(env: Env, *parts: tuple[str, int, bytes], version: int = 9, acks: int = 1) -> dict:
    r = await call(env.produce_handler(), ApiKey.PRODUCE, version, request(*parts, acks=acks))
    return {(t.name, p.index): p for t in r.responses for p in t.partition_responses}


def record_errors(p: Any) -> list[tuple[int, str]]:
    return [(e.batch_index, e.batch_index_error_message) for e in p.record_errors]


def no_key(tp: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {tp}"


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
async def test_compacted_topic_refuses_keyless_records(codec: str) -> None:
    env = Env()
    env.metadata.create_topic("c", 1, 1, {"cleanup.policy": "compact"})
    got = await produce(env, ("c", 0, keyed([b"a", None, b"c", None, b"e"], compression=CODEC_IDS[codec])))
    p = got[("c", 0)]
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert (p.base_offset, p.log_append_time_ms, p.log_start_offset) == (-1, -1, 0)
    assert record_errors(p) == [(1, no_key("c-0")), (3, no_key("c-0"))]
    assert p.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{no_key('c-0')}'), "
        f"RecordError(batchIndex=3, message='{no_key('c-0')}')]")
    assert env.leo("c") == 0  # nothing appended
    # Keyed records (an empty key is a key) are appended.
    p = (await produce(env, ("c", 0, keyed([b"a", b"", b"c"], compression=CODEC_IDS[codec]))))[("c", 0)]
    assert (p.error_code, p.base_offset, list(p.record_errors)) == (0, 0, [])
    assert env.leo("c") == 3


async def test_error_message_shows_at_most_three_record_errors() -> None:
    env = Env()
    env.metadata.create_topic("c", 1, 1, {"cleanup.policy": "compact,delete"})
    p = (await produce(env, ("c", 0, keyed([None] * 5))))[("c", 0)]
    assert [i for i, _ in record_errors(p)] == [0, 1, 2, 3, 4]
    assert p.error_message.startswith("One or more records have been rejected due to 5 record errors in total")
    assert p.error_message.count("RecordError(") == 3


async def test_other_partitions_of_the_request_are_unaffected() -> None:
    env = Env()
    env.metadata.create_topic("c", 2, 1, {"cleanup.policy": "compact"})
    env.metadata.create_topic("plain", 1, 1)
    got = await produce(env, ("c", 0, keyed([b"k", None])), ("c", 1, keyed([b"k1", b"k2"])),
                        ("plain", 0, keyed([None, None])), acks=-1)
    assert got[("c", 0)].error_code == ErrorCode.INVALID_RECORD
    assert record_errors(got[("c", 0)]) == [(1, no_key("c-0"))]
    assert (got[("c", 1)].error_code, got[("c", 1)].base_offset) == (0, 0)
    assert (got[("plain", 0)].error_code, got[("plain", 0)].base_offset) == (0, 0)  # keyless is fine here
    assert (env.leo("c", 0), env.leo("c", 1), env.leo("plain")) == (0, 2, 2)


async def test_records_are_numbered_across_the_partitions_batches() -> None:
    env = Env()
    env.metadata.create_topic("c", 1, 1, {"cleanup.policy": "compact"})
    p = (await produce(env, ("c", 0, keyed([b"a", b"b"]) + keyed([b"c", None]))))[("c", 0)]
    assert record_errors(p) == [(3, no_key("c-0"))]
    assert env.leo("c") == 0  # the whole produce data is refused, the good first batch too


async def test_timestamp_bounds_refuse_records_out_of_range() -> None:
    env = Env()
    env.metadata.create_topic("t", 1, 1, {"message.timestamp.before.max.ms": "1000",
                                          "message.timestamp.after.max.ms": "500"})
    now = env.clock.time_ms()
    records = keyed([b"a", b"b", b"c", b"d", b"e"], base_timestamp=now - 1001,
                    deltas=[0, 1, 1001 + 500, 1001 + 501, 1001])
    p = (await produce(env, ("t", 0, records)))[("t", 0)]
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert p.error_message == "One or more records have been rejected due to invalid timestamp"
    bounds = f"The timestamp should be within [{now - 1000}, {now + 500}]"
    assert record_errors(p) == [
        (0, f"Timestamp {now - 1001} of message with offset 0 is out of range. {bounds}"),
        (3, f"Timestamp {now + 501} of message with offset 3 is out of range. {bounds}"),
    ]
    assert env.leo("t") == 0
    p = (await produce(env, ("t", 0, keyed([b"a", b"b"], base_timestamp=now - 1000, deltas=[0, 1500]))))[("t", 0)]
    assert (p.error_code, p.base_offset) == (0, 0)  # both bounds are inclusive


async def test_broker_default_bound_and_java_long_arithmetic_in_the_message() -> None:
    env = Env(log_message_timestamp_before_max_ms=60_000)
    env.metadata.create_topic("t", 1, 1)
    now = env.clock.time_ms()
    p = (await produce(env, ("t", 0, keyed([b"a"], base_timestamp=now - 60_001))))[("t", 0)]
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    wrapped = now + INT64_MAX - (1 << 64)  # now + Long.MAX_VALUE overflows in Kafka's message
    assert record_errors(p) == [(0, f"Timestamp {now - 60_001} of message with offset 0 is out of range. "
                                    f"The timestamp should be within [{now - 60_000}, {wrapped}]")]
    p = (await produce(env, ("t", 0, keyed([b"a"], base_timestamp=now + 10**9))))[("t", 0)]
    assert p.error_code == 0  # no bound after


async def test_deprecated_timestamp_difference_applies_to_unset_bounds() -> None:
    env = Env()
    env.metadata.create_topic("d", 1, 1, {"message.timestamp.difference.max.ms": "100"})
    env.metadata.create_topic("o", 1, 1, {"message.timestamp.difference.max.ms": "100",
                                          "message.timestamp.before.max.ms": "10000"})
    now = env.clock.time_ms()
    got = await produce(env, ("d", 0, keyed([b"a", b"b"], base_timestamp=now - 200, deltas=[0, 400])),
                        ("o", 0, keyed([b"a", b"b"], base_timestamp=now - 200, deltas=[0, 400])))
    assert [i for i, _ in record_errors(got[("d", 0)])] == [0, 1]
    assert [i for i, _ in record_errors(got[("o", 0)])] == [1]  # before.max.ms set: only after falls back
    assert "within [%d, %d]" % (now - 10000, now + 100) in got[("o", 0)].record_errors[0].batch_index_error_message


async def test_broker_level_deprecated_timestamp_difference() -> None:
    env = Env(log_message_timestamp_difference_max_ms=100)  # log.message.timestamp.difference.max.ms
    env.metadata.create_topic("t", 1, 1)
    now = env.clock.time_ms()
    p = (await produce(env, ("t", 0, keyed([b"a", b"b"], base_timestamp=now - 50, deltas=[0, 200]))))[("t", 0)]
    assert [i for i, _ in record_errors(p)] == [1]


async def test_timestamp_bounds_do_not_apply_to_log_append_time_topics() -> None:
    env = Env()
    env.metadata.create_topic("lat", 1, 1, {"message.timestamp.type": "LogAppendTime",
                                            "message.timestamp.before.max.ms": "0"})
    p = (await produce(env, ("lat", 0, keyed([b"a"], base_timestamp=0))))[("lat", 0)]
    assert (p.error_code, p.log_append_time_ms) == (0, env.clock.time_ms())


async def test_log_append_time_topic_refuses_batches_marked_log_append_time() -> None:
    env = Env()
    env.metadata.create_topic("lat", 1, 1, {"message.timestamp.type": "LogAppendTime"})
    p = (await produce(env, ("lat", 0, keyed([b"a", None], base_timestamp=5, timestamp_type=LOG_APPEND_TIME))))
    p = p[("lat", 0)]
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP
    assert record_errors(p) == [
        (i, f"Invalid timestamp type in message DefaultRecord(offset={i}, timestamp=5, key={1 - i} bytes, "
            f"value=2 bytes). Producer should not set timestamp type to LogAppendTime.") for i in (0, 1)]
    assert env.leo("lat") == 0


async def test_key_and_timestamp_errors_together_answer_invalid_timestamp() -> None:
    env = Env()
    env.metadata.create_topic("ct", 1, 1, {"cleanup.policy": "compact", "message.timestamp.after.max.ms": "0"})
    now = env.clock.time_ms()
    p = (await produce(env, ("ct", 0, keyed([None, b"b", None], base_timestamp=now, deltas=[5, 5, 0]))))[("ct", 0)]
    assert p.error_code == ErrorCode.INVALID_TIMESTAMP  # any timestamp error wins (processRecordErrors)
    errors = record_errors(p)
    assert [(i, m.split(" ")[0]) for i, m in errors] == [(0, "Compacted"), (1, "Timestamp"), (2, "Compacted")]


async def test_old_versions_get_the_error_without_record_errors() -> None:
    env = Env()
    env.metadata.create_topic("c", 1, 1, {"cleanup.policy": "compact"})
    p = (await produce(env, ("c", 0, keyed([None])), version=7))[("c", 0)]
    assert p.error_code == ErrorCode.INVALID_RECORD
    assert not p.get("record_errors") and not p.get("error_message")  # not in ProduceResponse v7


async def test_refused_idempotent_batch_leaves_the_sequence_unchanged() -> None:
    env = Env()
    env.metadata.create_topic("c", 1, 1, {"cleanup.policy": "compact"})
    bad = keyed([b"a", None], producer_id=7, producer_epoch=0, base_sequence=0)
    assert (await produce(env, ("c", 0, bad)))[("c", 0)].error_code == ErrorCode.INVALID_RECORD
    good = keyed([b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    p = (await produce(env, ("c", 0, good)))[("c", 0)]
    assert (p.error_code, p.base_offset) == (0, 0)


async def test_ordinary_topics_never_decode_records(monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[int] = []
    real = validator.decode_records

    def counting(view: Any, **kw: Any) -> Any:
        decoded.append(len(view))
        return real(view, **kw)

    monkeypatch.setattr(validator, "decode_records", counting)
    env = Env()
    env.metadata.create_topic("plain", 1, 1)
    env.metadata.create_topic("lat", 1, 1, {"message.timestamp.type": "LogAppendTime"})
    env.metadata.create_topic("c", 1, 1, {"cleanup.policy": "compact"})
    got = await produce(env, ("plain", 0, keyed([None, b"k"], compression=CODEC_IDS["gzip"])),
                        ("lat", 0, keyed([None])))
    assert all(p.error_code == 0 for p in got.values())
    assert decoded == []
    assert not validator.needs_record_validation(LogConfig(), [])
    await produce(env, ("c", 0, keyed([b"k"])))
    assert len(decoded) == 1


async def test_keyless_records_counted_in_broker_topic_metrics() -> None:
    """Kafka's ``BrokerTopicMetrics`` NoKeyCompactedTopicRecordsPerSec counts each refused keyless record."""
    from helpers import produce as produce_wire
    from minikafka.broker.broker import serve_broker
    from minikafka.client.connection import KafkaConnection

    name = "kafka.server:type=BrokerTopicMetrics,name=NoKeyCompactedTopicRecordsPerSec"
    async with serve_broker() as broker:
        broker.create_topic("c", 1, 1, {"cleanup.policy": "compact"})
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            p = await produce_wire(conn, "c", keyed([b"a", None, None]))
            assert p.error_code == ErrorCode.INVALID_RECORD
            assert (await produce_wire(conn, "c", keyed([b"a"]))).error_code == 0
        assert broker.metrics()[name] == 2
