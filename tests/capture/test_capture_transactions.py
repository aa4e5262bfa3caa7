"""Transactional traffic (KIP-98) in captures: record batches by kind, ``capture show --transactions``,
and transactional Produce batches kept as the client sent them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from helpers import damaged_variants
from minikafka.analysis.decode import batch_stats
from minikafka.capture.format import CaptureRecord, encode_block, encode_record
from minikafka.capture.transactions import EMPTY_COUNTS, TransactionSummary, batch_counts
from minikafka.cli import main as cli_main
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import RequestHeader, is_flexible, request_header_version, response_header_bytes
from minikafka.protocol.records import (
    ControlRecordType,
    InvalidRecordError,
    Record,
    build_batch,
    build_control_batch,
    decode_control_key,
    decode_records,
    iter_batches,
)

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def data_batch(base: int, n: int, *, txn: bool = False, pid: int = -1, compression: int = 0) -> bytes:
    return build_batch([Record(offset_delta=i, value=b"r%d" % (base + i)) for i in range(n)], base_offset=base,
                       producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                       is_transactional=txn, compression=compression, base_timestamp=1_000)


def marker(base: int, kind: ControlRecordType, pid: int = 7) -> bytes:
    return build_control_batch(kind, producer_id=pid, producer_epoch=0, base_offset=base, timestamp=1_000)


def _reference(records) -> tuple:
    """batch_counts over iter_batches (no CRC check, truncated tail allowed) and the records' control keys."""
    if records is None:
        return tuple(EMPTY_COUNTS)
    c = {"records": 0, "batches": 0, "first": -1, "last": -1, "cb": 0, "cbat": 0, "crec": 0, "commit": 0,
         "abort": 0, "tb": 0, "tr": 0}
    try:
        for h, view in iter_batches(records, check_crc=False, allow_truncated_tail=True):
            if h.is_control:
                c["cb"] += h.size
                c["cbat"] += 1
                c["crec"] += h.record_count
                try:
                    kinds = [decode_control_key(r.key)[1] for r in decode_records(view, check_crc=False)]
                except Exception:  # noqa: BLE001 - damaged: counted as a control batch without markers
                    kinds = []
                c["commit"] += kinds.count(COMMIT)
                c["abort"] += kinds.count(ABORT)
            else:
                c["records"] += h.record_count
                c["batches"] += 1
                if h.is_transactional:
                    c["tb"] += 1
                    c["tr"] += h.record_count
            if c["first"] < 0:
                c["first"] = h.base_offset
            c["last"] = h.last_offset
    except InvalidRecordError:
        pass
    return (len(records), c["records"], c["batches"], c["first"], c["last"], c["cb"], c["cbat"], c["crec"],
            c["commit"], c["abort"], c["tb"], c["tr"])


def test_batch_counts_match_iter_batches() -> None:
    """Data, transactional and control batches told apart as iter_batches' headers say, on whole, mixed and
    damaged fields; data + control add up to what batch_stats counts."""
    rng = random.Random(5)
    pieces = [data_batch(0, 3, txn=True, pid=7), marker(3, COMMIT), data_batch(4, 2), data_batch(6, 2, txn=True, pid=8,
              compression=1), marker(8, ABORT, 8), data_batch(9, 4, compression=2), marker(13, COMMIT)]
    cases: list = [None, b"", b"\x00" * 10, *pieces, b"".join(pieces)]
    for _ in range(40):
        cases.append(b"".join(rng.sample(pieces, rng.randrange(1, len(pieces) + 1))))
    cases += damaged_variants(rng, cases[3:], 25, [16, 21, 22, 57, 58, 61, 62, 65, 66, 70])
    seen = {"control": 0, "commit": 0, "abort": 0, "txn": 0}
    for c in cases:
        got = batch_counts(c)
        assert tuple(got) == _reference(c)
        if c is not None:
            assert batch_counts(memoryview(c)) == got
        size, records, batches, first, last = batch_stats(c)
        assert (size, records, batches, first, last) == (
            got.size, got.records + got.control_records, got.all_batches, got.first_offset, got.last_offset)
        assert got.data_bytes == got.size - got.control_bytes
        seen["control"] += got.control_batches
        seen["commit"] += got.commit_markers
        seen["abort"] += got.abort_markers
        seen["txn"] += got.transactional_batches
    assert all(seen.values())  # every kind was met
    whole = batch_counts(b"".join(pieces))
    assert (whole.records, whole.batches, whole.control_batches, whole.commit_markers, whole.abort_markers,
            whole.transactional_batches, whole.transactional_records) == (11, 4, 3, 2, 1, 2, 5)
    assert (whole.first_offset, whole.last_offset) == (0, 13)
    assert whole.control_bytes == sum(len(p) for p in pieces if batch_counts(p).control_batches)


