"""Tests for minikafka.protocol.records (record batch format v2)."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.protocol.compression import decompress
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import (
    BATCH_HEADER,
    BATCH_HEADER_CONSTRUCT,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    LOG_APPEND_TIME,
    ConsumerRecord,
    ControlRecordType,
    CorruptRecordError,
    InvalidRecordError,
    Record,
    RecordBatchHeader,
    assign_offsets,
    build_batch,
    build_control_batch,
    decode_control_key,
    decode_raw_records,
    decode_records,
    encode_records,
    iter_batches,
    read_header,
    recover_batches,
    validate_batch,
)
from minikafka.common.clock import SYSTEM_CLOCK

CODECS = [0, 1, 2, 3, 4]
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

SAMPLE = [
    Record(0, 0, b"key-0", b"value-0" * 20, [("h1", b"v1"), ("h2", None)]),
    Record(1, 5, None, b"null key " * 20),
    Record(2, -3, b"null value", None, [("\u00fcnicode-h\u00e9ader", b"")]),
    Record(3, 1000, b"", b"", []),
    Record(4, 7, None, None, [("a", b"x" * 300)] * 3),
    Record(5, 2**40, b"k" * 200, bytes(range(256)) * 4),
]


def _recompute_crc(buf: bytearray) -> None:
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[21:])))


# ---------------------------------------------------------------- header


def test_header_struct_and_construct_agree():
    assert BATCH_HEADER.size == BATCH_HEADER_SIZE == BATCH_HEADER_CONSTRUCT.sizeof() == 61
    b = build_batch(SAMPLE, base_offset=77, compression=1, producer_id=9, producer_epoch=2,
                    base_sequence=40, is_transactional=True, partition_leader_epoch=3,
                    base_timestamp=1_700_000_000_000)
    h = read_header(b)
    parsed = BATCH_HEADER_CONSTRUCT.parse(b[:61])
    assert tuple(parsed[name] for name in RecordBatchHeader._fields) == tuple(h)
    assert BATCH_HEADER_CONSTRUCT.build(dict(h._asdict())) == b[:61] == BATCH_HEADER.pack(*h)


@given(st.binary(min_size=61, max_size=61))
@settings(max_examples=200)
def test_header_struct_and_construct_agree_on_any_bytes(raw):
    parsed = BATCH_HEADER_CONSTRUCT.parse(raw)
    assert tuple(parsed[name] for name in RecordBatchHeader._fields) == BATCH_HEADER.unpack(raw)


def test_header_properties():
    b = build_batch(SAMPLE, base_offset=100, compression=3, producer_id=1234, producer_epoch=5,
                    base_sequence=10, is_transactional=True, partition_leader_epoch=7,
                    base_timestamp=1000)
    h = validate_batch(b)
    assert h.magic == 2
    assert h.compression == 3
    assert h.timestamp_type == 0
    assert h.is_transactional and not h.is_control and not h.has_delete_horizon
    assert h.record_count == 6 and h.last_offset_delta == 5
    assert h.last_offset == 105 and h.next_offset == 106
    assert h.size == len(b) == h.batch_length + 12
    assert h.base_timestamp == 1000 and h.max_timestamp == 1000 + 2**40
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (1234, 5, 10)
    assert h.has_producer_id and h.last_sequence == 15
    assert h.partition_leader_epoch == 7
    # sequence wrap-around at int32 max (DefaultRecordBatch.incrementSequence)
    assert h._replace(base_sequence=2**31 - 2).last_sequence == 3
    assert h._replace(base_sequence=-1).last_sequence == -1
    plain = validate_batch(build_batch([Record()], base_timestamp=0))
    assert not plain.has_producer_id and not plain.is_transactional
    assert plain.producer_epoch == -1 and plain.base_sequence == -1


def test_errors_map_to_corrupt_message():
    assert issubclass(InvalidRecordError, CorruptRecordError)
    assert CorruptRecordError.error_code == InvalidRecordError.error_code == ErrorCode.CORRUPT_MESSAGE == 2


# ---------------------------------------------------------------- encode/decode


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_NAMES.get)
def test_build_decode_round_trip_each_codec(codec):
    b = build_batch(SAMPLE, base_offset=50, compression=codec, base_timestamp=10_000,
                    partition_leader_epoch=4)
    h = validate_batch(b)
    assert h.compression == codec
    out = decode_records(b)
    assert [type(r) for r in out] == [ConsumerRecord] * len(SAMPLE)
    assert [(r.key, r.value, r.headers) for r in out] == [(s.key, s.value, s.headers) for s in SAMPLE]
    assert [r.offset for r in out] == [50 + s.offset_delta for s in SAMPLE]
    assert [r.timestamp for r in out] == [10_000 + s.timestamp_delta for s in SAMPLE]
    assert {r.timestamp_type for r in out} == {0}
    assert {r.leader_epoch for r in out} == {4}
    assert out[1].key is None and out[2].value is None and out[0].headers[1] == ("h2", None)
    assert out[3].key == b"" and out[3].value == b""
    payload = b[61:] if codec == 0 else None
    if payload is not None:
        assert decode_raw_records(payload, len(SAMPLE)) == SAMPLE


headers_st = st.lists(st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3)
record_st = st.builds(
    Record,
    offset_delta=st.integers(0, 2**31 - 1),
    timestamp_delta=st.integers(-(2**40), 2**40),
    key=st.none() | st.binary(max_size=200),
    value=st.none() | st.binary(max_size=500),
    headers=headers_st,
)


@given(records=st.lists(record_st, max_size=20), codec=st.sampled_from(CODECS),
       base_ts=st.integers(0, 2**42))
@settings(max_examples=150, deadline=None)
def test_round_trip_property(records, codec, base_ts):
    b = build_batch(records, compression=codec, base_timestamp=base_ts)
    h = validate_batch(b)
    assert h.record_count == len(records)
    raw = decode_raw_records(decompress(codec, b[61:]), len(records))
    assert raw == records
    out = decode_records(b)
    assert [(r.offset, r.timestamp) for r in out] == [
        (s.offset_delta, base_ts + s.timestamp_delta) for s in records]


def test_empty_batch():
    b = build_batch([], base_offset=10, base_timestamp=5)
    h = validate_batch(b)
    assert h.record_count == 0 and h.next_offset == 10 and len(b) == 61
    assert decode_records(b) == []
    with pytest.raises(InvalidRecordError):
        validate_batch(b, produce=True)


def test_record_attributes_preserved():
    rec = Record(0, 0, b"k", b"v", [], attributes=0)
    assert decode_raw_records(encode_records([rec]), 1) == [rec]


def test_large_varints():
    rec = Record(2**31 - 1, -(2**62), b"k" * 70000, b"v" * 200000, [("h" * 300, b"x" * 20000)])
    assert decode_raw_records(encode_records([rec]), 1) == [rec]


def test_decode_raw_records_framing_errors():
    data = encode_records(SAMPLE[:2])
    with pytest.raises(InvalidRecordError):
        decode_raw_records(data, 3)  # count larger than data
    with pytest.raises(InvalidRecordError):
        decode_raw_records(data, 1)  # trailing bytes
    with pytest.raises(InvalidRecordError):
        decode_raw_records(data[:-1], 2)  # truncated
    bad = bytearray(encode_records([Record(0, 0, b"abc", b"d")]))
    bad[0] += 2  # record length (zig-zag) one larger than its fields
    with pytest.raises(InvalidRecordError):
        decode_raw_records(bytes(bad) + b"\x00", 1)
    neg_key = bytes([10, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0])  # key length -2
    with pytest.raises(InvalidRecordError):
        decode_raw_records(neg_key, 1)


def test_timestamp_type_flag_in_build():
    b = build_batch(SAMPLE, timestamp_type=LOG_APPEND_TIME, base_timestamp=100)
    h = validate_batch(b)
    assert h.timestamp_type == 1
    assert {r.timestamp for r in decode_records(b)} == {h.max_timestamp}


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_NAMES.get)
def test_crc_catches_flipped_byte(codec):
    b = build_batch(SAMPLE, compression=codec, base_timestamp=1)
    validate_batch(b)
    for pos in sorted({21, 22, 30, 45, 57, 61, len(b) // 2, len(b) - 1}):
        bad = bytearray(b)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecordError) as ei:
            validate_batch(bad)
        if pos != 22:  # low attributes byte: codec 4 -> 5 is caught structurally first
            assert type(ei.value) is CorruptRecordError and "corrupt" in str(ei.value)
        with pytest.raises(CorruptRecordError):
            list(iter_batches(bad))
        with pytest.raises(CorruptRecordError):
            decode_records(bad)
        if pos >= 61:  # the records area is only protected by the CRC
            validate_batch(bad, check_crc=False)
    crc_flip = bytearray(b)
    crc_flip[CRC_OFFSET + 3] ^= 0x80
    with pytest.raises(CorruptRecordError):
        validate_batch(crc_flip)


def test_bytes_outside_crc_do_not_invalidate():
    b = bytearray(build_batch(SAMPLE, base_timestamp=SYSTEM_CLOCK.time_ms()))
    original = read_header(b)
    for pos in (0, 7, 12, 15):  # baseOffset / partitionLeaderEpoch
        b[pos] ^= 0xFF
    header = validate_batch(b)  # still valid: the CRC covers the bytes from attributes on
    base_offset, leader_epoch = struct.unpack_from(">q", b, 0)[0], struct.unpack_from(">i", b, 12)[0]
    assert base_offset != original.base_offset and leader_epoch != original.partition_leader_epoch
    assert header == original._replace(base_offset=base_offset, partition_leader_epoch=leader_epoch)
    records = decode_records(b)
    assert [r.offset for r in records] == [base_offset + r.offset_delta for r in SAMPLE]
    assert [(r.key, r.value, r.headers) for r in records] == [(r.key, r.value, r.headers) for r in SAMPLE]
    assert {r.leader_epoch for r in records} == {leader_epoch}


def _with(b: bytes, offset: int, fmt: str, value: int, fix_crc: bool = True) -> bytearray:
    buf = bytearray(b)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        _recompute_crc(buf)
    return buf


def test_structural_errors():
    b = build_batch(SAMPLE, base_timestamp=SYSTEM_CLOCK.time_ms())
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_batch(_with(b, 16, ">b", 1))
    with pytest.raises(InvalidRecordError, match="magic"):
        list(iter_batches(_with(b, 16, ">b", 0)))
    with pytest.raises(InvalidRecordError):
        validate_batch(b[:60])
    with pytest.raises(InvalidRecordError):
        validate_batch(b[:-1])
    with pytest.raises(InvalidRecordError):
        validate_batch(b + b"\x00")
    with pytest.raises(InvalidRecordError, match="too small"):
        list(iter_batches(_with(b, 8, ">i", 48, fix_crc=False)))
    with pytest.raises(InvalidRecordError, match="compression"):
        validate_batch(_with(b, 21, ">h", 5))
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batch(_with(b, 57, ">i", -1))
    # LogValidator: recordCount must equal lastOffsetDelta + 1 for produce
    mismatch = _with(b, 23, ">i", 9)
    assert validate_batch(mismatch).last_offset_delta == 9
    with pytest.raises(InvalidRecordError):
        validate_batch(mismatch, produce=True)
    with pytest.raises(InvalidRecordError):
        list(iter_batches(mismatch, produce=True))
    validate_batch(b, produce=True)


def test_undecompressable_payload_is_corrupt():
    b = build_batch(SAMPLE, compression=4, base_timestamp=SYSTEM_CLOCK.time_ms())
    bad = bytearray(b[:61]) + bytearray(b"not zstd at all" * 3)
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    _recompute_crc(bad)
    validate_batch(bad)  # header + CRC fine; records undecodable
    with pytest.raises(CorruptRecordError, match="decompress"):
        decode_records(bad)


# ---------------------------------------------------------------- assign_offsets


def test_assign_offsets_keeps_crc_valid():
    b = build_batch(SAMPLE, compression=2, base_timestamp=500)
    buf = bytearray(b)
    crc_before = read_header(buf).crc
    nxt = assign_offsets(buf, 1_000_000, 42)
    assert nxt == 1_000_006
    h = validate_batch(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (1_000_000, 42, crc_before)
    assert buf[21:] == b[21:]  # nothing inside the CRC changed
    out = decode_records(buf)
    assert [r.offset for r in out] == list(range(1_000_000, 1_000_006))
    assert [r.timestamp for r in out] == [500 + s.timestamp_delta for s in SAMPLE]


def test_assign_offsets_log_append_time_recomputes_crc():
    b = build_batch(SAMPLE, compression=1, base_timestamp=500)
    buf = bytearray(b)
    assert assign_offsets(buf, 7, 1, log_append_time=99_999) == 13
    h = validate_batch(buf)
    assert h.timestamp_type == LOG_APPEND_TIME and h.compression == 1
    assert h.max_timestamp == 99_999 and h.base_timestamp == 500
    assert h.crc != read_header(b).crc
    assert {(r.timestamp, r.timestamp_type) for r in decode_records(buf)} == {(99_999, 1)}
    # idempotent: same append time leaves the bytes alone
    snapshot = bytes(buf)
    assign_offsets(buf, 7, 1, log_append_time=99_999)
    assert bytes(buf) == snapshot
    assign_offsets(buf, 7, 1, log_append_time=100_000)
    assert validate_batch(buf).max_timestamp == 100_000


def test_assign_offsets_in_place_through_iter_batches_views():
    batches = [build_batch(SAMPLE[:n], base_timestamp=1) for n in (1, 3, 6)]
    log = bytearray(b"".join(batches))
    offset = 10
    for _h, view in iter_batches(log):
        offset = assign_offsets(view, offset, 2, log_append_time=5)
    assert offset == 20
    hs = [h for h, _ in iter_batches(log)]
    assert [h.base_offset for h in hs] == [10, 11, 14]
    assert {(h.partition_leader_epoch, h.max_timestamp, h.timestamp_type) for h in hs} == {(2, 5, 1)}


def test_assign_offsets_needs_writable_buffer():
    with pytest.raises(TypeError):
        assign_offsets(build_batch(SAMPLE, base_timestamp=SYSTEM_CLOCK.time_ms()), 0, 0)


# ---------------------------------------------------------------- iteration / recovery


def _three_batches() -> list[bytes]:
    return [
        build_batch(SAMPLE[:2], base_offset=0, compression=0, base_timestamp=1),
        build_batch(SAMPLE, base_offset=2, compression=4, base_timestamp=2),
        build_batch(SAMPLE[3:], base_offset=8, compression=2, base_timestamp=3),
    ]


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_iter_batches_concatenated(kind):
    batches = _three_batches()
    got = list(iter_batches(kind(b"".join(batches))))
    assert [bytes(v) for _, v in got] == batches
    assert [h.base_offset for h, _ in got] == [0, 2, 8]
    assert [h.compression for h, _ in got] == [0, 4, 2]
    assert all(isinstance(v, memoryview) for _, v in got)
    assert [len(decode_records(v)) for _, v in got] == [2, 6, 3]
    assert list(iter_batches(b"")) == []


def test_iter_batches_truncated_tail():
    batches = _three_batches()
    whole = b"".join(batches)
    prefix = len(batches[0]) + len(batches[1])
    for cut in (prefix + 1, prefix + 11, prefix + 12, prefix + 17, prefix + 61, len(whole) - 1):
        with pytest.raises(InvalidRecordError, match="truncated"):
            list(iter_batches(whole[:cut]))
        got = list(iter_batches(whole[:cut], allow_truncated_tail=True))
        assert [bytes(v) for _, v in got] == batches[:2]


def test_recover_batches_torn_tail_every_cut_point():
    batches = _three_batches()
    whole = b"".join(batches)
    ends = [len(batches[0]), len(batches[0]) + len(batches[1]), len(whole)]
    res = recover_batches(whole)
    assert res.error is None and res.valid_bytes == len(whole)
    assert [p for p, _ in res.batches] == [0, ends[0], ends[1]]
    assert [h.base_offset for _, h in res.batches] == [0, 2, 8]
    for cut in range(len(whole)):
        res = recover_batches(whole[:cut])
        expected = max([0] + [e for e in ends if e <= cut])
        assert res.valid_bytes == expected, cut
        assert len(res.batches) == sum(e <= cut for e in ends)
        assert (res.error is None) == (cut == expected)


def test_recover_batches_stops_at_corrupt_batch():
    batches = _three_batches()
    log = bytearray(b"".join(batches))
    log[len(batches[0]) + 70] ^= 0x10  # inside batch 2's records
    res = recover_batches(log)
    assert res.valid_bytes == len(batches[0]) and len(res.batches) == 1
    assert isinstance(res.error, CorruptRecordError)
    # garbage (e.g. zero-filled preallocated tail) after valid data
    res = recover_batches(b"".join(batches) + b"\x00" * 100)
    assert res.valid_bytes == sum(map(len, batches)) and isinstance(res.error, InvalidRecordError)
    assert recover_batches(log, check_crc=False).valid_bytes == len(log)


# ---------------------------------------------------------------- control batches


def test_control_batch():
    b = build_control_batch(ControlRecordType.COMMIT, producer_id=77, producer_epoch=3,
                            coordinator_epoch=9, base_offset=40, timestamp=123)
    h = validate_batch(b)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_offset, h.record_count) == (77, 3, 40, 1)
    (rec,) = decode_records(b)
    assert decode_control_key(rec.key) == (0, ControlRecordType.COMMIT)
    assert rec.value == struct.pack(">hi", 0, 9) and rec.timestamp == 123
    abort = build_control_batch(ControlRecordType.ABORT, producer_id=1, producer_epoch=0,
                                timestamp=SYSTEM_CLOCK.time_ms())
    assert decode_control_key(decode_records(abort)[0].key)[1] == ControlRecordType.ABORT
    with pytest.raises(InvalidRecordError):
        decode_control_key(b"\x00")


def test_control_and_transactional_bits_in_build():
    h = validate_batch(build_batch([Record()], is_control=True, base_timestamp=SYSTEM_CLOCK.time_ms()))
    assert h.is_control and not h.is_transactional
    h = validate_batch(build_batch([Record()], is_transactional=True, producer_id=5,
                                   producer_epoch=0, base_sequence=0, base_timestamp=SYSTEM_CLOCK.time_ms()))
    assert h.is_transactional and not h.is_control


# ---------------------------------------------------------------- real clients

# Imported lazily so a missing client only skips its own tests, not the module.
KP_LIB = {2: "python-snappy", 3: "lz4", 4: "zstandard"}


@pytest.fixture
def kp_records():
    return pytest.importorskip("kafka.record.default_records")


@pytest.fixture
def ak_records():
    return pytest.importorskip("aiokafka.record.default_records")

# Compressible values so the clients' builders do not fall back to no compression.
CLIENT_RECORDS = [
    (i, 1_700_000_000_000 + i * 7, None if i % 4 == 0 else b"key-%d" % i,
     None if i % 5 == 3 else b"value %d " % i * 40,
     [] if i % 3 else [("trace", b"abc"), ("nul", None)])
    for i in range(25)
]


def _need_kp(codec: int) -> None:
    kp_codec = pytest.importorskip("kafka.codec")
    has = {0: lambda: True, 1: kp_codec.has_gzip, 2: kp_codec.has_snappy,
           3: kp_codec.has_lz4, 4: kp_codec.has_zstd}
    if not has[codec]():
        pytest.skip(f"kafka-python has no {CODEC_NAMES[codec]} codec: the optional "
                    f"{KP_LIB[codec]} module is not installed (not installing extras)")


def _our_batch(codec: int) -> bytes:
    base = CLIENT_RECORDS[0][1]
    return build_batch([Record(o, ts - base, k, v, list(h)) for o, ts, k, v, h in CLIENT_RECORDS],
                       compression=codec, base_timestamp=base, base_offset=300,
                       partition_leader_epoch=0)


def _check_ours_decoded(out: list) -> None:
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers])
            for r in out] == [(300 + o, ts, k, v, h) for o, ts, k, v, h in CLIENT_RECORDS]


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_NAMES.get)
def test_kafka_python_batches_decoded_by_us(codec, kp_records):
    _need_kp(codec)
    builder = kp_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for o, ts, k, v, h in CLIENT_RECORDS:
        assert builder.append(o, timestamp=ts, key=k, value=v, headers=h) is not None
    raw = bytes(builder.build())
    h = validate_batch(raw, produce=True)
    assert h.compression == codec
    out = decode_records(raw)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == CLIENT_RECORDS


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_NAMES.get)
def test_our_batches_decoded_by_kafka_python(codec, kp_records):
    _need_kp(codec)
    ours = _our_batch(codec)
    batch = kp_records.DefaultRecordBatch(ours)
    assert batch.validate_crc()
    assert batch.compression_type == codec and batch.next_offset == 325
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == [(300 + o, ts, k, v, h) for o, ts, k, v, h in CLIENT_RECORDS]


def test_uncompressed_bytes_identical_to_kafka_python(kp_records):
    builder = kp_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=True,
        producer_id=55, producer_epoch=1, base_sequence=17, batch_size=1 << 20)
    for o, ts, k, v, h in CLIENT_RECORDS:
        builder.append(o, timestamp=ts, key=k, value=v, headers=h)
    base = CLIENT_RECORDS[0][1]
    ours = build_batch([Record(o, ts - base, k, v, list(h)) for o, ts, k, v, h in CLIENT_RECORDS],
                       base_timestamp=base, partition_leader_epoch=0, producer_id=55,
                       producer_epoch=1, base_sequence=17, is_transactional=True)
    assert ours == bytes(builder.build())


def test_kafka_python_reads_log_append_time_and_control_batches(kp_records):
    buf = bytearray(_our_batch(1))
    assign_offsets(buf, 1000, 5, log_append_time=1_800_000_000_000)
    batch = kp_records.DefaultRecordBatch(bytes(buf))
    assert batch.validate_crc() and batch.timestamp_type == 1
    assert {r.timestamp for r in batch} == {1_800_000_000_000}
    ctrl = kp_records.DefaultRecordBatch(build_control_batch(
        ControlRecordType.COMMIT, producer_id=3, producer_epoch=0, coordinator_epoch=2,
        timestamp=SYSTEM_CLOCK.time_ms()))
    assert ctrl.validate_crc() and ctrl.is_control_batch and ctrl.is_transactional
    (marker,) = list(ctrl)
    assert marker.commit and not marker.abort


def test_kafka_python_memory_records_over_our_concatenation():
    mr_mod = pytest.importorskip("kafka.record.memory_records")
    batches = _three_batches()
    mr = mr_mod.MemoryRecords(b"".join(batches))
    seen = []
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        seen.append(batch.base_offset)
    assert seen == [0, 2, 8]


# aiokafka ships a Cython record implementation and cramjam-backed codecs:
# an independent encoder/decoder for every codec (kafka-python lacks 3 of them here).


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_NAMES.get)
def test_aiokafka_batches_decoded_by_us(codec, ak_records):
    builder = ak_records.DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, 1 << 20)
    for o, ts, k, v, h in CLIENT_RECORDS:
        assert builder.append(o, ts, k, v, h) is not None
    raw = bytes(builder.build())
    h = validate_batch(raw, produce=True)
    assert h.compression == codec
    out = decode_records(raw)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == CLIENT_RECORDS


@pytest.mark.parametrize("codec", CODECS, ids=CODEC_NAMES.get)
def test_our_batches_decoded_by_aiokafka(codec, ak_records):
    batch = ak_records.DefaultRecordBatch(_our_batch(codec))
    assert batch.validate_crc()
    assert batch.compression_type == codec and batch.next_offset == 325
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers]) for r in batch]
    assert got == [(300 + o, ts, k, v, h) for o, ts, k, v, h in CLIENT_RECORDS]
