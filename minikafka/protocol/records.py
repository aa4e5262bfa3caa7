"""Record batch format v2 (Kafka's ``DefaultRecordBatch`` / ``MemoryRecords``).

Layout of a batch (all integers big-endian)::

    offset  field                 type
    0       baseOffset            int64    \\ LOG_OVERHEAD (12 bytes)
    8       batchLength           int32    /  batchLength counts bytes after it
    12      partitionLeaderEpoch  int32
    16      magic                 int8     (= 2)
    17      crc                   uint32   CRC-32C of bytes [21, end)
    21      attributes            int16    bits 0-2 codec, 3 timestamp type,
                                           4 transactional, 5 control
    23      lastOffsetDelta       int32
    27      baseTimestamp         int64
    35      maxTimestamp          int64
    43      producerId            int64
    51      producerEpoch         int16
    53      baseSequence          int32
    57      recordCount           int32
    61      records (compressed as one blob when codec != 0)

The broker's hot path (produce -> append -> fetch) only ever touches the
61-byte header: `iter_batches` / `validate_batch` check structure and CRC,
`assign_offsets` rewrites baseOffset and partitionLeaderEpoch (both outside
the CRC) with ``struct.pack_into``.  Records are decoded only by clients
(`decode_records`) and built by `build_batch`.

Nothing here does I/O or imports trio.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Iterable, Iterator, NamedTuple, Union

import construct as cs

from .compression import CompressionError, UnsupportedCodecError, compress, decompress
from .errors import ErrorCode
from .exceptions import CorruptRecordError, InvalidRecordError


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """CRC-32C of ``data`` (continuing from ``value``): the ``crc32c`` package's, imported on first use.

    Importing that package reads its distribution's metadata (a tenth of a broker's start-up), so the first
    call replaces this function in the module with the package's own, and later calls cost nothing extra."""
    global crc32c
    from crc32c import crc32c as impl

    crc32c = impl  # the same signature, in C
    return impl(data, value)

__all__ = [
    "AbortedTransactions",
    "BATCH_HEADER", "BATCH_HEADER_CONSTRUCT", "BATCH_HEADER_SIZE", "LOG_OVERHEAD",
    "MAGIC", "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_TIMESTAMP",
    "CREATE_TIME", "LOG_APPEND_TIME",
    "CorruptRecordError", "InvalidRecordError",
    "RecordBatchHeader", "Record", "ConsumerRecord", "RecoveryResult", "ControlRecordType",
    "read_header", "validate_batch", "iter_batches", "count_records", "recover_batches", "assign_offsets",
    "read_batches",
    "decode_raw_records", "decode_records", "encode_records", "build_batch", "seal_batch", "records_payload",
    "build_control_batch", "decode_control_key", "read_end_txn_marker",
]

Buffer = Union[bytes, bytearray, memoryview]

# --------------------------------------------------------------------------
# Constants (DefaultRecordBatch / RecordBatch)
# --------------------------------------------------------------------------

MAGIC = 2
LOG_OVERHEAD = 12  # baseOffset + batchLength
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61
BATCH_HEADER_SIZE = 61
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD  # 49

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NO_PARTITION_LEADER_EPOCH = -1
_INT32_MAX = 0x7FFFFFFF

#: Fast path: the whole 61-byte header in one unpack.
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
assert BATCH_HEADER.size == BATCH_HEADER_SIZE

#: The same header as a ``construct`` declaration (documentation / tests).
BATCH_HEADER_CONSTRUCT = cs.Struct(
    "base_offset" / cs.Int64sb,
    "batch_length" / cs.Int32sb,
    "partition_leader_epoch" / cs.Int32sb,
    "magic" / cs.Int8sb,
    "crc" / cs.Int32ub,
    "attributes" / cs.Int16sb,
    "last_offset_delta" / cs.Int32sb,
    "base_timestamp" / cs.Int64sb,
    "max_timestamp" / cs.Int64sb,
    "producer_id" / cs.Int64sb,
    "producer_epoch" / cs.Int16sb,
    "base_sequence" / cs.Int32sb,
    "record_count" / cs.Int32sb,
)

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_ATTRS_AND_LAST_DELTA = struct.Struct(">hi")


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# Header
# --------------------------------------------------------------------------


