"""Property-based round trips for every API, request and response, at every supported version."""

from __future__ import annotations

import os
from typing import Any, Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minikafka.protocol.api import APIS
from minikafka.protocol.headers import RequestHeader, ResponseHeader
from minikafka.protocol.schema import Field, Message
from minikafka.protocol.types import write_uvarint
from message_strategies import UNKNOWN, default_value, message_strategy, normalise

MESSAGES: list[Message] = [RequestHeader, ResponseHeader]
for _api in APIS.values():
    MESSAGES += [_api.request, _api.response]

CASES = [
    pytest.param(msg, v, id=f"{msg.name}-v{v}")
    for msg in MESSAGES
    for v in range(msg.min_version, msg.max_version + 1)
]
FLEXIBLE_CASES = [p for p in CASES if p.values[0].is_flexible(p.values[1])]

# 15 examples per (message, version) keeps this file around ten seconds for ~290
# cases; set ROUNDTRIP_EXAMPLES for a deeper run.
EXAMPLES = int(os.environ.get("ROUNDTRIP_EXAMPLES", "15"))

FAST = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def assert_shape(fields: list[Field], parsed: Mapping[str, Any], version: int, path: str) -> None:
    """A parsed struct holds every field present at ``version`` and nothing undeclared.

    Fields the version does not carry may be there too, but only at their default.
    """
    present = {fl.name for fl in fields if fl.present(version)}
    declared = {fl.name: fl for fl in fields}
    keys = set(parsed.keys()) - {UNKNOWN}
    assert present <= keys, path
    assert keys <= set(declared), path
    for name in keys - present:
        assert parsed[name] == default_value(declared[name]), f"{path}.{name}"
    for fl in fields:
        value = parsed.get(fl.name) if fl.present(version) else None
        if value is None:
            continue
        if fl.is_struct:
            assert_shape(fl.subfields, value, version, f"{path}.{fl.name}")
        elif fl.is_array_of_structs:
            for i, item in enumerate(value):
                assert_shape(fl.subfields, item, version, f"{path}.{fl.name}[{i}]")


def check_roundtrip(msg: Message, version: int, obj: dict[str, Any]) -> bytes:
    """parse(build(obj)) reads back obj, and rebuilding is byte-exact; returns the bytes."""
    flexible = msg.is_flexible(version)
    data = msg.build(obj, version)
    parsed = msg.parse(data, version)
    assert_shape(msg.fields, parsed, version, msg.name)
    assert normalise(msg.fields, parsed, version, flexible) == normalise(
        msg.fields, obj, version, flexible
    )
    assert msg.build(parsed, version) == data
    return data


@pytest.mark.parametrize("msg,version", CASES)
@FAST
@given(data=st.data())
def test_roundtrip(msg: Message, version: int, data: st.DataObject) -> None:
    """parse(build(x)) == x on present fields, and build(parse(build(x))) == build(x).

    In flexible versions any struct may also carry unknown tagged fields
    (``_unknown_tags``): they must be skipped on parse, kept, and re-built in place.
    """
    obj = data.draw(message_strategy(msg, version, unknown_tags=True))
    check_roundtrip(msg, version, obj)


def _strip_root_tags(msg: Message, version: int, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without root-level tagged fields or unknown tags, so its tag section is empty."""
    tagged = {fl.name for fl in msg.fields if fl.present(version) and fl.is_tagged(version)}
    return {k: v for k, v in obj.items() if k not in tagged and k != UNKNOWN}


@pytest.mark.parametrize("msg,version", FLEXIBLE_CASES)
@settings(FAST, max_examples=5)
@given(data=st.data(), tag=st.integers(1000, 2**31 - 1), payload=st.binary(max_size=300))
def test_unknown_root_tag_patched_in(
    msg: Message, version: int, data: st.DataObject, tag: int, payload: bytes
) -> None:
    """Patch an unknown tag into the root's (empty, final) tag section of built bytes."""
    obj = _strip_root_tags(msg, version, data.draw(message_strategy(msg, version)))
    plain = msg.build(obj, version)
    # The root struct is last on the wire, so its empty tag section is the final 0x00.
    assert plain[-1:] == b"\x00"
    patched = plain[:-1] + write_uvarint(1) + write_uvarint(tag) + write_uvarint(len(payload)) + payload
    parsed = msg.parse(patched, version)
    assert parsed[UNKNOWN] == {tag: payload}
    assert normalise(msg.fields, parsed, version, True) == normalise(
        msg.fields, {**obj, UNKNOWN: {tag: payload}}, version, True
    )
    assert msg.build(parsed, version) == patched
    # Dropping the unknown tag gives back the original bytes.
    del parsed[UNKNOWN]
    assert msg.build(parsed, version) == plain


def test_unknown_tag_in_nested_struct_by_hand() -> None:
    """MetadataRequest v9 with an unknown tag (7, b'xy') inside its one topic entry."""
    from minikafka.protocol.messages.metadata import MetadataRequest

    wire = (
        b"\x02"  # topics: compact array, 1 entry (uvarint 1 + 1)
        + b"\x02t"  # name: compact string "t" (uvarint 1 + 1, then 1 byte)
        + b"\x01\x07\x02xy"  # topic tags: 1 field, tag 7, size 2, b"xy"
        + b"\x01"  # allow_auto_topic_creation = true
        + b"\x00"  # include_cluster_authorized_operations = false (v8-10)
        + b"\x00"  # include_topic_authorized_operations = false
        + b"\x00"  # root tags: none
    )
    parsed = MetadataRequest.parse(wire, 9)
    assert parsed.topics[0].name == "t"
    assert parsed.topics[0][UNKNOWN] == {7: b"xy"}
    assert parsed.allow_auto_topic_creation is True
    assert MetadataRequest.build(parsed, 9) == wire


def test_known_tag_is_read_and_absent_tag_defaults() -> None:
    """FetchRequest v12: tagged cluster_id is parsed when present and null when absent."""
    from minikafka.protocol.messages.fetch import FetchRequest

    base = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "topics": [],
            "forgotten_topics_data": []}
    without = FetchRequest.build(base, 12)
    with_tag = FetchRequest.build({**base, "cluster_id": "abc"}, 12)
    # Tag entry: tag 0 (1 byte) + size 4 (1 byte) + compact string "abc" (1 + 3) = 6 bytes more.
    assert len(with_tag) == len(without) + 6
    assert with_tag.endswith(b"\x01\x00\x04\x04abc")
    assert FetchRequest.parse(without, 12).cluster_id is None
    assert FetchRequest.parse(with_tag, 12).cluster_id == "abc"
