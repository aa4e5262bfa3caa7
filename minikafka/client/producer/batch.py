"""Producer batches (Kafka's ``ProducerBatch`` + ``MemoryRecordsBuilder``) and the futures handed
back by ``send()`` (``ProduceRequestResult``, ``FutureRecordMetadata``, ``RecordMetadata``).

Records are encoded straight into the batch's ``bytearray`` with precomputed varints (no
``construct`` on the hot path); the 61-byte v2 header, compression and CRC are added when the
Sender drains the batch (``close``), because producer id, epoch and base sequence are only known
then.  A retried batch keeps its (compressed) records and only gets a new header.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, NamedTuple

import trio
from crc32c import crc32c

from ...protocol.compression import compress
from ...protocol.records import (ATTRIBUTES_OFFSET, BATCH_HEADER, BATCH_HEADER_SIZE, CRC_OFFSET, LOG_OVERHEAD,
                                 MAGIC, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TRANSACTIONAL_MASK)

log = logging.getLogger(__name__)

# zig-zag varints for small non-negative ints (offset deltas, lengths, timestamp deltas)
_ZZ_CACHE = 1 << 14
_ZZ: list[bytes] = []
for _i in range(_ZZ_CACHE):
    _v = _i << 1
    _b = bytearray()
    while _v >= 0x80:
        _b.append((_v & 0x7F) | 0x80)
        _v >>= 7
    _b.append(_v)
    _ZZ.append(bytes(_b))
del _i, _v, _b


def zz(v: int) -> bytes:
    """Zig-zag varint (``ByteUtils.writeVarint``/``writeVarlong``)."""
    if 0 <= v < _ZZ_CACHE:
        return _ZZ[v]
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


_NULL = zz(-1)
_ZERO = _ZZ[0]
_ATTR = b"\x00"


def encode_headers(headers: Any) -> bytes:
    """The headers part of a ``DefaultRecord`` (count, then key/value pairs)."""
    if not headers:
        return _ZERO
    items = list(headers.items()) if isinstance(headers, dict) else list(headers)
    parts = [zz(len(items))]
    for hk, hv in items:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        parts.append(zz(len(hkb)))
        parts.append(hkb)
        if hv is None:
            parts.append(_NULL)
        else:
            if isinstance(hv, str):
                hv = hv.encode("utf-8")
            parts.append(zz(len(hv)))
            parts.append(hv)
    return b"".join(parts)


def estimate_size(key: bytes | None, value: bytes | None, headers_len: int = 1) -> int:
    """Upper bound of one record's encoded size (``DefaultRecord.sizeInBytes`` + varint slack)."""
    return 21 + (len(key) if key is not None else 0) + (len(value) if value is not None else 0) + headers_len


