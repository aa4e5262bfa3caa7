"""Every declaration in minikafka.protocol matches Apache Kafka's JSON schema, version by version.

Kafka 4.2's schema (``messages-4.2/``) is the reference for the versions it has; Kafka 3.9's
(``messages/``) for the APIs and old versions only it describes.

For each message (both directions of every API in ``APIS``, plus the request and
response headers) and each version we support, the fields present in that
version must match Kafka's in order, name, type, nullability, tagging,
flexibility and default.  A declared version the shared
snapshot lacks (Kafka 4.1/4.2 additions, APIs the snapshot has no file for) must
be listed in ``BEYOND_SNAPSHOT``, so that a new gap is noticed rather than
silently left unchecked.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from kafka_json import (
    PRIMITIVE_TYPES,
    in_versions,
    java_decode_int,
    load_schema,
    shared_dir,
    snake_case,
    version_bounds,
)
from minikafka.protocol.api import APIS
from minikafka.protocol.headers import RequestHeader, ResponseHeader
from minikafka.protocol.schema import Field, Message, VersionRange

SHARED = shared_dir()
if SHARED is None:
    pytest.skip("shared/kafka-protocol is not available", allow_module_level=True)
MESSAGES_DIR = SHARED / "kafka-protocol" / "messages"
MESSAGES_42_DIR = SHARED / "kafka-protocol" / "messages-4.2"

_INT_TYPES = {"int8", "int16", "uint16", "int32", "uint32", "int64"}


# Declared versions the shared snapshot (Kafka ~4.0) does not have, by message, with where they come
# from.  They were written from Kafka 4.2's JSON schemas (apache/kafka,
# clients/src/main/resources/common/message) and are covered by the round-trip tests only: nothing
# here can compare them field by field.  test_every_declared_version_is_compared_or_listed fails for a
# declared version that is neither in the snapshot nor here.
_KIP_932_STABLE = "KIP-932's stable version (Kafka 4.1); the snapshot has only the early-access v0"
_KIP_1222 = "v2 adds ShareAcquireMode and Renew acknowledgements (KIP-1206, KIP-1222; Kafka 4.2)"
_SHARE_OFFSETS = "KIP-932 share-group offsets admin (Kafka 4.1); the snapshot has no schema for it"
BEYOND_SNAPSHOT: dict[str, tuple[frozenset[int], str]] = {
    "ConsumerGroupDescribeRequest": (frozenset({1}), "v1 is v0 (KIP-1099, Kafka 4.0)"),
    "ConsumerGroupDescribeResponse": (frozenset({1}), "v1 adds the members' MemberType (KIP-1099, Kafka 4.0)"),
    "ShareGroupHeartbeatRequest": (frozenset({1}), _KIP_932_STABLE),
    "ShareGroupHeartbeatResponse": (frozenset({1}), _KIP_932_STABLE),
    "ShareGroupDescribeRequest": (frozenset({1}), _KIP_932_STABLE),
    "ShareGroupDescribeResponse": (frozenset({1}), _KIP_932_STABLE),
    "ShareFetchRequest": (frozenset({1, 2}), f"{_KIP_932_STABLE}; {_KIP_1222}"),
    "ShareFetchResponse": (frozenset({1, 2}), f"{_KIP_932_STABLE}; {_KIP_1222}"),
    "ShareAcknowledgeRequest": (frozenset({1, 2}), f"{_KIP_932_STABLE}; {_KIP_1222}"),
    "ShareAcknowledgeResponse": (frozenset({1, 2}), f"{_KIP_932_STABLE}; v2 adds AcquisitionLockTimeoutMs"),
    "DescribeShareGroupOffsetsRequest": (frozenset({0, 1}), _SHARE_OFFSETS),
    "DescribeShareGroupOffsetsResponse": (frozenset({0, 1}), f"{_SHARE_OFFSETS}; v1 adds Lag (Kafka 4.2)"),
    "AlterShareGroupOffsetsRequest": (frozenset({0}), _SHARE_OFFSETS),
    "AlterShareGroupOffsetsResponse": (frozenset({0}), _SHARE_OFFSETS),
    "DeleteShareGroupOffsetsRequest": (frozenset({0}), _SHARE_OFFSETS),
    "DeleteShareGroupOffsetsResponse": (frozenset({0}), _SHARE_OFFSETS),
}

ALL_MESSAGES: list[Message] = [RequestHeader, ResponseHeader]
for _api in APIS.values():
    ALL_MESSAGES += [_api.request, _api.response]

_schema_cache: dict[tuple[Path, str], dict[str, Any] | None] = {}


def _load(directory: Path, name: str) -> dict[str, Any] | None:
    if (directory, name) not in _schema_cache:
        path = directory / f"{name}.json"
        _schema_cache[directory, name] = load_schema(directory, name) if path.is_file() else None
    return _schema_cache[directory, name]


def _covers(schema: dict[str, Any] | None, version: int) -> bool:
    if schema is None:
        return False
    lo, hi = version_bounds(schema["validVersions"])
    return lo <= version and (hi is None or version <= hi)


def kafka_schema(name: str, version: int | None = None) -> dict[str, Any]:
    """Kafka's JSON schema for ``name``: Kafka 4.2's where it has ``version`` (or, for None, exists), else
    Kafka 3.9's (Kafka 4 dropped old versions, which only the 3.9 schema still describes)."""
    newer = _load(MESSAGES_42_DIR, name)
    if newer is not None and (version is None or _covers(newer, version)):
        return newer
    older = _load(MESSAGES_DIR, name)
    if older is None:
        raise FileNotFoundError(f"no Kafka schema for {name}")
    return older


