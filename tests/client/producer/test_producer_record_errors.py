"""Our producer and KIP-467 record errors (Java's ``Sender.failBatch`` with ``recordErrors``): the records the
broker named fail with their own message, the rest of the batch with a generic error, nothing is retried."""

from __future__ import annotations

import time

import pytest

from minikafka.client.producer import KafkaProducer, KafkaProducerError
from minikafka.protocol.errors import ErrorCode
from test_producer_broker import bootstrap, read_all

NO_KEY = "Compacted topic cannot accept message without key in topic partition {}"
OTHER = "Failed to append record because it was part of a batch which had one more more invalid records"


async def outcome(fut) -> BaseException | None:
    try:
        await fut.get()
    except KafkaProducerError as exc:
        return exc
    return None


@pytest.mark.parametrize("idempotent", [False, True])
async def test_keyless_records_of_a_compacted_topic_fail_by_name(broker, idempotent: bool) -> None:
    broker.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"})
    callbacks: dict[int, BaseException | None] = {}
    async with KafkaProducer(bootstrap(broker), linger_ms=50, enable_idempotence=idempotent,
                             compression_type="lz4") as p:
        keys = [b"a", None, b"c", None, b"e"]
        futs = [await p.send("compacted", b"v%d" % i, key=k, partition=0,
                             callback=lambda m, e, i=i: callbacks.__setitem__(i, e)) for i, k in enumerate(keys)]
        await p.flush()
        errors = [await outcome(f) for f in futs]
        for i in (1, 3):
            assert isinstance(errors[i], KafkaProducerError)
            assert errors[i].code == ErrorCode.INVALID_RECORD
            assert str(errors[i]) == "INVALID_RECORD: " + NO_KEY.format("compacted-0")
        for i in (0, 2, 4):
            assert str(errors[i]) == OTHER
        assert callbacks == dict(enumerate(errors))
        m = p.metrics()
        assert (m["record-error-total"], m["record-retry-total"]) == (5, 0)
        # Keyed records go through afterwards (an idempotent producer bumps its epoch first).
        done = [await p.send("compacted", b"ok%d" % i, key=b"k%d" % i, partition=0) for i in range(3)]
        assert [(await f.get()).offset for f in done] == [0, 1, 2]
    assert [r.value for _, r in await read_all(broker.port, "compacted")] == [b"ok0", b"ok1", b"ok2"]


async def test_one_record_error_keeps_the_partition_error_code(broker) -> None:
    broker.create_topic("bounded", 1, 1, {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    async with KafkaProducer(bootstrap(broker), linger_ms=50) as p:
        old = await p.send("bounded", b"old", partition=0, timestamp_ms=now - 3_600_000)
        fresh = await p.send("bounded", b"fresh", partition=0, timestamp_ms=now)
        await p.flush()
        err = await outcome(old)
        assert isinstance(err, KafkaProducerError) and err.code == ErrorCode.INVALID_TIMESTAMP
        assert str(err).startswith(f"INVALID_TIMESTAMP: Timestamp {now - 3_600_000} of message with offset 0 "
                                   "is out of range. The timestamp should be within [")
        assert str(await outcome(fresh)) == OTHER
    assert await read_all(broker.port, "bounded") == []
