"""Every coordinator record type minikafka reads and writes is declared as Kafka's record JSON declares it
(``../shared/kafka-protocol/records/``): the record type (the key's version), the value's versions, and field by
field the names, versions, nullable and tagged versions, nested structs included; and each KIP-848 consumer group
record reads back what was written."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_json import field_differences, load_schema, shared_dir
from minikafka.protocol import modern_group_records as cg
from minikafka.protocol.coordinator_records import RECORD_SCHEMAS, decode_group_record, encode_record
from minikafka.protocol.schema import Message, VersionRange

SHARED = shared_dir()
RECORDS = SHARED / "kafka-protocol" / "records" if SHARED is not None else None
DIRS = {"__consumer_offsets": "group-coordinator", "__transaction_state": "transaction-coordinator",
        "__share_group_state": "share-coordinator"}


def _declared() -> list[tuple[str, Message]]:
    return [(topic, m) for topic, by_type in RECORD_SCHEMAS.items() for pair in by_type.values() for m in pair]


@pytest.mark.skipif(RECORDS is None, reason="../shared/kafka-protocol is not beside the repository")
@pytest.mark.parametrize("topic,message", _declared(), ids=lambda x: x.name if isinstance(x, Message) else x)
def test_a_record_schema_is_kafkas(topic: str, message: Message) -> None:
    assert RECORDS is not None
    schema = load_schema(Path(RECORDS) / DIRS[topic], message.name)
    assert VersionRange.parse(schema["validVersions"]) == VersionRange(message.min_version, message.max_version)
    flexible = schema.get("flexibleVersions")
    assert message.flexible_versions == VersionRange.parse(flexible)
    assert field_differences(message.fields, schema) == []


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


# Strings near and past an int16 length in UTF-8 bytes (16,380-16,400 two-byte characters), and short ones.
_OFFSET_TEXT = st.text(max_size=40) | st.integers(16380, 16400).map(lambda n: "é" * n)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


@settings(max_examples=300, deadline=None)
@given(group=_OFFSET_TEXT, topic=st.text(max_size=40), partition=_INT32 | st.integers(1 << 31, 1 << 33),
       offset=_INT64, metadata=_OFFSET_TEXT, commit=_INT64, epoch=_INT32, expire=st.just(-1) | _INT64)
def test_packed_offset_commit_records_are_the_schema_builders_bytes(
        group: str, topic: str, partition: int, offset: int, metadata: str, commit: int, epoch: int,
        expire: int) -> None:
    """OffsetCommitKey v1 and OffsetCommitValue v3 (v1 with an expire timestamp) are packed directly: the same
    bytes as the schema's builder writes, or its error where it has one."""
    from minikafka.protocol import coordinator_records as cr

    key = cr.OffsetCommitKey(group, topic, partition)
    value = cr.OffsetCommitValue(offset, metadata, commit, epoch, expire)
    writer_key, writer_value = cr._KEY_WRITERS[cr.OffsetCommitKey], cr._VALUE_WRITERS[cr.OffsetCommitValue]
    value_version = 1 if expire >= 0 else writer_value[1]
    for encode, obj, message, version in ((cr.encode_key, key, *writer_key),
                                          (cr.encode_value, value, writer_value[0], value_version)):
        try:
            expected: bytes | type[Exception] = cr._prefixed(message, version, obj)
        except Exception as exc:  # noqa: BLE001 - the same error type is expected of the packed path
            expected = type(exc)
        if isinstance(expected, bytes):
            assert encode(obj) == expected
        else:
            with pytest.raises(expected):
                encode(obj)
