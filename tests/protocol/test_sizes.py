"""Byte-exact sizes against hand-computed figures (SPEC.md sections 3 and 5, and classic cases).

Every expected size is derived in a comment from the wire format: int8 1,
int16 2, int32 4, int64 8, classic string 2 + len, classic bytes/array 4 + len,
compact string/bytes/array uvarint(len + 1) + len, and one uvarint (here a
single 0x00 byte) for each empty tagged-field section in flexible versions.
"""

from __future__ import annotations

import pytest

from minikafka.protocol.headers import (
    RequestHeader,
    ResponseHeader,
    encode_response_header,
    parse_request_header_prefix,
    request_header_version,
    response_header_version,
    skip_header_tags,
)
from minikafka.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from minikafka.protocol.messages.fetch import FetchRequest, FetchResponse
from minikafka.protocol.messages.metadata import MetadataRequest
from minikafka.protocol.messages.produce import ProduceRequest


def follower_fetch(version: int, partitions: int = 500) -> dict:
    """The seed's follower fetch: replica 1 fetching ``partitions`` partitions of ``test``."""
    return {
        "replica_id": 1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 10 * 1024 * 1024,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": 0,
        "topics": [{
            "topic": "test",
            "partitions": [
                {"partition": p, "fetch_offset": 0, "log_start_offset": 0,
                 "partition_max_bytes": 1024 * 1024}
                for p in range(partitions)
            ],
        }],
        "forgotten_topics_data": [],
    }


# --- SPEC.md section 3: fetch session figures -------------------------------------------

def test_fetch_v6_full_request_is_12031_bytes() -> None:
    """Fetch v6, 500 partitions of ``test``: 12031 bytes of body."""
    # replica_id 4 + max_wait_ms 4 + min_bytes 4 + max_bytes 4 + isolation_level 1 = 17
    # topics count 4 + topic "test" (2 + 4) + partitions count 4              = 14
    # 500 x (partition 4 + fetch_offset 8 + log_start_offset 8 + max_bytes 4) = 500 x 24 = 12000
    # 17 + 14 + 12000                                                         = 12031
    assert len(FetchRequest.build(follower_fetch(6), 6)) == 12031


def test_fetch_v7_full_request_is_12043_bytes() -> None:
    """Fetch v7 first (full) fetch, session 0 epoch 0: 12031 + 12 = 12043 bytes."""
    # v6's 12031 + session_id 4 + session_epoch 4 + empty forgotten_topics_data count 4
    data = FetchRequest.build(follower_fetch(7), 7)
    assert len(data) == 12043
    parsed = FetchRequest.parse(data, 7)
    assert (parsed.session_id, parsed.session_epoch) == (0, 0)
    assert len(parsed.topics[0].partitions) == 500


def test_fetch_v7_incremental_request_is_33_bytes() -> None:
    """An incremental v7 fetch naming no partitions: 33 bytes, about 365x less than 12043."""
    incremental = {"replica_id": 1, "max_wait_ms": 500, "min_bytes": 1,
                   "max_bytes": 10 * 1024 * 1024, "isolation_level": 0,
                   "session_id": 123456, "session_epoch": 1,
                   "topics": [], "forgotten_topics_data": []}
    # replica_id 4 + max_wait 4 + min_bytes 4 + max_bytes 4 + isolation_level 1
    # + session_id 4 + epoch 4 + empty topics 4 + empty forgotten 4 = 33
    data = FetchRequest.build(incremental, 7)
    assert len(data) == 33
    assert data[-8:] == b"\x00\x00\x00\x00" * 2  # the two empty classic arrays
    assert round(12043 / len(data)) == 365


def test_fetch_sizes_grow_with_later_versions() -> None:
    """v9 adds current_leader_epoch (4 per partition); v11 adds rack_id (2 for "")."""
    # v9: 12043 + 500 x 4 = 14043;  v11: 14043 + empty rack_id string 2 = 14045
    assert len(FetchRequest.build(follower_fetch(9), 9)) == 14043
    assert len(FetchRequest.build(follower_fetch(11), 11)) == 14045


# --- SPEC.md section 5: empty FetchResponse (the throttled-partition phantom) -----------

EMPTY_FETCH_RESPONSE = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": []}


@pytest.mark.parametrize("version", [4, 5, 6])
def test_empty_fetch_response_v4_to_v6(version: int) -> None:
    """throttle_time_ms 4 + empty responses count 4 = 8; with the size prefix 12."""
    data = FetchResponse.build(EMPTY_FETCH_RESPONSE, version)
    assert len(data) == 8
    assert 4 + len(data) == 12


@pytest.mark.parametrize("version", [7, 8, 9, 10, 11])
def test_empty_fetch_response_v7_to_v11(version: int) -> None:
    """throttle 4 + error_code 2 + session_id 4 + empty responses 4 = 14; prefixed 18."""
    data = FetchResponse.build(EMPTY_FETCH_RESPONSE, version)
    assert len(data) == 14
    assert 4 + len(data) == 18


