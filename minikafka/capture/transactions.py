"""Transactional traffic (KIP-98) in captured frames: record batches by kind, and a capture's summary.

A v2 record batch says in its attributes whether it belongs to a transaction
(bit 4, 0x10) and whether it is a control batch (bit 5, 0x20): a commit or
abort marker (``EndTransactionMarker``) written by the transaction coordinator,
one control record whose key is (version, ``ControlRecordType``).  Producers
send transactional data batches; markers reach clients only in Fetch responses
(consumers and follower replicas).  Read_committed consumers (Fetch
``isolation_level`` 1) are answered up to the last stable offset (LSO), with the
aborted transactions of the range listed per partition.

:func:`batch_counts` classifies the batches of a ``records`` field from their
61-byte headers, decoding only control batches (to tell commit from abort);
it is what the analysis tables count with.  :class:`TransactionSummary` is
``minikafka capture show --transactions``.  Pure Python, no I/O, no Trio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..protocol.exceptions import ProtocolError
from ..protocol.records import ControlRecordType, decode_control_key, decode_records
from .format import CaptureRecord

__all__ = ["EMPTY_COUNTS", "BatchCounts", "TransactionSummary", "batch_counts", "marker_counts"]

CONTROL_MASK = 0x20
TRANSACTIONAL_MASK = 0x10
_PRODUCE, _FETCH = 0, 1

# Base offset (0), batch length (8), magic (16), attributes (21), last offset delta (23), record count (57)
# of the 61-byte v2 header, in one unpack.
_BATCH_FIELDS = struct.Struct(">qi4xb4xhi30xi")
_HEADER_SIZE = _BATCH_FIELDS.size  # 61
_COMMIT, _ABORT = int(ControlRecordType.COMMIT), int(ControlRecordType.ABORT)


class BatchCounts(NamedTuple):
    """The batches of one ``records`` field, data and control apart."""

    size: int                   # bytes of the whole field (a truncated trailing batch included)
    records: int                # records of the data (non-control) batches
    batches: int                # data batches
    first_offset: int           # base offset of the first batch, data or control (-1: no batch)
    last_offset: int            # last offset of the last batch, data or control (-1: no batch)
    control_bytes: int          # bytes of the control batches
    control_batches: int
    control_records: int
    commit_markers: int         # control records of type COMMIT
    abort_markers: int          # control records of type ABORT
    transactional_batches: int  # data batches with the transactional bit
    transactional_records: int  # their records

    @property
    def data_bytes(self) -> int:
        """The field's bytes that are not control batches (data batches and a truncated tail)."""
        return self.size - self.control_bytes

    @property
    def all_batches(self) -> int:
        return self.batches + self.control_batches


EMPTY_COUNTS = BatchCounts(0, 0, 0, -1, -1, 0, 0, 0, 0, 0, 0, 0)


def marker_counts(batch: Any) -> tuple[int, int]:
    """(commit, abort) control records of one control batch; (0, 0) when its records do not decode."""
    commits = aborts = 0
    try:
        for rec in decode_records(batch, check_crc=False):
            _version, kind = decode_control_key(rec.key)
            if kind == _COMMIT:
                commits += 1
            elif kind == _ABORT:
                aborts += 1
    except ProtocolError:  # a damaged control batch still counts as one, without markers
        return 0, 0
    return commits, aborts


def batch_counts(records: Any) -> BatchCounts:
    """:class:`BatchCounts` of a ``records`` field (bytes, memoryview or None), from the batch headers.

    The batches counted are those :func:`~minikafka.protocol.records.iter_batches` (no CRC check,
    truncated tail allowed) accepts: the counting stops at the end, at a truncated batch or at a batch
    it rejects (wrong magic, length under the header's, unknown codec, negative count).  Only control
    batches are decoded (their one record tells commit from abort).
    """
    if records is None:
        return EMPTY_COUNTS
    view = records if isinstance(records, memoryview) else memoryview(records)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    end = len(view)
    count = batches = pos = 0
    ctrl_bytes = ctrl_batches = ctrl_records = commits = aborts = txn_batches = txn_records = 0
    first = last = -1
    unpack = _BATCH_FIELDS.unpack_from
    while end - pos >= _HEADER_SIZE:
        base, length, magic, attributes, last_delta, record_count = unpack(view, pos)
        if magic != 2 or length < 49 or attributes & 7 > 4 or record_count < 0:
            break
        size = length + 12
        if size > end - pos:
            break
        if attributes & CONTROL_MASK:
            ctrl_bytes += size
            ctrl_batches += 1
            ctrl_records += record_count
            c, a = marker_counts(view[pos:pos + size])
            commits += c
            aborts += a
        else:
            count += record_count
            batches += 1
            if attributes & TRANSACTIONAL_MASK:
                txn_batches += 1
                txn_records += record_count
        if first < 0:
            first = base
        last = base + last_delta
        pos += size
    return BatchCounts(len(view), count, batches, first, last, ctrl_bytes, ctrl_batches, ctrl_records,
                       commits, aborts, txn_batches, txn_records)


