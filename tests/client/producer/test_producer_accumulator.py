"""RecordAccumulator readiness (linger.ms, batch.size, exhaustion, flush, retry backoff), draining and
expiry, driven with a controlled clock."""

from __future__ import annotations

import trio

from minikafka.client.producer.accumulator import RecordAccumulator
from minikafka.client.producer.buffer_pool import BufferPool
from minikafka.client.producer.transaction_manager import TransactionManager
from minikafka.protocol.records import decode_records, validate_batch


class Clock:
    def __init__(self) -> None:
        self.ms = 1000.0

    def __call__(self) -> float:
        return self.ms

    def monotonic(self) -> float:  # what the accumulator reads of a Clock
        return self.ms / 1000


def make(linger_ms: float = 10, batch_size: int = 1024, txn: TransactionManager | None = None,
         memory: int = 64 * 1024) -> tuple[RecordAccumulator, Clock]:
    clock = Clock()
    pool = BufferPool(memory, batch_size, clock=lambda: clock.ms / 1000)
    acc = RecordAccumulator(batch_size, 0, linger_ms, retry_backoff_ms=100, delivery_timeout_ms=5000, pool=pool,
                            txn=txn, clock=clock)
    return acc, clock


def append(acc: RecordAccumulator, tp: tuple[str, int], value: bytes, ts: int = 0):
    fut = acc.try_append_existing(tp, ts, None, value, b"\x00", None)
    if fut is None:
        size = acc.allocation_size(None, value, b"\x00")
        buf = acc.pool.try_allocate(size)
        assert buf is not None
        fut = acc.new_batch(tp, buf, size).try_append(ts, None, value, b"\x00", None)
    return fut


LEADERS = {("t", 0): 1, ("t", 1): 2}


def leader_of(topic: str, p: int):
    return LEADERS.get((topic, p))


def test_linger_readiness() -> None:
    acc, clock = make(linger_ms=10)
    append(acc, ("t", 0), b"x" * 10)
    r = acc.ready(leader_of, clock())
    assert r.ready_nodes == set() and r.next_ready_check_delay_ms == 10
    clock.ms += 9
    r = acc.ready(leader_of, clock())
    assert r.ready_nodes == set() and r.next_ready_check_delay_ms == 1
    clock.ms += 1
    assert acc.ready(leader_of, clock()).ready_nodes == {1}


def test_full_batch_is_ready_before_linger() -> None:
    acc, clock = make(linger_ms=10_000, batch_size=1024)
    n = 0
    while len(acc.batches.get(("t", 0), ())) < 2:
        append(acc, ("t", 0), b"x" * 100)
        n += 1
    first = acc.batches[("t", 0)][0]
    assert first.closed and 6 <= first.record_count <= 9
    assert first.estimated_size_in_bytes <= 1024
    assert acc.ready(leader_of, clock()).ready_nodes == {1}  # a full batch does not wait for linger


def test_flush_and_exhaustion_make_batches_ready() -> None:
    acc, clock = make(linger_ms=10_000)
    append(acc, ("t", 1), b"x")
    assert acc.ready(leader_of, clock()).ready_nodes == set()
    acc.begin_flush()
    assert acc.ready(leader_of, clock()).ready_nodes == {2}
    acc.end_flush()
    acc.pool.waiters.append(object())  # somebody is blocked on memory
    assert acc.ready(leader_of, clock()).ready_nodes == {2}
    acc.pool.waiters.clear()
    acc.close()
    assert acc.ready(leader_of, clock()).ready_nodes == {2}


def test_unknown_leader_is_reported() -> None:
    acc, clock = make(linger_ms=0)
    append(acc, ("other", 0), b"x")
    r = acc.ready(leader_of, clock())
    assert r.ready_nodes == set() and r.unknown_leader_topics == {"other"}


def test_drain_one_batch_per_partition_up_to_max_request_size_and_builds_v2_batches() -> None:
    acc, clock = make(linger_ms=0, batch_size=1024)
    for i in range(30):
        append(acc, ("t", 0), b"%03d" % i + b"x" * 97, ts=1000 + i)
        append(acc, ("t", 1), b"y" * 100)
    LEADERS[("t", 1)] = 1
    try:
        parts = [("t", 0), ("t", 1)]
        drained = acc.drain(lambda n: parts, {1}, 1 << 20, clock())[1]
        assert [(b.topic, b.partition) for b in drained] == [("t", 0), ("t", 1)]
        small = acc.drain(lambda n: parts, {1}, 100, clock())[1]
        assert len(small) == 1  # max.request.size: at least one batch, then stop
    finally:
        LEADERS[("t", 1)] = 2
    b0 = drained[0]
    h = validate_batch(b0.built)
    recs = decode_records(b0.built)
    assert h.record_count == len(recs) == b0.record_count
    assert [r.value[:3] for r in recs] == [b"%03d" % i for i in range(len(recs))]
    assert [r.timestamp for r in recs] == [1000 + i for i in range(len(recs))]


def test_retry_backoff_and_sequence_ordering_with_idempotence() -> None:
    txn = TransactionManager()
    txn.set_producer_id(7, 0)
    acc, clock = make(linger_ms=0, batch_size=1024, txn=txn)
    for _ in range(20):
        append(acc, ("t", 0), b"x" * 100)
    parts = [("t", 0)]
    first = acc.drain(lambda n: parts, {1}, 1 << 20, clock())[1][0]
    second = acc.drain(lambda n: parts, {1}, 1 << 20, clock())[1][0]
    assert (first.base_sequence, second.base_sequence) == (0, first.record_count)
    assert validate_batch(second.built).base_sequence == first.record_count
    # both fail: they go back in sequence order, ahead of the unsent batch, and back off
    acc.reenqueue(second, clock())
    acc.reenqueue(first, clock())
    dq = acc.batches[("t", 0)]
    assert dq[0] is first and dq[1] is second and not dq[2].has_sequence
    assert acc.ready(leader_of, clock()).ready_nodes == set()
    clock.ms += 100
    assert acc.ready(leader_of, clock()).ready_nodes == {1}
    # only the first in-flight sequence may be re-sent; the next waits until it completes
    assert acc.drain(lambda n: parts, {1}, 1 << 20, clock())[1] == [first]
    assert 1 not in acc.drain(lambda n: parts, {1}, 1 << 20, clock())
    txn.handle_completed(first)
    assert acc.drain(lambda n: parts, {1}, 1 << 20, clock())[1] == [second]


def test_expired_batches_after_delivery_timeout() -> None:
    acc, clock = make(linger_ms=0)
    fut = append(acc, ("t", 0), b"x")
    clock.ms += 4999
    assert acc.expired_batches(clock()) == []
    clock.ms += 1
    expired = acc.expired_batches(clock())
    assert len(expired) == 1 and expired[0].record_count == 1
    assert not fut.done()


async def test_pool_memory_returns_when_batches_complete() -> None:
    acc, clock = make(linger_ms=0, memory=4096, batch_size=1024)
    for _ in range(4):
        acc.new_batch(("t", 0), acc.pool.try_allocate(1024), 1024)
    assert acc.pool.available_memory == 0 and acc.pool.try_allocate(1024) is None
    for b in list(acc.batches[("t", 0)]):
        b.complete(0, -1, None)
        acc.deallocate(b)
    assert acc.pool.available_memory == 4096
    await trio.lowlevel.checkpoint()
