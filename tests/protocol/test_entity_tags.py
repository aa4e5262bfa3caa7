"""The ``entity`` tags of the message declarations say what their fields name.

* Every field Apache Kafka's JSON schemas tag with an ``entityType`` (Kafka 4.2's, and Kafka 3.9's for the APIs
  and old versions only it describes) carries the same tag in our declaration, at the same path.
* Only the nine known kinds are used (Kafka's five, the project's four: ``protocol.entities.Entity``).
* The project's kinds are complete: the partition numbers of every topic entry are ``partitionIndex``, every
  topic uuid is ``topicId``.
* (The ``--scale`` renaming reads these tags: tests/capture/test_replay_entities.py checks that every tagged name
  of every API is renamed.)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_json import in_versions, load_schema, shared_dir, snake_case, version_bounds
from minikafka.protocol.api import APIS
from minikafka.protocol.coordinator_records import RECORD_SCHEMAS
from minikafka.protocol.entities import Entity
from minikafka.protocol.headers import RequestHeader, ResponseHeader
from minikafka.protocol.schema import Field, Message

KAFKA_KINDS = frozenset({"topicName", "groupId", "transactionalId", "producerId", "brokerId"})
PROJECT_KINDS = frozenset({"topicId", "partitionIndex", "clientId", "topicRegex"})

API_MESSAGES: list[Message] = [m for api in APIS.values() for m in (api.request, api.response)]
ALL_MESSAGES: list[Message] = [RequestHeader, ResponseHeader, *API_MESSAGES] + [
    m for by_type in RECORD_SCHEMAS.values() for pair in by_type.values() for m in pair]

#: The int32 fields of a partition struct, and the []int32 fields of a topic entry, that number partitions.
PARTITION_NAMES = frozenset({"partition", "partition_index", "index", "partition_id"})
PARTITION_LISTS = frozenset({"partitions", "partition_indexes", "partition_ids"})


def _walk(fields: list[Field], path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Field]]:
    for fl in fields:
        yield path + (fl.name,), fl
        yield from _walk(fl.subfields, path + (fl.name,))


def _field_at(fields: list[Field], path: tuple[str, ...]) -> Field | None:
    fl = None
    for name in path:
        fl = next((x for x in fields if x.name == name), None)
        if fl is None:
            return None
        fields = fl.subfields
    return fl


def _is_list(fl: Field) -> bool:
    return isinstance(fl.type, str) and fl.type.startswith("[]")


# -- 1. Kafka's entityType ------------------------------------------------------------------------------------
def kafka_entity_types(schema: dict[str, Any]) -> list[tuple[tuple[str, ...], str, str]]:
    """(snake_case path, entityType, versions) of every field a Kafka JSON schema tags (common structs resolved)."""
    common = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}
    out: list[tuple[tuple[str, ...], str, str]] = []

    def walk(fields: list[dict[str, Any]], path: tuple[str, ...]) -> None:
        for jf in fields:
            fp = path + (snake_case(jf["name"]),)
            if "entityType" in jf:
                out.append((fp, jf["entityType"], jf["versions"]))
            subs = jf.get("fields") or common.get(jf["type"].removeprefix("[]"))
            if subs:
                walk(subs, fp)

    walk(schema["fields"], ())
    return out


def kafka_tag_errors(msg: Message, schema: dict[str, Any]) -> list[str]:
    """Where ``msg`` lacks (or differs from) a tag ``schema`` has, for the versions both describe."""
    lo, hi = version_bounds(schema["validVersions"])
    shared = [v for v in range(msg.min_version, msg.max_version + 1) if lo <= v and (hi is None or v <= hi)]
    errors = []
    for path, entity, versions in kafka_entity_types(schema):
        if not any(in_versions(versions, v) for v in shared):
            continue  # a field of versions we do not declare
        ours = _field_at(msg.fields, path)
        got = None if ours is None else ours.entity
        if got != entity:
            errors.append(f"{msg.name}.{'.'.join(path)}: entity {got!r} != Kafka's {entity!r}")
    return errors


def _schemas() -> list[tuple[Path, str]]:
    shared = shared_dir()
    if shared is None:
        return []
    dirs = [shared / "kafka-protocol" / "messages-4.2", shared / "kafka-protocol" / "messages"]
    return [(d, m.name) for m in API_MESSAGES for d in dirs if (d / f"{m.name}.json").is_file()]


@pytest.mark.parametrize("messages_dir,name", _schemas(), ids=lambda x: x.name if isinstance(x, Path) else x)
def test_kafka_entity_types_are_tagged(messages_dir: Path, name: str) -> None:
    """Each field Kafka's JSON tags with an entityType carries the same ``entity`` here."""
    msg = next(m for m in API_MESSAGES if m.name == name)
    assert kafka_tag_errors(msg, load_schema(messages_dir, name)) == []


