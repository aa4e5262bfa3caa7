"""Decoding captured frames with minikafka.protocol, for the capture tests."""

from __future__ import annotations

from typing import Any

from minikafka.capture import CaptureRecord
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import parse_request_header, response_body_offset


def parse_request(r: CaptureRecord) -> Any:
    """The request body of a captured record (its header must match the record's fields)."""
    hdr = parse_request_header(r.request)
    assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (
        r.api_key, r.api_version, r.correlation_id, r.client_id)
    return APIS[r.api_key].request.parse(memoryview(r.request)[hdr.body_offset:], r.api_version)


def parse_response(r: CaptureRecord) -> Any:
    """The response body of a captured record (its correlation id must match)."""
    assert r.response is not None
    assert int.from_bytes(r.response[:4], "big", signed=True) == r.correlation_id
    off = response_body_offset(r.response, r.api_key, r.api_version)
    return APIS[r.api_key].response.parse(memoryview(r.response)[off:], r.api_version)
