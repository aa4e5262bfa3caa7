"""Decoding captured frames with minikafka.protocol, for the capture tests."""

from __future__ import annotations

from typing import Any

from minikafka.capture import CaptureRecord
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import (
    parse_request_header_prefix,
    response_header_version,
    skip_header_tags,
)


def parse_request(r: CaptureRecord) -> Any:
    """The request body of a captured record (its header must match the record's fields)."""
    hdr = parse_request_header_prefix(r.request)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (
        r.api_key, r.api_version, r.correlation_id, r.client_id)
    api = APIS[r.api_key]
    off = hdr.body_offset
    if api.is_flexible(r.api_version):
        off = skip_header_tags(r.request, off)
    return api.request.parse(memoryview(r.request)[off:], r.api_version)


def parse_response(r: CaptureRecord) -> Any:
    """The response body of a captured record (its correlation id must match)."""
    assert r.response is not None
    api = APIS[r.api_key]
    hv = response_header_version(r.api_key, api.is_flexible(r.api_version))
    assert int.from_bytes(r.response[:4], "big", signed=True) == r.correlation_id
    off = 4 if hv == 0 else skip_header_tags(r.response, 4)
    return api.response.parse(memoryview(r.response)[off:], r.api_version)
