"""Real clients against the per-record produce checks (KIP-467 record errors): keyless records on a
compacted topic and timestamps outside ``message.timestamp.{before,after}.max.ms``.

librdkafka (``rd_kafka_msgbatch_handle_Produce_result_record_errors``): with several record errors the
named records fail with INVALID_RECORD and the rest of the batch with ``_INVALID_DIFFERENT_RECORD``; with a
single record error every message of the batch gets the partition's error (its
``on_acknowledgement_queue`` forces the error then).  kafka-python 3 follows Java's ``Sender.failBatch``:
the named records get their own message, the others a generic ``KafkaError``.  Nothing is retried, nothing
stored, and the producer goes on.
"""

from __future__ import annotations

import time
import warnings

import pytest
from confluent_kafka import KafkaError, Producer

from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from clients_common import stored_batch_headers
from minikafka.testing import BrokerThread

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as Errors
    from kafka import KafkaProducer

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

TOPIC_METRICS = "kafka.server:type=BrokerTopicMetrics,name="
NO_KEY = "Compacted topic cannot accept message without key in topic partition {}"
OTHER = "Failed to append record because it was part of a batch which had one more more invalid records"


def produce_requests(b: BrokerThread, topic: str) -> tuple[float, float]:
    """(produce requests, failed produce requests) the broker counted for ``topic``."""
    m = b.call(b.broker.metrics)
    return (m.get(f"{TOPIC_METRICS}TotalProduceRequestsPerSec,topic={topic}", 0),
            m.get(f"{TOPIC_METRICS}FailedProduceRequestsPerSec,topic={topic}", 0))


def ck_send_batch(p: Producer, topic: str, messages: list[dict]) -> list[KafkaError | None]:
    """Produce ``messages`` (lingering, so they share one batch) and return each one's delivery error."""
    errors: dict[int, KafkaError | None] = {}
    for i, m in enumerate(messages):
        p.produce(topic, partition=0, on_delivery=lambda err, _m, i=i: errors.__setitem__(i, err), **m)
    assert p.flush(30) == 0
    return [errors[i] for i in range(len(messages))]


def codes(errors: list[KafkaError | None]) -> list[int | None]:
    return [e.code() if e is not None else None for e in errors]


@pytest.mark.parametrize("idempotent", [False, True])
def test_confluent_keyless_records_fail_the_batch(broker_thread: BrokerThread, idempotent: bool) -> None:
    topic = broker_thread.create_topic(f"ck-compacted-{int(idempotent)}", configs={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker_thread.bootstrap, "linger.ms": 500, "compression.type": "lz4",
                  "enable.idempotence": idempotent})
    keys = [b"a", None, b"c", None, b"e", b"f"]
    errors = ck_send_batch(p, topic, [{"key": k, "value": b"v%d" % i} for i, k in enumerate(keys)])
    invalid, different = KafkaError.INVALID_RECORD, KafkaError._INVALID_DIFFERENT_RECORD
    assert codes(errors) == [different, invalid, different, invalid, different, different]
    assert not any(e.retriable() or e.fatal() for e in errors if e is not None)
    assert stored_batch_headers(broker_thread, topic, 0) == []
    assert produce_requests(broker_thread, topic) == (1, 1)  # refused once, never retried
    # A keyed-only batch goes through, from offset 0.
    offsets: list[int] = []
    for i in range(3):
        p.produce(topic, key=b"k%d" % i, value=b"ok", partition=0,
                  on_delivery=lambda err, m: offsets.append(-1 if err else m.offset()))
    assert p.flush(30) == 0
    assert sorted(offsets) == [0, 1, 2]
    assert [h.record_count for h in stored_batch_headers(broker_thread, topic, 0)] == [3]


def test_confluent_single_record_error_fails_the_batch_with_its_code(broker_thread: BrokerThread) -> None:
    topic = broker_thread.create_topic("ck-compacted-one", configs={"cleanup.policy": "compact"})
    p = Producer({"bootstrap.servers": broker_thread.bootstrap, "linger.ms": 500})
    errors = ck_send_batch(p, topic, [{"key": b"a", "value": b"1"}, {"key": None, "value": b"2"}])
    assert codes(errors) == [KafkaError.INVALID_RECORD] * 2
    assert stored_batch_headers(broker_thread, topic, 0) == []


def test_confluent_timestamp_out_of_bounds(broker_thread: BrokerThread) -> None:
    topic = broker_thread.create_topic("ck-bounded", configs={"message.timestamp.before.max.ms": "60000",
                                                              "message.timestamp.after.max.ms": "60000"})
    p = Producer({"bootstrap.servers": broker_thread.bootstrap, "linger.ms": 500})
    now = int(time.time() * 1000)
    errors = ck_send_batch(p, topic, [{"value": b"old", "timestamp": now - 3_600_000}])
    assert codes(errors) == [KafkaError.INVALID_TIMESTAMP]
    # Two bad timestamps in a batch: librdkafka names them INVALID_RECORD, the good one is a bystander.
    errors = ck_send_batch(p, topic, [{"value": b"future", "timestamp": now + 3_600_000},
                                      {"value": b"now", "timestamp": now},
                                      {"value": b"old", "timestamp": now - 3_600_000}])
    assert codes(errors) == [KafkaError.INVALID_RECORD, KafkaError._INVALID_DIFFERENT_RECORD,
                             KafkaError.INVALID_RECORD]
    assert ck_send_batch(p, topic, [{"value": b"now", "timestamp": int(time.time() * 1000)}]) == [None]
    assert [h.record_count for h in stored_batch_headers(broker_thread, topic, 0)] == [1]


def test_kafka_python_record_errors(broker_thread: BrokerThread) -> None:
    topic = broker_thread.create_topic("kp-compacted", configs={"cleanup.policy": "compact",
                                                                "message.timestamp.before.max.ms": "60000"})
    # kafka-python 3's idempotent producer treats INVALID_RECORD as fatal (Java's does not): not idempotent here.
    p = KafkaProducer(bootstrap_servers=broker_thread.bootstrap, linger_ms=500, enable_idempotence=False)
    try:
        futures = [p.send(topic, key=k, value=b"v", partition=0) for k in (b"a", None, b"c", None)]
        p.flush(30)
        errors = [f.exception for f in futures]
        assert [type(e) for e in errors] == [Errors.KafkaError, Errors.InvalidRecordError] * 2
        assert [str(e.args[0]) for e in errors] == [OTHER, NO_KEY.format(f"{topic}-0")] * 2
        now = int(time.time() * 1000)
        futures = [p.send(topic, key=b"k", value=b"v", partition=0, timestamp_ms=ts)
                   for ts in (now - 3_600_000, now)]
        p.flush(30)
        old, fresh = (f.exception for f in futures)
        assert isinstance(old, Errors.InvalidTimestampError)  # one record error: the partition's error type
        assert str(old.args[0]).startswith(f"Timestamp {now - 3_600_000} of message with offset 0 is out of range")
        assert type(fresh) is Errors.KafkaError and fresh.args[0] == OTHER
        assert p.send(topic, key=b"k", value=b"v", partition=0).get(timeout=30).offset == 0
    finally:
        p.close()
