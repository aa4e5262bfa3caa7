"""The walker over tagged fields (``minikafka.protocol.entities``): every tagged field of every API is reached,
on the wire form a reader sees, and renaming through it changes exactly the tagged values."""

from __future__ import annotations

from typing import Any

import pytest

from minikafka.protocol.api import APIS
from minikafka.protocol.entities import Entity, entity_fields, rewrite, topic_entries, topic_layouts, values
from minikafka.protocol.schema import Message, f
from message_strategies import full_body

CASES = [pytest.param(msg, v, id=f"{msg.name}-v{v}")
         for api in APIS.values() for msg in (api.request, api.response)
         for v in range(msg.min_version, msg.max_version + 1) if entity_fields(msg, v)]


def _parsed(msg: Message, version: int) -> Any:
    return msg.parse(msg.build(full_body(msg, version), version), version)


def test_some_apis_are_tagged() -> None:
    tagged = {msg.name for api in APIS.values() for msg in (api.request, api.response) if entity_fields(msg)}
    assert {"ProduceRequest", "FetchRequest", "OffsetCommitRequest", "EndTxnRequest"} <= tagged


@pytest.mark.parametrize(("msg", "version"), CASES)
def test_every_tagged_field_is_reached(msg: Message, version: int) -> None:
    """Each tagged field present at this version gives at least one value from a body that sets every field
    (after a build and parse), and no value comes from a field absent at this version."""
    body = _parsed(msg, version)
    reached = {ef.path for ef, _value in values(body, msg, version)}
    assert reached == {ef.path for ef in entity_fields(msg, version)}


@pytest.mark.parametrize(("msg", "version"), CASES)
def test_rewriting_changes_every_tagged_string(msg: Message, version: int) -> None:
    body = _parsed(msg, version)
    strings = [(ef.path, v) for ef, v in values(body, msg, version) if isinstance(v, str)]
    changed = rewrite(body, msg, version, {k: (lambda s: s + "~" if isinstance(s, str) else s) for k in Entity})
    assert changed >= len(strings)
    after = [(ef.path, v) for ef, v in values(body, msg, version) if isinstance(v, str)]
    assert after == [(path, v + "~") for path, v in strings]
    # The rewritten body still builds at this version.
    msg.build(body, version)


@pytest.mark.parametrize(("msg", "version"), CASES)
def test_topic_entries_list_every_tagged_partition(msg: Message, version: int) -> None:
    body = _parsed(msg, version)
    parts = sorted((e.layout.path, p) for e in topic_entries(body, msg, version) for p, _s in e.partitions)
    entry_of: dict[tuple[str, ...], tuple[str, ...]] = {}  # a partition field's path -> its entries' path
    for lay in topic_layouts(msg, version):
        if lay.partition is None and lay.partitions is not None:
            entry_of[lay.path + (lay.partitions,)] = lay.path
        elif lay.partition is not None:
            entry_of[lay.path + ((lay.partitions, lay.partition) if lay.partitions else (lay.partition,))] = lay.path
    expected = sorted((entry_of[ef.path], v) for ef, v in values(body, msg, version, Entity.PARTITION)
                      if ef.path in entry_of)
    assert parts == expected


# A declaration the project has never seen: the walker needs nothing but its tags.
NEW_API = Message("NewRequest", 9999, "0-1", "1+", [
    f("group_id", "string", entity="groupId"),
    f("topics", [
        f("name", "string", "0", entity="topicName"),
        f("topic_id", "uuid", "1+", entity="topicId"),
        f("partitions", [f("partition_index", "int32", entity="partitionIndex"), f("offset", "int64")]),
    ]),
    f("forgotten", [f("topic", "string", entity="topicName"), f("partitions", "[]int32", entity="partitionIndex")]),
])


def test_a_new_declaration_needs_only_its_tags() -> None:
    body = {"group_id": "g", "topics": [{"name": "a", "partitions": [{"partition_index": 3, "offset": 7},
                                                                      {"partition_index": 4, "offset": 8}]}],
            "forgotten": [{"topic": "b", "partitions": [5]}]}
    assert [(ef.dotted, v) for ef, v in values(body, NEW_API, 0)] == [
        ("group_id", "g"), ("topics.name", "a"), ("topics.partitions.partition_index", 3),
        ("topics.partitions.partition_index", 4), ("forgotten.topic", "b"), ("forgotten.partitions", 5)]
    entries = list(topic_entries(body, NEW_API, 0))
    assert [(e.name, [p for p, _ in e.partitions]) for e in entries] == [("a", [3, 4]), ("b", [5])]
    assert rewrite(body, NEW_API, 0, {Entity.TOPIC_NAME: str.upper, Entity.GROUP_ID: lambda g: g * 2}) == 3
    assert body["group_id"] == "gg" and body["topics"][0]["name"] == "A" and body["forgotten"][0]["topic"] == "B"
    # v1 names topics by id only: the name field is absent there and is neither read nor written.
    entry = next(topic_entries({"topics": [{"name": "x", "topic_id": "id", "partitions": []}]}, NEW_API, 1))
    assert (entry.name, entry.topic_id) == (None, "id")
