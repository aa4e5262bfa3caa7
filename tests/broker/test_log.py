"""Tests for minikafka.broker.log (partition log storage)."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.broker.log import (
    CorruptRecordError,
    Log,
    LogConfig,
    LogManager,
    OffsetOutOfRangeError,
)

HDR = struct.Struct(">qiibIhiqqqhii")


def make_batch(n: int = 1, ts: int | list[int] = 1000, value_size: int = 10, codec: int = 0) -> bytearray:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                  producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    tss = ts if isinstance(ts, list) else [ts] * n
    for i in range(n):
        b.append(i, timestamp=tss[i], key=None, value=b"v%d-" % i + b"x" * value_size, headers=[])
    return b.build()


def decode(chunks) -> list[DefaultRecordBatch]:
    data = b"".join(bytes(c) for c in chunks)
    out, pos = [], 0
    while pos < len(data):
        size = HDR.unpack_from(data, pos)[1] + 12
        batch = DefaultRecordBatch(data[pos : pos + size])
        assert batch.validate_crc()
        out.append(batch)
        pos += size
    assert pos == len(data)
    return out


def base_offsets(chunks) -> list[int]:
    return [b.base_offset for b in decode(chunks)]


@pytest.fixture(params=["memory", "disk"])
def mode(request):
    return request.param


@pytest.fixture
def make_log(mode, tmp_path):
    made: list[Log] = []

    def factory(config: LogConfig | None = None, name: str = "t-0") -> Log:
        lg = Log("t", 0, config or LogConfig(), None if mode == "memory" else tmp_path / name)
        made.append(lg)
        return lg

    yield factory
    for lg in made:
        lg.close()


# -- append / read ---------------------------------------------------------------------------


def test_append_assigns_offsets(make_log):
    lg = make_log()
    info = lg.append_as_leader([make_batch(3), make_batch(2)], leader_epoch=0, now_ms=5)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 4, 5)
    assert info.log_append_time == -1 and info.log_start_offset == 0
    info2 = lg.append_as_leader([make_batch(1)], 0, 6)
    assert (info2.first_offset, info2.last_offset) == (5, 5)
    assert lg.log_end_offset == 6 == lg.high_watermark
    batches = decode(lg.read(0, 1 << 20).chunks)
    assert [b.base_offset for b in batches] == [0, 3, 5]
    assert [r.offset for b in batches for r in b] == list(range(6))
    assert all(b.leader_epoch == 0 for b in batches)


def test_read_returns_containing_batch_and_empty_at_end(make_log):
    lg = make_log()
    lg.append_as_leader([make_batch(3), make_batch(3)], 0, 0)
    assert base_offsets(lg.read(4, 1 << 20).chunks) == [3]
    info = lg.read(6, 1 << 20)
    assert info.chunks == [] and info.size == 0


def test_read_max_bytes_min_one_batch_and_max_offset(make_log):
    lg = make_log()
    batches = [make_batch(2, value_size=100) for _ in range(5)]
    size = len(batches[0])
    lg.append_as_leader(batches, 0, 0)
    info = lg.read(0, int(size * 2.5))
    assert base_offsets(info.chunks) == [0, 2] and info.size == 2 * size
    assert base_offsets(lg.read(0, 10).chunks) == [0]  # KIP-74
    assert lg.read(0, 10, min_one_batch=False).size == 0
    assert base_offsets(lg.read(0, 1 << 20, max_offset=4).chunks) == [0, 2]
    assert base_offsets(lg.read(0, 1 << 20, max_offset=5).chunks) == [0, 2, 4]
    assert lg.read(4, 1 << 20, max_offset=4).size == 0
    assert base_offsets(lg.read(2, 1 << 20).chunks) == [2, 4, 6, 8]


def test_offset_out_of_range(make_log):
    lg = make_log()
    lg.append_as_leader([make_batch(2)], 0, 0)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(-1, 100)


def test_invalid_batch_rejected_atomically(make_log):
    lg = make_log()
    bad = make_batch(1)
    bad[16] = 1  # magic
    with pytest.raises(CorruptRecordError):
        lg.append_as_leader([make_batch(1), bad], 0, 0)
    assert lg.log_end_offset == 0


def test_segment_rolling_and_reads_across_segments(make_log):
    lg = make_log(LogConfig(segment_bytes=1000, index_interval_bytes=100))
    batches = [make_batch(2, value_size=50) for _ in range(40)]
    for i in range(0, 40, 4):
        lg.append_as_leader(batches[i : i + 4], 0, 0)
    assert lg.num_segments > 5
    assert all(s.size <= 1000 for s in lg.segments)
    assert lg.size_in_bytes == sum(len(b) for b in batches)
    assert base_offsets(lg.read(0, 1 << 20).chunks) == list(range(0, 80, 2))
    for off in range(80):
        info = lg.read(off, len(batches[0]))
        assert base_offsets(info.chunks) == [off - off % 2]
    assert base_offsets(lg.read(30, 1 << 20, max_offset=41).chunks) == list(range(30, 42, 2))


def test_segment_ms_roll(make_log):
    lg = make_log(LogConfig(segment_ms=100))
    lg.append_as_leader([make_batch(1, ts=0)], 0, 0)
    lg.append_as_leader([make_batch(1, ts=50)], 0, 50)
    assert lg.num_segments == 1
    lg.append_as_leader([make_batch(1, ts=200)], 0, 200)
    assert lg.num_segments == 2


# -- persistence / recovery ------------------------------------------------------------------


def test_restart_preserves_records_and_offsets(tmp_path):
    cfg = LogConfig(segment_bytes=2000, index_interval_bytes=200)
    mgr = LogManager(tmp_path)
    lg = mgr.get_or_create("orders", 0, cfg)
    mgr.get_or_create("orders", 1, cfg).append_as_leader([make_batch(1)], 0, 0)
    for i in range(30):
        lg.append_as_leader([make_batch(3, ts=1000 + i, value_size=40)], 0, 1000 + i)
    before = b"".join(bytes(c) for c in lg.read(0, 1 << 30).chunks)
    nseg = lg.num_segments
    assert (tmp_path / "orders-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "orders-0" / "00000000000000000000.index").exists()
    assert (tmp_path / "orders-0" / "00000000000000000000.timeindex").exists()
    mgr.close_all()

    mgr2 = LogManager(tmp_path)
    mgr2.load_existing({"orders": cfg})
    lg2 = mgr2.get("orders", 0)
    assert lg2 is not None and mgr2.get("orders", 1).log_end_offset == 1
    assert lg2.log_end_offset == 90 and lg2.num_segments == nseg
    assert b"".join(bytes(c) for c in lg2.read(0, 1 << 30).chunks) == before
    for off in range(0, 90, 7):
        assert base_offsets(lg2.read(off, 1).chunks) == [off - off % 3]
    assert lg2.offset_for_timestamp(1010)[0] == 30
    assert lg2.max_timestamp_and_offset() == (1029, 87)
    assert lg2.append_as_leader([make_batch(1)], 0, 0).first_offset == 90
    mgr2.close_all()


def _reopen(tmp_path: Path, cfg: LogConfig | None = None) -> Log:
    mgr = LogManager(tmp_path)
    mgr.load_existing({"t": cfg or LogConfig()})
    lg = mgr.get("t", 0)
    assert lg is not None
    return lg


@pytest.mark.parametrize("garbage", [b"\x00" * 7, b"\xff" * 100, "partial"])
def test_torn_tail_is_truncated(tmp_path, garbage):
    lg = LogManager(tmp_path).get_or_create("t", 0, LogConfig())
    lg.append_as_leader([make_batch(2), make_batch(2), make_batch(2)], 0, 0)
    good_size = lg.size_in_bytes
    lg.close()
    if garbage == "partial":
        partial = make_batch(5)
        struct.pack_into(">q", partial, 0, 6)
        garbage = bytes(partial[: len(partial) - 3])
    with open(tmp_path / "t-0" / "00000000000000000000.log", "ab") as f:
        f.write(garbage)
    lg2 = _reopen(tmp_path)
    assert lg2.log_end_offset == 6 and lg2.size_in_bytes == good_size
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.log") == good_size
    assert lg2.append_as_leader([make_batch(1)], 0, 0).first_offset == 6
    assert base_offsets(lg2.read(0, 1 << 20).chunks) == [0, 2, 4, 6]
    lg2.close()


def test_crc_corrupted_last_batch_truncated(tmp_path):
    lg = LogManager(tmp_path).get_or_create("t", 0, LogConfig())
    lg.append_as_leader([make_batch(2), make_batch(2), make_batch(2, value_size=30)], 0, 0)
    size = lg.size_in_bytes
    lg.close()
    path = tmp_path / "t-0" / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[size - 5] ^= 0xFF
    path.write_bytes(data)
    lg2 = _reopen(tmp_path)
    assert lg2.log_end_offset == 4
    assert base_offsets(lg2.read(0, 1 << 20).chunks) == [0, 2]
    assert lg2.append_as_leader([make_batch(1)], 0, 0).first_offset == 4
    lg2.close()


def test_bad_index_of_inactive_segment_is_rebuilt(tmp_path):
    cfg = LogConfig(segment_bytes=500, index_interval_bytes=50)
    lg = LogManager(tmp_path).get_or_create("t", 0, cfg)
    for _ in range(20):
        lg.append_as_leader([make_batch(1, value_size=60)], 0, 0)
    assert lg.num_segments > 3
    lg.close()
    idx = tmp_path / "t-0" / "00000000000000000000.index"
    idx.write_bytes(idx.read_bytes()[:-3])  # not a multiple of the entry size
    (tmp_path / "t-0" / "00000000000000000000.timeindex").unlink()
    lg2 = _reopen(tmp_path, cfg)
    assert lg2.log_end_offset == 20
    for off in range(20):
        assert base_offsets(lg2.read(off, 1).chunks) == [off]
    assert len(idx.read_bytes()) % 8 == 0
    lg2.close()


def test_corrupt_middle_segment_drops_later_segments(tmp_path):
    cfg = LogConfig(segment_bytes=500)
    lg = LogManager(tmp_path).get_or_create("t", 0, cfg)
    for _ in range(20):
        lg.append_as_leader([make_batch(1, value_size=60)], 0, 0)
    second = lg.segments[1]
    lg.close()
    d = tmp_path / "t-0"
    (d / f"{second.base_offset:020d}.index").write_bytes(b"\x00" * 5)
    logp = d / f"{second.base_offset:020d}.log"
    data = bytearray(logp.read_bytes())
    data[-5] ^= 0xFF
    logp.write_bytes(data)
    lg2 = _reopen(tmp_path, cfg)
    assert lg2.num_segments == 2
    assert lg2.log_end_offset == second.next_offset - 1
    lg2.close()


# -- retention / deletion ----------------------------------------------------------------------


def test_retention_by_bytes(make_log):
    lg = make_log(LogConfig(segment_bytes=1000, retention_bytes=2500, retention_ms=-1))
    for _ in range(40):
        lg.append_as_leader([make_batch(1, value_size=100)], 0, 0)
    n, total = lg.num_segments, lg.size_in_bytes
    deleted = lg.enforce_retention(now_ms=0)
    assert deleted > 0 and lg.num_segments == n - deleted
    assert lg.size_in_bytes <= 2500 + 1000 and lg.size_in_bytes < total
    assert lg.log_start_offset == lg.segments[0].base_offset > 0
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    assert base_offsets(lg.read(lg.log_start_offset, 1).chunks) == [lg.log_start_offset]
    assert lg.enforce_retention(now_ms=0) == 0


def test_retention_by_time_never_deletes_active(make_log):
    lg = make_log(LogConfig(segment_bytes=300, retention_ms=1000))
    for t in range(10):
        lg.append_as_leader([make_batch(1, ts=t * 100, value_size=100)], 0, t * 100)
    n = lg.num_segments
    assert lg.enforce_retention(now_ms=900) == 0
    deleted = lg.enforce_retention(now_ms=1450)  # segments whose max timestamp < 450
    assert 0 < deleted < n
    assert all(s.largest_timestamp >= 450 for s in lg.segments)
    lg.enforce_retention(now_ms=10**9)
    assert lg.num_segments == 1 and lg.log_end_offset == 10
    assert lg.append_as_leader([make_batch(1)], 0, 0).first_offset == 10


def test_delete_records_before(make_log, mode, tmp_path):
    lg = make_log(LogConfig(segment_bytes=500))
    for _ in range(20):
        lg.append_as_leader([make_batch(2, value_size=50)], 0, 0)
    n = lg.num_segments
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(41)
    assert lg.delete_records_before(13) == 13
    assert lg.log_start_offset == 13 and lg.num_segments < n
    assert lg.segments[0].base_offset <= 13
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(12, 100)
    assert base_offsets(lg.read(13, 1).chunks) == [12]
    assert lg.delete_records_before(5) == 13
    lg.high_watermark = 30
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(31)
    if mode == "disk":
        lg.close()
        lg2 = _reopen(tmp_path)
        assert lg2.log_start_offset == 13 and lg2.log_end_offset == 40
        lg2.close()


def test_delete_records_to_end_frees_active_segment(make_log):
    lg = make_log()
    lg.append_as_leader([make_batch(3)], 0, 0)
    assert lg.delete_records_before(-1) == 3
    assert lg.size_in_bytes == 0 and lg.log_end_offset == 3
    assert lg.read(3, 100).size == 0
    assert lg.append_as_leader([make_batch(1)], 0, 0).first_offset == 3


def test_log_manager_delete_topic(tmp_path):
    mgr = LogManager(tmp_path)
    mgr.get_or_create("a", 0, LogConfig()).append_as_leader([make_batch(1)], 0, 0)
    mgr.get_or_create("a", 1, LogConfig())
    mgr.get_or_create("b", 0, LogConfig())
    mgr.delete_topic("a")
    assert mgr.get("a", 0) is None and sorted(p.name for p in tmp_path.iterdir()) == ["b-0"]
    mgr.close_all()


def test_in_memory_manager():
    mgr = LogManager(None)
    lg = mgr.get_or_create("a", 0, LogConfig())
    assert mgr.get_or_create("a", 0, LogConfig()) is lg
    lg.append_as_leader([make_batch(1)], 0, 0)
    mgr.load_existing({})
    mgr.enforce_retention(0)
    mgr.close_all()


# -- timestamps / epochs ------------------------------------------------------------------------


def test_offset_for_timestamp(make_log):
    lg = make_log(LogConfig(segment_bytes=400, index_interval_bytes=60))
    lg.append_as_leader([make_batch(3, ts=[100, 150, 120])], 0, 0)  # offsets 0-2
    lg.append_as_leader([make_batch(2, ts=[200, 300])], 1, 0)  # offsets 3-4
    for i in range(10):
        lg.append_as_leader([make_batch(1, ts=400 + 10 * i, value_size=60)], 1, 0)  # 5..14
    assert lg.num_segments > 1
    assert lg.offset_for_timestamp(0) == (0, 100, 0)
    assert lg.offset_for_timestamp(101) == (1, 150, 0)
    assert lg.offset_for_timestamp(150) == (1, 150, 0)
    assert lg.offset_for_timestamp(151) == (3, 200, 1)
    assert lg.offset_for_timestamp(250) == (4, 300, 1)
    assert lg.offset_for_timestamp(455) == (11, 460, 1)
    assert lg.offset_for_timestamp(490) == (14, 490, 1)
    assert lg.offset_for_timestamp(491) is None
    assert lg.max_timestamp_and_offset() == (490, 14)


def test_offset_for_timestamp_compressed_batch(make_log):
    lg = make_log()
    lg.append_as_leader([make_batch(4, ts=[10, 20, 30, 40], codec=1)], 0, 0)  # gzip
    assert lg.offset_for_timestamp(25) == (2, 30, 0)
    assert lg.max_timestamp_and_offset() == (40, 3)


def test_max_timestamp_and_offset_empty(make_log):
    assert make_log().max_timestamp_and_offset() == (-1, -1)


def test_log_append_time(make_log):
    lg = make_log(LogConfig(message_timestamp_type="LogAppendTime"))
    info = lg.append_as_leader([make_batch(2, ts=5), make_batch(1, ts=6)], 3, now_ms=123456)
    assert info.log_append_time == 123456 and info.max_timestamp == 123456
    batches = decode(lg.read(0, 1 << 20).chunks)
    for b in batches:
        assert b.max_timestamp == 123456 and b.timestamp_type == 1
        assert all(r.timestamp == 123456 for r in b)
    assert lg.offset_for_timestamp(100) == (0, 123456, 3)


def test_end_offset_for_epoch(make_log, mode, tmp_path):
    lg = make_log()
    assert lg.latest_epoch() == -1 and lg.end_offset_for_epoch(0) == (-1, -1)
    lg.append_as_leader([make_batch(2)], 1, 0)  # epoch 1: 0..1
    lg.append_as_leader([make_batch(3)], 1, 0)  # 2..4
    lg.append_as_leader([make_batch(2)], 3, 0)  # epoch 3: 5..6
    lg.append_as_leader([make_batch(1)], 5, 0)  # epoch 5: 7
    assert lg.latest_epoch() == 5
    assert lg.end_offset_for_epoch(5) == (5, 8)
    assert lg.end_offset_for_epoch(1) == (1, 5)
    assert lg.end_offset_for_epoch(2) == (1, 5)
    assert lg.end_offset_for_epoch(3) == (3, 7)
    assert lg.end_offset_for_epoch(4) == (3, 7)
    assert lg.end_offset_for_epoch(0) == (0, 0)
    assert lg.end_offset_for_epoch(6) == (-1, -1)
    assert lg.end_offset_for_epoch(-1) == (-1, -1)
    assert [b.leader_epoch for b in decode(lg.read(0, 1 << 20).chunks)] == [1, 1, 3, 5]
    if mode == "disk":
        lg.close()
        assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 5\n5 7\n"
        lg2 = _reopen(tmp_path)
        assert lg2.end_offset_for_epoch(3) == (3, 7) and lg2.latest_epoch() == 5
        lg2.close()


def test_epoch_cache_rebuilt_from_log_when_checkpoint_missing(tmp_path):
    lg = LogManager(tmp_path).get_or_create("t", 0, LogConfig())
    lg.append_as_leader([make_batch(2)], 2, 0)
    lg.append_as_leader([make_batch(2)], 4, 0)
    lg.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").unlink()
    lg2 = _reopen(tmp_path)
    assert lg2.end_offset_for_epoch(2) == (2, 2) and lg2.latest_epoch() == 4
    lg2.close()


# -- replication hooks ---------------------------------------------------------------------------


def test_truncate_to_and_follower_append(make_log):
    cfg = LogConfig(segment_bytes=400)
    leader = make_log(cfg, name="leader")
    for e in (0, 0, 1, 1, 2, 2):
        leader.append_as_leader([make_batch(2, value_size=80)], e, 0)
    follower = make_log(cfg, name="follower")
    follower.high_watermark = 0
    data = b"".join(bytes(c) for c in leader.read(0, 1 << 20).chunks)
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset, info.num_records) == (0, 11, 12)
    assert follower.log_end_offset == 12 and follower.latest_epoch() == 2
    assert follower.end_offset_for_epoch(1) == (1, 8)
    assert b"".join(bytes(c) for c in follower.read(0, 1 << 20).chunks) == data
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(leader.read(2, 1).chunks[0])  # offsets going backwards
    follower.truncate_to(6)
    assert follower.log_end_offset == 6 and follower.latest_epoch() == 1
    assert follower.end_offset_for_epoch(1) == (1, 6)
    assert base_offsets(follower.read(0, 1 << 20).chunks) == [0, 2, 4]
    follower.append_as_follower(b"".join(bytes(c) for c in leader.read(6, 1 << 20).chunks))
    assert b"".join(bytes(c) for c in follower.read(0, 1 << 20).chunks) == data
    follower.truncate_to(0)
    assert follower.log_end_offset == 0 and follower.size_in_bytes == 0


@pytest.mark.parametrize("read_piece", [None, 700])
def test_randomised_against_model(make_log, monkeypatch, read_piece):
    if read_piece:  # force multi-piece file reads, batches straddling pieces
        monkeypatch.setattr("minikafka.broker.log.segment._READ_PIECE", read_piece)
    rng = random.Random(7)
    lg = make_log(LogConfig(segment_bytes=3000, index_interval_bytes=250))
    model: list[tuple[int, int, int]] = []  # (base, last, size)
    for _ in range(150):
        n = rng.randint(1, 5)
        b = make_batch(n, value_size=rng.randint(0, 300))
        info = lg.append_as_leader([b], 0, 0)
        model.append((info.first_offset, info.last_offset, len(b)))
    leo = model[-1][1] + 1
    for _ in range(300):
        off = rng.randrange(leo + 1)
        max_bytes = rng.randint(1, 5000)
        max_off = rng.choice([None, rng.randrange(leo + 1)])
        got = lg.read(off, max_bytes, max_offset=max_off)
        exp, total = [], 0
        for base, last, size in model:
            if last < off:
                continue
            if max_off is not None and base >= max_off:
                break
            if exp and total + size > max_bytes:
                break
            if not exp and size > max_bytes:
                exp.append(base)
                total += size
                break
            exp.append(base)
            total += size
        if off == leo:
            exp = []
        got_bases = base_offsets(got.chunks)
        assert got_bases == exp
        assert got.size == sum(s for b, _, s in model if b in got_bases)


def test_high_watermark_checkpoint_without_auto_advance(tmp_path):
    lg = Log("t", 0, LogConfig(), tmp_path / "t-0", auto_advance_hw=False)
    lg.append_as_leader([make_batch(2), make_batch(2)], 0, 0)
    assert lg.high_watermark == 0 and lg.log_end_offset == 4
    assert lg.read(0, 1 << 20, max_offset=lg.high_watermark).size == 0
    lg.high_watermark = 2
    assert base_offsets(lg.read(0, 1 << 20, max_offset=lg.high_watermark).chunks) == [0]
    lg.high_watermark = 99
    assert lg.high_watermark == 4
    lg.high_watermark = 2
    lg.close()
    lg2 = Log("t", 0, LogConfig(), tmp_path / "t-0", auto_advance_hw=False)
    assert lg2.high_watermark == 2 and lg2.log_end_offset == 4
    lg2.close()


def test_large_batches_read_back_byte_identical(make_log, mode):
    """Batches of 64 KiB and more (an in-memory log copies them into populated regions, .arena) read back
    byte for byte, across regions, rolls, truncation and appends after it; the caller's buffer is not kept
    (changing it afterwards changes nothing stored), and reads taken before the segments go stay intact."""
    from minikafka.broker.log.arena import MIN_ARENA_BATCH

    lg = make_log(LogConfig(segment_bytes=2 << 20))
    sizes = [100, MIN_ARENA_BATCH, 200_000, 700_000, 50, 1_500_000, 300_000, 90_000, 2_000_000, 80_000]
    stored: list[bytes] = []
    for i, size in enumerate(sizes):
        batch = make_batch(2, value_size=size // 2)
        lg.append_as_leader([batch], 0, i)
        stored.append(bytes(batch))  # as the log stored it: offsets and epoch assigned in place
        if mode == "disk" or len(batch) >= MIN_ARENA_BATCH:  # (small ones are kept as given in memory)
            batch[-1] ^= 0xFF  # the producer's buffer reused: the stored copy must not change
    assert lg.num_segments > 2
    assert b"".join(bytes(c) for c in lg.read(0, 1 << 30).chunks) == b"".join(stored)
    held = lg.read(0, 1 << 30).chunks
    lg.truncate_to(12)  # drops the batches from offset 12 on (the 7th on)
    assert lg.log_end_offset == 12
    again = make_batch(2, value_size=400_000)
    lg.append_as_leader([again], 0, 20)
    assert b"".join(bytes(c) for c in lg.read(0, 1 << 30).chunks) == b"".join(stored[:6]) + bytes(again)
    lg.delete_records_before(lg.log_end_offset)
    lg.enforce_retention(1 << 40)
    assert b"".join(bytes(c) for c in held) == b"".join(stored)
