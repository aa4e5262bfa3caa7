"""Request and response headers: their versions, where bodies start, and frames split into header and body.

The one place header layouts and body offsets are computed: the broker, the
clients, capture, pcap reading, replay and the analysis decoder all call these.
A frame here is a Kafka frame without its 4-byte size prefix
(:mod:`minikafka.protocol.framing` cuts them).

Which header version a request or response uses depends on its api key and
version; that answer is looked up once per known (api key, version) pair, so
:func:`request_body_offset` and :func:`response_body_offset` cost an unpack
and a dict look-up (they are on the analysis decoder's hot path).
"""

from __future__ import annotations

import struct as _struct
from typing import Any, NamedTuple

from construct import ConstructError

from .api import APIS, Api
from .exceptions import MalformedMessage, UnknownApi, UnsupportedVersion
from .schema import Message, f
from .types import uvarint_at

__all__ = [
    "API_VERSIONS_KEY", "CONTROLLED_SHUTDOWN_KEY", "ParsedHeader", "RequestHeader", "ResponseHeader",
    "encode_response_header", "is_flexible", "parse_request_frame", "parse_request_header",
    "parse_request_header_prefix", "parse_response_frame", "request_body_offset", "request_header_version",
    "response_body_offset", "response_correlation_id", "response_header_bytes", "response_header_version",
    "skip_header_tags",
]

RequestHeader = Message("RequestHeader", -1, "0-2", "2+", [
    f("request_api_key", "int16"),
    f("request_api_version", "int16"),
    f("correlation_id", "int32"),
    f("client_id", "string", "1+", nullable="1+", default=None, flexible="none", entity="clientId"),
])

ResponseHeader = Message("ResponseHeader", -1, "0-1", "1+", [
    f("correlation_id", "int32"),
])

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7

_HDR = _struct.Struct(">hhih")  # api key, api version, correlation id, client id length


class ParsedHeader(NamedTuple):
    """The fields of a request header and where the body starts."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


# -- header versions ---------------------------------------------------------------------------

def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether ``api_version`` of ``api_key`` is a flexible version (False for an api key minikafka lacks)."""
    api = APIS.get(api_key)
    return api is not None and api.is_flexible(api_version)


def request_header_version(api_key: int, flexible: bool) -> int:
    """Header v2 for flexible API versions, v1 otherwise (v0 only for ControlledShutdown v0)."""
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    """Header v1 for flexible versions, except ApiVersions which always answers with v0."""
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0


# (api key, api version) -> whether its request header has a tagged-field section (v2), and its
# response header (v1); filled as pairs are met, for the versions minikafka declares only (bounded).
_REQUEST_TAGS: dict[tuple[int, int], bool] = {}
_RESPONSE_TAGS: dict[tuple[int, int], bool] = {}


def _header_tags(api_key: int, api_version: int) -> tuple[bool, bool]:
    """(request header has tags, response header has tags), remembered for declared versions."""
    flexible = is_flexible(api_key, api_version)
    request = request_header_version(api_key, flexible) >= 2
    response = response_header_version(api_key, flexible) >= 1
    api = APIS.get(api_key)
    if api is not None and api.request.supports(api_version):
        _REQUEST_TAGS[(api_key, api_version)] = request
        _RESPONSE_TAGS[(api_key, api_version)] = response
    return request, response


# -- requests ---------------------------------------------------------------------------------

def parse_request_header_prefix(frame: bytes | bytearray | memoryview) -> ParsedHeader:
    """Read the v1 part of a request header (the part every version shares).

    ``body_offset`` is where that part ends: for a v2 header its tagged-field
    section starts there (:func:`skip_header_tags`; :func:`parse_request_header`
    does both).
    """
    try:
        api_key, api_version, correlation_id, n = _HDR.unpack_from(frame, 0)
    except _struct.error as exc:
        raise MalformedMessage(f"request header: {len(frame)} bytes are too short for a header") from exc
    off = 10
    client_id = None
    if n >= 0:
        client_id = bytes(frame[off:off + n]).decode("utf-8", "replace")
        off += n
    return ParsedHeader(api_key, api_version, correlation_id, client_id, off)


def skip_header_tags(frame: bytes | bytearray | memoryview, offset: int) -> int:
    """Skip a header's tagged-field section starting at ``offset``; return the offset after it.

    :class:`MalformedMessage` if the section is truncated or its varints are bad."""
    try:
        if frame[offset] == 0:  # no tagged fields: the usual case
            return offset + 1
        count, offset = uvarint_at(frame, offset)
        for _ in range(count):
            _tag, offset = uvarint_at(frame, offset)
            size, offset = uvarint_at(frame, offset)
            offset += size
    except (IndexError, ConstructError) as exc:
        raise MalformedMessage(f"truncated or malformed header tagged fields: {exc}") from exc
    if offset > len(frame):
        raise MalformedMessage("truncated header tagged fields")
    return offset


