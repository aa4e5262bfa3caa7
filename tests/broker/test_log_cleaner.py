"""The log cleaner (broker/log/cleaner*.py) on logs in memory and on disk, driven by a manual clock."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from minikafka.broker.log import Log, LogConfig
from minikafka.broker.log.cleaner import OffsetMap
from minikafka.broker.log.cleaner_manager import CleanerConfig, CleanerTarget, LogCleaner
from minikafka.broker.log.txn_index import AbortedTxn
from minikafka.common.clock import ManualClock
from minikafka.protocol.records import (ControlRecordType, Record, build_batch, build_control_batch, decode_records,
                                       iter_batches, read_header)
from minikafka.common.clock import SYSTEM_CLOCK

COMPACT = frozenset({"compact"})


def keyed_batch(items: list[tuple[bytes | None, bytes | None]], *, ts: int, codec: int = 0, pid: int = -1,
                epoch: int = -1, seq: int = -1, txn: bool = False) -> bytearray:
    recs = [Record(i, i, k, v) for i, (k, v) in enumerate(items)]
    return bytearray(build_batch(recs, base_timestamp=ts, compression=codec, producer_id=pid, producer_epoch=epoch,
                                 base_sequence=seq, is_transactional=txn))


def all_batches(lg: Log):
    return [(h, bytes(v)) for h, v in lg.iter_batches_from(lg.log_start_offset)]


def all_records(lg: Log):
    out = []
    for h, view in lg.iter_batches_from(lg.log_start_offset):
        if not h.is_control:
            out.extend(decode_records(view))
    return out


def target(lg: Log, producers: dict[int, tuple[int, int]] | None = None, lso: int | None = None) -> CleanerTarget:
    return CleanerTarget(f"{lg.topic}-{lg.partition}", lg, (lambda: lg.high_watermark if lso is None else lso),
                         lambda: producers or {})


def make_log(tmp: Path | None, clock: ManualClock, **cfg) -> Log:
    config = LogConfig(cleanup_policy=COMPACT, segment_bytes=cfg.pop("segment_bytes", 4096),
                       min_cleanable_dirty_ratio=cfg.pop("ratio", 0.01), **cfg)
    return Log("t", 0, config, tmp, clock=clock)


_CLEANERS: list[LogCleaner] = []


@pytest.fixture(autouse=True)
def _close_cleaners():
    yield
    while _CLEANERS:
        _CLEANERS.pop().close()  # their cleaning processes


def cleaner_for(lg: Log, clock: ManualClock, tmp: Path | None = None, **kw) -> LogCleaner:
    c = LogCleaner(CleanerConfig(**kw), checkpoint_dir=tmp, clock=clock)
    c.add_source(lambda: [target(lg)])
    _CLEANERS.append(c)
    return c


def latest_by_key(writes: list[tuple[bytes, bytes | None, int]]) -> dict[bytes, tuple[bytes | None, int]]:
    out: dict[bytes, tuple[bytes | None, int]] = {}
    for k, v, off in writes:
        out[k] = (v, off)
    return out


def write_random(lg: Log, clock: ManualClock, n_batches: int, keys: int, *, codec: int = 0, seed: int = 1,
                 tombstone_every: int = 0) -> list[tuple[bytes, bytes | None, int]]:
    rnd = random.Random(seed)
    writes = []
    for b in range(n_batches):
        items: list[tuple[bytes | None, bytes | None]] = []
        for _ in range(rnd.randrange(1, 8)):
            k = b"k%03d" % rnd.randrange(keys)
            v = None if tombstone_every and rnd.randrange(tombstone_every) == 0 else b"v%d-" % b + bytes(20)
            items.append((k, v))
        first = lg.log_end_offset
        lg.append_as_leader([keyed_batch(items, ts=clock.time_ms(), codec=codec)], 0, clock.time_ms())
        writes.extend((k, v, first + i) for i, (k, v) in enumerate(items))
        clock.sleep(1)
    return writes


@pytest.mark.parametrize("on_disk, processes", [(False, False), (True, True), (True, False)],
                         ids=["memory", "disk-process", "disk-thread"])
@pytest.mark.parametrize("codec", [0, 1, 4])
async def test_last_value_per_key_kept_offsets_unchanged(tmp_path: Path, on_disk: bool, processes: bool,
                                                         codec: int) -> None:
    clock = ManualClock()
    lg = make_log(tmp_path / "t-0" if on_disk else None, clock)
    writes = write_random(lg, clock, 400, 30, codec=codec)
    assert lg.num_segments > 3
    cleaner = cleaner_for(lg, clock, tmp_path if on_disk else None, processes=processes)
    before = lg.size_in_bytes
    assert await cleaner.clean_until_idle() >= 1
    recs = all_records(lg)
    active_base = lg.active_segment.base_offset
    expected = latest_by_key([w for w in writes if w[2] < active_base])
    cleaned = {r.key: (r.value, r.offset) for r in recs if r.offset < active_base}
    assert cleaned == expected  # one record per key below the active segment, its latest value and offset
    assert [r.offset for r in recs] == sorted(r.offset for r in recs)
    tail = [(w[0], w[1], w[2]) for w in writes if w[2] >= active_base]
    assert [(r.key, r.value, r.offset) for r in recs if r.offset >= active_base] == tail  # active segment untouched
    assert lg.size_in_bytes < before
    assert lg.log_end_offset == writes[-1][2] + 1
    m = cleaner.metrics()
    assert 0 < m["kafka.log:type=LogCleaner,name=cleaner-recopy-percent"] < 100
    if on_disk:  # the cleaned log loads back as it was, with the checkpoint
        lg.close()
        again = make_log(tmp_path / "t-0", clock)
        assert [(r.key, r.value, r.offset) for r in all_records(again)] == [(r.key, r.value, r.offset) for r in recs]
        c2 = cleaner_for(again, clock, tmp_path)
        assert c2.manager.checkpoints["t-0"] == cleaner.manager.checkpoints["t-0"]
        assert await c2.clean_until_idle() == 0


async def test_fetch_at_an_offset_removed_by_cleaning_returns_the_next_batch() -> None:
    clock = ManualClock()
    lg = make_log(None, clock)
    write_random(lg, clock, 300, 5)
    lg.roll()
    await cleaner_for(lg, clock).clean_until_idle()
    covered = {o for h, _ in all_batches(lg) for o in range(h.base_offset, h.last_offset + 1)}
    gap = next(o for o in range(lg.log_end_offset) if o not in covered)
    info = lg.read(gap, 1 << 20)
    first = read_header(bytes(info.chunks[0]))
    assert first.base_offset > gap and all(o not in covered for o in range(gap, first.base_offset))


async def test_tombstones_kept_for_delete_retention_then_removed() -> None:
    clock = ManualClock()
    lg = make_log(None, clock, delete_retention_ms=60_000)
    for i in range(50):
        lg.append_as_leader([keyed_batch([(b"a%d" % i, b"x")], ts=clock.time_ms())], 0, clock.time_ms())
    lg.append_as_leader([keyed_batch([(b"a%d" % i, None) for i in range(10)], ts=clock.time_ms())], 0,
                        clock.time_ms())
    lg.roll()
    cleaner = cleaner_for(lg, clock)
    await cleaner.clean_until_idle()
    recs = {r.key: r.value for r in all_records(lg)}
    assert len(recs) == 50 and all(recs[b"a%d" % i] is None for i in range(10))  # tombstones stay for now
    tomb_batch = next(h for h, _ in all_batches(lg) if h.record_count == 10)
    assert tomb_batch.has_delete_horizon and tomb_batch.base_timestamp == clock.time_ms() + 60_000
    ts_before = {r.key: r.timestamp for r in all_records(lg)}
    clock.sleep(30_000)  # more writes make the log dirty again; the horizon is not reached yet
    for i in range(50, 60):
        lg.append_as_leader([keyed_batch([(b"a%d" % i, b"y")], ts=clock.time_ms())], 0, clock.time_ms())
    lg.roll()
    await cleaner.clean_until_idle()
    assert sum(1 for r in all_records(lg) if r.value is None) == 10
    assert {r.key: r.timestamp for r in all_records(lg) if r.key in ts_before} == ts_before  # timestamps kept
    clock.sleep(30_001)
    for i in range(60, 70):
        lg.append_as_leader([keyed_batch([(b"a%d" % i, b"y")], ts=clock.time_ms())], 0, clock.time_ms())
    lg.roll()
    await cleaner.clean_until_idle()
    recs = {r.key: r.value for r in all_records(lg)}
    assert len(recs) == 60 and all(v is not None for v in recs.values())


async def test_idempotent_producer_last_batch_kept_empty() -> None:
    clock = ManualClock()
    lg = make_log(None, clock)
    pid = 7
    lg.append_as_leader([keyed_batch([(b"k", b"1"), (b"k", b"2")], ts=1, pid=pid, epoch=0, seq=0)], 0, 1)
    lg.append_as_leader([keyed_batch([(b"k", b"3")], ts=2, pid=pid, epoch=0, seq=2)], 0, 2)
    lg.append_as_leader([keyed_batch([(b"k", b"4")], ts=3)], 0, 3)  # a plain write supersedes it
    lg.roll()
    c = LogCleaner(CleanerConfig(), clock=clock)
    c.add_source(lambda: [target(lg, producers={pid: (2, 0)})])
    await c.clean_until_idle()
    batches = all_batches(lg)
    kept = [h for h, _ in batches if h.producer_id == pid]
    assert len(kept) == 1 and kept[0].record_count == 0  # the producer's last batch, emptied
    assert (kept[0].base_offset, kept[0].last_offset, kept[0].base_sequence, kept[0].last_sequence) == (2, 2, 2, 2)
    assert [r.value for r in all_records(lg)] == [b"4"]
    # A timestamp lookup skips the emptied batch (it keeps its maxTimestamp) for the first record kept.
    assert lg.offset_for_timestamp(2)[:2] == (3, 3)


async def test_aborted_transaction_removed_and_markers_after_horizon() -> None:
    clock = ManualClock()
    lg = make_log(None, clock, delete_retention_ms=1000)
    a, c_ = 11, 12
    lg.append_as_leader([keyed_batch([(b"x", b"aborted"), (b"y", b"aborted")], ts=1, pid=a, epoch=0, seq=0,
                                     txn=True)], 0, 1)
    lg.append_as_leader([keyed_batch([(b"z", b"committed")], ts=1, pid=c_, epoch=0, seq=0, txn=True)], 0, 1)
    abort_at = lg.log_end_offset
    lg.append_as_leader([bytearray(build_control_batch(ControlRecordType.ABORT, producer_id=a, producer_epoch=0,
                                                       timestamp=1))], 0, 1)
    lg.append_as_leader([bytearray(build_control_batch(ControlRecordType.COMMIT, producer_id=c_, producer_epoch=0,
                                                       timestamp=1))], 0, 1)
    lg.txn_index.append(AbortedTxn(a, 0, abort_at, 2))
    lg.append_as_leader([keyed_batch([(b"z", b"newer")], ts=2)], 0, 2)
    lg.roll()
    cleaner = cleaner_for(lg, clock)
    await cleaner.clean_until_idle()
    assert {r.key: r.value for r in all_records(lg)} == {b"z": b"newer"}
    markers = [h for h, _ in all_batches(lg) if h.is_control]
    # As in Kafka, a marker whose transaction's batches this pass read stays as it is (and so does an
    # aborted transaction's index entry); the next pass finds no data left and starts its delete horizon.
    assert len(markers) == 2 and not any(h.has_delete_horizon for h in markers)
    lg.append_as_leader([keyed_batch([(b"v", b"1")], ts=2)], 0, 2)
    lg.roll()
    await cleaner.clean_until_idle()
    markers = [h for h, _ in all_batches(lg) if h.is_control]
    assert len(markers) == 2 and all(h.has_delete_horizon and h.base_timestamp == clock.time_ms() + 1000
                                     for h in markers)
    assert not lg.txn_index.entries  # the aborted data is gone: its index entry too
    clock.sleep(1001)
    lg.append_as_leader([keyed_batch([(b"w", b"1")], ts=3)], 0, 3)
    lg.roll()
    await cleaner.clean_until_idle()
    assert not [h for h, _ in all_batches(lg) if h.is_control and h.record_count]


async def test_small_dedupe_buffer_takes_several_passes(tmp_path: Path) -> None:
    clock = ManualClock()
    lg = make_log(None, clock, segment_bytes=2048)
    writes = write_random(lg, clock, 300, 200)
    lg.roll()
    cleaner = cleaner_for(lg, clock, dedupe_buffer_size=24 * 50)  # room for 45 keys a pass
    assert OffsetMap(24 * 50).max_entries == 45
    passes = await cleaner.clean_until_idle()
    assert passes > 1
    assert {r.key: (r.value, r.offset) for r in all_records(lg)} == latest_by_key(writes)


async def test_crash_during_swap_leaves_old_or_new_segments(tmp_path: Path) -> None:
    clock = ManualClock()
    d = tmp_path / "t-0"
    lg = make_log(d, clock)
    writes = write_random(lg, clock, 300, 20)
    lg.roll()
    expected = latest_by_key(writes)
    # A crash after the cleaned segment was committed (.swap) but before the old files were removed.
    cleaner = cleaner_for(lg, clock)
    from minikafka.broker.log.cleaner import CleanedTransactionMetadata, CleanerStats, group_segments_by_size
    segs = lg.segments[:-1]
    th = cleaner.threads[0].cleaner
    end = th.build_offset_map(segs, 0, lg.active_segment.base_offset, [], CleanerStats())
    group = group_segments_by_size([s for s in segs if s.base_offset < end], 1 << 30, end)[0]
    result = th.clean_group(lg, group, CleanedTransactionMetadata(), {}, end, clock.time_ms(), CleanerStats())
    result.cleaned.change_suffix(".swap")
    result.cleaned.close()
    lg.close()
    assert list(d.glob("*.log.swap"))
    again = make_log(d, clock)
    assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned"))
    assert {r.key: (r.value, r.offset) for r in all_records(again)} == expected
    again.close()
    # A crash before the commit point (.cleaned files only): the old segments stay.
    lg3 = make_log(d, clock)
    n_before = lg3.num_segments
    cleaner3 = cleaner_for(lg3, clock)
    th3 = cleaner3.threads[0].cleaner
    write_random(lg3, clock, 100, 20, seed=3)
    lg3.roll()
    segs = lg3.segments[:-1]
    end = th3.build_offset_map(segs, 0, lg3.active_segment.base_offset, [], CleanerStats())
    group = group_segments_by_size(segs, 1 << 30, end)[0]
    th3.clean_group(lg3, group, CleanedTransactionMetadata(), {}, end, clock.time_ms(), CleanerStats())
    records_before = [(r.key, r.value, r.offset) for r in all_records(lg3)]
    lg3.close()
    assert list(d.glob("*.cleaned"))
    lg4 = make_log(d, clock)
    assert not list(d.glob("*.cleaned")) and lg4.num_segments >= n_before
    assert [(r.key, r.value, r.offset) for r in all_records(lg4)] == records_before


async def test_not_compacted_log_not_cleaned_and_active_segment_never() -> None:
    clock = ManualClock()
    lg = make_log(None, clock, segment_bytes=1 << 20)
    write_random(lg, clock, 50, 3)
    assert lg.num_segments == 1
    assert await cleaner_for(lg, clock).clean_until_idle() == 0  # everything is in the active segment
    lg.config.cleanup_policy = frozenset({"delete"})
    lg.roll()
    assert await cleaner_for(lg, clock).clean_until_idle() == 0


async def test_min_compaction_lag_and_max_compaction_lag() -> None:
    clock = ManualClock()
    lg = make_log(None, clock, min_compaction_lag_ms=10_000, ratio=0.99)
    write_random(lg, clock, 100, 5)
    lg.roll()
    cleaner = cleaner_for(lg, clock)
    assert await cleaner.clean_until_idle() == 0  # ratio not reached
    lg.config.min_cleanable_dirty_ratio = 0.01
    assert await cleaner.clean_until_idle() == 0  # too young for min.compaction.lag.ms
    clock.sleep(10_001)
    assert await cleaner.clean_until_idle() == 1
    lg2 = make_log(None, clock, max_compaction_lag_ms=5_000, ratio=1.0)
    write_random(lg2, clock, 100, 5)
    lg2.roll()
    c2 = cleaner_for(lg2, clock)
    assert await c2.clean_until_idle() == 0
    clock.sleep(5_001 + 100)
    assert await c2.clean_until_idle() == 1  # past max.compaction.lag.ms whatever the ratio


def test_iter_batches_of_file_segment_survive_large_batches(tmp_path: Path) -> None:
    clock = ManualClock()
    lg = make_log(tmp_path / "t-0", clock, segment_bytes=64 << 20)
    big = keyed_batch([(b"k%d" % i, bytes(100_000)) for i in range(100)], ts=1)  # 10 MB, larger than a read chunk
    lg.append_as_leader([big], 0, 1)
    lg.append_as_leader([keyed_batch([(b"a", b"b")], ts=1)], 0, 1)
    got = list(lg.active_segment.iter_batches())
    assert [h.record_count for h, _ in got] == [100, 1]
    assert [h.base_offset for h, _ in iter_batches(b"".join(bytes(v) for _, v in got))] == [0, 100]


async def test_swap_abandoned_when_the_log_was_truncated_meanwhile() -> None:
    clock = ManualClock()
    lg = make_log(None, clock)
    write_random(lg, clock, 200, 10)
    lg.roll()
    from minikafka.broker.log.cleaner import CleanedTransactionMetadata, CleanerStats, group_segments_by_size
    th = cleaner_for(lg, clock).threads[0].cleaner
    segs = lg.segments[:-1]
    truncations = lg.truncations
    end = th.build_offset_map(segs, 0, lg.active_segment.base_offset, [], CleanerStats())
    group = group_segments_by_size(segs, 1 << 30, end)[0]
    result = th.clean_group(lg, group, CleanedTransactionMetadata(), {}, end, clock.time_ms(), CleanerStats())
    lg.truncate_to(group[-1].base_offset + 1)  # a follower truncates inside the group, then writes and rolls
    write_random(lg, clock, 5, 10, seed=9)
    lg.roll()
    before = [(r.key, r.value, r.offset) for r in all_records(lg)]
    assert not lg.replace_segments(result.cleaned, group[:-1] + [lg.segments[len(group) - 1]], truncations)
    assert [(r.key, r.value, r.offset) for r in all_records(lg)] == before


async def test_broker_compacts_a_topic_made_compacted_by_alter_configs() -> None:
    from helpers import fetch, produce
    from minikafka.broker.broker import serve_broker
    from minikafka.client.connection import KafkaConnection
    from minikafka.protocol.api import ApiKey

    async with serve_broker(log_cleaner_backoff_ms=3_600_000, log_segment_bytes=2048) as broker:
        broker.create_topic("t", 1, 1)
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            for i in range(200):
                recs = [Record(j, 0, b"key%d" % ((i * 3 + j) % 7), b"value-%d-%d" % (i, j)) for j in range(3)]
                batch = build_batch(recs, base_timestamp=SYSTEM_CLOCK.time_ms())
                assert (await produce(conn, "t", batch)).error_code == 0
            assert await broker.log_cleaner.clean_until_idle() == 0  # cleanup.policy=delete
            resp = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
                "resource_type": 2, "resource_name": "t", "configs": [
                    {"name": "cleanup.policy", "config_operation": 0, "value": "compact"},
                    {"name": "min.cleanable.dirty.ratio", "config_operation": 0, "value": "0.01"}]}],
                "validate_only": False})
            assert resp.responses[0].error_code == 0
            assert broker.replica_manager.get("t", 0).log.config.compact
            await broker.log_cleaner.clean_until_idle()  # the change also woke the cleaner's own task
            lg = broker.replica_manager.get("t", 0).log
            assert broker.log_cleaner.cleanings >= 1, (lg, broker.log_cleaner.failures, lg.config)
            records, offset = [], 0
            while True:
                p = await fetch(conn, "t", offset)
                if not p.records:
                    break
                for h, view in iter_batches(p.records, allow_truncated_tail=True):
                    records.extend(decode_records(view))
                    offset = h.next_offset
            active = broker.replica_manager.get("t", 0).log.active_segment.base_offset
            cleaned = [r for r in records if r.offset < active]
            assert len({r.key for r in cleaned}) == len(cleaned) <= 7
            assert records[-1].offset == 599 and records[-1].value == b"value-199-2"
            assert broker.metrics()["kafka.log:type=LogCleaner,name=cleaner-recopy-percent"] < 100


async def test_consumer_offsets_log_compacted_and_reloaded(tmp_path: Path) -> None:
    """__consumer_offsets is a compacted log: commits of the same partitions shrink to one record each
    (plus what the active segment holds), and a restarted broker reads the same committed offsets."""
    from minikafka.broker.broker import serve_broker
    from minikafka.client.connection import KafkaConnection
    from minikafka.protocol.api import ApiKey

    settings = dict(data_dir=tmp_path, offsets_topic_segment_bytes=4096, log_cleaner_backoff_ms=3_600_000,
                    log_cleaner_min_cleanable_ratio=0.01, offsets_topic_num_partitions=1)

    async def committed(conn: KafkaConnection, group: str) -> dict[int, int]:
        resp = await conn.request(ApiKey.OFFSET_FETCH, 7, {"group_id": group, "topics": None})
        return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}

    async with serve_broker(**settings) as broker:
        broker.create_topic("t", 4, 1)
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            for i in range(300):
                resp = await conn.request(ApiKey.OFFSET_COMMIT, 8, {
                    "group_id": f"g{i % 3}", "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                        {"partition_index": p, "committed_offset": i * 10 + p, "committed_leader_epoch": -1,
                         "committed_metadata": ""} for p in range(4)]}]})
                assert all(p.error_code == 0 for t in resp.topics for p in t.partitions)
            before = {g: await committed(conn, g) for g in ("g0", "g1", "g2")}
        # The broker's replica of __consumer_offsets-0 (one partition here), compacted as any compacted topic.
        offsets_log = broker.replica_manager.get("__consumer_offsets", 0).log
        size_before = offsets_log.size_in_bytes
        await broker.log_cleaner.clean_until_idle()
        assert offsets_log.size_in_bytes < size_before / 3
        active = offsets_log.active_segment.base_offset
        keys = [r.key for h, v in offsets_log.iter_batches_from(0) if not h.is_control and h.last_offset < active
                for r in decode_records(v)]
        assert len(keys) == len(set(keys))  # one record per key below the active segment
    async with serve_broker(**settings) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert {g: await committed(conn, g) for g in ("g0", "g1", "g2")} == before


def test_throttler_sleeps_to_the_desired_rate() -> None:
    from minikafka.broker.log.cleaner import Throttler

    clock = ManualClock(monotonic_ns=0)
    t = Throttler(1_000_000, check_interval_ms=300, clock=clock)
    clock.sleep(100)
    t.maybe_throttle(2_000_000)  # within the first interval: no check yet
    assert t.slept_ms == 0 and clock.monotonic_ns() == 100_000_000
    clock.sleep(300)  # 4 MB in 0.4 s against 1 MB/s: sleep until 4 s have passed
    t.maybe_throttle(2_000_000)
    assert t.slept_ms == 3600 and clock.monotonic_ns() == 4_000_000_000
    clock.sleep(400)
    t.maybe_throttle(100_000)  # 0.25 MB/s: under the rate
    assert t.slept_ms == 3600 and clock.monotonic_ns() == 4_400_000_000


class _TickingClock(ManualClock):
    """A manual clock whose every monotonic reading is 1 ms after the previous one: work takes time."""

    def monotonic_ns(self) -> int:
        self.sleep(1)
        return super().monotonic_ns()


async def test_io_max_bytes_per_second_throttles_a_cleaning() -> None:
    clock = ManualClock()
    lg = make_log(None, clock)
    write_random(lg, clock, 300, 20)
    lg.roll()
    cleaner = cleaner_for(lg, clock, io_max_bytes_per_second=1e12)
    th = cleaner.throttler
    start = th.clock.monotonic_ns()
    th.clock = _TickingClock(monotonic_ns=start)  # carries on from the real clock; its naps take no time
    th.desired_rate_per_sec = 1000.0  # far below what it reads: every check naps
    th.check_interval_ns = 0
    assert await cleaner.clean_until_idle() == 1
    assert th.slept_ms > 0 and th.clock.monotonic_ns() - start > th.slept_ms * 1_000_000


async def test_compact_and_delete_policy_applies_both() -> None:
    clock = ManualClock()
    lg = make_log(None, clock, retention_ms=60_000)
    old = write_random(lg, clock, 100, 10)
    clock.sleep(120_000)
    new = write_random(lg, clock, 100, 10, seed=2)
    lg.roll()
    assert lg.enforce_retention(clock.time_ms()) == 0  # compact alone: no time retention
    lg.config.cleanup_policy = frozenset({"compact", "delete"})
    assert lg.enforce_retention(clock.time_ms()) > 0  # compact,delete: the old segments go by time
    assert 0 < lg.log_start_offset <= new[0][2]  # only segments wholly older than retention.ms went
    await cleaner_for(lg, clock).clean_until_idle()
    recs = all_records(lg)
    assert {r.key: (r.value, r.offset) for r in recs} == latest_by_key(
        [w for w in old + new if w[2] >= lg.log_start_offset])


async def test_a_dead_cleaning_process_fails_that_cleaning_only(tmp_path: Path) -> None:
    clock = ManualClock()
    lg = make_log(tmp_path / "t-0", clock)
    writes = write_random(lg, clock, 300, 20)
    lg.roll()
    cleaner = cleaner_for(lg, clock, tmp_path)
    process = cleaner.threads[0].process
    import subprocess
    import sys
    # A cleaning process that dies as soon as it reads a job's first bytes.
    process._proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.buffer.read(8); sys.exit(3)"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert await cleaner.clean_once()  # it tried, and failed
    assert cleaner.failures == 1 and cleaner.metrics()[
        "kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count"] == 1
    before = [(r.key, r.value, r.offset) for r in all_records(lg)]
    assert len(before) == len(writes)  # nothing was swapped in
    assert await cleaner.clean_until_idle() == 1  # a new process cleans it
    assert {r.key: (r.value, r.offset) for r in all_records(lg)} == latest_by_key(writes)
    assert cleaner.metrics()["kafka.log:type=LogCleanerManager,name=uncleanable-partitions-count"] == 0