# -- capture show --transactions ------------------------------------------------------------------
def _capture_record(t: int, client: str, key: int, version: int, req: dict, resp: dict | None) -> CaptureRecord:
    hv = request_header_version(key, is_flexible(key, version))
    frame = RequestHeader.build({"request_api_key": key, "request_api_version": version, "correlation_id": t,
                                 "client_id": client}, hv) + APIS[key].request.build(req, version)
    response = (None if resp is None
                else response_header_bytes(t, key, version) + APIS[key].response.build(resp, version))
    return CaptureRecord(t * 1_000_000, t * 1_000_000 + 1000, f"0-{client}", "peer", 0, "User:ANONYMOUS", client,
                         key, version, t, frame, response)


def _produce(t: int, tid: str | None, records: bytes) -> CaptureRecord:
    req = {"transactional_id": tid, "acks": -1, "timeout_ms": 1000,
           "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    resp = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
    return _capture_record(t, tid or "plain", 0, 9, req, resp)


def _fetch(t: int, client: str, version: int, isolation: int, replica: int, records: bytes, hw: int, lso: int,
           aborted: list | None) -> CaptureRecord:
    req = {"replica_id": replica, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20,
           "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
           "topics": [{"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                                     "last_fetched_epoch": -1, "log_start_offset": -1,
                                                     "partition_max_bytes": 1 << 20}]}],
           "forgotten_topics_data": [], "rack_id": ""}
    resp = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": hw, "last_stable_offset": lso,
         "log_start_offset": 0, "aborted_transactions": aborted, "preferred_read_replica": -1,
         "records": records}]}]}
    return _capture_record(t, client, 1, version, req, resp)


@pytest.fixture
def txn_capture(tmp_path: Path) -> tuple[Path, list[CaptureRecord]]:
    committed, aborted = data_batch(0, 3, txn=True, pid=7), data_batch(4, 2, txn=True, pid=8)
    recs = [
        _produce(1, "tx-1", committed),
        _produce(2, None, data_batch(3, 1)),
        _produce(3, "tx-2", aborted),
        _produce(4, "tx-1", data_batch(7, 1, txn=True, pid=7)),
        _fetch(5, "rc", 11, 1, -1, committed + marker(3, COMMIT) + aborted + marker(6, ABORT, 8), 8, 7,
               [{"producer_id": 8, "first_offset": 4}]),
        _fetch(6, "ru", 12, 0, -1, marker(3, COMMIT), 8, 8, None),
        _fetch(7, "follower", 11, 0, 1, marker(3, COMMIT) + marker(6, ABORT, 8), 8, 7, None),
    ]
    broken = _fetch(8, "rc", 11, 1, -1, b"", 8, 8, [])
    recs.append(CaptureRecord(**{**{f: getattr(broken, f) for f in broken.__dataclass_fields__},
                                 "request": broken.request[:20]}))
    cap = tmp_path / "cap"
    cap.mkdir()
    (cap / "capture-0-0.mkcap").write_bytes(encode_block([encode_record(r) for r in recs]))
    return cap, recs


