"""KRaft's metadata records (issue 26's ``__cluster_metadata``): every record type of Kafka's ``metadata`` record
JSON is declared as that JSON declares it (type, versions, flexible versions, field by field), and a record reads
back what was written, framed as Kafka's ``MetadataRecordSerde`` frames it."""

from __future__ import annotations

import uuid

import pytest

from kafka_json import field_differences, load_schema, shared_dir
from minikafka.protocol.exceptions import MetadataRecordError
from minikafka.protocol.metadata_records import (METADATA_RECORDS, decode_metadata_record, encode_metadata_record,
                                                 record_type)
from minikafka.protocol.schema import Message, VersionRange

SHARED = shared_dir()
METADATA = SHARED / "kafka-protocol" / "records" / "metadata" if SHARED is not None else None


def _kafka_schemas() -> dict[str, dict]:
    """Kafka's metadata record schemas by record name (a file's name may differ: ZkMigrationRecord.json)."""
    schemas = [load_schema(METADATA, p.stem) for p in sorted(METADATA.glob("*.json"))] if METADATA is not None else []
    return {s["name"]: s for s in schemas}


@pytest.mark.skipif(METADATA is None, reason="../shared/kafka-protocol is not beside the repository")
def test_every_metadata_record_type_of_kafka_is_declared() -> None:
    assert {m.name for m in METADATA_RECORDS.values()} == set(_kafka_schemas())


@pytest.mark.skipif(METADATA is None, reason="../shared/kafka-protocol is not beside the repository")
@pytest.mark.parametrize("message", list(METADATA_RECORDS.values()), ids=lambda m: m.name)
def test_a_metadata_record_schema_is_kafkas(message: Message) -> None:
    schema = _kafka_schemas()[message.name]
    assert schema["type"] == "metadata" and schema["apiKey"] == message.api_key
    assert VersionRange.parse(schema["validVersions"]) == VersionRange(message.min_version, message.max_version)
    assert message.flexible_versions == VersionRange.parse(schema["flexibleVersions"])
    assert field_differences(message.fields, schema) == []


def test_a_topic_record_is_framed_as_kafka_frames_it() -> None:
    # Frame version 1, type 2, version 0 (unsigned varints), then the flexible body: compact string "foo",
    # the 16 bytes of the id, no tagged fields.
    topic_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    data = encode_metadata_record("TopicRecord", {"name": "foo", "topic_id": topic_id})
    assert data == b"\x01\x02\x00" + b"\x04foo" + topic_id.bytes + b"\x00"
    record = decode_metadata_record(data)
    assert (record.type, record.name, record.version) == (2, "TopicRecord", 0)
    assert (record.data.name, record.data.topic_id) == ("foo", topic_id)


def test_records_read_back_what_was_written_at_every_version() -> None:
    t, d = uuid.uuid4(), uuid.uuid4()
    cases = {
        "RegisterBrokerRecord": {"broker_id": 1, "incarnation_id": uuid.uuid4(), "broker_epoch": 42,
                                 "end_points": [{"name": "PLAINTEXT", "host": "127.0.0.2", "port": 9092,
                                                 "security_protocol": 0}],
                                 "features": [{"name": "metadata.version", "min_supported_version": 7,
                                               "max_supported_version": 27}],
                                 "rack": None, "fenced": False, "in_controlled_shutdown": True, "log_dirs": [d]},
        "PartitionRecord": {"partition_id": 4, "topic_id": t, "replicas": [1, 2, 3], "isr": [1, 2],
                            "removing_replicas": [], "adding_replicas": [3], "leader": 1, "leader_epoch": 7,
                            "partition_epoch": 9, "directories": [d, d, d], "eligible_leader_replicas": [2],
                            "last_known_elr": None},
        "PartitionChangeRecord": {"partition_id": 4, "topic_id": t, "isr": [2], "leader": 2,
                                  "directories": None, "eligible_leader_replicas": [1]},
        "ClientQuotaRecord": {"entity": [{"entity_type": "user", "entity_name": None},
                                         {"entity_type": "client-id", "entity_name": "app"}],
                              "key": "producer_byte_rate", "value": 1024.0, "remove": False},
        "UserScramCredentialRecord": {"name": "alice", "mechanism": 1, "salt": b"salt", "stored_key": b"s" * 32,
                                      "server_key": b"k" * 32, "iterations": 4096},
        "BrokerRegistrationChangeRecord": {"broker_id": 3, "broker_epoch": 11, "fenced": -1,
                                           "in_controlled_shutdown": 1, "log_dirs": [d]},
        "AbortTransactionRecord": {"reason": "controller failover"},
    }
    for name, fields in cases.items():
        message = METADATA_RECORDS[record_type(name)]
        for version in range(message.min_version, message.max_version + 1):
            record = decode_metadata_record(encode_metadata_record(name, fields, version))
            assert (record.name, record.version) == (name, version)
            present = {fl.name for fl in message.fields if fl.present(version)}
            got = {k: _plain(getattr(record.data, k)) for k in present}
            assert got == {k: v for k, v in {**message.default(), **fields}.items() if k in present}, (name, version)


def _plain(value: object) -> object:
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if hasattr(value, "items") and not isinstance(value, (bytes, str)):
        return {k: _plain(v) for k, v in value.items() if not k.startswith("_")}  # type: ignore[attr-defined]
    return bytes(value) if isinstance(value, memoryview) else value


@pytest.mark.parametrize("data,error", [
    (b"", "frame"),
    (b"\x00\x02\x00\x04foo" + bytes(17), "frame version 0"),
    (b"\x01\x7f\x00", "type 127"),
    (b"\x01\x02\x05", "TopicRecord version 5"),
    (b"\x01\x02\x00\x04fo", "could not read TopicRecord"),
])
def test_bytes_that_are_no_metadata_record_raise_one_error(data: bytes, error: str) -> None:
    with pytest.raises(MetadataRecordError, match=error):
        decode_metadata_record(data)