def valid_versions(name: str) -> tuple[int, int | None]:
    """The versions Kafka 3.9 and 4.2 together describe (Kafka 4 dropped old ones, added new ones)."""
    bounds = [version_bounds(sch["validVersions"]) for d in (MESSAGES_DIR, MESSAGES_42_DIR)
              if (sch := _load(d, name)) is not None]
    his = [hi for _, hi in bounds]
    return min(lo for lo, _ in bounds), None if None in his else max(h for h in his if h is not None)


def has_schema(name: str) -> bool:
    return _load(MESSAGES_42_DIR, name) is not None or _load(MESSAGES_DIR, name) is not None


def in_snapshot(name: str, version: int) -> bool:
    """Whether the shared schemas (Kafka 4.2's or 3.9's) describe ``version`` of ``name``."""
    return _covers(_load(MESSAGES_42_DIR, name), version) or _covers(_load(MESSAGES_DIR, name), version)


def listed_beyond(name: str, version: int) -> bool:
    return version in BEYOND_SNAPSHOT.get(name, (frozenset(), ""))[0]


CASES = [
    pytest.param(msg, v, id=f"{msg.name}-v{v}")
    for msg in ALL_MESSAGES
    for v in range(msg.min_version, msg.max_version + 1)
    if in_snapshot(msg.name, v)
]


def kafka_kind(jf: dict[str, Any]) -> tuple[str, str | None]:
    """Classify a JSON field: ("prim", t), ("array", t), ("array_struct", None) or ("struct", None)."""
    t = jf["type"]
    if t.startswith("[]"):
        inner = t[2:]
        return ("array", inner) if inner in PRIMITIVE_TYPES else ("array_struct", None)
    return ("prim", t) if t in PRIMITIVE_TYPES else ("struct", None)


def our_kind(fl: Field) -> tuple[str, str | None]:
    """Classify one of our fields the same way as :func:`kafka_kind`."""
    if fl.is_array_of_structs:
        return ("array_struct", None)
    if fl.is_struct:
        return ("struct", None)
    assert isinstance(fl.type, str)
    if fl.type.startswith("[]"):
        return ("array", fl.type[2:])
    return ("prim", fl.type)


def kafka_default(jf: dict[str, Any], prim: str) -> Any:
    """The value Kafka's generated code reads for an absent field of primitive type ``prim``."""
    raw = jf.get("default")
    if raw is not None and not isinstance(raw, str):
        raw = str(raw).lower()  # a few schemas give bare JSON numbers/booleans
    if prim in _INT_TYPES:
        return 0 if raw in (None, "") else java_decode_int(raw)
    if prim == "bool":
        return False if raw is None else raw.strip() == "true"
    if prim == "float64":
        return 0.0 if raw is None else float(raw)
    if prim == "string":
        if raw is None:
            return ""
        return None if raw == "null" else raw
    if prim == "bytes":
        return None if raw == "null" else b""
    if prim == "records":
        return None
    raise KeyError(prim)


