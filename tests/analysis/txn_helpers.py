"""A synthetic capture of transactional traffic (KIP-98) for the analysis tests, and what it should give.

One broker (0), topic "txn" partition 0, whose log is :data:`LOG`:

====== ======================================================= ==========
offset batch                                                   producer
====== ======================================================= ==========
0-2    transaction A, 3 records (transactional)                 PID_A "tx-a"
3      COMMIT marker of A (control batch)                       PID_A
4-5    2 plain records (no transaction)                         "plain"
6-7    transaction B, 2 records (transactional)                 PID_B "tx-b"
8      ABORT marker of B (control batch)                        PID_B
9-11   transaction C, 3 records, open until 2 s                 PID_A "tx-a"
12     COMMIT marker of C, written at 2 s                       PID_A
====== ======================================================= ==========

Until 2 s the high watermark is 12 and the last stable offset 9 (C is open); then both are 13.
The data batches are produced (Produce v9 with the transactional id) in the first 50 ms; markers are
written by the coordinator, so they reach clients only in Fetch responses:

* "rc-consumer" fetches with isolation_level 1 (read_committed, Fetch v11), answered up to the LSO,
  with B listed in aborted_transactions when its records are in the response;
* "ru-consumer" fetches with isolation_level 0 (Fetch v12, flexible), answered up to the HW;
* follower replica 1 fetches everything once at the end (Fetch v11).

Every expectation the tests check is computed from these specs (:func:`expected_fetch_rows`), not
written out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from minikafka.capture.format import CaptureRecord, encode_block, encode_record
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import RequestHeader, is_flexible, request_header_version, response_header_bytes
from minikafka.protocol.records import ControlRecordType, Record, build_batch, build_control_batch

TOPIC = "txn"
PID_A, PID_B = 4000, 4001
T0_NS = 1_700_000_000 * 10**9  # capture start (a bucket boundary for 0.5 s and 1 s buckets)
COMMIT_C_MS = 2000


@dataclass(frozen=True)
class Batch:
    base: int
    kind: str            # "data", "commit" or "abort"
    producer_id: int = -1
    records: int = 1
    transactional: bool = False
    transactional_id: str | None = None

    @property
    def control(self) -> bool:
        return self.kind != "data"

    @property
    def last(self) -> int:
        return self.base + self.records - 1

    def encode(self) -> bytes:
        if self.kind == "data":
            recs = [Record(offset_delta=i, timestamp_delta=i, value=b"v%d" % (self.base + i))
                    for i in range(self.records)]
            return build_batch(recs, base_offset=self.base, producer_id=self.producer_id,
                               producer_epoch=0 if self.producer_id >= 0 else -1,
                               base_sequence=0 if self.producer_id >= 0 else -1,
                               is_transactional=self.transactional, base_timestamp=T0_NS // 10**6)
        kind = ControlRecordType.COMMIT if self.kind == "commit" else ControlRecordType.ABORT
        return build_control_batch(kind, producer_id=self.producer_id, producer_epoch=0, base_offset=self.base,
                                   timestamp=T0_NS // 10**6)


LOG = [
    Batch(0, "data", PID_A, 3, True, "tx-a"),
    Batch(3, "commit", PID_A),
    Batch(4, "data", -1, 2, False, None),
    Batch(6, "data", PID_B, 2, True, "tx-b"),
    Batch(8, "abort", PID_B),
    Batch(9, "data", PID_A, 3, True, "tx-a"),
    Batch(12, "commit", PID_A),
]
BY_BASE = {b.base: b for b in LOG}


@dataclass(frozen=True)
class FetchSpec:
    client_id: str
    t_ms: int
    fetch_offset: int
    returned: tuple[int, ...]      # base offsets of the LOG batches in the response
    high_watermark: int
    last_stable_offset: int
    aborted: tuple[tuple[int, int], ...] | None  # (producer id, first offset); None = null list
    isolation_level: int = 0
    replica_id: int = -1
    version: int = 11


def _hw_lso(t_ms: int) -> tuple[int, int]:
    return (13, 13) if t_ms >= COMMIT_C_MS else (12, 9)


def _fetch(client: str, t_ms: int, offset: int, returned: tuple[int, ...], isolation: int, aborted=None,
           replica: int = -1, version: int = 11) -> FetchSpec:
    hw, lso = _hw_lso(t_ms)
    return FetchSpec(client, t_ms, offset, returned, hw, lso, aborted, isolation, replica, version)


FETCHES = [
    # read_committed: never past the LSO; B's records come with B in aborted_transactions.
    _fetch("rc-consumer", 100, 0, (0, 3), 1, ()),
    _fetch("rc-consumer", 200, 4, (4, 6, 8), 1, ((PID_B, 6),)),
    _fetch("rc-consumer", 1100, 9, (), 1, ()),
    _fetch("rc-consumer", 2100, 9, (9,), 1, ()),
    _fetch("rc-consumer", 2200, 12, (12,), 1, ()),  # a response holding only a marker
    # read_uncommitted: up to the HW, aborted_transactions null.
    _fetch("ru-consumer", 150, 0, (0, 3, 4, 6, 8), 0, version=12),
    _fetch("ru-consumer", 1150, 9, (9,), 0, version=12),
    _fetch("ru-consumer", 2150, 12, (12,), 0, version=12),
    # a follower replica (read_uncommitted, as replicas are)
    _fetch("broker-1-fetcher", 2300, 0, tuple(b.base for b in LOG), 0, replica=1),
]
PRODUCES = [(i * 10, b) for i, b in enumerate(b for b in LOG if not b.control)]  # (t ms, batch)


def _request(key: int, version: int, corr: int, client_id: str, body: dict) -> bytes:
    hv = request_header_version(key, is_flexible(key, version))
    head = RequestHeader.build({"request_api_key": key, "request_api_version": version, "correlation_id": corr,
                                "client_id": client_id}, hv)
    return head + APIS[key].request.build(body, version)


def _response(key: int, version: int, corr: int, body: dict) -> bytes:
    return response_header_bytes(corr, key, version) + APIS[key].response.build(body, version)


def _record(t_ms: int, conn: str, client_id: str, key: int, version: int, corr: int, req: dict,
            resp: dict) -> CaptureRecord:
    recv = T0_NS + t_ms * 1_000_000
    return CaptureRecord(recv, recv + 2_000_000, conn, "127.0.0.1:40000", 0, "User:ANONYMOUS", client_id, key,
                         version, corr, _request(key, version, corr, client_id, req),
                         _response(key, version, corr, resp))


def produce_record(t_ms: int, corr: int, batch: Batch) -> CaptureRecord:
    client = batch.transactional_id or "plain"
    req = {"transactional_id": batch.transactional_id, "acks": -1, "timeout_ms": 1000,
           "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch.encode()}]}]}
    resp = {"responses": [{"name": TOPIC, "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": batch.base, "log_append_time_ms": -1, "log_start_offset": 0,
         "record_errors": [], "error_message": None}]}], "throttle_time_ms": 0}
    return _record(t_ms, f"0-{client}", client, 0, 9, corr, req, resp)


def fetch_record(spec: FetchSpec, corr: int) -> CaptureRecord:
    records = b"".join(BY_BASE[b].encode() for b in spec.returned)
    req = {"replica_id": spec.replica_id, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
           "isolation_level": spec.isolation_level, "session_id": 0, "session_epoch": -1,
           "topics": [{"topic": TOPIC, "partitions": [
               {"partition": 0, "current_leader_epoch": -1, "fetch_offset": spec.fetch_offset,
                "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
           "forgotten_topics_data": [], "rack_id": ""}
    aborted = None if spec.aborted is None else [{"producer_id": p, "first_offset": o} for p, o in spec.aborted]
    resp = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": spec.high_watermark,
         "last_stable_offset": spec.last_stable_offset, "log_start_offset": 0, "aborted_transactions": aborted,
         "preferred_read_replica": -1, "records": records or None}]}]}
    return _record(spec.t_ms, f"0-{spec.client_id}", spec.client_id, 1, spec.version, corr, req, resp)


def txn_records() -> list[CaptureRecord]:
    """The capture's records in receive order."""
    recs = [produce_record(t, i + 1, b) for i, (t, b) in enumerate(PRODUCES)]
    recs += [fetch_record(s, 100 + i) for i, s in enumerate(FETCHES)]
    return sorted(recs, key=lambda r: r.receive_ns)