def test_kafka_schemas_are_compared() -> None:
    """The comparison above ran over Kafka's schemas (skipped only without ``../shared``), and Kafka 4.2's
    schemas tag the five kinds it knows."""
    if shared_dir() is None:
        pytest.skip("shared/kafka-protocol is not available")
    schemas = _schemas()
    assert len({name for _d, name in schemas}) > 80
    kinds = {e for d, name in schemas if d.name == "messages-4.2"
             for _p, e, _v in kafka_entity_types(load_schema(d, name))}
    assert kinds == KAFKA_KINDS


def test_a_missing_tag_is_reported() -> None:
    """The comparison is not vacuous: FetchRequest without its topics' name tag is reported."""
    shared = shared_dir()
    if shared is None:
        pytest.skip("shared/kafka-protocol is not available")
    fetch = APIS[1].request
    topics = next(fl for fl in fetch.fields if fl.name == "topics")
    subs = [dataclasses.replace(fl, entity=None) if fl.name == "topic" else fl for fl in topics.subfields]
    fields = [dataclasses.replace(fl, type=subs) if fl is topics else fl for fl in fetch.fields]
    mutated = Message(fetch.name, fetch.api_key, f"{fetch.min_version}-{fetch.max_version}", "12+", fields)
    errors = kafka_tag_errors(mutated, load_schema(shared / "kafka-protocol" / "messages-4.2", "FetchRequest"))
    assert errors == ["FetchRequest.topics.topic: entity None != Kafka's 'topicName'"]


# -- 2. the vocabulary ---------------------------------------------------------------------------------------
def test_entity_values_are_the_nine_kinds() -> None:
    """Every tag (messages, headers, coordinator records) is one of the nine kinds, which ``Entity`` lists."""
    assert {e.value for e in Entity} == KAFKA_KINDS | PROJECT_KINDS
    used = {fl.entity for msg in ALL_MESSAGES for _p, fl in _walk(msg.fields) if fl.entity is not None}
    assert used == KAFKA_KINDS | PROJECT_KINDS


def test_tags_fit_their_field_types() -> None:
    """Names are strings, ids of brokers, producers and partitions are integers, topic ids uuids."""
    types = {"topicName": "string", "groupId": "string", "transactionalId": "string", "clientId": "string",
             "topicRegex": "string", "brokerId": "int32", "partitionIndex": "int32", "producerId": "int64",
             "topicId": "uuid"}
    wrong = [f"{msg.name}.{'.'.join(p)}: {fl.entity} on {fl.type}" for msg in ALL_MESSAGES
             for p, fl in _walk(msg.fields) if fl.entity is not None
             and fl.type not in (types[fl.entity], "[]" + types[fl.entity])]
    assert wrong == []


# -- 3. the project's kinds are complete ---------------------------------------------------------------------
def _structs(msg: Message) -> Iterator[tuple[tuple[str, ...], list[Field]]]:
    yield (), msg.fields
    for path, fl in _walk(msg.fields):
        if fl.subfields:
            yield path, fl.subfields


def _is_topic_entry(fields: list[Field]) -> bool:
    return any(fl.entity in ("topicName", "topicId") and not _is_list(fl) for fl in fields)


