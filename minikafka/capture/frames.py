"""Decode captured frames (request and response) with minikafka's protocol layer.

Shared by the analysis data source, the pcap reader and wire replay.  Pure
functions, no I/O: a frame is the Kafka frame without its 4-byte size prefix.
Header layouts and body offsets live in :mod:`minikafka.protocol.headers`;
they are re-exported here for the capture code's callers.
"""

from __future__ import annotations

from ..protocol.api import APIS
from ..protocol.headers import (
    ParsedHeader,
    is_flexible,
    parse_request_frame,
    parse_request_header,
    parse_response_frame,
    request_body_offset,
    response_body_offset,
    response_header_bytes,
)

__all__ = [
    "ParsedHeader", "api_name", "is_flexible", "parse_request_frame", "parse_request_header",
    "parse_response_frame", "request_body_offset", "response_body_offset", "response_header_bytes",
    "rewrite_correlation_id",
]


def api_name(api_key: int) -> str:
    """Kafka's name of an api key ("Fetch"), or "Unknown<key>"."""
    api = APIS.get(api_key)
    return api.name if api is not None else f"Unknown{api_key}"


def rewrite_correlation_id(frame: bytes | bytearray | memoryview, correlation_id: int) -> bytes:
    """A copy of a request frame with another correlation id (bytes 4-8 of every request header)."""
    b = bytearray(frame)
    b[4:8] = correlation_id.to_bytes(4, "big", signed=True)
    return bytes(b)
