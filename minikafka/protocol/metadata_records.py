"""The records of KRaft's metadata log, ``__cluster_metadata`` (the first piece of issue 26's controller).

Models Kafka's ``MetadataRecordSerde`` (``AbstractApiMessageAndVersionSerde``): a metadata record has no key;
its value is a frame version (an unsigned varint, always 1), the record's type (its ``apiKey`` in Kafka's
record JSON, unsigned varint), the record's version (unsigned varint), then the record itself, flexible in every
version.  The schemas are declared once here, field by field as Kafka's ``metadata`` record JSON has them, in the
project's schema machinery (:mod:`.schema`); a test checks each against that JSON.

A record goes in and comes out as the schema's plain form: :func:`encode_metadata_record` takes a dict of the
record's fields (snake_case, absent ones at their default), :func:`decode_metadata_record` returns a
:class:`MetadataRecord` whose ``data`` has the fields as attributes.  Pure: no I/O; bytes that do not decode
raise :class:`~.exceptions.MetadataRecordError`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from .exceptions import MetadataRecordError, ProtocolError
from .schema import Message, f
from .types import uvarint_at, write_uvarint

__all__ = ["METADATA_RECORDS", "MetadataRecord", "MetadataRecordError", "encode_metadata_record",
           "decode_metadata_record", "record_type", "FRAME_VERSION"]

#: The frame version Kafka writes and the only one it reads (``AbstractApiMessageAndVersionSerde``).
FRAME_VERSION = 1

_ENDPOINT = [
    f("name", "string"),
    f("host", "string"),
    f("port", "uint16"),
    f("security_protocol", "int16"),
]
_FEATURE = [
    f("name", "string"),
    f("min_supported_version", "int16"),
    f("max_supported_version", "int16"),
]

_RECORDS = [
    Message("RegisterBrokerRecord", 0, "0-3", "0+", [
        f("broker_id", "int32", entity="brokerId"),
        f("is_migrating_zk_broker", "bool", "2+", default=False),
        f("incarnation_id", "uuid"),
        f("broker_epoch", "int64"),
        f("end_points", _ENDPOINT),
        f("features", _FEATURE),
        f("rack", "string", nullable="0+"),
        f("fenced", "bool", default=True),
        f("in_controlled_shutdown", "bool", "1+", default=False),
        f("log_dirs", "[]uuid", "3+", tag=0),
    ]),
    Message("UnregisterBrokerRecord", 1, "0", "0+", [
        f("broker_id", "int32", entity="brokerId"),
        f("broker_epoch", "int64"),
    ]),
    Message("TopicRecord", 2, "0", "0+", [
        f("name", "string", entity="topicName"),
        f("topic_id", "uuid"),
    ]),
    Message("PartitionRecord", 3, "0-2", "0+", [
        f("partition_id", "int32", default=-1),
        f("topic_id", "uuid"),
        f("replicas", "[]int32", entity="brokerId"),
        f("isr", "[]int32"),
        f("removing_replicas", "[]int32", entity="brokerId"),
        f("adding_replicas", "[]int32", entity="brokerId"),
        f("leader", "int32", default=-1, entity="brokerId"),
        f("leader_recovery_state", "int8", tag=0, default=0),
        f("leader_epoch", "int32", default=-1),
        f("partition_epoch", "int32", default=-1),
        f("directories", "[]uuid", "1+"),
        f("eligible_leader_replicas", "[]int32", "2+", nullable="2+", tag=1, default=None, entity="brokerId"),
        f("last_known_elr", "[]int32", "2+", nullable="2+", tag=2, default=None, entity="brokerId"),
    ]),
    Message("ConfigRecord", 4, "0", "0+", [
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("name", "string"),
        f("value", "string", nullable="0+"),
    ]),
    Message("PartitionChangeRecord", 5, "0-2", "0+", [
        f("partition_id", "int32", default=-1),
        f("topic_id", "uuid"),
        f("isr", "[]int32", nullable="0+", tag=0, default=None, entity="brokerId"),
        f("leader", "int32", tag=1, default=-2, entity="brokerId"),
        f("replicas", "[]int32", nullable="0+", tag=2, default=None, entity="brokerId"),
        f("removing_replicas", "[]int32", nullable="0+", tag=3, default=None, entity="brokerId"),
        f("adding_replicas", "[]int32", nullable="0+", tag=4, default=None, entity="brokerId"),
        f("leader_recovery_state", "int8", tag=5, default=-1),
        f("directories", "[]uuid", "1+", nullable="1+", tag=8, default=None),
        f("eligible_leader_replicas", "[]int32", "2+", nullable="2+", tag=6, default=None, entity="brokerId"),
        f("last_known_elr", "[]int32", "2+", nullable="2+", tag=7, default=None, entity="brokerId"),
    ]),
    Message("FenceBrokerRecord", 7, "0", "0+", [
        f("id", "int32", entity="brokerId"),
        f("epoch", "int64"),
    ]),
    Message("UnfenceBrokerRecord", 8, "0", "0+", [
        f("id", "int32", entity="brokerId"),
        f("epoch", "int64"),
    ]),
    Message("RemoveTopicRecord", 9, "0", "0+", [
        f("topic_id", "uuid"),
    ]),
    Message("DelegationTokenRecord", 10, "0", "0+", [
        f("owner", "string"),
        f("requester", "string"),
        f("renewers", "[]string"),
        f("issue_timestamp", "int64"),
        f("max_timestamp", "int64"),
        f("expiration_timestamp", "int64"),
        f("token_id", "string"),
    ]),
    Message("UserScramCredentialRecord", 11, "0", "0+", [
        f("name", "string"),
        f("mechanism", "int8"),
        f("salt", "bytes"),
        f("stored_key", "bytes"),
        f("server_key", "bytes"),
        f("iterations", "int32"),
    ]),
    Message("FeatureLevelRecord", 12, "0", "0+", [
        f("name", "string"),
        f("feature_level", "int16"),
    ]),
    Message("ClientQuotaRecord", 14, "0", "0+", [
        f("entity", [
            f("entity_type", "string"),
            f("entity_name", "string", nullable="0+"),
        ]),
        f("key", "string"),
        f("value", "float64"),
        f("remove", "bool"),
    ]),
    Message("ProducerIdsRecord", 15, "0", "0+", [
        f("broker_id", "int32", entity="brokerId"),
        f("broker_epoch", "int64", default=-1),
        f("next_producer_id", "int64"),
    ]),
    Message("BrokerRegistrationChangeRecord", 17, "0-2", "0+", [
        f("broker_id", "int32", entity="brokerId"),
        f("broker_epoch", "int64"),
        f("fenced", "int8", tag=0),
        f("in_controlled_shutdown", "int8", "1+", tag=1),
        f("log_dirs", "[]uuid", "2+", tag=2),
    ]),
    Message("AccessControlEntryRecord", 18, "0", "0+", [
        f("id", "uuid"),
        f("resource_type", "int8"),
        f("resource_name", "string"),
        f("pattern_type", "int8"),
        f("principal", "string"),
        f("host", "string"),
        f("operation", "int8"),
        f("permission_type", "int8"),
    ]),
    Message("RemoveAccessControlEntryRecord", 19, "0", "0+", [
        f("id", "uuid"),
    ]),
    Message("NoOpRecord", 20, "0", "0+", []),
    Message("ZkMigrationStateRecord", 21, "0", "0+", [
        f("zk_migration_state", "int8"),
    ]),
    Message("RemoveUserScramCredentialRecord", 22, "0", "0+", [
        f("name", "string"),
        f("mechanism", "int8"),
    ]),
    Message("BeginTransactionRecord", 23, "0", "0+", [
        f("name", "string", nullable="0+", tag=0, default=None),
    ]),
    Message("EndTransactionRecord", 24, "0", "0+", []),
    Message("AbortTransactionRecord", 25, "0", "0+", [
        f("reason", "string", nullable="0+", tag=0, default=None),
    ]),
    Message("RemoveDelegationTokenRecord", 26, "0", "0+", [
        f("token_id", "string"),
    ]),
    Message("RegisterControllerRecord", 27, "0", "0+", [
        f("controller_id", "int32"),
        f("incarnation_id", "uuid"),
        f("zk_migration_ready", "bool"),
        f("end_points", _ENDPOINT),
        f("features", _FEATURE),
    ]),
]

#: Each metadata record type (Kafka's ``MetadataRecordType``: the record JSON's ``apiKey``) -> its schema.
METADATA_RECORDS: dict[int, Message] = {m.api_key: m for m in _RECORDS}
_BY_NAME: dict[str, Message] = {m.name: m for m in _RECORDS}


class MetadataRecord(NamedTuple):
    """One decoded metadata record: its type, its name (``TopicRecord``...), its version and its fields."""

    type: int
    name: str
    version: int
    data: Any


def record_type(name: str) -> int:
    """The type of the record called ``name`` (KeyError: not a metadata record)."""
    return _BY_NAME[name].api_key


def encode_metadata_record(name: str, fields: Mapping[str, Any], version: int | None = None) -> bytes:
    """The value bytes of one ``name`` record (its newest version unless ``version``): the frame, the type, the
    version, then ``fields`` (those left out at their defaults).  KeyError: an unknown record; ValueError: a
    version it does not have."""
    message = _BY_NAME[name]
    version = message.max_version if version is None else version
    if not message.supports(version):
        raise ValueError(f"{name} has no version {version}")
    body = {**message.default(), **fields}
    return (write_uvarint(FRAME_VERSION) + write_uvarint(message.api_key) + write_uvarint(version)
            + message.build(body, version))


def decode_metadata_record(value: bytes | bytearray | memoryview) -> MetadataRecord:
    """Read one record's value bytes (Kafka's ``MetadataRecordSerde.read``)."""
    view = memoryview(value)
    try:
        frame, pos = uvarint_at(view, 0)
        api_key, pos = uvarint_at(view, pos)
        version, pos = uvarint_at(view, pos)
    except (IndexError, ProtocolError) as exc:
        raise MetadataRecordError(f"could not read a metadata record's frame: {exc}") from exc
    if frame != FRAME_VERSION:
        raise MetadataRecordError(f"unknown frame version {frame} of a metadata record")
    message = METADATA_RECORDS.get(api_key)
    if message is None:
        raise MetadataRecordError(f"unknown metadata record type {api_key}")
    if not message.supports(version):
        raise MetadataRecordError(f"unknown {message.name} version {version}")
    try:
        data = message.parse(view[pos:], version)
    except ProtocolError as exc:
        raise MetadataRecordError(f"could not read {message.name} v{version}: {exc}") from exc
    return MetadataRecord(api_key, message.name, version, data)