@pytest.mark.parametrize("version", [12, 13])
def test_empty_fetch_response_flexible(version: int) -> None:
    """throttle 4 + error_code 2 + session_id 4 + compact empty array 1 + tags 1 = 12."""
    data = FetchResponse.build(EMPTY_FETCH_RESPONSE, version)
    assert data == b"\x00" * 10 + b"\x01\x00"


# --- ApiVersions -------------------------------------------------------------------------

def test_api_versions_v0_request_is_empty() -> None:
    """ApiVersions v0 has no request fields: a zero-byte body."""
    assert ApiVersionsRequest.build({}, 0) == b""
    assert ApiVersionsRequest.parse(b"", 0) is not None


def test_api_versions_v0_response() -> None:
    """error_code 2 + api_keys count 4 + 2 x (api_key 2 + min 2 + max 2) = 18 bytes."""
    obj = {"error_code": 35, "api_keys": [
        {"api_key": 0, "min_version": 3, "max_version": 9},
        {"api_key": 18, "min_version": 0, "max_version": 3},
    ]}
    data = ApiVersionsResponse.build(obj, 0)
    assert data == bytes.fromhex("0023" "00000002" "0000" "0003" "0009" "0012" "0000" "0003")
    assert len(data) == 18
    assert ApiVersionsResponse.parse(data, 0).api_keys[1].max_version == 3


def test_api_versions_v3_request_is_compact() -> None:
    """Compact strings "mk" (1 + 2) and "1.0" (1 + 3) + empty tags 1 = 8 bytes."""
    data = ApiVersionsRequest.build(
        {"client_software_name": "mk", "client_software_version": "1.0"}, 3)
    assert data == b"\x03mk\x041.0\x00"


# --- Produce -----------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 61, 1000])
def test_produce_v3_one_partition(n: int) -> None:
    """Produce v3, topic "test", one partition, records blob of n bytes: 30 + n bytes."""
    # transactional_id null 2 + acks 2 + timeout_ms 4                 = 8
    # topic_data count 4 + name "test" (2 + 4)                         = 10
    # partition_data count 4 + index 4 + records length 4 + n          = 12 + n
    # 8 + 10 + 12 + n                                                  = 30 + n
    obj = {"transactional_id": None, "acks": -1, "timeout_ms": 30000, "topic_data": [
        {"name": "test", "partition_data": [{"index": 0, "records": b"\xab" * n}]},
    ]}
    data = ProduceRequest.build(obj, 3)
    assert len(data) == 30 + n
    assert data[:2] == b"\xff\xff"  # null transactional_id
    assert data[26:30] == n.to_bytes(4, "big")
    assert ProduceRequest.parse(data, 3).topic_data[0].partition_data[0].records == b"\xab" * n


def test_produce_v9_one_partition_is_compact() -> None:
    """Flexible Produce v9, one partition with 100 record bytes: 122 bytes."""
    # transactional_id null: compact 0x00 1 + acks 2 + timeout_ms 4          = 7
    # topic_data compact count 1 + name "test" (1 + 4)                       = 6
    # partition_data compact count 1 + index 4 + records (uvarint 101 = 1) + 100 + partition tags 1
    #                                                                         = 107
    # topic tags 1 + root tags 1                                              = 2
    # 7 + 6 + 107 + 2                                                         = 122
    obj = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "test", "partition_data": [{"index": 0, "records": bytes(100)}]},
    ]}
    assert len(ProduceRequest.build(obj, 9)) == 122


# --- Metadata: classic vs compact --------------------------------------------------------

def test_metadata_v1_two_topics() -> None:
    """topics count 4 + "a" (2 + 1) + "bc" (2 + 2) = 11 bytes."""
    data = MetadataRequest.build({"topics": [{"name": "a"}, {"name": "bc"}]}, 1)
    assert data == b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bc"


def test_metadata_v1_null_topics_means_all() -> None:
    """A null topics array (all topics) is the 4-byte length -1 at v1."""
    data = MetadataRequest.build({"topics": None}, 1)
    assert data == b"\xff\xff\xff\xff"
    assert MetadataRequest.parse(data, 1).topics is None


def test_metadata_v8_vs_v9_compact() -> None:
    """The same request, classic v8 (14 bytes) and flexible v9 (12 bytes)."""
    obj = {"topics": [{"name": "a"}, {"name": "bc"}], "allow_auto_topic_creation": True,
           "include_cluster_authorized_operations": False,
           "include_topic_authorized_operations": True}
    # v8: count 4 + "a" (2 + 1) + "bc" (2 + 2) + three bools 3 = 14
    v8 = MetadataRequest.build(obj, 8)
    assert v8 == b"\x00\x00\x00\x02\x00\x01a\x00\x02bc\x01\x00\x01"
    # v9: count uvarint(2 + 1) 1 + ("a": 1 + 1, tags 1) + ("bc": 1 + 2, tags 1)
    #     + three bools 3 + root tags 1 = 1 + 3 + 4 + 3 + 1 = 12
    v9 = MetadataRequest.build(obj, 9)
    assert v9 == b"\x03" + b"\x02a\x00" + b"\x03bc\x00" + b"\x01\x00\x01" + b"\x00"
    # null topics: classic length -1 (4 bytes) vs compact 0 (1 byte)
    assert MetadataRequest.build({**obj, "topics": None}, 8)[:4] == b"\xff\xff\xff\xff"
    assert MetadataRequest.build({**obj, "topics": None}, 9)[:1] == b"\x00"


