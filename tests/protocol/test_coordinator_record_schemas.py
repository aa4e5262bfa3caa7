"""Every coordinator record type minikafka reads and writes is declared as Kafka's record JSON declares it
(``../shared/kafka-protocol/records/``): the record type (the key's version), the value's versions, and field by
field the names, versions, nullable and tagged versions, nested structs included; and each KIP-848 consumer group
record reads back what was written."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kafka_json import load_schema, shared_dir, snake_case
from minikafka.protocol import modern_group_records as cg
from minikafka.protocol.coordinator_records import RECORD_SCHEMAS, decode_group_record, encode_record
from minikafka.protocol.schema import Field, Message, VersionRange

SHARED = shared_dir()
RECORDS = SHARED / "kafka-protocol" / "records" if SHARED is not None else None
DIRS = {"__consumer_offsets": "group-coordinator", "__transaction_state": "transaction-coordinator",
        "__share_group_state": "share-coordinator"}


def _declared() -> list[tuple[str, Message]]:
    return [(topic, m) for topic, by_type in RECORD_SCHEMAS.items() for pair in by_type.values() for m in pair]


def _differences(ours: list[Field], theirs: list[dict[str, Any]], path: str) -> list[str]:
    out = []
    by_name = {fl.name: fl for fl in ours}
    for spec in theirs:
        name = snake_case(spec["name"])
        fl = by_name.pop(name, None)
        where = f"{path}.{name}"
        if fl is None:
            out.append(f"{where}: missing")
            continue
        for attr, key in (("versions", "versions"), ("nullable", "nullableVersions")):
            want = VersionRange.parse(spec.get(key, spec.get("taggedVersions") if key == "versions" else None))
            if getattr(fl, attr) != want:
                out.append(f"{where}: {attr} {getattr(fl, attr)} != {want}")
        if spec.get("tag") is not None:
            want = VersionRange.parse(spec.get("taggedVersions"))
            if (fl.tag, fl.tagged) != (spec["tag"], want):
                out.append(f"{where}: tag {fl.tag}/{fl.tagged} != {spec['tag']}/{want}")
        nested = spec.get("fields") or theirs_structs.get(spec["type"].removeprefix("[]"))
        if nested is not None:
            out += _differences(fl.subfields, nested, where)
    out += [f"{path}.{name}: not in Kafka's schema" for name in by_name]
    return out


theirs_structs: dict[str, list[dict[str, Any]]] = {}


@pytest.mark.skipif(RECORDS is None, reason="../shared/kafka-protocol is not beside the repository")
@pytest.mark.parametrize("topic,message", _declared(), ids=lambda x: x.name if isinstance(x, Message) else x)
def test_a_record_schema_is_kafkas(topic: str, message: Message) -> None:
    assert RECORDS is not None
    schema = load_schema(Path(RECORDS) / DIRS[topic], message.name)
    theirs_structs.clear()
    theirs_structs.update({s["name"]: s["fields"] for s in schema.get("commonStructs", [])})
    assert VersionRange.parse(schema["validVersions"]) == VersionRange(message.min_version, message.max_version)
    flexible = schema.get("flexibleVersions")
    assert message.flexible_versions == VersionRange.parse(flexible)
    assert _differences(message.fields, schema["fields"], message.name) == []


def test_every_consumer_group_record_reads_back_what_was_written() -> None:
    t = uuid.uuid4()
    records = [
        (cg.ConsumerGroupPartitionMetadataKey("g"), cg.ConsumerGroupPartitionMetadataValue(((t, "orders", 3),))),
        (cg.ConsumerGroupMemberMetadataKey("g", "m1"), cg.ConsumerGroupMemberMetadataValue(
            "instance", "rack", "client", "/127.0.0.1", ("orders",), None, 30_000, "uniform")),
        (cg.ConsumerGroupMemberMetadataKey("g", "m2"), cg.ConsumerGroupMemberMetadataValue(
            None, None, "client", "/127.0.0.1", (), "ord.*", -1, None,
            cg.ClassicMemberMetadataValue(45_000, (("range", b"\x00\x01"), ("roundrobin", b""))))),
        (cg.ConsumerGroupTargetAssignmentMetadataKey("g"), cg.ConsumerGroupTargetAssignmentMetadataValue(4)),
        (cg.ConsumerGroupTargetAssignmentMemberKey("g", "m1"),
         cg.ConsumerGroupTargetAssignmentMemberValue(((t, (0, 1)),))),
        (cg.ConsumerGroupCurrentMemberAssignmentKey("g", "m1"),
         cg.ConsumerGroupCurrentMemberAssignmentValue(4, 3, 1, ((t, (0,)),), ((t, (2,)),))),
        (cg.ConsumerGroupCurrentMemberAssignmentKey("g", "m2"), None),
    ]
    for key, value in records:
        assert decode_group_record(*encode_record(key, value)) == (key, value)
