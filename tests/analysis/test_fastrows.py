"""The Produce/Fetch rows read straight off the frames (minikafka.analysis.fastrows) are the rows the general
decoder builds from parsed bodies: every version the fast path covers, well-formed and damaged frames."""

from __future__ import annotations

import dataclasses
import random
import struct
import uuid

import pytest

from minikafka.analysis.decode import RecordDecoder
from minikafka.analysis.fastrows import FAST_VERSIONS, fast_rows
from minikafka.capture.format import CaptureRecord
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import response_header_bytes
from minikafka.protocol.records import Record, build_batch

TABLES = ("requests", "partitions", "topics")


def _batch(rng: random.Random, base: int, **kw) -> bytes:
    n = rng.randrange(1, 4)
    return build_batch([Record(offset_delta=i, value=b"v" * rng.randrange(1, 30)) for i in range(n)],
                       base_offset=base, base_timestamp=1_700_000_000_000, **kw)


def _records(rng: random.Random, kind: str = "data") -> bytes | None:
    """A records field: null, empty, one or two data batches, a truncated tail, or a control/transactional
    batch (``kind``)."""
    if kind == "control":
        return build_batch([Record(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")],
                           base_offset=5, base_timestamp=1_700_000_000_000, is_control=True, is_transactional=True,
                           producer_id=7, producer_epoch=0)
    if kind == "transactional":
        return _batch(rng, 3, is_transactional=True, producer_id=7, producer_epoch=0, base_sequence=0)
    k = rng.randrange(6)
    if k == 0:
        return None
    if k == 1:
        return b""
    data = _batch(rng, rng.randrange(0, 1000))
    if k >= 4:
        data += _batch(rng, rng.randrange(1000, 2000))
    if k == 5:
        data += _batch(rng, 3000)[:40]  # a truncated trailing batch
    return data


def _frame(key: int, version: int, corr: int, body: bytes, client: bytes = b"cli") -> bytes:
    tags = b"\x00" if APIS[key].is_flexible(version) else b""  # request header v2: no tagged fields
    return struct.pack(">hhih", key, version, corr, len(client)) + client + tags + body


def _record(key: int, version: int, req: dict, resp: dict | None, corr: int) -> CaptureRecord:
    api = APIS[key]
    request = _frame(key, version, corr, api.request.build(req, version))
    response = None if resp is None else response_header_bytes(corr, key, version) + api.response.build(resp, version)
    return CaptureRecord(1_000 + corr, 5_000 + 3 * corr, f"c{corr % 3}", "127.0.0.1:5", 1, "User:ANONYMOUS",
                         "cli", key, version, corr, request, response, "127.0.0.1:9092", "", "PLAINTEXT")


def _produce(rng: random.Random, version: int, corr: int, kind: str = "data", extra_answer: bool = False,
             answered: bool = True) -> CaptureRecord:
    topics = []
    answers = []
    for t in range(rng.randrange(1, 3)):
        parts = list(range(rng.randrange(1, 4)))
        if rng.random() < 0.2:
            parts.append(parts[0])  # the same partition twice
        topics.append({"name": f"t{t}", "partition_data": [{"index": p, "records": _records(rng, kind)}
                                                           for p in parts]})
        answers.append({"name": f"t{t}", "partition_responses": [
            {"index": p, "error_code": rng.choice([0, 0, 6, 87]), "base_offset": rng.choice([-1, 0, 41]),
             "log_append_time_ms": -1, "log_start_offset": rng.choice([-1, 0, 9]),
             "record_errors": [{"batch_index": 0, "batch_index_error_message": rng.choice([None, "bad"])}]
             if rng.random() < 0.3 else [],
             "error_message": rng.choice([None, "msg"])} for p in reversed(parts)]})
    if extra_answer:
        answers.append({"name": "other", "partition_responses": [{"index": 9, "error_code": 0, "base_offset": 1}]})
    req = {**APIS[0].request.default(), "transactional_id": rng.choice([None, "", "tx"]), "acks": rng.choice([-1, 1]),
           "timeout_ms": 1000, "topic_data": topics}
    resp = {**APIS[0].response.default(), "responses": answers, "throttle_time_ms": rng.choice([0, 25])}
    return _record(0, version, req, resp if answered else None, corr)


def _fetch(rng: random.Random, version: int, corr: int, kind: str = "data", answered: bool = True) -> CaptureRecord:
    asked = [(f"t{rng.randrange(2)}", rng.randrange(3)) for _ in range(rng.randrange(0, 4))]
    extra = [(f"t{rng.randrange(2)}", rng.randrange(3, 5)) for _ in range(rng.randrange(kind != "data", 3))]
    req_topics = [{"topic": t, "partitions": [{"partition": p, "current_leader_epoch": 2, "fetch_offset": 10 + p,
                                               "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}
                  for t, p in asked]
    resp_topics = [{"topic": t, "partitions": [{
        "partition_index": p, "error_code": rng.choice([0, 0, 1]), "high_watermark": 100 + p,
        "last_stable_offset": rng.choice([-1, 90]), "log_start_offset": 0,
        "aborted_transactions": rng.choice([None, [], [{"producer_id": 7, "first_offset": 3}]]),
        "preferred_read_replica": -1, "records": _records(rng, kind)}]}
        for t, p in (asked[: rng.randrange(len(asked) + 1)] + extra)]
    epoch = rng.choice([-1, 0, 5])
    req = {**APIS[1].request.default(), "replica_id": rng.choice([-1, -1, 2]), "max_wait_ms": 500, "min_bytes": 1,
           "max_bytes": 50 << 20, "isolation_level": rng.choice([0, 1]), "session_id": rng.choice([0, 77]),
           "session_epoch": epoch, "topics": req_topics, "rack_id": rng.choice(["", "r1"]),
           "forgotten_topics_data": [{"topic": "gone", "partitions": [1, 2]}] if rng.random() < 0.3 else []}
    resp = {**APIS[1].response.default(), "throttle_time_ms": rng.choice([0, 7]), "error_code": rng.choice([0, 0, 70]),
            "session_id": rng.choice([0, 77]), "responses": resp_topics}
    return _record(1, version, req, resp if answered else None, corr)


def _rows(records: list[CaptureRecord], fast: bool) -> dict[str, list]:
    out = {t: list(RecordDecoder("src", fast=fast).iter_rows(records, t)) for t in TABLES}
    out["all"] = list(RecordDecoder("src", fast=fast).iter_all(records))
    return out


def _same_rows(records: list[CaptureRecord]) -> None:
    fast, general = _rows(records, True), _rows(records, False)
    for table, rows in general.items():
        assert fast[table] == rows, table
        assert [tuple(map(type, r)) for r in fast[table]] == [tuple(map(type, r)) for r in rows], table


@pytest.mark.parametrize("key", sorted(FAST_VERSIONS))
def test_fast_rows_are_the_general_rows(key: int) -> None:
    rng = random.Random(key)
    make = _produce if key == 0 else _fetch
    records = [make(rng, v, corr, answered=corr % 7 != 0) for v in FAST_VERSIONS[key] for corr in range(40)]
    assert all(fast_rows(r, "src") is not None for r in records)  # the fast path took them all
    _same_rows(records)


@pytest.mark.parametrize("key", sorted(FAST_VERSIONS))
def test_other_cases_take_the_general_path(key: int) -> None:
    rng = random.Random(100 + key)
    make = _produce if key == 0 else _fetch
    v = max(FAST_VERSIONS[key])
    odd = [make(rng, v, 1, kind="control"), make(rng, v, 2, kind="transactional")]
    if key == 0:
        odd.append(_produce(rng, v, 3, extra_answer=True))  # answered but not asked
    else:
        odd.append(dataclasses.replace(_fetch(rng, v, 3), request=_frame(1, v, 3, struct.pack(
            ">iiiibii", -2, 1, 1, 1, 0, 0, -1) + bytes(12))))  # a replica id the general path looks further for
    outside = [dataclasses.replace(make(rng, v, 4), api_version=min(FAST_VERSIONS[key]) - 1),
               make(rng, v, 5)]
    outside[1] = dataclasses.replace(outside[1], api_version=v + 1)
    for r in odd + outside:
        assert fast_rows(r, "src") is None
    _same_rows(odd + outside)


@pytest.mark.parametrize("key", sorted(FAST_VERSIONS))
def test_damaged_frames_give_the_general_rows(key: int) -> None:
    """Every truncation of a request and of a response, and flipped bytes: the fast path answers the general
    path's rows (decode errors included) or leaves the record to it."""
    rng = random.Random(200 + key)
    make = _produce if key == 0 else _fetch
    records = []
    for v in FAST_VERSIONS[key]:
        r = make(rng, v, v)
        records += [dataclasses.replace(r, request=r.request[:n]) for n in range(0, len(r.request), 3)]
        records += [dataclasses.replace(r, response=r.response[:n]) for n in range(0, len(r.response or b""), 3)]
        for _ in range(30):
            which = rng.choice(["request", "response"])
            frame = bytearray(getattr(r, which))
            frame[rng.randrange(len(frame))] = rng.choice([0, 0x80, 0xFF, rng.randrange(256)])
            records.append(dataclasses.replace(r, **{which: bytes(frame)}))
    _same_rows(records)


def _metadata(corr: int) -> CaptureRecord:
    """A Metadata v12 exchange naming two topics by id (rows of the topics table)."""
    resp = {**APIS[3].response.default(), "topics": [
        {"error_code": 0, "name": f"m{i}", "topic_id": uuid.UUID(int=corr * 10 + i + 1), "partitions": []}
        for i in range(2)]}
    return _record(3, 12, {**APIS[3].request.default(), "topics": None}, resp, corr)


def test_block_records_are_the_capture_formats() -> None:
    """decode_block_records (the five strings remembered) reads the records decode_records reads."""
    from minikafka.analysis.datasource import decode_block_records
    from minikafka.capture.format import decode_records, encode_record

    rng = random.Random(5)
    recs = []
    for i in range(200):
        r = (_produce if i % 2 else _fetch)(rng, 8, i)
        recs.append(dataclasses.replace(
            r, connection_id=rng.choice(["", "c1", "c2"]), client_id=rng.choice([None, "", "cli", "é"]),
            principal=rng.choice(["", "User:x"]), response=rng.choice([r.response, None]),
            injected=rng.choice(["", "", "delay"]), listener=rng.choice(["", "PLAINTEXT", "SSL"])))
    payload = b"".join(encode_record(r) for r in recs)
    names: dict = {}
    got = decode_block_records(memoryview(payload), len(recs), names)
    assert got == decode_records(payload, len(recs)) == recs
    assert 0 < len(names) < len(recs)  # strings remembered, not decoded per record
    with pytest.raises(ValueError):
        decode_block_records(memoryview(payload + b"\x00"), len(recs), {})


def test_chunks_and_their_batches_hold_iter_alls_rows() -> None:
    """iter_all_chunks gives each table's rows of iter_all, in order, in chunks; all_chunk_batches turns them
    into the all table's batches as all_batches does."""
    from minikafka.analysis import datasource

    rng = random.Random(9)
    recs = [(_produce if i % 3 else _fetch)(rng, 8 if i % 3 else 11, i) for i in range(120)]
    recs += [_metadata(500 + i) for i in range(3)] + [dataclasses.replace(recs[1], request=recs[1].request[:20])]
    rng.shuffle(recs)
    expected: dict[str, list] = {t: [] for t in TABLES}
    for table, row in RecordDecoder("src").iter_all(recs):
        expected[table].append(row)
    assert all(expected.values())
    for fast in (True, False):
        got: dict[str, list] = {t: [] for t in TABLES}
        for table, rows in RecordDecoder("src", fast=fast).iter_all_chunks(recs, 7):
            assert rows
            got[table].extend(rows)
        assert got == expected
    by_pairs = list(datasource.all_batches(RecordDecoder("src").iter_all(recs), 7))
    by_chunks = list(datasource.all_chunk_batches(RecordDecoder("src").iter_all_chunks(recs, 7)))
    for kind in range(3):
        assert ([r for b in by_chunks for r in b.to_pylist() if r["table"] == kind]
                == [r for b in by_pairs for r in b.to_pylist() if r["table"] == kind])


def test_reading_with_the_collector_off_turns_it_back_on() -> None:
    import gc

    from minikafka.analysis.datasource import _without_gc

    assert gc.isenabled()
    seen = []
    for _ in _without_gc(iter(range(3))):
        seen.append(gc.isenabled())
    assert seen == [False] * 3 and gc.isenabled()
    gc.disable()
    try:
        list(_without_gc(iter(range(2))))
        assert not gc.isenabled()  # it was off: left off
    finally:
        gc.enable()