@dataclass
class TransactionSummary:
    """Transactional traffic of a capture (``minikafka capture show --transactions``).

    Produce: the transactional ids, requests carrying one, and the transactional batches/records sent.
    Fetch: consumer fetches per isolation level; in every Fetch response (consumers and followers) the
    control batches and their commit/abort markers, the transactional data records, the aborted
    transactions listed and the partition responses whose last stable offset is below the high watermark.
    """

    transactional_ids: set[str] = field(default_factory=set)
    transactional_produce_requests: int = 0
    produce_transactional_batches: int = 0
    produce_transactional_records: int = 0
    produce_control_batches: int = 0
    read_committed_fetches: int = 0
    read_uncommitted_fetches: int = 0
    fetch_control_batches: int = 0
    commit_markers: int = 0
    abort_markers: int = 0
    fetch_transactional_records: int = 0
    aborted_transactions: int = 0
    lso_behind_hw: int = 0
    undecodable: int = 0

    def add(self, r: CaptureRecord) -> None:
        """Count one captured request/response (only Produce and Fetch are looked at)."""
        if r.api_key not in (_PRODUCE, _FETCH):
            return
        from ..protocol.headers import parse_request_frame, parse_response_frame
        from ..protocol.messages.fetch import fetch_replica_id

        try:
            _hdr, req = parse_request_frame(r.request)
            resp = None if r.response is None else parse_response_frame(r.response, r.api_key, r.api_version)[1]
        except ProtocolError:  # a frame that does not parse is counted, not fatal
            self.undecodable += 1
            return
        if r.api_key == _PRODUCE:
            tid = req.get("transactional_id")
            if tid is not None:
                self.transactional_ids.add(tid)
                self.transactional_produce_requests += 1
            for t in req["topic_data"]:
                for p in t["partition_data"]:
                    c = batch_counts(p["records"])
                    self.produce_transactional_batches += c.transactional_batches
                    self.produce_transactional_records += c.transactional_records
                    self.produce_control_batches += c.control_batches
            return
        if fetch_replica_id(req) < 0:  # a consumer (v15+ followers name themselves in replica_state)
            if req.get("isolation_level", 0) == 1:
                self.read_committed_fetches += 1
            else:
                self.read_uncommitted_fetches += 1
        if resp is None:
            return
        for t in resp["responses"]:
            for p in t["partitions"]:
                c = batch_counts(p["records"])
                self.fetch_control_batches += c.control_batches
                self.commit_markers += c.commit_markers
                self.abort_markers += c.abort_markers
                self.fetch_transactional_records += c.transactional_records
                self.aborted_transactions += len(p.get("aborted_transactions") or ())
                lso, hw = p.get("last_stable_offset", -1), p["high_watermark"]
                if lso is not None and 0 <= lso < hw:
                    self.lso_behind_hw += 1

    def lines(self) -> list[str]:
        """The summary as text lines."""
        produced = (f"transactions: {len(self.transactional_ids)} transactional id(s); "
                    f"{self.transactional_produce_requests} transactional Produce request(s) with "
                    f"{self.produce_transactional_batches} transactional batch(es), "
                    f"{self.produce_transactional_records} record(s)")
        if self.produce_control_batches:
            produced += f", {self.produce_control_batches} control batch(es)"
        fetched = (f"  Fetch responses: {self.fetch_control_batches} control batch(es) ({self.commit_markers} commit, "
                   f"{self.abort_markers} abort marker(s)), {self.fetch_transactional_records} transactional "
                   f"record(s), {self.aborted_transactions} aborted transaction(s) listed, {self.lso_behind_hw} "
                   f"partition response(s) with last stable offset < high watermark")
        if self.undecodable:
            fetched += f"; {self.undecodable} Produce/Fetch frame(s) did not parse"
        consumers = (f"  consumer fetches: {self.read_committed_fetches} read_committed, "
                     f"{self.read_uncommitted_fetches} read_uncommitted")
        return [produced, consumers, fetched]