def test_transaction_summary(txn_capture) -> None:
    _cap, recs = txn_capture
    s = TransactionSummary()
    for r in recs:
        s.add(r)
    from capture_helpers import parse_request, parse_response

    produce = [parse_request(r) for r in recs[:4]]
    fetch = [(parse_request(r), parse_response(r)) for r in recs[4:7]]
    fields = [p for _q, a in fetch for t in a["responses"] for p in t["partitions"]]
    counts = [batch_counts(p["records"]) for p in fields]
    sent = [batch_counts(p["records"]) for q in produce for t in q["topic_data"] for p in t["partition_data"]]
    assert s.transactional_ids == {q["transactional_id"] for q in produce} - {None} == {"tx-1", "tx-2"}
    assert s.transactional_produce_requests == sum(q["transactional_id"] is not None for q in produce)
    assert s.produce_transactional_batches == sum(c.transactional_batches for c in sent) == 3
    assert s.produce_transactional_records == sum(c.transactional_records for c in sent)
    assert s.produce_control_batches == 0
    assert (s.read_committed_fetches, s.read_uncommitted_fetches) == (
        sum(q["isolation_level"] == 1 and q["replica_id"] < 0 for q, _a in fetch),
        sum(q["isolation_level"] == 0 and q["replica_id"] < 0 for q, _a in fetch))
    assert s.fetch_control_batches == sum(c.control_batches for c in counts) == 5
    assert (s.commit_markers, s.abort_markers) == (sum(c.commit_markers for c in counts),
                                                   sum(c.abort_markers for c in counts)) == (3, 2)
    assert s.fetch_transactional_records == sum(c.transactional_records for c in counts)
    assert s.aborted_transactions == sum(len(p["aborted_transactions"] or ()) for p in fields) == 1
    assert s.lso_behind_hw == sum(0 <= p["last_stable_offset"] < p["high_watermark"] for p in fields) == 2
    assert s.undecodable == 1


def test_capture_show_transactions(txn_capture, capsys) -> None:
    cap, recs = txn_capture
    assert cli_main(["capture", "show", str(cap)]) == 0
    assert "transactions:" not in capsys.readouterr().out  # only when asked: it parses every Produce and Fetch
    assert cli_main(["capture", "show", "--transactions", str(cap)]) == 0
    out = capsys.readouterr().out
    s = TransactionSummary()
    for r in recs:
        s.add(r)
    for line in s.lines():
        assert line in out
    assert "2 transactional id(s)" in out and "(3 commit, 2 abort marker(s))" in out
    assert "1 read_committed, 1 read_uncommitted" in out and "1 Produce/Fetch frame(s) did not parse" in out


def test_capture_keeps_transactional_produce_batches_as_sent() -> None:
    """The broker stamps base offsets and leader epochs into Produce batches in place; the captured frame
    still holds the transactional batches as the producer sent them (producer id/epoch, sequence, bit 4)."""
    from minikafka.capture.produce import original_frame_parts
    from minikafka.protocol.headers import request_body_offset
    from minikafka.protocol.records import assign_offsets

    records = data_batch(0, 3, txn=True, pid=42) + data_batch(0, 2, txn=True, pid=42)
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 1000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    frame = bytearray(RequestHeader.build({"request_api_key": 0, "request_api_version": 9, "correlation_id": 1,
                                           "client_id": "p"}, 2) + APIS[0].request.build(body, 9))
    original = bytes(frame)
    req = APIS[0].request.parse(memoryview(frame)[request_body_offset(frame):], 9)
    parts = original_frame_parts(frame, req)
    for td in req.topic_data:
        for pd in td.partition_data:
            for i, (_h, view) in enumerate(iter_batches(pd.records)):
                assign_offsets(view, 500 + 10 * i, 3)
    assert bytes(frame) != original and b"".join(parts) == original
    captured = APIS[0].request.parse(memoryview(original)[request_body_offset(original):], 9)
    assert captured["transactional_id"] == "tx"
    hs = [h for h, _ in iter_batches(captured["topic_data"][0]["partition_data"][0]["records"])]
    assert [(h.base_offset, h.producer_id, h.is_transactional, h.is_control) for h in hs] == [
        (0, 42, True, False), (0, 42, True, False)]
    assert batch_counts(captured["topic_data"][0]["partition_data"][0]["records"]).transactional_records == 5
