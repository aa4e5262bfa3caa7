"""The capture file format: round trip, torn tails, corrupt blocks, rolling, byte-range reads."""

from __future__ import annotations

import dataclasses
import itertools
import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.capture import (
    CaptureRecord,
    ReadStats,
    capture_files,
    read_capture,
    read_file,
)
from minikafka.capture.format import (
    BLOCK_HEADER,
    decode_records,
    encode_block,
    encode_record,
    iter_blocks,
)
from minikafka.capture.writer import CaptureFileWriter

text = st.text(max_size=30)
records = st.builds(
    CaptureRecord,
    receive_ns=st.integers(0, 2**63 - 1), send_ns=st.integers(0, 2**63 - 1), connection_id=text, peer=text,
    broker_id=st.integers(-2**31, 2**31 - 1), principal=text, client_id=st.none() | text,
    api_key=st.integers(-2**15, 2**15 - 1), api_version=st.integers(-2**15, 2**15 - 1),
    correlation_id=st.integers(-2**31, 2**31 - 1), request=st.binary(max_size=200),
    response=st.none() | st.binary(max_size=200), server=text, injected=text, listener=text,
)


def rec(i: int, size: int = 50) -> CaptureRecord:
    return CaptureRecord(1000 + i, 2000 + i, f"0-{i % 3}", "127.0.0.1:5000", 0, "User:ANONYMOUS", "c",
                         3, 12, i, bytes([i % 256]) * size, None if i % 5 == 0 else b"r" * (i % 7))


@given(st.lists(records, max_size=20))
@settings(max_examples=200, deadline=None)
def test_round_trip(rs: list[CaptureRecord]) -> None:
    block = encode_block([encode_record(r) for r in rs])
    got = [r for _off, n, payload in iter_blocks(block) for r in decode_records(payload, n)]
    assert got == rs


