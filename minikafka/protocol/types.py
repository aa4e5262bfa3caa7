"""Kafka's primitive wire types as `construct` constructs.

Models the type system of Kafka's message generator (``Type`` in
``org.apache.kafka.common.protocol.types``): fixed-width big-endian integers,
unsigned varints, the classic (int16/int32 length) and compact (KIP-482,
unsigned-varint length + 1) encodings of strings, bytes and arrays, UUIDs, and
structs closed by a tagged-fields section in flexible versions, and
nullable structs (an int8 marker, -1 for null and 1 before the struct).

Every class is an ordinary ``construct.Construct``; the schema layer composes
them per message version.  Null is encoded as length -1 (classic) or 0
(compact).
"""

from __future__ import annotations

import uuid
from typing import Any

from construct import (
    Construct,
    Container,
    Flag,
    Float64b,
    Int8sb,
    Int16sb,
    Int16ub,
    Int32sb,
    Int32ub,
    Int64sb,
    ListContainer,
    StreamError,
    stream_read,
    stream_write,
)

from .exceptions import MalformedMessage

__all__ = [
    "INT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "FLOAT64", "BOOL",
    "UVarInt", "VarIntZigZag", "KString", "KBytes", "KArray", "KUuid", "KStruct",
    "KNullableStruct", "read_uvarint", "uvarint_at", "write_uvarint", "uvarint_size", "ViewReader", "SegmentedWriter",
]

INT8 = Int8sb
INT16 = Int16sb
UINT16 = Int16ub
INT32 = Int32sb
UINT32 = Int32ub
INT64 = Int64sb
FLOAT64 = Float64b
BOOL = Flag

ZERO_UUID = uuid.UUID(int=0)


def read_uvarint(stream: Any, path: str = "") -> int:
    """Read one unsigned LEB128 varint (Kafka's ``UNSIGNED_VARINT``)."""
    result = 0
    shift = 0
    while True:
        b = stream.read(1)
        if not b:
            raise StreamError("stream ended inside a varint", path=path)
        b = b[0]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
        if shift > 35 + 28:
            raise StreamError("varint too long", path=path)


def uvarint_at(buf: Any, pos: int) -> tuple[int, int]:
    """Read an unsigned varint from ``buf`` at ``pos``: (value, position after it).

    ``IndexError`` if ``buf`` ends inside it, :class:`MalformedMessage` if it is longer than 64 bits."""
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise MalformedMessage("varint too long")


