"""KIP-932 share-partitions and share sessions, unit-tested (Kafka's SharePartitionTest, ShareSessionCacheTest).

The state machine is pure (times are milliseconds passed in); the manager's lock timer runs on Trio's
MockClock, so lock expiry is tested without sleeping.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
import trio.testing

from helpers import HandlerEnv, batch
from minikafka.broker.groups.group_config import GroupConfigManager
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.share.manager import SharePartitionManager
from minikafka.broker.share.partition import (AckBatch, AcknowledgeType, AcquiredRecords, FetchedBatch,
                                              InFlightBatch, RecordState, ShareAcquireMode, SharePartition,
                                              validate_ack_batches)
from minikafka.broker.share.partition_state import PersistedShareState, ShareStateKey, ShareStateStore
from minikafka.broker.share.session import ShareSessionCache, ShareSessionError, TopicIdPartition, next_epoch
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import Record, build_batch

A, ACQ, ACK, ARC = RecordState.AVAILABLE, RecordState.ACQUIRED, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED
ACCEPT, RELEASE, REJECT, GAP, RENEW = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                       AcknowledgeType.GAP, AcknowledgeType.RENEW)
LOCK = 30_000
LIMIT = 5


def batches(*ranges: tuple[int, int]) -> list[FetchedBatch]:
    return [FetchedBatch(a, b) for a, b in ranges]


def acquire(sp: SharePartition, member: str, fetched: list[FetchedBatch], now: int = 0, *, max_records: int = 500,
            max_in_flight: int = 2000, batch_size: int = 0,
            mode: ShareAcquireMode = ShareAcquireMode.BATCH_OPTIMIZED) -> list[AcquiredRecords]:
    return sp.acquire(member, fetched, now, LOCK, max_records=max_records, max_in_flight=max_in_flight,
                      batch_size=batch_size, mode=mode)


def ack(sp: SharePartition, member: str, first: int, last: int, *types: int, now: int = 0) -> ErrorCode:
    return sp.acknowledge(member, [AckBatch(first, last, list(types))], now, LOCK, LIMIT)


def states(sp: SharePartition) -> list[tuple[int, int, RecordState, int]]:
    return [(b.first_offset, b.last_offset, b.state, b.delivery_count) for b in sp.batches]


# -- acquisition -------------------------------------------------------------------------------------
def test_acquire_new_batches_whole() -> None:
    sp = SharePartition("g", "t", 0, 0)
    assert acquire(sp, "m1", batches((0, 4), (5, 9))) == [AcquiredRecords(0, 9, 1)]
    assert states(sp) == [(0, 9, ACQ, 1)] and sp.next_offset == 10 and sp.start_offset == 0
    # Acquired records are not acquired again, by anyone.
    assert acquire(sp, "m2", batches((0, 4), (5, 9))) == []
    assert sp.next_fetch_offset() == 10


def test_acquire_starts_at_the_share_partition_start() -> None:
    sp = SharePartition("g", "t", 0, 3)  # a batch 0-4 straddles the SPSO
    assert acquire(sp, "m1", batches((0, 4), (5, 6))) == [AcquiredRecords(3, 6, 1)]


def test_max_records_rounds_up_to_a_batch_end_unless_record_limit() -> None:
    sp = SharePartition("g", "t", 0, 0)
    assert acquire(sp, "m1", batches((0, 4), (5, 9), (10, 14)), max_records=7) == [AcquiredRecords(0, 9, 1)]
    sp = SharePartition("g", "t", 0, 0)
    got = acquire(sp, "m1", batches((0, 4), (5, 9), (10, 14)), max_records=7, mode=ShareAcquireMode.RECORD_LIMIT)
    assert got == [AcquiredRecords(0, 6, 1)] and sp.next_offset == 7
    # The rest of the split batch is acquired by the next fetch.
    assert acquire(sp, "m2", batches((5, 9)), max_records=7,
                   mode=ShareAcquireMode.RECORD_LIMIT) == [AcquiredRecords(7, 9, 1)]


def test_batch_size_splits_acquired_records_at_batch_boundaries() -> None:
    sp = SharePartition("g", "t", 0, 0)
    got = acquire(sp, "m1", batches((0, 2), (3, 5), (6, 8), (9, 11)), batch_size=5)
    assert got == [AcquiredRecords(0, 5, 1), AcquiredRecords(6, 11, 1)]


def test_max_in_flight_records_caps_new_acquisitions() -> None:
    sp = SharePartition("g", "t", 0, 0)
    assert acquire(sp, "m1", batches((0, 4), (5, 9), (10, 14)), max_in_flight=6) == [AcquiredRecords(0, 9, 1)]
    assert not sp.can_acquire(6)
    assert acquire(sp, "m2", batches((10, 14)), max_in_flight=6) == []
    assert ack(sp, "m1", 0, 9, ACCEPT) == ErrorCode.NONE
    assert sp.start_offset == 10 and sp.can_acquire(6)
    assert acquire(sp, "m2", batches((10, 14)), max_in_flight=6) == [AcquiredRecords(10, 14, 1)]


def test_gaps_between_batches_are_archived() -> None:
    sp = SharePartition("g", "t", 0, 0)
    assert acquire(sp, "m1", batches((0, 1), (5, 6))) == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
    assert states(sp)[1] == (2, 4, ARC, 0)


def test_aborted_batches_are_archived_not_acquired() -> None:
    sp = SharePartition("g", "t", 0, 0)
    fetched = [FetchedBatch(0, 2), FetchedBatch(3, 5, aborted=True), FetchedBatch(6, 6)]
    assert acquire(sp, "m1", fetched) == [AcquiredRecords(0, 2, 1), AcquiredRecords(6, 6, 1)]
    assert sp.state_of(4) == ARC


# -- acknowledgement ---------------------------------------------------------------------------------
def test_accept_release_reject_and_the_start_offset() -> None:
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, "m1", batches((0, 9)))
    assert ack(sp, "m1", 0, 2, ACCEPT) == ErrorCode.NONE
    assert sp.start_offset == 3  # the SPSO moves past the acknowledged prefix
    assert ack(sp, "m1", 3, 3, RELEASE) == ErrorCode.NONE
    assert ack(sp, "m1", 4, 5, REJECT) == ErrorCode.NONE
    assert sp.start_offset == 3 and states(sp)[:2] == [(3, 3, A, 1), (4, 5, ARC, 1)]
    assert sp.next_fetch_offset() == 3
    # The released record is redelivered with delivery count 2, possibly to another member.
    assert acquire(sp, "m2", batches((0, 9))) == [AcquiredRecords(3, 3, 2)]
    assert ack(sp, "m2", 3, 3, ACCEPT) == ErrorCode.NONE
    assert sp.start_offset == 6  # 3 accepted, 4-5 rejected: never delivered again
    assert ack(sp, "m1", 6, 9, *[ACCEPT, GAP, REJECT, ACCEPT]) == ErrorCode.NONE
    assert sp.start_offset == 10 and sp.batches == [] and sp.in_flight_records == 0


def test_acknowledging_records_not_acquired_by_the_member_is_invalid_record_state() -> None:
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, "m1", batches((0, 4)))
    assert ack(sp, "m2", 0, 0, ACCEPT) == ErrorCode.INVALID_RECORD_STATE
    assert ack(sp, "m1", 3, 7, ACCEPT) == ErrorCode.INVALID_RECORD_STATE  # beyond what is in flight
    # All or nothing: the valid batch of a failing request is not applied either.
    err = sp.acknowledge("m1", [AckBatch(0, 1, [ACCEPT]), AckBatch(10, 11, [ACCEPT])], 0, LOCK, LIMIT)
    assert err == ErrorCode.INVALID_RECORD_STATE and sp.state_of(0) == ACQ
    assert ack(sp, "m1", 0, 1, ACCEPT) == ErrorCode.NONE
    assert ack(sp, "m1", 0, 1, ACCEPT) == ErrorCode.INVALID_RECORD_STATE  # already done


def test_acknowledgement_batches_are_validated() -> None:
    assert validate_ack_batches([AckBatch(0, 4, [1])], False) == ErrorCode.NONE
    assert validate_ack_batches([AckBatch(4, 0, [1])], False) == ErrorCode.INVALID_REQUEST
    assert validate_ack_batches([AckBatch(0, 4, [1, 2])], False) == ErrorCode.INVALID_REQUEST
    assert validate_ack_batches([AckBatch(0, 4, [])], False) == ErrorCode.INVALID_REQUEST
    assert validate_ack_batches([AckBatch(0, 1, [1]), AckBatch(1, 2, [1])], False) == ErrorCode.INVALID_REQUEST
    assert validate_ack_batches([AckBatch(0, 0, [4])], False) == ErrorCode.INVALID_REQUEST  # Renew before v2
    assert validate_ack_batches([AckBatch(0, 0, [4])], True) == ErrorCode.NONE
    assert validate_ack_batches([AckBatch(0, 0, [7])], True) == ErrorCode.INVALID_REQUEST


# -- locks, delivery counts ----------------------------------------------------------------------------
def test_lock_expiry_redelivers_with_a_higher_delivery_count_until_archived() -> None:
    sp = SharePartition("g", "t", 0, 0)
    now = 0
    for delivery in range(1, LIMIT + 1):
        assert acquire(sp, f"m{delivery}", batches((0, 1)), now) == [AcquiredRecords(0, 1, delivery)]
        assert sp.expire_locks(now + LOCK - 1, LIMIT) == []  # not yet
        now += LOCK
        assert sp.expire_locks(now, LIMIT) == [(0, 1)]
    # The fifth expiry reached share.delivery.count.limit: archived, and the SPSO moves on.
    assert sp.batches == [] and sp.start_offset == 2
    assert acquire(sp, "m9", batches((0, 1)), now) == []


def test_release_at_the_delivery_count_limit_archives() -> None:
    sp = SharePartition("g", "t", 0, 0)
    for _ in range(LIMIT - 1):
        acquire(sp, "m", batches((0, 0)))
        assert ack(sp, "m", 0, 0, RELEASE) == ErrorCode.NONE
    acquire(sp, "m", batches((0, 0)))
    assert sp.delivery_count_of(0) == LIMIT
    assert ack(sp, "m", 0, 0, RELEASE) == ErrorCode.NONE
    assert sp.start_offset == 1


def test_renew_extends_the_lock() -> None:
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, "m", batches((0, 3)), now=0)
    assert ack(sp, "m", 2, 3, RENEW, now=20_000) == ErrorCode.NONE
    assert sp.expire_locks(LOCK, LIMIT) == [(0, 1)]
    assert sp.state_of(2) == ACQ and sp.next_lock_deadline() == 20_000 + LOCK


def test_release_member_gives_its_records_back() -> None:
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, "m1", batches((0, 4)))
    acquire(sp, "m2", batches((5, 9)))
    assert sp.release_member("m1", LIMIT) == [(0, 4)]
    assert states(sp) == [(0, 4, A, 1), (5, 9, ACQ, 1)] and sp.acquired_by("m2") == 5


def test_move_start_to_drops_records_below() -> None:
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, "m", batches((0, 9)))
    sp.move_start_to(4)
    assert sp.start_offset == 4 and states(sp) == [(4, 9, ACQ, 1)]
    sp.move_start_to(20)
    assert sp.start_offset == sp.next_offset == 20 and sp.batches == []


def test_snapshot_writes_acquired_records_as_available() -> None:
    sp = SharePartition("g", "t", 0, 0)
    acquire(sp, "m", batches((0, 9)))
    ack(sp, "m", 5, 6, ACCEPT)
    start, _, runs = sp.snapshot()
    assert start == 0 and runs == [(0, 4, 0, 1), (5, 6, 2, 1), (7, 9, 0, 1)]
    restored = SharePartition("g", "t", 0, start, [InFlightBatch(f, last, RecordState(s), dc) for f, last, s, dc in runs])
    assert restored.next_fetch_offset() == 0 and restored.next_offset == 10
    assert acquire(restored, "m2", batches((0, 9))) == [AcquiredRecords(0, 4, 2), AcquiredRecords(7, 9, 2)]


# -- sessions ---------------------------------------------------------------------------------------
T = uuid.uuid4()
P0, P1 = TopicIdPartition(T, 0), TopicIdPartition(T, 1)


def test_share_session_epochs() -> None:
    cache = ShareSessionCache(max_entries=2)
    ctx = cache.new_context("g", "m", 0, [P0], [], False, "c1")
    assert ctx.partitions == [P0] and not ctx.incremental
    with pytest.raises(ShareSessionError) as e:
        cache.new_context("g", "m", 2, [], [], False)
    assert e.value.code == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    ctx = cache.new_context("g", "m", 1, [P1], [P0], True)
    assert ctx.incremental and ctx.partitions == [P1]
    assert cache.get(("g", "m")).epoch == 2  # type: ignore[arg-type]
    cache.acknowledge_session_update("g", "m", 2)
    assert cache.get(("g", "m")).epoch == 3  # type: ignore[arg-type]
    for bad_epoch, code in ((0, ErrorCode.INVALID_SHARE_SESSION_EPOCH), (9, ErrorCode.INVALID_SHARE_SESSION_EPOCH)):
        with pytest.raises(ShareSessionError) as e:
            cache.acknowledge_session_update("g", "m", bad_epoch)
        assert e.value.code == code
    with pytest.raises(ShareSessionError) as e:
        cache.new_context("g", "other", 5, [], [], False)
    assert e.value.code == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.new_context("g", "m", -1, [], [], True).final
    with pytest.raises(ShareSessionError) as e:  # acknowledgements in an initial request
        cache.new_context("g", "m2", 0, [P0], [], True)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    assert next_epoch(0x7FFFFFFF) == 1 and next_epoch(-1) == -1


def test_share_session_limit_and_connection_close() -> None:
    cache = ShareSessionCache(max_entries=2)
    cache.new_context("g", "m1", 0, [P0], [], False, "c1")
    cache.new_context("g", "m2", 0, [P0], [], False, "c1")
    with pytest.raises(ShareSessionError) as e:
        cache.new_context("g", "m3", 0, [P0], [], False, "c2")
    assert e.value.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    cache.new_context("g", "m1", 0, [P1], [], False, "c1")  # a member reopening replaces its session
    assert len(cache) == 2 and cache.partitions(("g", "m1")) == [P1]  # type: ignore[arg-type]
    assert cache.connection_closed("c1") == [("g", "m1"), ("g", "m2")]
    assert len(cache) == 0


# -- the manager: persistence, lock timer ---------------------------------------------------------
def test_state_store_survives_a_restart(tmp_path: Path) -> None:
    metadata = ClusterMetadata([0])
    metadata.create_topic("t", 2, 1)
    store = ShareStateStore(tmp_path, metadata)
    key = ShareStateKey("g", "t", 0)
    store.put(key, PersistedShareState(5, 0, ((5, 6, 2, 1), (7, 9, 0, 2))))
    store.put(ShareStateKey("g", "t", 1), PersistedShareState(0, 0, ()))
    store.delete(ShareStateKey("g", "t", 1))
    store.close()
    segment = tmp_path / "__share_group_state-0" / "00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(segment.read_bytes()[:40])  # a torn last batch
    again = ShareStateStore(tmp_path, metadata)
    assert again.get(key) == PersistedShareState(5, 0, ((5, 6, 2, 1), (7, 9, 0, 2)))
    assert again.keys() == [key]
    again.close()


async def test_manager_initializes_from_auto_offset_reset_and_persisted_state(tmp_path: Path) -> None:
    env = HandlerEnv()
    env.metadata.create_topic("t", 1, 1)
    part = env.log.get("t", 0)
    part.log.append_as_leader([bytearray(batch([b"a", b"b", b"c"]))], 0, 0)
    manager = SharePartitionManager(env.config, ShareStateStore(tmp_path, env.metadata))
    assert manager.share_partition("g", part).start_offset == 3  # latest: the high watermark
    sp = manager.share_partition("g", part)
    part.log.append_as_leader([bytearray(batch([b"d", b"e"]))], 0, 0)
    assert manager.acquire("g", "m", part, batches((3, 4)), max_records=10) == [AcquiredRecords(3, 4, 1)]
    assert manager.acknowledge("g", "m", part, [AckBatch(3, 3, [ACCEPT])]) == ErrorCode.NONE
    assert sp.start_offset == 4
    manager.store.close()
    # A new manager (a restarted broker, or a new leader) reads the state back: 4 is to be delivered again.
    again = SharePartitionManager(env.config, ShareStateStore(tmp_path, env.metadata))
    sp2 = again.share_partition("g", part)
    assert (sp2.start_offset, sp2.next_fetch_offset(), sp2.delivery_count_of(4)) == (4, 4, 1)
    assert again.start_offset("g", "t", 0) == 4


async def test_manager_lock_timer_expires_locks_on_the_mock_clock(autojump_clock: trio.testing.MockClock) -> None:
    env = HandlerEnv(group_share_record_lock_duration_ms=15_000)
    env.metadata.create_topic("t", 1, 1)
    part = env.log.get("t", 0)
    woken: list[object] = []
    manager = SharePartitionManager(env.config, partitions=env.log, notify=woken.append)
    sp = manager.share_partition("g", part)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(manager.run)
        await trio.testing.wait_all_tasks_blocked()
        start = trio.current_time()
        manager.acquire("g", "m", part, batches((0, 4)), max_records=10)
        await trio.sleep(14.9)
        assert sp.state_of(0) == ACQ
        await trio.sleep(0.2)
        assert sp.state_of(0) == A and manager.locks_expired == 5
        assert woken == [ShareStateKey("g", "t", 0)]
        assert 15 <= trio.current_time() - start < 15.2
        manager.close()


def test_auto_offset_reset_by_duration() -> None:
    env = HandlerEnv()
    env.metadata.create_topic("t", 1, 1)
    part = env.log.get("t", 0)
    now = env.clock.time_ms()
    for age_minutes in (180, 120, 30, 5):  # offsets 0-3, one record each
        data = build_batch([Record(offset_delta=0, value=b"x")], base_timestamp=now - age_minutes * 60_000)
        part.log.append_as_leader([bytearray(data)], 0, now)
    configs = GroupConfigManager(env.config)
    manager = SharePartitionManager(env.config, group_configs=configs, wall_clock=env.clock)
    configs.set_overrides("hour", {"share.auto.offset.reset": "by_duration:PT1H"})
    configs.set_overrides("early", {"share.auto.offset.reset": "earliest"})
    configs.set_overrides("future", {"share.auto.offset.reset": "by_duration:PT0S"})
    assert manager.share_partition("hour", part).start_offset == 2
    assert manager.share_partition("early", part).start_offset == 0
    assert manager.share_partition("future", part).start_offset == 4  # nothing that recent: the latest offset
    assert manager.share_partition("latest", part).start_offset == 4
