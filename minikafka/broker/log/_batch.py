"""Private v2 record-batch header helpers for the log layer.

Kept local (``minikafka.protocol.records`` offers the same) because the log only needs the
61-byte ``DefaultRecordBatch`` header (never the records, except when
``offset_for_timestamp`` wants the exact record), CRC-32C validation and a
chunked scanner used by recovery and by sparse-index lookups.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from minikafka.protocol import compression as _compression
from minikafka.protocol import records as _records

#: baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes,
#: lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
#: baseSequence, recordCount
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: batch size = batchLength + 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_QI = struct.Struct(">qi")  # baseOffset, batchLength
_I32 = struct.Struct(">i")
_Q = struct.Struct(">q")
_U32 = struct.Struct(">I")
_H = struct.Struct(">h")
_LOD = struct.Struct(">i")  # lastOffsetDelta at byte 23


# Shared with the protocol layer so the broker maps one hierarchy to CORRUPT_MESSAGE.
CorruptRecordError = _records.CorruptRecordError
InvalidRecordError = _records.InvalidRecordError


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(HEADER.unpack_from(buf, pos))


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, size: int, crc: int) -> bool:
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]) == crc


def set_base_offset_and_epoch(buf: bytearray, base_offset: int, epoch: int) -> None:
    _Q.pack_into(buf, 0, base_offset)
    _I32.pack_into(buf, 12, epoch)


def set_log_append_time(buf: bytearray, now_ms: int) -> None:
    """Set maxTimestamp + timestamp-type bit (both inside the CRC) and re-CRC."""
    attrs = _H.unpack_from(buf, ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    _H.pack_into(buf, ATTRIBUTES_OFFSET, attrs)
    _Q.pack_into(buf, MAX_TIMESTAMP_OFFSET, now_ms)
    _U32.pack_into(buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))


def validate_header(h: BatchHeader, available: int | None = None) -> None:
    if h.magic != 2:
        raise InvalidRecordError(f"unsupported magic {h.magic}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidRecordError(f"batch length {h.batch_length} too small")
    if h.last_offset_delta < 0:
        raise InvalidRecordError(f"negative lastOffsetDelta {h.last_offset_delta}")
    if available is not None and h.size != available:
        raise InvalidRecordError(f"batch length {h.size} != buffer size {available}")


def split_batches(buf: bytes | bytearray | memoryview) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` of each whole batch in *buf*; raise on a partial/bad one."""
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise InvalidRecordError("truncated batch header")
        h = parse_header(buf, pos)
        validate_header(h)
        if pos + h.size > end:
            raise InvalidRecordError("truncated batch")
        yield pos, h
        pos += h.size


# -- record-level decoding (only for offset_for_timestamp / max timestamp) ---------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _decompress(codec: int, data: bytes) -> bytes | None:
    try:
        return _compression.decompress(codec, data)
    except Exception:  # noqa: BLE001 - fall back to batch granularity
        return None


def record_offsets_and_timestamps(batch: bytes | memoryview) -> list[tuple[int, int]] | None:
    """``[(offset, timestamp)]`` for each record, or None if the records cannot be decoded.

    LogAppendTime batches report maxTimestamp for every record, as Kafka's
    ``DefaultRecordBatch`` does.
    """
    h = parse_header(batch)
    codec = h.attributes & COMPRESSION_MASK
    body = bytes(batch[HEADER_SIZE : h.size])
    if codec:
        body = _decompress(codec, body)
        if body is None:
            return None
    log_append = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    out: list[tuple[int, int]] = []
    pos = 0
    try:
        for _ in range(h.record_count):
            length, pos = _varint(body, pos)
            nxt = pos + length
            pos += 1  # record attributes
            ts_delta, pos = _varint(body, pos)
            off_delta, pos = _varint(body, pos)
            ts = h.max_timestamp if log_append else h.base_timestamp + ts_delta
            out.append((h.base_offset + off_delta, ts))
            pos = nxt
    except IndexError:
        return None
    return out
