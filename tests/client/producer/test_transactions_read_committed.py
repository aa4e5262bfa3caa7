"""The consumer side of transactions, without a broker: a read_committed ``CompletedFetch`` drops the
batches of aborted transactions (the response's ``aborted_transactions``) and every control batch, as
Java's ``CompletedFetch`` does; read_uncommitted drops only control batches.  ``group_metadata``."""

from __future__ import annotations

import pytest

from minikafka.client.consumer import ConsumerError, ConsumerGroupMetadata, KafkaConsumer, TopicPartition
from minikafka.client.consumer.fetcher import CompletedFetch
from minikafka.protocol.records import ControlRecordType, Record, build_batch, build_control_batch
from minikafka.common.clock import SYSTEM_CLOCK

ABORTER, COMMITTER, PLAIN = 1, 2, -1


def data(base: int, pid: int, *values: bytes) -> bytes:
    return build_batch([Record(i, 0, None, v) for i, v in enumerate(values)], base_offset=base, producer_id=pid,
                       producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                       is_transactional=pid >= 0, base_timestamp=SYSTEM_CLOCK.time_ms())


def marker(base: int, pid: int, kind: ControlRecordType) -> bytes:
    return build_control_batch(kind, producer_id=pid, producer_epoch=0, base_offset=base,
                               timestamp=SYSTEM_CLOCK.time_ms())


# offsets: 0-1 aborter, 2-3 committer, 4 plain, 5 aborter, 6 ABORT(aborter), 7 COMMIT(committer),
#          8 aborter (a new transaction, committed), 9 COMMIT(aborter)
LOG = b"".join([
    data(0, ABORTER, b"a0", b"a1"),
    data(2, COMMITTER, b"c0", b"c1"),
    data(4, PLAIN, b"p0"),
    data(5, ABORTER, b"a2"),
    marker(6, ABORTER, ControlRecordType.ABORT),
    marker(7, COMMITTER, ControlRecordType.COMMIT),
    data(8, ABORTER, b"n0"),
    marker(9, ABORTER, ControlRecordType.COMMIT),
])


def completed(read_committed: bool, fetch_offset: int = 0,
              aborted: list[tuple[int, int]] | None = None) -> CompletedFetch:
    return CompletedFetch(TopicPartition("t", 0), 0, fetch_offset, 10, 10, 10, 0, memoryview(LOG),
                          [(ABORTER, 0)] if aborted is None else aborted, read_committed)


def test_read_committed_drops_aborted_batches_and_markers() -> None:
    c = completed(True)
    recs = c.take(100)
    assert [r.value for r in recs] == [b"c0", b"c1", b"p0", b"n0"]
    assert [r.offset for r in recs] == [2, 3, 4, 8]
    assert c.exhausted and c.next_fetch_offset == 10


def test_read_uncommitted_keeps_aborted_records_but_not_markers() -> None:
    recs = completed(False).take(100)
    assert [r.value for r in recs] == [b"a0", b"a1", b"c0", b"c1", b"p0", b"a2", b"n0"]


def test_read_committed_from_the_middle_and_in_small_takes() -> None:
    c = completed(True, fetch_offset=3)
    got = []
    while not c.exhausted:
        got.extend(r.value for r in c.take(1))
    assert got == [b"c1", b"p0", b"n0"]


def test_without_aborted_transactions_everything_transactional_is_committed() -> None:
    recs = completed(True, aborted=[]).take(100)
    assert [r.value for r in recs] == [b"a0", b"a1", b"c0", b"c1", b"p0", b"a2", b"n0"]


async def test_group_metadata_needs_a_group() -> None:
    c = KafkaConsumer(bootstrap_servers="127.0.0.1:1")
    with pytest.raises(ConsumerError, match="group_id"):
        c.group_metadata()
    assert ConsumerGroupMetadata("g") == ConsumerGroupMetadata("g", -1, "", None)