class RecordMetadata(NamedTuple):
    """Where a record was stored (Kafka's ``RecordMetadata``); offset -1 with acks=0."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


class ProduceRequestResult:
    """One batch's outcome, shared by its records' futures (``ProduceRequestResult``).

    ``error`` is the batch's error; ``errors_by_index`` (KIP-467: the broker named the records it refused)
    gives each record's own error by its index in the batch (:meth:`error_for`).
    """

    __slots__ = ("event", "base_offset", "log_append_time", "error", "errors_by_index", "_done_callbacks")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        self.errors_by_index: Callable[[int], BaseException] | None = None
        self._done_callbacks: list[Callable[[ProduceRequestResult], Any]] | None = None

    def set(self, base_offset: int, log_append_time: int, error: BaseException | None,
            errors_by_index: Callable[[int], BaseException] | None = None) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.errors_by_index = errors_by_index if error is not None else None

    def error_for(self, batch_index: int) -> BaseException | None:
        """The error of the record at ``batch_index`` (``ProduceRequestResult.error(batchIndex)``)."""
        if self.errors_by_index is not None:
            return self.errors_by_index(batch_index)
        return self.error

    def done(self) -> None:
        self.event.set()
        callbacks, self._done_callbacks = self._done_callbacks, None
        for fn in callbacks or ():
            try:
                fn(self)
            except Exception:  # someone else's code must not break the Sender
                log.exception("produce result callback raised")

    def add_done_callback(self, fn: Callable[[ProduceRequestResult], Any]) -> None:
        """Call ``fn(result)`` once the batch is complete (now if it is): one call for all the batch's
        records, where a per-record ``send`` callback costs a call and a :class:`RecordMetadata` each."""
        if self.event.is_set():
            fn(self)
        elif self._done_callbacks is None:
            self._done_callbacks = [fn]
        else:
            self._done_callbacks.append(fn)

    @property
    def completed(self) -> bool:
        return self.event.is_set()

    async def wait(self) -> None:
        await self.event.wait()


class FutureRecordMetadata:
    """What ``send()`` returns (``FutureRecordMetadata``): ``await fut.get()`` -> :class:`RecordMetadata`."""

    __slots__ = ("result", "topic", "partition", "relative_offset", "timestamp", "key_size", "value_size")

    def __init__(self, result: ProduceRequestResult, topic: str, partition: int, relative_offset: int,
                 timestamp: int, key_size: int, value_size: int) -> None:
        self.result = result
        self.topic = topic
        self.partition = partition
        self.relative_offset = relative_offset
        self.timestamp = timestamp
        self.key_size = key_size
        self.value_size = value_size

    def done(self) -> bool:
        return self.result.event.is_set()

    def value(self) -> RecordMetadata:
        """The metadata of a completed send; raises the send's error."""
        r = self.result
        if not r.event.is_set():
            raise RuntimeError("send is not complete yet; await get()")
        error = r.error_for(self.relative_offset)
        if error is not None:
            raise error
        offset = r.base_offset + self.relative_offset if r.base_offset >= 0 else -1
        ts = r.log_append_time if r.log_append_time >= 0 else self.timestamp
        return RecordMetadata(self.topic, self.partition, offset, ts, self.key_size, self.value_size)

    async def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for the batch to complete (``Future.get``); ``timeout`` in seconds."""
        if not self.result.event.is_set():
            if timeout is None:
                await self.result.event.wait()
            else:
                with trio.fail_after(timeout):
                    await self.result.event.wait()
        return self.value()

    def __await__(self):
        return self.get().__await__()

    def exception(self) -> BaseException | None:
        return self.result.error_for(self.relative_offset) if self.result.event.is_set() else None


Callback = Callable[[RecordMetadata | None, BaseException | None], Any]


class ProducerBatch:
    """Records for one partition, sent together (``ProducerBatch``).

    Records are written at ``pos`` into ``buffer``, a bytearray of the capacity taken from the pool (kept
    at that size, so appending never reallocates); the batch on the wire is ``header`` (61 bytes, built on
    drain) followed by ``payload``, a view of the written bytes (or their compressed form), never joined.
    """

    __slots__ = ("topic", "partition", "buffer", "pos", "capacity", "write_limit", "created_ms", "last_attempt_ms",
                 "drained_ms", "attempts", "record_count", "base_timestamp", "max_timestamp", "result",
                 "callbacks", "closed", "payload", "compression", "producer_id", "producer_epoch",
                 "base_sequence", "header", "retry", "final_state", "uncompressed_size", "futures",
                 "reopened", "estimated_size", "is_transactional")

    def __init__(self, topic: str, partition: int, buffer: bytearray, capacity: int, write_limit: int,
                 compression: int, now_ms: int) -> None:
        self.topic = topic
        self.partition = partition
        if len(buffer) < capacity:
            buffer += bytes(capacity - len(buffer))
        self.buffer = buffer
        self.pos = 0  # bytes of records written into buffer
        self.capacity = capacity  # bytes taken from the BufferPool
        self.write_limit = write_limit  # batch.size
        self.compression = compression
        self.created_ms = now_ms
        self.last_attempt_ms: float = now_ms  # the Sender's _now_ms() (float) once drained or retried
        self.drained_ms: float = now_ms
        self.attempts = 0
        self.record_count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.result = ProduceRequestResult()
        self.callbacks: list[tuple[FutureRecordMetadata, Callback]] = []
        self.futures: list[FutureRecordMetadata] = []
        self.closed = False
        self.payload: bytes | memoryview | None = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.header: bytes | None = None
        self.retry = False
        self.final_state: str | None = None
        self.uncompressed_size = 0
        self.reopened = False
        self.estimated_size = BATCH_HEADER_SIZE
        self.is_transactional = False  # attributes bit 4, set with the producer state of a transactional producer

    # -- appending -------------------------------------------------------------------------------
    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None, headers_bytes: bytes,
                   callback: Callback | None) -> FutureRecordMetadata | None:
        """Append one record, or None when it does not fit (``tryAppend`` / ``hasRoomFor``)."""
        if self.closed:
            return None
        count = self.record_count
        if count == 0:
            self.base_timestamp = timestamp
            tsd = _ZERO
        else:
            ts_delta = timestamp - self.base_timestamp
            tsd = _ZZ[ts_delta] if 0 <= ts_delta < _ZZ_CACHE else zz(ts_delta)
        # DefaultRecord: length, attributes, timestampDelta, offsetDelta, key, value, headers
        if key is None:
            klen_b = _NULL
            key = b""
            klen = -1
        else:
            klen = len(key)
            klen_b = _ZZ[klen] if klen < _ZZ_CACHE else zz(klen)
        if value is None:
            vlen_b = _NULL
            value = b""
            vlen = -1
        else:
            vlen = len(value)
            vlen_b = _ZZ[vlen] if vlen < _ZZ_CACHE else zz(vlen)
        od = _ZZ[count] if count < _ZZ_CACHE else zz(count)
        body = b"".join((_ATTR, tsd, od, klen_b, key, vlen_b, value, headers_bytes))
        n = len(body)
        lb = _ZZ[n] if n < _ZZ_CACHE else zz(n)
        pos = self.pos
        mid = pos + len(lb)
        end = mid + n
        if count and end + BATCH_HEADER_SIZE > self.write_limit:
            return None
        buf = self.buffer
        buf[pos:mid] = lb  # grows the buffer only for a first record larger than the estimate
        buf[mid:end] = body
        self.pos = end
        self.record_count = count + 1
        if timestamp > self.max_timestamp:
            self.max_timestamp = timestamp
        fut = FutureRecordMetadata(self.result, self.topic, self.partition, count, timestamp, klen, vlen)
        if callback is not None:
            self.callbacks.append((fut, callback))
        return fut

    @property
    def is_full(self) -> bool:
        """``isFull``: closed for appends, or no room for even a tiny record."""
        return self.closed or self.pos + BATCH_HEADER_SIZE + 8 >= self.write_limit

    @property
    def estimated_size_in_bytes(self) -> int:
        if self.payload is not None:
            return BATCH_HEADER_SIZE + len(self.payload)
        return BATCH_HEADER_SIZE + self.pos

    @property
    def built_size(self) -> int:
        """Bytes of the batch on the wire once built (0 before)."""
        return BATCH_HEADER_SIZE + len(self.payload) if self.header is not None and self.payload is not None else 0

    @property
    def built(self) -> bytes | None:
        """The built v2 record batch as one ``bytes`` (a copy; the Sender sends :attr:`wire_chunks`)."""
        if self.header is None or self.payload is None:
            return None
        return self.header + bytes(self.payload)

    @property
    def wire_chunks(self) -> list[bytes | memoryview]:
        """Header and records as a produce request's ``records`` value (two buffers, nothing joined)."""
        assert self.header is not None and self.payload is not None, "build_chunks() first"
        return [self.header, self.payload]

    def waited_ms(self, now_ms: float) -> float:
        """``waitedTimeMs``: since creation, or since the last attempt for a retry."""
        return now_ms - max(self.created_ms, self.last_attempt_ms)

    def has_reached_delivery_timeout(self, delivery_timeout_ms: float, now_ms: float) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1

    # -- closing / building ----------------------------------------------------------------------
    def close_for_appends(self) -> None:
        self.closed = True

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        if (producer_id, epoch, base_sequence) != (self.producer_id, self.producer_epoch, self.base_sequence):
            self.producer_id = producer_id
            self.producer_epoch = epoch
            self.base_sequence = base_sequence
            self.header = None

    def build(self) -> bytes:
        """The v2 record batch as one ``bytes`` (a copy of :meth:`build_chunks`' buffers)."""
        header, payload = self.build_chunks()
        return bytes(header) + bytes(payload)

    def build_chunks(self) -> list[bytes | memoryview]:
        """The v2 record batch on the wire (``MemoryRecordsBuilder.build`` + ``writeHeader``), as
        :attr:`wire_chunks`: the records are compressed once and only the header is rebuilt for a retry."""
        self.closed = True
        if self.header is not None:
            return self.wire_chunks
        if self.payload is None:
            raw = memoryview(self.buffer)[:self.pos]
            self.uncompressed_size = self.pos + BATCH_HEADER_SIZE
            self.payload = compress(self.compression, bytes(raw)) if self.compression else raw
        payload = self.payload
        count = self.record_count
        attributes = (self.compression & 7) | (TRANSACTIONAL_MASK if self.is_transactional else 0)
        header = bytearray(BATCH_HEADER.pack(
            0, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload), -1, MAGIC, 0, attributes,
            count - 1, self.base_timestamp, self.max_timestamp, self.producer_id, self.producer_epoch,
            self.base_sequence, count))
        crc = crc32c(payload, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
        header[CRC_OFFSET:CRC_OFFSET + 4] = crc.to_bytes(4, "big")
        self.header = bytes(header)
        return self.wire_chunks

    # -- completion ------------------------------------------------------------------------------
    @property
    def is_done(self) -> bool:
        return self.final_state is not None

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None,
                 record_errors: Callable[[int], BaseException] | None = None) -> bool:
        """Complete every record's future and run callbacks (``ProducerBatch.done``); False if already done.

        On failure ``record_errors`` maps a record's index in the batch to its own error
        (``completeExceptionally(topLevelException, recordExceptions)``)."""
        if self.final_state is not None:
            return False
        self.final_state = "failed" if error is not None else "succeeded"
        self.result.set(base_offset, log_append_time, error, record_errors)
        self.result.done()
        for fut, cb in self.callbacks:
            try:
                if error is None:
                    cb(fut.value(), None)
                else:
                    cb(None, self.result.error_for(fut.relative_offset))
            except Exception:  # a user callback must not break the Sender
                log.exception("producer callback raised")
        return True

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic}-{self.partition}, records={self.record_count}, "
                f"seq={self.base_sequence}, attempts={self.attempts})")