class RecordBatchHeader(NamedTuple):
    """The 61-byte v2 batch header (the fixed part of ``DefaultRecordBatch``)."""

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
    def compression(self) -> int:
        """Codec id (attributes bits 0-2)."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime (attributes bit 3)."""
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """KIP-534 delete horizon flag (bit 6); baseTimestamp is then the horizon."""
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire / in the log."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping at int32 max like ``DefaultRecordBatch``."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        inc = self.last_offset_delta
        if base > _INT32_MAX - inc:
            return inc - (_INT32_MAX - base) - 1
        return base + inc


_make_header = RecordBatchHeader._make
_new_header = tuple.__new__  # (RecordBatchHeader, 13 values): _make without its Python-level length check
_unpack_header = BATCH_HEADER.unpack_from


def read_header(buf: Buffer, offset: int = 0) -> RecordBatchHeader:
    """Unpack a batch header at ``offset`` without any validation."""
    return _make_header(_unpack_header(buf, offset))


def _check(view: memoryview, h: RecordBatchHeader, check_crc: bool, produce: bool) -> None:
    if h.magic != MAGIC:
        raise InvalidRecordError(f"unsupported record batch magic {h.magic}")
    if h.batch_length + LOG_OVERHEAD != len(view):
        raise InvalidRecordError(
            f"batch length {h.batch_length} does not match buffer of {len(view)} bytes")
    if h.attributes & COMPRESSION_MASK > 4:
        raise InvalidRecordError(f"unknown compression codec {h.attributes & COMPRESSION_MASK}")
    if h.record_count < 0:
        raise InvalidRecordError(f"invalid record count {h.record_count}")
    if check_crc:
        actual = crc32c(view[ATTRIBUTES_OFFSET:])
        if actual != h.crc:
            raise CorruptRecordError(
                f"record batch at offset {h.base_offset} is corrupt "
                f"(stored crc {h.crc:#010x}, computed {actual:#010x})")
    if produce:
        # LogValidator.validateBatch
        if h.record_count == 0 or h.record_count != h.last_offset_delta + 1:
            raise InvalidRecordError(
                f"inconsistent record count {h.record_count} for last offset delta "
                f"{h.last_offset_delta}")


def _as_view(buf: Buffer) -> memoryview:
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def validate_batch(view: Buffer, *, check_crc: bool = True, produce: bool = False
                   ) -> RecordBatchHeader:
    """Validate exactly one batch (``DefaultRecordBatch.ensureValid``) and return its header.

    Checks magic 2, batchLength against the buffer, codec id, record count and
    CRC-32C.  ``produce=True`` adds ``LogValidator``'s check that the batch is
    non-empty and recordCount == lastOffsetDelta + 1 (compacted log batches may
    legitimately violate that).
    """
    view = _as_view(view)
    if len(view) < BATCH_HEADER_SIZE:
        raise InvalidRecordError(
            f"record batch of {len(view)} bytes is smaller than the {BATCH_HEADER_SIZE}-byte header")
    h = _make_header(_unpack_header(view))
    _check(view, h, check_crc, produce)
    return h


def _next_batch_size(view: memoryview, pos: int, n: int) -> int:
    """Size of the batch at ``pos``; -1 if truncated; raises if structurally bad."""
    remaining = n - pos
    if remaining < LOG_OVERHEAD:
        return -1
    (length,) = _I32.unpack_from(view, pos + LENGTH_OFFSET)
    if remaining > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != MAGIC:
        raise InvalidRecordError(
            f"unsupported record batch magic {_I8.unpack_from(view, pos + MAGIC_OFFSET)[0]} "
            f"at position {pos}")
    if length < MIN_BATCH_LENGTH:
        raise InvalidRecordError(f"batch length {length} at position {pos} is too small")
    size = length + LOG_OVERHEAD
    if size > remaining:
        return -1
    return size


def iter_batches(buf: Buffer, *, check_crc: bool = True, produce: bool = False,
                 allow_truncated_tail: bool = False
                 ) -> Iterator[tuple[RecordBatchHeader, memoryview]]:
    """Iterate over a concatenation of batches (``MemoryRecords.batches()``).

    Yields ``(header, view)`` where ``view`` is a zero-copy memoryview of the
    whole batch (writable if ``buf`` is).  Each batch is validated as in
    `validate_batch`.  A truncated trailing batch raises `InvalidRecordError`
    unless ``allow_truncated_tail`` (Fetch responses may end with a partial
    batch, which ``ByteBufferLogInputStream`` silently drops).
    """
    view = _as_view(buf)
    n = len(view)
    pos = 0
    while pos < n:
        size = _next_batch_size(view, pos, n)
        if size < 0:
            if allow_truncated_tail:
                return
            raise InvalidRecordError(
                f"truncated record batch at position {pos} ({n - pos} bytes left)")
        bview = view[pos:pos + size]
        h = _make_header(_unpack_header(view, pos))
        _check(bview, h, check_crc, produce)
        yield h, bview
        pos += size


