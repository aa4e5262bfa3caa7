"""Request and response headers (versions 0-2 and 0-1), and which one an API version uses."""

from __future__ import annotations

import struct as _struct
from typing import NamedTuple

from .schema import Message, f
from .types import uvarint_at

RequestHeader = Message("RequestHeader", -1, "0-2", "2+", [
    f("request_api_key", "int16"),
    f("request_api_version", "int16"),
    f("correlation_id", "int32"),
    f("client_id", "string", "1+", nullable="1+", default=None, flexible="none"),
])

ResponseHeader = Message("ResponseHeader", -1, "0-1", "1+", [
    f("correlation_id", "int32"),
])

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

_HDR = _struct.Struct(">hhih")


class ParsedHeader(NamedTuple):
    """The fields of a request header and where the body starts."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def request_header_version(api_key: int, flexible: bool) -> int:
    """Header v2 for flexible API versions, v1 otherwise (v0 only for ControlledShutdown v0)."""
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    """Header v1 for flexible versions, except ApiVersions which always answers with v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


def parse_request_header_prefix(frame: bytes | memoryview) -> ParsedHeader:
    """Fast path: read the v1 part of a request header (the part every version shares).

    The tagged-field section of a v2 header, if any, starts at ``body_offset``
    and is consumed by :func:`skip_header_tags`.
    """
    api_key, api_version, correlation_id, n = _HDR.unpack_from(frame, 0)
    off = 10
    client_id = None
    if n >= 0:
        client_id = bytes(frame[off:off + n]).decode("utf-8", "replace")
        off += n
    return ParsedHeader(api_key, api_version, correlation_id, client_id, off)


def skip_header_tags(frame: bytes | memoryview, offset: int) -> int:
    """Skip the tagged fields of a v2 request header; return the body offset."""
    count, offset = uvarint_at(frame, offset)
    for _ in range(count):
        _tag, offset = uvarint_at(frame, offset)
        size, offset = uvarint_at(frame, offset)
        offset += size
    if offset > len(frame):
        raise ValueError("truncated header tagged fields")
    return offset


def encode_response_header(correlation_id: int, version: int) -> bytes:
    """Response header bytes: correlation id, plus an empty tag section at v1."""
    head = correlation_id.to_bytes(4, "big", signed=True)
    return head + b"\x00" if version >= 1 else head
