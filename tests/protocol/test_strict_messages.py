"""Strict mode: building a body with a key no version declares raises, naming where; off, nothing changes."""

from __future__ import annotations

from typing import Iterator

import pytest

from minikafka.protocol.messages.fetch import FetchRequest, FetchResponse
from minikafka.protocol.messages.metadata import MetadataRequest
from minikafka.protocol.schema import Message, UnknownFieldError, set_strict, strict_enabled

FETCH_RESPONSE = {"throttle_time_ms": 0, "responses": [{"topic": "t", "partitions": [
    {"partition_index": i, "error_code": 0, "high_watermark": 5, "records": b""} for i in range(3)]}]}


def _switched(on: bool) -> Iterator[None]:
    before = strict_enabled()
    set_strict(on)
    yield
    set_strict(before)


@pytest.fixture
def strict() -> Iterator[None]:
    yield from _switched(True)


@pytest.fixture
def lax() -> Iterator[None]:
    yield from _switched(False)


@pytest.mark.parametrize("method", ["build", "build_segments"])
def test_misspelled_top_level_key(strict: None, method: str) -> None:
    with pytest.raises(UnknownFieldError, match=r"^MetadataRequest: unknown field 'allow_auto_topic_creations'") as e:
        getattr(MetadataRequest, method)({"topics": None, "allow_auto_topic_creations": False}, 9)
    assert (e.value.message_name, e.value.path, e.value.key) == (
        "MetadataRequest", "MetadataRequest", "allow_auto_topic_creations")


def test_array_element_names_its_index(strict: None) -> None:
    body = {**FETCH_RESPONSE, "responses": [{**FETCH_RESPONSE["responses"][0]}]}
    body["responses"][0]["partitions"] = [dict(p) for p in body["responses"][0]["partitions"]]
    body["responses"][0]["partitions"][2]["_size"] = 10
    with pytest.raises(UnknownFieldError) as e:
        FetchResponse.build_segments(body, 12)
    assert e.value.path == "FetchResponse.responses[0].partitions[2]" and e.value.key == "_size"


def test_nested_struct(strict: None) -> None:
    partition = {**FETCH_RESPONSE["responses"][0]["partitions"][0], "current_leader": {"leader": 1}}
    with pytest.raises(UnknownFieldError, match=r"responses\[0\]\.partitions\[0\]\.current_leader: .*'leader'"):
        FetchResponse.build({"responses": [{"topic": "t", "partitions": [partition]}]}, 12)


def test_unknown_tags_and_other_versions_fields_pass(strict: None) -> None:
    body = {"replica_id": -1, "max_wait_ms": 1, "min_bytes": 1, "_unknown_tags": {7: b"x"}, "topics": [
        {"topic": "t", "topic_id": None, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1,
                                                         "last_fetched_epoch": 3, "_unknown_tags": {}}]}]}
    assert FetchRequest.parse(FetchRequest.build(body, 12), 12)._unknown_tags == {7: b"x"}
    FetchRequest.build(body, 4)  # topic_id (v13+) and last_fetched_epoch (v12+) are fields of other versions
    FetchResponse.build(FETCH_RESPONSE, 4)
    FetchResponse.build(FetchResponse.parse(FetchResponse.build(FETCH_RESPONSE, 13), 13), 13)


def test_off_by_default_builds_as_before(lax: None) -> None:
    assert Message.__dict__["build"].__name__ == "build"  # the plain builders, no check wrapped around
    assert Message.__dict__["build_segments"].__name__ == "build_segments"
    body = {"topics": None, "allow_auto_topic_creation": False}
    assert MetadataRequest.build({**body, "allow_auto_topic_creations": True}, 9) == MetadataRequest.build(body, 9)


def test_switch_round_trips(lax: None) -> None:
    set_strict(True)
    assert strict_enabled() and Message.__dict__["build"].__name__ == "_strict_build"
    set_strict(False)
    assert not strict_enabled() and Message.__dict__["build"].__name__ == "build"