def write_uvarint(value: int) -> bytes:
    """Encode ``value`` (>= 0) as an unsigned LEB128 varint."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def uvarint_size(value: int) -> int:
    """Bytes needed for ``value`` as an unsigned varint."""
    n = 1
    while value > 0x7F:
        value >>= 7
        n += 1
    return n


class UVarInt(Construct):
    """Unsigned varint (KIP-482 ``UNSIGNED_VARINT``)."""

    def _parse(self, stream, context, path):
        return read_uvarint(stream, path)

    def _build(self, obj, stream, context, path):
        b = write_uvarint(obj)
        stream_write(stream, b, len(b), path)
        return obj


class VarIntZigZag(Construct):
    """Signed zig-zag varint (``VARINT``/``VARLONG``), used inside records."""

    def _parse(self, stream, context, path):
        v = read_uvarint(stream, path)
        return (v >> 1) ^ -(v & 1)

    def _build(self, obj, stream, context, path):
        b = write_uvarint((obj << 1) ^ (obj >> 63))
        stream_write(stream, b, len(b), path)
        return obj


class _Sized(Construct):
    """Shared length-prefix handling for strings, bytes and arrays."""

    def __init__(self, compact: bool, nullable: bool):
        super().__init__()
        self.compact = compact
        self.nullable = nullable
        self.flagbuildnone = nullable

    def _read_len(self, stream, path, width: int) -> int:
        if self.compact:
            return read_uvarint(stream, path) - 1
        raw = stream_read(stream, width, path)
        return int.from_bytes(raw, "big", signed=True)

    def _write_len(self, n: int, stream, path, width: int) -> None:
        if self.compact:
            b = write_uvarint(n + 1)
            stream_write(stream, b, len(b), path)
        else:
            stream_write(stream, n.to_bytes(width, "big", signed=True), width, path)

    def _null(self, path):
        if not self.nullable:
            raise StreamError("null value in a non-nullable field", path=path)
        return None


class KString(_Sized):
    """STRING / NULLABLE_STRING / COMPACT_STRING / COMPACT_NULLABLE_STRING (UTF-8)."""

    def _parse(self, stream, context, path):
        n = self._read_len(stream, path, 2)
        if n < 0:
            return self._null(path)
        return str(stream_read(stream, n, path), "utf-8")

    def _build(self, obj, stream, context, path):
        if obj is None:
            self._null(path)
            self._write_len(-1, stream, path, 2)
            return obj
        data = obj.encode("utf-8")
        self._write_len(len(data), stream, path, 2)
        stream_write(stream, data, len(data), path)
        return obj


class KBytes(_Sized):
    """BYTES / NULLABLE_BYTES / COMPACT_BYTES / RECORDS (int32 or varint length).

    A ``records`` field is the hot path: parsed from a :class:`ViewReader` it
    is a zero-copy ``memoryview`` of the frame, and it may be built from a
    list of chunks (stored batches) that a :class:`SegmentedWriter` passes
    through without copying.
    """

    def __init__(self, compact: bool, nullable: bool, records: bool = False):
        super().__init__(compact, nullable)
        self.records = records

    def _parse(self, stream, context, path):
        n = self._read_len(stream, path, 4)
        if n < 0:
            return self._null(path)
        data = stream_read(stream, n, path)
        if self.records or type(data) is bytes:
            return data
        return bytes(data)

    def _build(self, obj, stream, context, path):
        if obj is None:
            self._null(path)
            self._write_len(-1, stream, path, 4)
            return obj
        if isinstance(obj, (list, tuple)):
            n = sum(_nbytes(c) for c in obj)
            self._write_len(n, stream, path, 4)
            for chunk in obj:
                stream.write(chunk)
            return obj
        self._write_len(_nbytes(obj), stream, path, 4)
        stream.write(obj)
        return obj


def _nbytes(buf) -> int:
    return buf.nbytes if isinstance(buf, memoryview) else len(buf)


class ViewReader:
    """A read-only stream over a buffer whose ``read`` returns zero-copy memoryview slices."""

    __slots__ = ("view", "pos")

    def __init__(self, data) -> None:
        self.view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
        self.pos = 0

    def read(self, n: int = -1):
        start = self.pos
        end = len(self.view) if n < 0 else min(start + n, len(self.view))
        self.pos = end
        return self.view[start:end]

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        self.pos = pos if whence == 0 else (self.pos + pos if whence == 1 else len(self.view) + pos)
        return self.pos

    def remaining(self) -> int:
        return len(self.view) - self.pos


class SegmentedWriter:
    """A write-only stream that keeps large buffers by reference (scatter-gather output).

    Small writes are coalesced into a bytearray; a buffer of ``threshold`` bytes
    or more becomes its own segment, so record batches reach ``sendmsg``
    without being copied.
    """

    __slots__ = ("segments", "buf", "threshold", "size")

    def __init__(self, threshold: int = 16384) -> None:
        self.segments: list = []
        self.buf = bytearray()
        self.threshold = threshold
        self.size = 0

    def write(self, data) -> int:
        n = _nbytes(data)
        if n >= self.threshold:
            if self.buf:
                self.segments.append(self.buf)
                self.buf = bytearray()
            self.segments.append(data)
        else:
            self.buf += data
        self.size += n
        return len(data)

    def tell(self) -> int:
        return self.size

    def getsegments(self) -> list:
        if self.buf:
            self.segments.append(self.buf)
            self.buf = bytearray()
        return self.segments


class KArray(_Sized):
    """ARRAY / COMPACT_ARRAY of ``subcon`` (int32 or varint count, -1/0 for null)."""

    def __init__(self, subcon: Construct, compact: bool, nullable: bool):
        super().__init__(compact, nullable)
        self.subcon = subcon

    def _parse(self, stream, context, path):
        n = self._read_len(stream, path, 4)
        if n < 0:
            return self._null(path)
        remaining = getattr(stream, "remaining", None)
        if remaining is not None and n > remaining():  # refused before allocating, as Kafka does
            raise StreamError(f"Tried to allocate a collection of size {n}, but there are only {remaining()} "
                              "bytes remaining.", path=path)
        sub = self.subcon._parsereport
        return ListContainer([sub(stream, context, path) for _ in range(n)])

    def _build(self, obj, stream, context, path):
        if obj is None:
            self._null(path)
            self._write_len(-1, stream, path, 4)
            return obj
        self._write_len(len(obj), stream, path, 4)
        build = self.subcon._build
        for item in obj:
            build(item, stream, context, path)
        return obj


class KUuid(Construct):
    """UUID: 16 raw bytes, as ``uuid.UUID``."""

    def _parse(self, stream, context, path):
        return uuid.UUID(bytes=bytes(stream_read(stream, 16, path)))

    def _build(self, obj, stream, context, path):
        if obj is None:
            obj = ZERO_UUID
        if isinstance(obj, (bytes, bytearray)):
            obj = uuid.UUID(bytes=bytes(obj))
        stream_write(stream, obj.bytes, 16, path)
        return obj

    def _sizeof(self, context, path):
        return 16


class KStruct(Construct):
    """A struct of named fields, closed by tagged fields in flexible versions.

    ``fields`` are ``(name, construct, default)`` in wire order; missing values
    are built from their default.  ``tagged`` maps tag number to
    ``(name, construct, default)``: such a field is written only when its value
    differs from the default, read when present, and unknown tags are skipped
    (kept raw under ``_unknown_tags`` so a round trip preserves them).
    ``flexible`` says whether the tagged-fields section exists at all.
    ``absent`` lists ``(name, default)`` of fields the version does not carry:
    they read back as their default, as in Kafka's generated message classes.
    """

    def __init__(self, fields, tagged=None, flexible=False, absent=()):
        super().__init__()
        self.fields = list(fields)
        self.tagged = dict(tagged or {})
        self.flexible = flexible
        self.absent = list(absent)
        self.flagbuildnone = True

    def _parse(self, stream, context, path):
        obj = Container()
        for name, default in self.absent:
            obj[name] = default() if callable(default) else default
        for name, sub, _default in self.fields:
            obj[name] = sub._parsereport(stream, context, path)
        if self.flexible:
            for name, _sub, default in self.tagged.values():
                obj[name] = default() if callable(default) else default
            count = read_uvarint(stream, path)
            unknown = None
            for _ in range(count):
                tag = read_uvarint(stream, path)
                size = read_uvarint(stream, path)
                raw = bytes(stream_read(stream, size, path))
                known = self.tagged.get(tag)
                if known is None:
                    if unknown is None:
                        unknown = {}
                    unknown[tag] = raw
                else:
                    obj[known[0]] = known[1].parse(raw)
            if unknown:
                obj["_unknown_tags"] = unknown
        return obj

    def _build(self, obj, stream, context, path):
        if obj is None:
            obj = {}
        get = obj.get
        for name, sub, default in self.fields:
            value = get(name, _MISSING)
            if value is _MISSING:
                value = default() if callable(default) else default
            sub._build(value, stream, context, path)
        if self.flexible:
            entries = []
            for tag, (name, sub, default) in self.tagged.items():
                value = get(name, _MISSING)
                dv = default() if callable(default) else default
                if value is _MISSING or value == dv:
                    continue
                entries.append((tag, sub.build(value)))
            unknown = get("_unknown_tags")
            if unknown:
                entries.extend(unknown.items())
            entries.sort(key=lambda e: e[0])
            b = write_uvarint(len(entries))
            stream_write(stream, b, len(b), path)
            for tag, raw in entries:
                b = write_uvarint(tag) + write_uvarint(len(raw))
                stream_write(stream, b, len(b), path)
                stream_write(stream, raw, len(raw), path)
        return obj


class KNullableStruct(Construct):
    """A struct field with ``nullableVersions``: an int8 marker, then the struct unless null.

    Kafka's generated code writes -1 for null and 1 before a present struct, and
    reads any negative marker as null (``ConsumerGroupHeartbeatResponse.Assignment``).
    """

    def __init__(self, subcon: KStruct) -> None:
        super().__init__()
        self.subcon = subcon
        self.flagbuildnone = True

    def _parse(self, stream, context, path):
        marker = stream_read(stream, 1, path)[0]
        if marker >= 0x80:
            return None
        return self.subcon._parsereport(stream, context, path)

    def _build(self, obj, stream, context, path):
        if obj is None:
            stream_write(stream, b"\xff", 1, path)
            return obj
        stream_write(stream, b"\x01", 1, path)
        self.subcon._build(obj, stream, context, path)
        return obj


_MISSING = object()