def read_batches(buf: Buffer, *, check_crc: bool = True, produce: bool = False
                 ) -> tuple[list[tuple[RecordBatchHeader, memoryview]], CorruptRecordError | None]:
    """``list(iter_batches(buf, ...))`` without the generator (the produce path's usual one batch): the
    batches read before the first bad one, and that one's error (None when all are good), so that a caller
    checking each batch (``max.message.bytes``) reports what it would have met first."""
    view = _as_view(buf)
    n = len(view)
    pos = 0
    out: list[tuple[RecordBatchHeader, memoryview]] = []
    try:
        while pos < n:
            size = _next_batch_size(view, pos, n)
            if size < 0:
                raise InvalidRecordError(f"truncated record batch at position {pos} ({n - pos} bytes left)")
            bview = view[pos:pos + size]
            h = _new_header(RecordBatchHeader, _unpack_header(view, pos))
            _check(bview, h, check_crc, produce)
            out.append((h, bview))
            pos += size
    except CorruptRecordError as exc:
        return out, exc
    return out, None


def count_records(buf: Buffer) -> int:
    """The records in already validated batches, summed from their headers' record counts
    (``LogAppendInfo.numMessages``): no CRC check, no decompression; a truncated tail counts nothing."""
    n = len(buf)
    pos = count = 0
    while pos + BATCH_HEADER_SIZE <= n:
        (length,) = _I32.unpack_from(buf, pos + LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH or pos + length + LOG_OVERHEAD > n:
            break
        count += _I32.unpack_from(buf, pos + RECORDS_COUNT_OFFSET)[0]
        pos += length + LOG_OVERHEAD
    return count


class RecoveryResult(NamedTuple):
    """Outcome of `recover_batches`: valid batches and where the valid prefix ends."""

    batches: list[tuple[int, RecordBatchHeader]]  # (position, header)
    valid_bytes: int
    error: CorruptRecordError | None  # why scanning stopped early, None if clean/torn-free


def recover_batches(buf: Buffer, *, check_crc: bool = True) -> RecoveryResult:
    """Scan a log segment, stopping at the first truncated or invalid batch
    (``LogSegment.recover``).  The caller truncates the segment to
    ``valid_bytes``.  ``error`` is None when the buffer ends cleanly, an
    `InvalidRecordError` for a torn tail, or the validation error."""
    view = _as_view(buf)
    n = len(view)
    pos = 0
    out: list[tuple[int, RecordBatchHeader]] = []
    while pos < n:
        try:
            size = _next_batch_size(view, pos, n)
            if size < 0:
                return RecoveryResult(out, pos, InvalidRecordError(
                    f"truncated record batch at position {pos} ({n - pos} bytes left)"))
            h = _make_header(_unpack_header(view, pos))
            _check(view[pos:pos + size], h, check_crc, False)
        except CorruptRecordError as exc:
            return RecoveryResult(out, pos, exc)
        out.append((pos, h))
        pos += size
    return RecoveryResult(out, pos, None)


def assign_offsets(batch: bytearray | memoryview, base_offset: int,
                   partition_leader_epoch: int, log_append_time: int | None = None) -> int:
    """Stamp a validated batch in place for appending (``LogValidator.assignOffsetsNonCompressed``
    / in-place path of ``validateMessagesAndAssignOffsetsCompressed``).

    Writes baseOffset and partitionLeaderEpoch, which lie outside the CRC.  With
    ``log_append_time`` (LogAppendTime topics) also sets the timestamp-type bit
    and maxTimestamp and recomputes the CRC, as ``DefaultRecordBatch.setMaxTimestamp``.
    ``batch`` must be writable.  Returns the next offset (last offset + 1).
    """
    _I64.pack_into(batch, BASE_OFFSET_OFFSET, base_offset)
    _I32.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    attrs, last_delta = _ATTRS_AND_LAST_DELTA.unpack_from(batch, ATTRIBUTES_OFFSET)
    if log_append_time is not None:
        (cur_max,) = _I64.unpack_from(batch, MAX_TIMESTAMP_OFFSET)
        if not (attrs & TIMESTAMP_TYPE_MASK and cur_max == log_append_time):
            _I16.pack_into(batch, ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
            _I64.pack_into(batch, MAX_TIMESTAMP_OFFSET, log_append_time)
            mv = batch if isinstance(batch, memoryview) else memoryview(batch)
            _U32.pack_into(batch, CRC_OFFSET, crc32c(mv[ATTRIBUTES_OFFSET:]))
    return base_offset + last_delta + 1


# --------------------------------------------------------------------------
# Records (DefaultRecord)
# --------------------------------------------------------------------------


@dataclass(slots=True)
class Record:
    """One record inside a batch (``DefaultRecord``), with batch-relative deltas."""

    offset_delta: int = 0
    timestamp_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    attributes: int = 0


class ConsumerRecord(NamedTuple):
    """A decoded record with absolute offset and timestamp (client's ``ConsumerRecord``)."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int = NO_PARTITION_LEADER_EPOCH


def _read_uvarint_slow(data: bytes, pos: int, first: int) -> tuple[int, int]:
    """Continue a varint whose first byte (>= 0x80) is ``first``; ``pos`` is after it."""
    result = first & 0x7F
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint is too long")


def decode_raw_records(data: bytes, count: int) -> list[Record]:
    """Decode ``count`` uncompressed ``DefaultRecord``s filling ``data`` exactly.

    Raises `InvalidRecordError` for framing errors (length mismatch, bad sizes,
    trailing bytes).
    """
    records: list[Record] = []
    append = records.append
    slow = _read_uvarint_slow
    pos = 0
    n = len(data)
    try:
        for _ in range(count):
            # length (varint)
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            length = (b >> 1) ^ -(b & 1)
            end = pos + length
            if length < 0 or end > n:
                raise InvalidRecordError(f"invalid record length {length}")
            attributes = data[pos]; pos += 1
            # timestampDelta (varlong)
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            ts_delta = (b >> 1) ^ -(b & 1)
            # offsetDelta (varint)
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            off_delta = (b >> 1) ^ -(b & 1)
            # key
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            klen = (b >> 1) ^ -(b & 1)
            if klen >= 0:
                key = data[pos:pos + klen]
                pos += klen
            elif klen == -1:
                key = None
            else:
                raise InvalidRecordError(f"invalid key length {klen}")
            # value
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            vlen = (b >> 1) ^ -(b & 1)
            if vlen >= 0:
                value = data[pos:pos + vlen]
                pos += vlen
            elif vlen == -1:
                value = None
            else:
                raise InvalidRecordError(f"invalid value length {vlen}")
            # headers
            b = data[pos]; pos += 1
            if b >= 0x80:
                b, pos = slow(data, pos, b)
            hcount = (b >> 1) ^ -(b & 1)
            headers: list[tuple[str, bytes | None]] = []
            if hcount:
                if hcount < 0:
                    raise InvalidRecordError(f"invalid header count {hcount}")
                for _h in range(hcount):
                    b = data[pos]; pos += 1
                    if b >= 0x80:
                        b, pos = slow(data, pos, b)
                    hklen = (b >> 1) ^ -(b & 1)
                    if hklen < 0 or pos + hklen > end:
                        raise InvalidRecordError(f"invalid header key length {hklen}")
                    hkey = data[pos:pos + hklen].decode("utf-8")
                    pos += hklen
                    b = data[pos]; pos += 1
                    if b >= 0x80:
                        b, pos = slow(data, pos, b)
                    hvlen = (b >> 1) ^ -(b & 1)
                    if hvlen >= 0:
                        hval = data[pos:pos + hvlen]
                        pos += hvlen
                    elif hvlen == -1:
                        hval = None
                    else:
                        raise InvalidRecordError(f"invalid header value length {hvlen}")
                    headers.append((hkey, hval))
            if pos != end:
                raise InvalidRecordError(
                    f"record length {length} does not match its fields ({length + pos - end})")
            append(Record(off_delta, ts_delta, key, value, headers, attributes))
    except IndexError:
        raise InvalidRecordError("record data is truncated") from None
    except UnicodeDecodeError as exc:
        raise InvalidRecordError(f"header key is not UTF-8: {exc}") from None
    if pos != n:
        raise InvalidRecordError(
            f"{n - pos} bytes remain after the declared {count} records")
    return records


def records_payload(view: memoryview, h: RecordBatchHeader) -> bytes:
    """The batch's records, decompressed (``CorruptRecordError`` if they cannot be)."""
    body = view[RECORDS_OFFSET:]
    codec = h.attributes & COMPRESSION_MASK
    if codec == 0:
        return bytes(body)
    try:
        return decompress(codec, body)
    except (CompressionError, UnsupportedCodecError) as exc:
        raise CorruptRecordError(f"cannot decompress record batch: {exc}") from exc


def decode_records(batch_view: Buffer, *, check_crc: bool = True) -> list[ConsumerRecord]:
    """Decode one batch into records with absolute offsets and timestamps
    (``DefaultRecordBatch.iterator()``), decompressing if needed.

    For LogAppendTime batches every record gets the batch's maxTimestamp.
    Control batches are decoded like any other; check `RecordBatchHeader.is_control`
    (and `decode_control_key`) to skip them.
    """
    view = _as_view(batch_view)
    h = validate_batch(view, check_crc=check_crc)
    raw = decode_raw_records(records_payload(view, h), h.record_count)
    base_offset = h.base_offset
    epoch = h.partition_leader_epoch
    if h.attributes & TIMESTAMP_TYPE_MASK:
        ts = h.max_timestamp
        return [ConsumerRecord(base_offset + r.offset_delta, ts, LOG_APPEND_TIME,
                               r.key, r.value, r.headers, epoch) for r in raw]
    base_ts = h.base_timestamp
    return [ConsumerRecord(base_offset + r.offset_delta, base_ts + r.timestamp_delta, CREATE_TIME,
                           r.key, r.value, r.headers, epoch) for r in raw]


# --------------------------------------------------------------------------
# Encoding (DefaultRecordBatch.writeHeader / DefaultRecord.writeTo)
# --------------------------------------------------------------------------

_SMALL_VARINTS = [bytes([i]) for i in range(128)]


def _uvarint(v: int) -> bytes:
    if v < 0x80:
        return _SMALL_VARINTS[v]
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _varint(v: int) -> bytes:
    """Zig-zag signed varint/varlong."""
    return _uvarint((v << 1) ^ (v >> 63))


_NULL = _varint(-1)
_NO_HEADERS = _varint(0)
_ATTR_ZERO = b"\x00"


def encode_records(records: Iterable[Record]) -> bytes:
    """Serialize records back to back (uncompressed ``DefaultRecord.writeTo``)."""
    out: list[bytes] = []
    append = out.append
    varint = _varint
    for r in records:
        key, value, headers = r.key, r.value, r.headers
        parts = [_ATTR_ZERO if not r.attributes else bytes([r.attributes & 0xFF]),
                 varint(r.timestamp_delta), varint(r.offset_delta)]
        if key is None:
            parts.append(_NULL)
        else:
            parts.append(varint(len(key)))
            parts.append(key)
        if value is None:
            parts.append(_NULL)
        else:
            parts.append(varint(len(value)))
            parts.append(value)
        if headers:
            parts.append(varint(len(headers)))
            for hk, hv in headers:
                hkb = hk.encode("utf-8")
                parts.append(varint(len(hkb)))
                parts.append(hkb)
                if hv is None:
                    parts.append(_NULL)
                else:
                    parts.append(varint(len(hv)))
                    parts.append(hv)
        else:
            parts.append(_NO_HEADERS)
        body = b"".join(parts)
        append(varint(len(body)))
        append(body)
    return b"".join(out)


def build_batch(records: Iterable[Record], *, base_offset: int = 0, compression: int = 0,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE, is_transactional: bool = False,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                timestamp_type: int = CREATE_TIME, base_timestamp: int,
                is_control: bool = False) -> bytes:
    """Build one complete v2 batch with CRC (``MemoryRecordsBuilder`` + ``DefaultRecordBatch.writeHeader``).

    Record timestamps are ``base_timestamp + timestamp_delta``; the caller gives ``base_timestamp`` (ms, from
    its clock: the protocol never reads the time).  lastOffsetDelta is the largest offset_delta (-1 for
    an empty batch); maxTimestamp the largest record timestamp.
    """
    records = list(records)
    if records:
        last_offset_delta = max(r.offset_delta for r in records)
        max_timestamp = base_timestamp + max(r.timestamp_delta for r in records)
    else:
        last_offset_delta = -1
        max_timestamp = base_timestamp
    payload = encode_records(records)
    if compression:
        payload = compress(compression, payload)
    attributes = (compression & COMPRESSION_MASK) | (TIMESTAMP_TYPE_MASK if timestamp_type else 0)
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    header = bytearray(BATCH_HEADER.pack(
        base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), partition_leader_epoch,
        MAGIC, 0, attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, len(records)))
    return seal_batch(header, payload)


def seal_batch(header: bytearray, payload: bytes) -> bytes:
    """A packed 61-byte header (CRC field zero) and its records payload as one batch, with the CRC-32C
    over attributes to the end written in."""
    crc = crc32c(payload, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _U32.pack_into(header, CRC_OFFSET, crc)
    return b"".join((header, payload))


# --------------------------------------------------------------------------
# Control batches (ControlRecordType / EndTransactionMarker)
# --------------------------------------------------------------------------


class ControlRecordType(IntEnum):
    """``ControlRecordType``: the key of a control record is int16 version + int16 type."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4


_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")


def decode_control_key(key: bytes | None) -> tuple[int, int]:
    """Return ``(version, type)`` of a control record key (``ControlRecordType.parse``)."""
    if key is None or len(key) < 4:
        raise InvalidRecordError("control record key is too short")
    return _CONTROL_KEY.unpack_from(key)


class AbortedTransactions:
    """What a consumer skips, batch by batch in offset order (Kafka's ``CompletedFetch`` with its
    ``abortedProducerIds``): every control batch, and under read_committed the data batches of a transaction
    that aborted.  ``aborted`` holds ``(producer_id, first_offset)`` of each aborted transaction in range (a
    Fetch response's ``aborted_transactions``)."""

    __slots__ = ("_read_committed", "_pending", "_producer_ids")

    def __init__(self, aborted: Iterable[tuple[int, int]], read_committed: bool) -> None:
        self._read_committed = read_committed
        self._pending = sorted(aborted, key=lambda a: a[1]) if read_committed else []
        self._producer_ids: set[int] = set()

    def skips(self, header: RecordBatchHeader, view: Buffer, *, check_crc: bool = False) -> bool:
        """Whether the consumer skips this batch (under read_committed an ABORT marker, decoded here, which
        may raise :class:`CorruptRecordError`, ends its producer's aborted transaction)."""
        if self._read_committed and header.has_producer_id:
            while self._pending and self._pending[0][1] <= header.last_offset:
                self._producer_ids.add(self._pending.pop(0)[0])
            if header.is_control:
                records = decode_records(view, check_crc=check_crc)
                if records and decode_control_key(records[0].key)[1] == ControlRecordType.ABORT:
                    self._producer_ids.discard(header.producer_id)
                return True
            return header.is_transactional and header.producer_id in self._producer_ids
        return header.is_control


def build_control_batch(control_type: int, *, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int = 0, base_offset: int = 0,
                        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                        timestamp: int) -> bytes:
    """Build a transaction marker batch (``MemoryRecords.withEndTransactionMarker``):
    transactional + control, one record with key (0, type) and value
    ``EndTransactionMarker`` (version 0, coordinator epoch)."""
    rec = Record(0, 0, _CONTROL_KEY.pack(0, int(control_type)),
                 _END_TXN_VALUE.pack(0, coordinator_epoch))
    return build_batch([rec], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, is_transactional=True, is_control=True,
                       partition_leader_epoch=partition_leader_epoch, base_timestamp=timestamp)


def read_end_txn_marker(batch: Buffer) -> tuple[int, int]:
    """``(control type, coordinator epoch)`` of a transaction marker batch
    (``EndTransactionMarker.deserialize``); raises ``InvalidRecordError`` if it is none."""
    recs = decode_records(batch, check_crc=False)
    if len(recs) != 1:
        raise InvalidRecordError(f"a control batch holds {len(recs)} records, not 1")
    _, control_type = decode_control_key(recs[0].key)
    value = recs[0].value
    coordinator_epoch = _END_TXN_VALUE.unpack_from(value)[1] if value is not None and len(value) >= 6 else -1
    return control_type, coordinator_epoch
