"""Decode captured frames (request and response) with minikafka's protocol layer.

Shared by the analysis data source, the pcap reader and wire replay.  Pure
functions, no I/O: a frame is the Kafka frame without its 4-byte size prefix.
"""

from __future__ import annotations

from typing import Any

from ..protocol.api import APIS
from ..protocol.headers import (
    ParsedHeader,
    encode_response_header,
    parse_request_header_prefix,
    request_header_version,
    response_header_version,
    skip_header_tags,
)

__all__ = [
    "ParsedHeader", "api_name", "is_flexible", "parse_request_frame", "parse_request_header",
    "parse_response_frame", "request_body_offset", "response_body_offset", "rewrite_correlation_id",
]


def api_name(api_key: int) -> str:
    """Kafka's name of an api key ("Fetch"), or "Unknown<key>"."""
    api = APIS.get(api_key)
    return api.name if api is not None else f"Unknown{api_key}"


def is_flexible(api_key: int, api_version: int) -> bool:
    api = APIS.get(api_key)
    return api is not None and api.is_flexible(api_version)


def parse_request_header(frame: bytes | memoryview) -> ParsedHeader:
    """The request header, with ``body_offset`` past any header tagged fields."""
    hdr = parse_request_header_prefix(frame)
    if request_header_version(hdr.api_key, is_flexible(hdr.api_key, hdr.api_version)) >= 2:
        return hdr._replace(body_offset=skip_header_tags(frame, hdr.body_offset))
    return hdr


def request_body_offset(frame: bytes | memoryview) -> int:
    return parse_request_header(frame).body_offset


def response_body_offset(frame: bytes | memoryview, api_key: int, api_version: int) -> int:
    """Where a response body starts (after correlation id and, at header v1, its tags)."""
    if response_header_version(api_key, is_flexible(api_key, api_version)) == 0:
        return 4
    return skip_header_tags(frame, 4)


def parse_request_frame(frame: bytes | memoryview) -> tuple[ParsedHeader, Any]:
    """(header, body) of a request frame; ``records`` fields are memoryviews into ``frame``.

    Raises KeyError for an api key minikafka does not know, ValueError (or a
    construct error) for a version it does not know or a malformed body.
    """
    hdr = parse_request_header(frame)
    api = APIS[hdr.api_key]
    if not api.request.supports(hdr.api_version):
        raise ValueError(f"{api.name} v{hdr.api_version} is not supported")
    return hdr, api.request.parse(memoryview(frame)[hdr.body_offset:], hdr.api_version)


def parse_response_frame(frame: bytes | memoryview, api_key: int, api_version: int) -> tuple[int, Any]:
    """(correlation id, body) of a response frame to a request of ``api_key``/``api_version``."""
    api = APIS[api_key]
    correlation_id = int.from_bytes(frame[:4], "big", signed=True)
    off = response_body_offset(frame, api_key, api_version)
    return correlation_id, api.response.parse(memoryview(frame)[off:], api_version)


def rewrite_correlation_id(frame: bytes | memoryview, correlation_id: int) -> bytes:
    """A copy of a request frame with another correlation id (bytes 4-8 of every request header)."""
    b = bytearray(frame)
    b[4:8] = correlation_id.to_bytes(4, "big", signed=True)
    return bytes(b)


def response_header_bytes(correlation_id: int, api_key: int, api_version: int) -> bytes:
    """The response header a broker writes for this request."""
    return encode_response_header(correlation_id, response_header_version(api_key, is_flexible(api_key, api_version)))