def _str16(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    return struct.pack(">h", len(s.encode())) + s.encode()


def _old_record(r: CaptureRecord, trailing: list[str]) -> bytes:
    """A record as writers before the optional trailing fields (``trailing`` = []) or with only
    ``injected`` wrote it, byte by byte from the documented layout."""
    body = (struct.pack(">qqihhi", r.receive_ns, r.send_ns, r.broker_id, r.api_key, r.api_version, r.correlation_id)
            + b"".join(_str16(s) for s in (r.connection_id, r.peer, r.server, r.principal, r.client_id))
            + struct.pack(">I", len(r.request)) + r.request
            + (struct.pack(">i", -1) if r.response is None else struct.pack(">i", len(r.response)) + r.response)
            + b"".join(_str16(s) for s in trailing))
    return struct.pack(">I", len(body)) + body


def test_records_without_the_trailing_fields_still_read() -> None:
    """Captures written before ``injected``/``listener`` existed, or with ``injected`` only, read with
    those fields empty; the new fields are written only when set, so such records encode as before."""
    base = CaptureRecord(1, 2, "0-1", "127.0.0.1:5000", 0, "User:alice", "c", 3, 12, 7, b"req", b"resp",
                         server="127.0.0.1:9092")
    old = [_old_record(base, []), _old_record(base, ["fault-1"])]
    got = decode_records(b"".join(old), 2)
    assert got == [base, dataclasses.replace(base, injected="fault-1")]
    assert encode_record(base) == old[0]
    assert encode_record(dataclasses.replace(base, injected="fault-1")) == old[1]
    # Both trailing fields: a listener without a fault writes an empty "injected" before it.
    with_listener = dataclasses.replace(base, listener="SASL_SSL")
    assert encode_record(with_listener) == _old_record(base, ["", "SASL_SSL"])
    assert decode_records(encode_record(with_listener), 1) == [with_listener]


def write(tmp_path: Path, n: int, per_block: int = 10, **kw) -> CaptureFileWriter:
    w = CaptureFileWriter(tmp_path, 0, **kw)
    for i in range(n):
        w.add(rec(i))
        if (i + 1) % per_block == 0:
            w.flush()
    w.close()
    return w


def test_file_round_trip_and_no_reopen(tmp_path: Path) -> None:
    write(tmp_path, 35)
    assert [r.correlation_id for r in read_capture([tmp_path])] == list(range(35))
    w2 = write(tmp_path, 5)  # a second writer starts a new file, never appends to the old one
    assert [p.name for p in capture_files([tmp_path])] == ["capture-0-000000.mkcap", "capture-0-000001.mkcap"]
    assert w2.files == [tmp_path / "capture-0-000001.mkcap"]
    assert len(list(read_capture([tmp_path]))) == 40


def test_torn_last_block_stops_at_last_complete_block(tmp_path: Path) -> None:
    write(tmp_path, 40)
    path = capture_files([tmp_path])[0]
    data = path.read_bytes()
    offsets = [off for off, _n, _p in iter_blocks(data)]
    assert len(offsets) == 4
    last = offsets[-1]
    for cut in (last + 1, last + 3, last + BLOCK_HEADER.size, last + BLOCK_HEADER.size + 7, len(data) - 1):
        path.write_bytes(data[:cut])
        stats = ReadStats()
        assert [r.correlation_id for r in read_file(path, stats)] == list(range(30))
        assert stats.torn_bytes == cut - last and stats.corrupt_blocks == 0


def test_corrupt_block_is_skipped_others_kept(tmp_path: Path) -> None:
    write(tmp_path, 40)
    path = capture_files([tmp_path])[0]
    data = bytearray(path.read_bytes())
    offsets = [off for off, _n, _p in iter_blocks(bytes(data))]
    data[offsets[1] + BLOCK_HEADER.size + 20] ^= 0xFF  # a payload byte of the second block
    path.write_bytes(data)
    stats = ReadStats()
    got = [r.correlation_id for r in read_file(path, stats)]
    assert got == list(range(10)) + list(range(20, 40))
    assert stats.corrupt_blocks == 1 and stats.blocks == 3
    data[offsets[2]:offsets[2] + 4] = b"XXXX"  # a destroyed block header: resync at the next magic
    path.write_bytes(data)
    stats = ReadStats()
    assert [r.correlation_id for r in read_file(path, stats)] == list(range(10)) + list(range(30, 40))


def test_rolling(tmp_path: Path) -> None:
    write(tmp_path, 100, per_block=5, roll_bytes=2000)
    files = capture_files([tmp_path])
    assert len(files) > 3
    assert all(p.stat().st_size < 2000 + 5 * 200 for p in files)
    assert [r.correlation_id for r in read_capture(files)] == list(range(100))


def test_writer_flushes_full_blocks(tmp_path: Path) -> None:
    w = CaptureFileWriter(tmp_path, 7, block_bytes=500)
    full = [w.add(rec(i)) for i in range(20)]
    assert any(full)
    w.close()
    assert capture_files([tmp_path])[0].name == "capture-7-000000.mkcap"


def test_byte_range_split_reads_every_block_once(tmp_path: Path) -> None:
    write(tmp_path, 97, per_block=7)
    path = capture_files([tmp_path])[0]
    size = path.stat().st_size
    for parts in (2, 3, 5, 11):
        bounds = [size * i // parts for i in range(parts + 1)]
        got = [r.correlation_id for a, b in itertools.pairwise(bounds) for r in read_file(path, start=a, end=b)]
        assert got == list(range(97))


def test_page_cache_dropping_keeps_data(tmp_path: Path, monkeypatch) -> None:
    import minikafka.capture.writer as writer_mod

    monkeypatch.setattr(writer_mod, "DROP_CACHE_BYTES", 1000)
    w = CaptureFileWriter(tmp_path, 0)
    for i in range(60):
        parts = [encode_record(rec(i, size=100))]
        w.write_parts(parts, len(parts[0]), 1)
    w.close()
    assert [r.correlation_id for r in read_capture([tmp_path])] == list(range(60))
