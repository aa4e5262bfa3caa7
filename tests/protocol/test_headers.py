"""The one implementation of header layouts and body offsets (minikafka.protocol.headers)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, strategies as st

from minikafka.protocol import headers as H
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.exceptions import MalformedMessage
from minikafka.protocol.headers import (
    RequestHeader, encode_response_header, is_flexible, parse_request_frame, parse_request_header,
    parse_request_header_prefix, parse_response_frame, request_body_offset, request_header_version,
    response_body_offset, response_correlation_id, response_header_bytes, response_header_version,
    skip_header_tags,
)
from minikafka.protocol.types import uvarint_at

TAGS = b"\x02" + b"\x00\x03abc" + b"\xac\x02\x01z"  # two tagged fields: tag 0 (3 bytes), tag 300 (1 byte)


def _reference_request_body_offset(frame: bytes) -> int:
    """Straight from the header definitions: v1 part, then tagged fields when the header is v2."""
    api_key, api_version, _corr, n = struct.unpack_from(">hhih", frame)
    off = 10 + max(n, 0)
    if request_header_version(api_key, is_flexible(api_key, api_version)) < 2:
        return off
    count, off = uvarint_at(frame, off)
    for _ in range(count):
        off = uvarint_at(frame, uvarint_at(frame, off)[1])
        off = off[1] + off[0]
    if off > len(frame):
        raise ValueError("truncated")
    return off


def _outcome(fn, *args):
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the kind of failure is what is compared
        return type(exc)


def _request(api_key: int, version: int, client_id: str | None = "c-1", tags: bytes = b"\x00") -> bytes:
    hv = request_header_version(api_key, is_flexible(api_key, version))
    head = RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                "correlation_id": 42, "client_id": client_id}, 1)
    return head + (tags if hv >= 2 else b"") + b"BODY"


@pytest.mark.parametrize("api_key,version", [(k, v) for k, api in sorted(APIS.items())
                                             for v in (api.min_version, api.max_version)])
def test_request_body_offset_for_every_api(api_key, version):
    for tags in (b"\x00", TAGS):
        frame = _request(api_key, version, tags=tags)
        hdr = parse_request_header(frame)
        assert (hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id) == (api_key, version, 42, "c-1")
        assert frame[hdr.body_offset:] == b"BODY"
        assert request_body_offset(frame) == request_body_offset(memoryview(frame)) == hdr.body_offset
        assert request_body_offset(bytearray(frame)) == hdr.body_offset


@given(st.integers(-1, 70), st.integers(-2, 20), st.integers(-3, 12), st.binary(max_size=24))
def test_request_body_offset_is_parse_request_header_on_any_bytes(api_key, version, n, tail):
    """Same answer or same exception as the full header parse and the definitions, on any bytes."""
    frame = struct.pack(">hhih", api_key, version, 7, n) + tail
    got = _outcome(request_body_offset, frame)
    assert got == _outcome(lambda f: parse_request_header(f).body_offset, frame)
    ref = _outcome(_reference_request_body_offset, frame)
    assert got == ref or (isinstance(got, type) and isinstance(ref, type))


def test_response_body_offset_and_header_bytes():
    body = b"BODY"
    for api_key, api in APIS.items():
        for version in range(api.min_version, api.max_version + 1):
            hv = response_header_version(api_key, api.is_flexible(version))
            head = response_header_bytes(-5, api_key, version)
            assert head == encode_response_header(-5, hv)
            assert response_body_offset(head + body, api_key, version) == len(head)
            if hv:
                tagged = head[:4] + TAGS + body
                assert response_body_offset(tagged, api_key, version) == len(tagged) - 4
            assert response_correlation_id(head + body) == -5
    # ApiVersions answers with header v0 even in its flexible versions (KIP-511).
    assert response_body_offset(b"\x00\x00\x00\x01\x00", ApiKey.API_VERSIONS, 3) == 4
    assert response_body_offset(b"\x00\x00\x00\x01\x00", ApiKey.METADATA, 12) == 5
    with pytest.raises(ValueError):
        response_body_offset(b"\x00\x00\x00\x01\x01\x00\x05ab", ApiKey.METADATA, 12)
    with pytest.raises(MalformedMessage):  # was an IndexError before the ProtocolError hierarchy (issue 29)
        response_body_offset(b"\x00\x00\x00\x01", ApiKey.METADATA, 12)


def test_parse_frames_give_header_and_body():
    api = APIS[ApiKey.METADATA]
    req = api.request.build({"topics": None}, 12)
    frame = _request(ApiKey.METADATA, 12, tags=TAGS)[:-4] + req
    hdr, body = parse_request_frame(frame)
    assert hdr.body_offset == len(frame) - len(req) and body.topics is None
    resp = api.response.build({"brokers": [], "topics": []}, 12)
    corr, parsed = parse_response_frame(encode_response_header(9, 1) + resp, ApiKey.METADATA, 12)
    assert corr == 9 and parsed.brokers == []
    with pytest.raises(ValueError):
        parse_request_frame(_request(ApiKey.METADATA, 99))
    with pytest.raises(KeyError):
        parse_request_frame(_request(999, 0))


def test_skip_header_tags_empty_section_shortcut_matches_the_general_path():
    frame = _request(ApiKey.FETCH, 12)
    start = parse_request_header_prefix(frame).body_offset
    assert skip_header_tags(frame, start) == start + 1
    with pytest.raises(MalformedMessage):  # was an IndexError before the ProtocolError hierarchy (issue 29)
        skip_header_tags(frame[:start], start)


def test_header_version_cache_holds_declared_versions_only():
    assert request_body_offset(struct.pack(">hhih", 1234, 5, 0, -1)) == 10
    assert request_body_offset(struct.pack(">hhih", ApiKey.FETCH, 30000, 0, -1) + b"\x00") == 11  # "12+"
    assert (1234, 5) not in H._REQUEST_TAGS and (ApiKey.FETCH, 30000) not in H._REQUEST_TAGS
    request_body_offset(_request(ApiKey.FETCH, 12))
    assert H._REQUEST_TAGS[(ApiKey.FETCH, 12)] is True and H._RESPONSE_TAGS[(ApiKey.FETCH, 12)] is True