def sub_fields(jf: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The JSON sub-fields of a struct-typed field (inline or from ``commonStructs``)."""
    if "fields" in jf:
        return jf["fields"]
    return common[jf["type"].removeprefix("[]")]


def compare_fields(
    ours: list[Field],
    theirs: list[dict[str, Any]],
    version: int,
    path: str,
    common: dict[str, list[dict[str, Any]]],
) -> list[str]:
    """All differences between our fields and Kafka's at ``version``, as readable strings."""
    errors: list[str] = []
    our_present = [fl for fl in ours if fl.present(version)]
    their_present = [jf for jf in theirs if in_versions(jf.get("versions"), version)]
    our_names = [fl.name for fl in our_present]
    their_names = [snake_case(jf["name"]) for jf in their_present]
    if our_names != their_names:
        return [f"{path}: fields {our_names} != Kafka's {their_names}"]
    for fl, jf in zip(our_present, their_present):
        where = f"{path}.{fl.name}"
        kind = our_kind(fl)
        if kind != kafka_kind(jf):
            errors.append(f"{where}: type {kind} != Kafka's {jf['type']!r}")
            continue
        nullable = in_versions(jf.get("nullableVersions"), version)
        if fl.is_nullable(version) != nullable:
            errors.append(f"{where}: nullable {fl.is_nullable(version)} != Kafka's {nullable}")
        tagged = in_versions(jf.get("taggedVersions"), version)
        if fl.is_tagged(version) != tagged:
            errors.append(f"{where}: tagged {fl.is_tagged(version)} != Kafka's {tagged}")
        elif tagged and fl.tag != int(jf.get("tag")):  # (some schemas give the tag as a string)
            errors.append(f"{where}: tag {fl.tag} != Kafka's {jf.get('tag')}")
        field_flex = jf.get("flexibleVersions")
        if field_flex not in (None, "none"):
            errors.append(f"{where}: unexpected field flexibleVersions {field_flex!r}")
        if (fl.flexible is not False) != (field_flex != "none"):
            errors.append(f"{where}: flexible {fl.flexible} != Kafka's {field_flex!r}")
        if kind[0] == "prim" and kind[1] != "uuid":
            expected = kafka_default(jf, kind[1])
            got = fl.default_factory()
            # Without a JSON default Kafka reads "" for an absent string; reading null
            # instead is accepted when the field is nullable (RequestHeader.client_id).
            lenient = "default" not in jf and got is None and nullable
            if not lenient and (got != expected or type(got) is not type(expected)):
                errors.append(f"{where}: default {got!r} != Kafka's {expected!r}")
        if kind[0] in ("array_struct", "struct"):
            errors += compare_fields(fl.subfields, sub_fields(jf, common), version, where, common)
    return errors


@pytest.mark.parametrize("msg,version", CASES)
def test_fields_match_kafka(msg: Message, version: int) -> None:
    """Fields present at ``version``: same order, names, types, nullability, tags, defaults."""
    schema = kafka_schema(msg.name, version)
    common = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}
    errors = compare_fields(msg.fields, schema["fields"], version, msg.name, common)
    assert errors == []


@pytest.mark.parametrize("msg,version", CASES)
def test_flexible_versions_match_kafka(msg: Message, version: int) -> None:
    """The message is flexible at ``version`` exactly when Kafka's flexibleVersions says so."""
    schema = kafka_schema(msg.name, version)
    assert msg.is_flexible(version) == in_versions(schema.get("flexibleVersions"), version)


def test_every_declared_version_is_compared_or_listed() -> None:
    """Each declared version is in the snapshot or in BEYOND_SNAPSHOT (a new gap fails)."""
    unchecked = [f"{msg.name} v{v}" for msg in ALL_MESSAGES for v in range(msg.min_version, msg.max_version + 1)
                 if not (in_snapshot(msg.name, v) or listed_beyond(msg.name, v))]
    assert unchecked == []