@pytest.mark.parametrize("length,prefix", [(0, 1), (126, 1), (127, 2), (16382, 2), (16383, 3)])
def test_compact_string_length_prefix(length: int, prefix: int) -> None:
    """A compact string carries uvarint(len + 1): 1 byte up to 126 chars, 2 from 127."""
    obj = {"topics": [{"name": "x" * length}], "allow_auto_topic_creation": True,
           "include_topic_authorized_operations": False}
    # v9: topics count 1 + name (prefix + length) + topic tags 1 + three bools 3 + root tags 1
    assert len(MetadataRequest.build(obj, 9)) == 1 + prefix + length + 1 + 3 + 1
    # v8: topics count 4 + name (2 + length) + three bools 3
    assert len(MetadataRequest.build(obj, 8)) == 4 + 2 + length + 3


# --- Headers -----------------------------------------------------------------------------

def request_header(version: int, client_id: str | None = "client-1") -> bytes:
    """A Fetch request header with correlation id 7."""
    return RequestHeader.build({"request_api_key": 1, "request_api_version": 12,
                                "correlation_id": 7, "client_id": client_id}, version)


def test_request_header_sizes() -> None:
    """v1: api_key 2 + api_version 2 + correlation_id 4 + "client-1" (2 + 8) = 18; v2 + tags 1 = 19."""
    v1 = request_header(1)
    assert v1 == bytes.fromhex("0001" "000c" "00000007" "0008") + b"client-1"
    assert request_header(2) == v1 + b"\x00"
    # ClientId is never compact, even in flexible header v2 (Kafka's flexibleVersions "none").
    assert request_header(2)[8:10] == b"\x00\x08"
    # null client id: length -1 in 2 bytes -> 10 bytes
    assert request_header(1, None) == bytes.fromhex("0001000c00000007ffff")
    # v0 (ControlledShutdown v0 only) has no client id: 8 bytes
    assert len(request_header(0)) == 8


def test_parse_request_header_prefix_and_skip_tags() -> None:
    """The fast header path finds client id and body offset in v1 and v2 frames."""
    body = FetchResponse.build(EMPTY_FETCH_RESPONSE, 12)  # any bytes stand in for a body
    v1 = request_header(1) + body
    h = parse_request_header_prefix(v1)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (1, 12, 7, "client-1")
    assert h.body_offset == 18 and v1[h.body_offset:] == body
    v2 = request_header(2) + body
    h2 = parse_request_header_prefix(memoryview(v2))
    assert h2.body_offset == 18
    assert skip_header_tags(v2, h2.body_offset) == 19
    assert v2[19:] == body
    null = parse_request_header_prefix(request_header(1, None))
    assert null.client_id is None and null.body_offset == 10


def test_skip_header_tags_with_tagged_fields() -> None:
    """Two header tagged fields (tag 0 with 3 bytes, tag 300 with 1 byte) are skipped."""
    tags = b"\x02" + b"\x00\x03abc" + b"\xac\x02\x01z"  # 300 = uvarint ac 02
    frame = request_header(1) + tags + b"BODY"
    assert skip_header_tags(frame, 18) == len(frame) - 4
    with pytest.raises(ValueError):
        skip_header_tags(request_header(1) + b"\x01\x00\x05ab", 18)
    parsed = RequestHeader.parse(request_header(1) + tags, 2)
    assert parsed.client_id == "client-1"
    assert parsed._unknown_tags == {0: b"abc", 300: b"z"}


def test_encode_response_header() -> None:
    """v0 is the 4-byte correlation id; v1 adds an empty tag section (1 byte)."""
    assert encode_response_header(7, 0) == b"\x00\x00\x00\x07"
    assert encode_response_header(-2, 1) == b"\xff\xff\xff\xfe\x00"
    for version in (0, 1):
        assert encode_response_header(12345, version) == ResponseHeader.build(
            {"correlation_id": 12345}, version)


def test_header_versions() -> None:
    """Header v2/v1 for flexible requests/responses; ApiVersions always answers with v0."""
    assert request_header_version(1, True) == 2
    assert request_header_version(1, False) == 1
    assert response_header_version(1, True) == 1
    assert response_header_version(1, False) == 0
    assert response_header_version(18, True) == 0