def completeness_errors(msg: Message) -> list[str]:
    """Partition numbers of topic entries not tagged ``partitionIndex``, topic uuids not tagged ``topicId``,
    and ``partitionIndex`` tags outside topic entries."""
    errors = []
    expected: set[tuple[str, ...]] = set()
    for path, fields in _structs(msg):
        if not _is_topic_entry(fields):
            continue
        for fl in fields:
            if (fl.type == "[]int32" and fl.name in PARTITION_LISTS) or (
                    fl.type == "int32" and fl.name in PARTITION_NAMES):
                expected.add(path + (fl.name,))
            elif fl.is_array_of_structs:
                expected |= {path + (fl.name, p.name) for p in fl.subfields
                             if p.type == "int32" and p.name in PARTITION_NAMES}
    tagged = {p for p, fl in _walk(msg.fields) if fl.entity == "partitionIndex"}
    errors += [f"{msg.name}.{'.'.join(p)}: a partition number of a topic entry, not tagged"
               for p in sorted(expected - tagged)]
    errors += [f"{msg.name}.{'.'.join(p)}: partitionIndex outside a topic entry" for p in sorted(tagged - expected)]
    errors += [f"{msg.name}.{'.'.join(p)}: a topic uuid tagged {fl.entity!r}" for p, fl in _walk(msg.fields)
               if fl.name == "topic_id" and fl.type == "uuid" and fl.entity != "topicId"]
    return errors


@pytest.mark.parametrize("msg", ALL_MESSAGES, ids=lambda m: m.name)
def test_project_kinds_are_complete(msg: Message) -> None:
    assert completeness_errors(msg) == []


def test_completeness_check_is_not_vacuous() -> None:
    """Dropping the tag of Produce's partition index is reported; every API naming partitions has them."""
    produce = APIS[0].request
    topic_data = next(fl for fl in produce.fields if fl.name == "topic_data")
    part_data = next(fl for fl in topic_data.subfields if fl.name == "partition_data")
    new_parts = [dataclasses.replace(p, entity=None) if p.name == "index" else p for p in part_data.subfields]
    new_topic = [dataclasses.replace(fl, type=new_parts) if fl is part_data else fl for fl in topic_data.subfields]
    fields = [dataclasses.replace(fl, type=new_topic) if fl is topic_data else fl for fl in produce.fields]
    mutated = Message(produce.name, 0, f"{produce.min_version}-{produce.max_version}", "9+", fields)
    assert completeness_errors(mutated) == [
        "ProduceRequest.topic_data.partition_data.index: a partition number of a topic entry, not tagged"]
    with_partitions = {msg.name for msg in API_MESSAGES for _p, fl in _walk(msg.fields)
                       if fl.entity == "partitionIndex"}
    assert len(with_partitions) >= 50


def test_client_ids_and_regexes() -> None:
    """The members' client ids of the describe APIs, the header's client id, and the topic regexes."""
    tagged = {(msg.name, ".".join(p), fl.entity) for msg in ALL_MESSAGES for p, fl in _walk(msg.fields)
              if fl.entity in ("clientId", "topicRegex")}
    assert tagged == {
        ("RequestHeader", "client_id", "clientId"),
        ("DescribeGroupsResponse", "groups.members.client_id", "clientId"),
        ("ConsumerGroupDescribeResponse", "groups.members.client_id", "clientId"),
        ("ShareGroupDescribeResponse", "groups.members.client_id", "clientId"),
        ("GroupMetadataValue", "members.client_id", "clientId"),
        ("ConsumerGroupMemberMetadataValue", "client_id", "clientId"),
        ("ShareGroupMemberMetadataValue", "client_id", "clientId"),
        ("ConsumerGroupMemberMetadataValue", "subscribed_topic_regex", "topicRegex"),
        ("ConsumerGroupHeartbeatRequest", "subscribed_topic_regex", "topicRegex"),
        ("ConsumerGroupDescribeResponse", "groups.members.subscribed_topic_regex", "topicRegex"),
    }