@pytest.mark.parametrize("name", sorted(BEYOND_SNAPSHOT))
def test_beyond_snapshot_entries_are_declared_and_missing(name: str) -> None:
    """Each BEYOND_SNAPSHOT version is declared and really absent from the snapshot (drop it once there)."""
    versions, reason = BEYOND_SNAPSHOT[name]
    msg = next(m for m in ALL_MESSAGES if m.name == name)
    assert reason and versions
    assert all(msg.supports(v) and not in_snapshot(name, v) for v in versions)


@pytest.mark.parametrize("msg", ALL_MESSAGES, ids=lambda m: m.name)
def test_message_identity_matches_kafka(msg: Message) -> None:
    """API key, kind and our version range lie within Kafka's validVersions (or are listed beyond them)."""
    if not has_schema(msg.name):
        assert all(listed_beyond(msg.name, v) for v in range(msg.min_version, msg.max_version + 1))
        return
    schema = kafka_schema(msg.name)
    lo, hi = valid_versions(msg.name)
    beyond = [] if hi is None else range(hi + 1, msg.max_version + 1)
    assert lo <= msg.min_version
    assert all(listed_beyond(msg.name, v) for v in beyond)
    if schema["type"] == "header":
        assert msg.api_key == -1
    else:
        assert schema["type"] == ("request" if msg.name.endswith("Request") else "response")
        assert msg.api_key == schema["apiKey"]


def test_snake_case() -> None:
    """The CamelCase -> snake_case mapping used above."""
    assert snake_case("ThrottleTimeMs") == "throttle_time_ms"
    assert snake_case("TopicId") == "topic_id"
    assert snake_case("ZkMigrationReady") == "zk_migration_ready"
    assert snake_case("IsrNodes") == "isr_nodes"


def test_java_decode_int() -> None:
    """Kafka's default strings decode like Java's Long.decode."""
    assert java_decode_int("-1") == -1
    assert java_decode_int("0x7fffffff") == 2**31 - 1
    assert java_decode_int("-2147483648") == -(2**31)
    assert java_decode_int("0") == 0
    assert java_decode_int("010") == 8


def _fetch_request_fields(version: int) -> tuple[list[Field], list[dict[str, Any]]]:
    """Our FetchRequest fields and Kafka's JSON fields (for the checker's self-test)."""
    from minikafka.protocol.messages.fetch import FetchRequest

    return list(FetchRequest.fields), kafka_schema("FetchRequest")["fields"]


@pytest.mark.parametrize(
    "change,needle",
    [
        ({"name": "replica"}, "fields"),
        ({"type": "int64"}, "type"),
        ({"nullable": VersionRange(0, None)}, "nullable"),
        ({"default": -2, "has_default": True}, "default"),
        ({"tag": 5, "tagged": VersionRange(12, None)}, "tagged"),
        ({"flexible": False}, "flexible"),
    ],
)
def test_checker_detects_mismatches(change: dict[str, Any], needle: str) -> None:
    """The comparison is not vacuous: a mutated FetchRequest.replica_id is reported."""
    ours, theirs = _fetch_request_fields(12)
    assert compare_fields(ours, theirs, 12, "FetchRequest", {}) == []
    idx = next(i for i, fl in enumerate(ours) if fl.name == "replica_id")
    ours[idx] = dataclasses.replace(ours[idx], **change)
    errors = compare_fields(ours, theirs, 12, "FetchRequest", {})
    assert len(errors) == 1 and needle in errors[0]


def test_checker_detects_nested_mismatch() -> None:
    """A difference inside an array of structs is reported with its path."""
    ours, theirs = _fetch_request_fields(7)
    idx = next(i for i, fl in enumerate(ours) if fl.name == "topics")
    topics = ours[idx]
    subs = [dataclasses.replace(fl, type="int32") if fl.name == "topic" else fl
            for fl in topics.subfields]
    ours[idx] = dataclasses.replace(topics, type=subs)
    errors = compare_fields(ours, theirs, 7, "FetchRequest", {})
    assert errors == ["FetchRequest.topics.topic: type ('prim', 'int32') != Kafka's 'string'"]
