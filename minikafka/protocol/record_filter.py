"""Filtering the records of a stored batch (the wire-format half of Kafka's ``MemoryRecords.filterTo``).

The log cleaner decides which records of a batch survive; this module reads a batch's records as
spans of its (decompressed) payload and writes the survivors back as one batch with the original
base offset, last offset delta, producer id, epoch, base sequence and flags, so that offsets keep
their gaps and idempotent producers and read_committed consumers see what they saw before.

Deliberate difference from Kafka's ``MemoryRecordsBuilder``: a rebuilt batch keeps the original
``baseTimestamp`` and copies each kept record's bytes unchanged (Kafka re-bases on the first kept
record); only when a delete horizon is set (KIP-534: attributes bit 6, ``baseTimestamp`` = horizon)
are the kept records' timestamp deltas rewritten. Record timestamps read back the same either way.

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from .compression import compress
from .records import (BATCH_HEADER, BATCH_HEADER_SIZE, COMPRESSION_MASK, DELETE_HORIZON_MASK, LOG_OVERHEAD, MAGIC,
                      TIMESTAMP_TYPE_MASK, InvalidRecordError,
                      RecordBatchHeader, _read_uvarint_slow, _varint, seal_batch)

__all__ = ["RecordSpan", "scan_records", "build_filtered_batch", "build_empty_batch"]


class RecordSpan(NamedTuple):
    """Where one record lies in a batch payload, and what the cleaner needs to judge it."""

    start: int  # first byte of the record's length varint
    ts_pos: int  # first byte of its timestampDelta
    after_ts: int  # first byte after its timestampDelta
    end: int  # one past its last byte
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool


def scan_records(data: bytes, count: int) -> list[RecordSpan]:
    """Spans of the ``count`` records filling ``data`` (headers are skipped, not decoded)."""
    out: list[RecordSpan] = []
    append = out.append
    slow = _read_uvarint_slow
    pos = 0
    n = len(data)
    try:
        for _ in range(count):
            start = pos
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            length = (b >> 1) ^ -(b & 1)
            end = pos + length
            if length < 0 or end > n:
                raise InvalidRecordError(f"invalid record length {length}")
            ts_pos = pos + 1  # after the attributes byte
            pos = ts_pos
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            ts_delta = (b >> 1) ^ -(b & 1)
            after_ts = pos
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            off_delta = (b >> 1) ^ -(b & 1)
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            klen = (b >> 1) ^ -(b & 1)
            if klen >= 0:
                key: bytes | None = data[pos:pos + klen]
                pos += klen
            elif klen == -1:
                key = None
            else:
                raise InvalidRecordError(f"invalid key length {klen}")
            b = data[pos]
            if b >= 0x80:
                b, _ = slow(data, pos + 1, b)
            vlen = (b >> 1) ^ -(b & 1)
            if vlen < -1 or pos > end:
                raise InvalidRecordError(f"invalid value length {vlen}")
            append(RecordSpan(start, ts_pos, after_ts, end, off_delta, ts_delta, key, vlen >= 0))
            pos = end
    except IndexError:
        raise InvalidRecordError("record data is truncated") from None
    if pos != n:
        raise InvalidRecordError(f"{n - pos} bytes remain after the declared {count} records")
    return out


def build_filtered_batch(h: RecordBatchHeader, data: bytes, kept: Sequence[RecordSpan],
                         delete_horizon_ms: int | None = None) -> bytes:
    """One batch holding the ``kept`` records of the batch ``h`` whose payload is ``data``.

    ``delete_horizon_ms`` sets a new delete horizon (the batch had none): ``baseTimestamp`` becomes
    the horizon and every kept record's timestamp delta is rewritten to keep its timestamp.
    """
    attributes = h.attributes
    base_ts = h.base_timestamp
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        shift = base_ts - delete_horizon_ms
        parts: list[bytes] = []
        for s in kept:
            body = b"".join((data[s.ts_pos - 1:s.ts_pos], _varint(s.timestamp_delta + shift), data[s.after_ts:s.end]))
            parts.append(_varint(len(body)))
            parts.append(body)
        payload = b"".join(parts)
        new_base_ts = delete_horizon_ms
    else:
        payload = b"".join([data[s.start:s.end] for s in kept])
        new_base_ts = base_ts
    if attributes & TIMESTAMP_TYPE_MASK:
        max_ts = h.max_timestamp
    else:
        max_ts = max((base_ts + s.timestamp_delta for s in kept), default=h.max_timestamp)
    codec = attributes & COMPRESSION_MASK
    if codec:
        payload = compress(codec, payload)
    header = bytearray(BATCH_HEADER.pack(
        h.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), h.partition_leader_epoch, MAGIC, 0,
        attributes, h.last_offset_delta, new_base_ts, max_ts, h.producer_id, h.producer_epoch, h.base_sequence,
        len(kept)))
    return seal_batch(header, payload)


def build_empty_batch(h: RecordBatchHeader) -> bytes:
    """An empty batch keeping ``h``'s offsets and producer fields (Kafka's ``writeEmptyHeader``): what
    the cleaner leaves when every record of a producer's last batch went away."""
    attributes = h.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_MASK)
    header = bytearray(BATCH_HEADER.pack(
        h.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD, h.partition_leader_epoch, MAGIC, 0, attributes,
        h.last_offset_delta, h.max_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence, 0))
    return seal_batch(header, b"")