def write_txn_capture(directory: Path) -> Path:
    """The capture as one ``.mkcap`` file in ``directory``; returns the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "capture-0-0.mkcap").write_bytes(encode_block([encode_record(r) for r in txn_records()]))
    return directory


# -- expectations, from the specs -----------------------------------------------------------------
def batch_totals(bases: tuple[int, ...]) -> dict[str, int]:
    """What the tables should count for a records field made of these LOG batches."""
    bs = [BY_BASE[b] for b in bases]
    data = [b for b in bs if not b.control]
    ctrl = [b for b in bs if b.control]
    return {
        "record_bytes": sum(len(b.encode()) for b in data),
        "record_count": sum(b.records for b in data),
        "batch_count": len(data),
        "control_bytes": sum(len(b.encode()) for b in ctrl),
        "control_batch_count": len(ctrl),
        "commit_markers": sum(b.kind == "commit" for b in ctrl),
        "abort_markers": sum(b.kind == "abort" for b in ctrl),
        "transactional_batch_count": sum(b.transactional for b in data),
        "transactional_record_count": sum(b.records for b in data if b.transactional),
    }


def expected_lag(spec: FetchSpec) -> dict[str, int | str]:
    """Position after the fetch (past every batch returned, markers too) and the lag: from the LSO under
    read_committed, from the HW under read_uncommitted."""
    position = max(spec.fetch_offset, max((BY_BASE[b].last + 1 for b in spec.returned), default=0))
    end = spec.last_stable_offset if spec.isolation_level == 1 else spec.high_watermark
    return {"position": position, "lag": max(0, end - position), "lag_before": max(0, end - spec.fetch_offset),
            "isolation_level": "read_committed" if spec.isolation_level == 1 else "read_uncommitted",
            "end_offset": end}