def parse_request_header(frame: bytes | bytearray | memoryview) -> ParsedHeader:
    """The request header, with ``body_offset`` past a v2 header's tagged fields."""
    hdr = parse_request_header_prefix(frame)
    key = (hdr.api_key, hdr.api_version)
    tags = _REQUEST_TAGS.get(key)
    if tags is None:
        tags = _header_tags(*key)[0]
    return hdr._replace(body_offset=skip_header_tags(frame, hdr.body_offset)) if tags else hdr


def request_body_offset(frame: bytes | bytearray | memoryview) -> int:
    """``parse_request_header(frame).body_offset`` (same result, same exceptions), without decoding
    the client id."""
    try:
        api_key, api_version, _correlation_id, n = _HDR.unpack_from(frame, 0)
    except _struct.error as exc:
        raise MalformedMessage(f"request header: {len(frame)} bytes are too short for a header") from exc
    off = 10 + n if n >= 0 else 10
    tags = _REQUEST_TAGS.get((api_key, api_version))
    if tags is None:
        tags = _header_tags(api_key, api_version)[0]
    if not tags:
        return off
    return off + 1 if off < len(frame) and frame[off] == 0 else skip_header_tags(frame, off)


def _api(api_key: int) -> Api:
    """The api ``api_key`` names; :class:`UnknownApi` (a ``KeyError``) if minikafka does not know it."""
    api = APIS.get(api_key)
    if api is None:
        raise UnknownApi(api_key)
    return api


def parse_request_frame(frame: bytes | bytearray | memoryview) -> tuple[ParsedHeader, Any]:
    """(header, body) of a request frame; ``records`` fields are memoryviews into ``frame``.

    Raises :class:`UnknownApi` (also a ``KeyError``) for an api key minikafka does not know,
    :class:`UnsupportedVersion` for a version it does not know, :class:`MalformedMessage` for a
    header or body that does not parse: all :class:`ProtocolError`.
    """
    hdr = parse_request_header(frame)
    api = _api(hdr.api_key)
    if not api.request.supports(hdr.api_version):
        raise UnsupportedVersion(f"{api.name} v{hdr.api_version} is not supported", hdr.api_key, hdr.api_version)
    return hdr, api.request.parse(memoryview(frame)[hdr.body_offset:], hdr.api_version)


# -- responses --------------------------------------------------------------------------------

def response_correlation_id(frame: bytes | bytearray | memoryview) -> int:
    """The correlation id a response frame starts with (what its bytes give, if fewer than 4)."""
    return int.from_bytes(frame[:4], "big", signed=True)


def response_body_offset(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> int:
    """Where the body of a response to ``api_key``/``api_version`` starts (after the correlation id
    and, at header v1, its tagged fields)."""
    tags = _RESPONSE_TAGS.get((api_key, api_version))
    if tags is None:
        tags = _header_tags(api_key, api_version)[1]
    if not tags:
        return 4
    return 5 if len(frame) > 4 and frame[4] == 0 else skip_header_tags(frame, 4)


def parse_response_frame(frame: bytes | bytearray | memoryview, api_key: int,
                         api_version: int) -> tuple[int, Any]:
    """(correlation id, body) of a response frame to a request of ``api_key``/``api_version``;
    ``records`` fields are memoryviews into ``frame``.  :class:`UnknownApi` (a ``KeyError``) for an
    unknown api key, :class:`MalformedMessage` for a frame that does not parse."""
    api = _api(api_key)
    off = response_body_offset(frame, api_key, api_version)
    return response_correlation_id(frame), api.response.parse(memoryview(frame)[off:], api_version)


def encode_response_header(correlation_id: int, version: int) -> bytes:
    """Response header bytes: correlation id, plus an empty tag section at v1."""
    head = correlation_id.to_bytes(4, "big", signed=True)
    return head + b"\x00" if version >= 1 else head


def response_header_bytes(correlation_id: int, api_key: int, api_version: int) -> bytes:
    """The response header a broker writes for a request of ``api_key``/``api_version``."""
    tags = _RESPONSE_TAGS.get((api_key, api_version))
    if tags is None:
        tags = _header_tags(api_key, api_version)[1]
    return encode_response_header(correlation_id, 1 if tags else 0)
