"""Unit tests for the primitive wire types in minikafka.protocol.types."""

from __future__ import annotations

import io
import uuid

import pytest
from construct import StreamError

from minikafka.protocol.messages.heartbeat import HeartbeatRequest
from minikafka.protocol.messages.metadata import MetadataRequest
from minikafka.protocol.types import (
    INT32,
    KArray,
    KBytes,
    KString,
    KStruct,
    KUuid,
    UVarInt,
    VarIntZigZag,
    read_uvarint,
    uvarint_size,
    write_uvarint,
)

UVARINTS = [
    (0, b"\x00"),
    (1, b"\x01"),
    (127, b"\x7f"),
    (128, b"\x80\x01"),
    (300, b"\xac\x02"),
    (16383, b"\xff\x7f"),
    (16384, b"\x80\x80\x01"),
    (2**21 - 1, b"\xff\xff\x7f"),
    (2**21, b"\x80\x80\x80\x01"),
    (2**31 - 1, b"\xff\xff\xff\xff\x07"),
]


@pytest.mark.parametrize("value,encoded", UVARINTS)
def test_uvarint_boundaries(value: int, encoded: bytes) -> None:
    """LEB128 encoding, size and decoding at the 7-bit group boundaries."""
    assert write_uvarint(value) == encoded
    assert uvarint_size(value) == len(encoded)
    assert read_uvarint(io.BytesIO(encoded)) == value
    assert UVarInt().build(value) == encoded
    assert UVarInt().parse(encoded + b"trailing") == value


def test_uvarint_rejects_negative_and_overlong() -> None:
    """Negative values cannot be written; a never-ending varint is an error, not a hang."""
    with pytest.raises(ValueError):
        write_uvarint(-1)
    with pytest.raises(StreamError):
        read_uvarint(io.BytesIO(b"\x80" * 20))
    with pytest.raises(StreamError):
        read_uvarint(io.BytesIO(b"\x80\x80"))  # truncated


@pytest.mark.parametrize("value,encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (63, b"\x7e"),
    (64, b"\x80\x01"), (-65, b"\x81\x01"),
])
def test_zigzag_varint(value: int, encoded: bytes) -> None:
    """Signed varints use zig-zag: 0, -1, 1, -2, ... map to 0, 1, 2, 3, ..."""
    assert VarIntZigZag().build(value) == encoded
    assert VarIntZigZag().parse(encoded) == value


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 2**31 - 1, -(2**31)])
def test_zigzag_varint_extremes(value: int) -> None:
    """int64 extremes survive a zig-zag round trip (10 bytes at most)."""
    data = VarIntZigZag().build(value)
    assert len(data) <= 10
    assert VarIntZigZag().parse(data) == value


@pytest.mark.parametrize("con,null,empty", [
    (KString(compact=False, nullable=True), b"\xff\xff", b"\x00\x00"),
    (KString(compact=True, nullable=True), b"\x00", b"\x01"),
    (KBytes(compact=False, nullable=True), b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"),
    (KBytes(compact=True, nullable=True), b"\x00", b"\x01"),
    (KArray(INT32, compact=False, nullable=True), b"\xff\xff\xff\xff", b"\x00\x00\x00\x00"),
    (KArray(INT32, compact=True, nullable=True), b"\x00", b"\x01"),
], ids=["string", "compact_string", "bytes", "compact_bytes", "array", "compact_array"])
def test_null_and_empty_encodings(con, null: bytes, empty: bytes) -> None:
    """Null is length -1 (classic) or uvarint 0 (compact); empty is 0 or uvarint 1."""
    assert con.build(None) == null
    assert con.parse(null) is None
    empty_value = {KString: "", KBytes: b"", KArray: []}[type(con)]
    assert con.build(empty_value) == empty
    assert con.parse(empty) == empty_value


@pytest.mark.parametrize("con,null", [
    (KString(compact=False, nullable=False), b"\xff\xff"),
    (KString(compact=True, nullable=False), b"\x00"),
    (KBytes(compact=False, nullable=False), b"\xff\xff\xff\xff"),
    (KBytes(compact=True, nullable=False), b"\x00"),
    (KArray(INT32, compact=False, nullable=False), b"\xff\xff\xff\xff"),
    (KArray(INT32, compact=True, nullable=False), b"\x00"),
], ids=["string", "compact_string", "bytes", "compact_bytes", "array", "compact_array"])
def test_null_rejected_when_not_nullable(con, null: bytes) -> None:
    """A non-nullable field refuses to build None and refuses to parse a null length."""
    with pytest.raises(StreamError):
        con.build(None)
    with pytest.raises(StreamError):
        con.parse(null)


def test_null_rejected_through_a_message() -> None:
    """HeartbeatRequest.group_id is never nullable; group_instance_id is from v3."""
    ok = {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    assert HeartbeatRequest.parse(HeartbeatRequest.build(ok, 3), 3).group_instance_id is None
    with pytest.raises(StreamError):
        HeartbeatRequest.build({**ok, "group_id": None}, 3)
    with pytest.raises(StreamError):
        HeartbeatRequest.build({**ok, "member_id": None}, 4)
    # MetadataRequest.topics is nullable only from v1.
    with pytest.raises(StreamError):
        MetadataRequest.build({"topics": None}, 0)


def test_string_length_counts_utf8_bytes() -> None:
    """String lengths are UTF-8 byte counts, not characters."""
    assert KString(compact=False, nullable=False).build("é€") == b"\x00\x05" + "é€".encode()
    assert KString(compact=True, nullable=False).build("é€") == b"\x06" + "é€".encode()
    assert KString(compact=True, nullable=False).parse(b"\x06" + "é€".encode()) == "é€"


def test_uuid() -> None:
    """UUIDs are 16 raw bytes; None builds as the zero UUID."""
    u = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    assert KUuid().build(u) == u.bytes
    assert KUuid().parse(u.bytes) == u
    assert KUuid().build(None) == bytes(16)
    assert KUuid().sizeof() == 16


def test_kstruct_tagged_fields() -> None:
    """Known tags are written only when not default, in tag order; unknown ones round-trip."""
    s = KStruct(
        [("a", INT32, 0)],
        {1: ("t1", INT32, -1), 5: ("t5", KString(True, True), None)},
        flexible=True,
    )
    assert s.build({"a": 1}) == b"\x00\x00\x00\x01\x00"
    assert s.build({"a": 1, "t1": -1}) == b"\x00\x00\x00\x01\x00"  # default: omitted
    data = s.build({"a": 1, "t5": "x", "t1": 2})
    assert data == b"\x00\x00\x00\x01" + b"\x02" + b"\x01\x04\x00\x00\x00\x02" + b"\x05\x02\x02x"
    parsed = s.parse(b"\x00\x00\x00\x01" + b"\x02" + b"\x03\x01q" + b"\x05\x02\x02x")
    assert (parsed.a, parsed.t1, parsed.t5) == (1, -1, "x")
    assert parsed._unknown_tags == {3: b"q"}
    assert s.build(parsed) == b"\x00\x00\x00\x01" + b"\x02" + b"\x03\x01q" + b"\x05\x02\x02x"


def test_kstruct_classic_has_no_tag_section() -> None:
    """A non-flexible struct writes only its fields."""
    s = KStruct([("a", INT32, 0), ("b", KString(False, True), None)])
    assert s.build({"a": 2}) == b"\x00\x00\x00\x02\xff\xff"
    assert s.parse(b"\x00\x00\x00\x02\xff\xff") == {"a": 2, "b": None}
