"""The records of Kafka's coordinator topics: ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``.

Models Kafka's ``CoordinatorRecordSerde`` (``MessageUtil.toVersionPrefixedBytes``): a record's key is an
int16 version followed by the key struct, and that version *is the record type* (in ``__consumer_offsets``
0/1 an offset commit, 2 a classic group's metadata, 3 a consumer group's epoch); its value is an int16
version followed by the value struct, or null for a tombstone (a deletion, which the log cleaner drops
after ``delete.retention.ms``).  The schemas are declared once here, field by field as Kafka's record
JSON has them (``group-coordinator``, ``transaction-coordinator``, ``share-coordinator``), in the
project's schema machinery (:mod:`.schema`).

Which versions are written, as Kafka 3.9 / 4.0 write them:

* ``OffsetCommitKey`` v1, ``OffsetCommitValue`` v1 with an expire timestamp, else v3
  (``GroupCoordinatorRecordHelpers.newOffsetCommitRecord``, ``MetadataVersion.offsetCommitValueVersion``);
* ``GroupMetadataKey`` v2, ``GroupMetadataValue`` v3 (``groupMetadataValueVersion``);
* ``ConsumerGroupMetadataKey`` v3, ``ConsumerGroupMetadataValue`` v0 (``newConsumerGroupEpochRecord``), and a
  consumer group's other records, types 4 to 8, and a share group's, types 9 to 14, at v0
  (:mod:`.modern_group_records`);
* ``TransactionLogKey`` v0, ``TransactionLogValue`` v1 (``TransactionLog.valueToBytes`` with
  ``transaction.version`` >= 1: the flexible version, whose tagged fields carry the previous producer id
  and the client's transaction version);
* ``ShareSnapshotKey`` v0, ``ShareSnapshotValue`` v0 (``ShareCoordinatorRecordHelpers.newShareSnapshotRecord``).

Every version the schemas declare is read.  Pure: no I/O; a record that does not decode raises
:class:`CoordinatorRecordError`.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any, NamedTuple, Union

from . import modern_group_records as cg
from .modern_group_records import ModernGroupRecordKey, ModernGroupRecordValue
from .exceptions import CoordinatorRecordError, ProtocolError
from .schema import Message, f

__all__ = [
    "CoordinatorRecordError", "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
    "GroupMemberMetadata", "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue", "TransactionLogKey",
    "TransactionLogValue", "TransactionPartitions", "ShareSnapshotKey", "ShareSnapshotValue", "ShareStateBatch",
    "GroupRecordKey", "GroupRecordValue", "encode_key", "encode_value", "encode_record", "decode_group_record",
    "decode_transaction_record", "decode_share_record", "OFFSETS_TOPIC", "TRANSACTION_STATE_TOPIC",
    "SHARE_GROUP_STATE_TOPIC", "RECORD_SCHEMAS",
]

_INT16 = struct.Struct(">h")  # a record's version prefix; a string's length
_NO_API_KEY = -1  # coordinator records are no API messages


# -- the schemas (Kafka's record JSON, declared in our schema machinery) -------------------------------------
_OFFSET_COMMIT_KEY = Message("OffsetCommitKey", _NO_API_KEY, "0-1", None, [
    f("group", "string", "0-1", entity="groupId"),
    f("topic", "string", "0-1", entity="topicName"),
    f("partition", "int32", "0-1", entity="partitionIndex"),
])
_OFFSET_COMMIT_VALUE = Message("OffsetCommitValue", _NO_API_KEY, "0-4", "4+", [
    f("offset", "int64", "0+"),
    f("leader_epoch", "int32", "3+", default=-1),
    f("metadata", "string", "0+"),
    f("commit_timestamp", "int64", "0+"),
    f("expire_timestamp", "int64", "1", default=-1),
])
_GROUP_METADATA_KEY = Message("GroupMetadataKey", _NO_API_KEY, "2", None, [
    f("group", "string", "2", entity="groupId"),
])
_GROUP_METADATA_VALUE = Message("GroupMetadataValue", _NO_API_KEY, "0-4", "4+", [
    f("protocol_type", "string", "0+"),
    f("generation", "int32", "0+"),
    f("protocol", "string", "0+", nullable="0+"),
    f("leader", "string", "0+", nullable="0+"),
    f("current_state_timestamp", "int64", "2+", default=-1),
    f("members", [
        f("member_id", "string", "0+"),
        f("group_instance_id", "string", "3+", nullable="3+", default=None),
        f("client_id", "string", "0+", entity="clientId"),
        f("client_host", "string", "0+"),
        f("rebalance_timeout", "int32", "1+", default=-1),
        f("session_timeout", "int32", "0+"),
        f("subscription", "bytes", "0+"),
        f("assignment", "bytes", "0+"),
    ], "0+"),
])
_CONSUMER_GROUP_METADATA_KEY = Message("ConsumerGroupMetadataKey", _NO_API_KEY, "3", None, [
    f("group_id", "string", "3", entity="groupId"),
])
_CONSUMER_GROUP_METADATA_VALUE = Message("ConsumerGroupMetadataValue", _NO_API_KEY, "0", "0+", [
    f("epoch", "int32", "0+"),
])
_TRANSACTION_LOG_KEY = Message("TransactionLogKey", _NO_API_KEY, "0", None, [
    f("transactional_id", "string", "0", entity="transactionalId"),
])
_TRANSACTION_LOG_VALUE = Message("TransactionLogValue", _NO_API_KEY, "0-1", "1+", [
    f("producer_id", "int64", "0+", entity="producerId"),
    f("previous_producer_id", "int64", "1+", tag=0, default=-1, entity="producerId"),
    f("next_producer_id", "int64", "1+", tag=1, default=-1, entity="producerId"),
    f("producer_epoch", "int16", "0+"),
    f("transaction_timeout_ms", "int32", "0+"),
    f("transaction_status", "int8", "0+"),
    f("transaction_partitions", [
        f("topic", "string", "0+", entity="topicName"),
        f("partition_ids", "[]int32", "0+", entity="partitionIndex"),
    ], "0+", nullable="0+"),
    f("transaction_last_update_timestamp_ms", "int64", "0+"),
    f("transaction_start_timestamp_ms", "int64", "0+"),
    f("client_transaction_version", "int16", "1+", tag=2, default=0),
])
_SHARE_SNAPSHOT_KEY = Message("ShareSnapshotKey", _NO_API_KEY, "0", None, [
    f("group_id", "string", "0", entity="groupId"),
    f("topic_id", "uuid", "0", entity="topicId"),
    f("partition", "int32", "0", entity="partitionIndex"),
])
_SHARE_SNAPSHOT_VALUE = Message("ShareSnapshotValue", _NO_API_KEY, "0", "0+", [
    f("snapshot_epoch", "uint16", "0"),
    f("state_epoch", "int32", "0+"),
    f("leader_epoch", "int32", "0+"),
    f("start_offset", "int64", "0"),
    f("state_batches", [
        f("first_offset", "int64", "0"),
        f("last_offset", "int64", "0"),
        f("delivery_state", "int8", "0"),
        f("delivery_count", "int16", "0"),
    ], "0"),
])


# -- typed keys and values ----------------------------------------------------------------------------------
class OffsetCommitKey(NamedTuple):
    """A group's committed offset for one partition (record type 1; 0 is read too)."""

    group: str
    topic: str
    partition: int


class OffsetCommitValue(NamedTuple):
    offset: int
    metadata: str = ""
    commit_timestamp: int = 0
    leader_epoch: int = -1
    expire_timestamp: int = -1  # -1: none (then written as v3, which has no such field)


class GroupMetadataKey(NamedTuple):
    """A classic group's metadata (record type 2)."""

    group: str


class GroupMemberMetadata(NamedTuple):
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


class GroupMetadataValue(NamedTuple):
    protocol_type: str  # "" for none
    generation: int
    protocol: str | None = None
    leader: str | None = None
    current_state_timestamp: int = -1
    members: tuple[GroupMemberMetadata, ...] = ()


class ConsumerGroupMetadataKey(NamedTuple):
    """A KIP-848 consumer group's epoch (record type 3)."""

    group_id: str


class ConsumerGroupMetadataValue(NamedTuple):
    epoch: int


class TransactionLogKey(NamedTuple):
    """A transactional id's state (``__transaction_state``, record type 0)."""

    transactional_id: str


class TransactionPartitions(NamedTuple):
    topic: str
    partition_ids: tuple[int, ...]


class TransactionLogValue(NamedTuple):
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int  # Kafka's TransactionState id (Empty 0 ... PrepareEpochFence 7)
    transaction_partitions: tuple[TransactionPartitions, ...] | None  # None (null) when Empty
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


class ShareSnapshotKey(NamedTuple):
    """A share-partition's state (``__share_group_state``, record type 0)."""

    group_id: str
    topic_id: uuid.UUID
    partition: int


class ShareStateBatch(NamedTuple):
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 Available, 2 Acknowledged, 4 Archived
    delivery_count: int


class ShareSnapshotValue(NamedTuple):
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[ShareStateBatch, ...] = ()


GroupRecordKey = Union[OffsetCommitKey, GroupMetadataKey, ConsumerGroupMetadataKey, ModernGroupRecordKey]
GroupRecordValue = Union[OffsetCommitValue, GroupMetadataValue, ConsumerGroupMetadataValue, ModernGroupRecordValue]
CoordinatorKey = Union[GroupRecordKey, TransactionLogKey, ShareSnapshotKey]
CoordinatorValue = Union[GroupRecordValue, TransactionLogValue, ShareSnapshotValue]


# -- encoding -----------------------------------------------------------------------------------------------
def _plain(obj: Any) -> Any:
    """NamedTuples (nested too) as the dicts and lists the schema builders take."""
    fields = getattr(obj, "_fields", None)
    if isinstance(obj, tuple) and fields is not None:
        return {k: _plain(v) for k, v in zip(fields, obj)}
    if isinstance(obj, tuple):
        return [_plain(v) for v in obj]
    return obj


def _prefixed(message: Message, version: int, obj: Any) -> bytes:
    return _INT16.pack(version) + message.build(_plain(obj), version)


# What each key and value type is written as: its message and version (the key's version is the record type).
_KEY_WRITERS: dict[type, tuple[Message, int]] = {
    OffsetCommitKey: (_OFFSET_COMMIT_KEY, 1), GroupMetadataKey: (_GROUP_METADATA_KEY, 2),
    ConsumerGroupMetadataKey: (_CONSUMER_GROUP_METADATA_KEY, 3), TransactionLogKey: (_TRANSACTION_LOG_KEY, 0),
    ShareSnapshotKey: (_SHARE_SNAPSHOT_KEY, 0), **cg.KEY_WRITERS,
}
_VALUE_WRITERS: dict[type, tuple[Message, int]] = {
    OffsetCommitValue: (_OFFSET_COMMIT_VALUE, 3), GroupMetadataValue: (_GROUP_METADATA_VALUE, 3),
    ConsumerGroupMetadataValue: (_CONSUMER_GROUP_METADATA_VALUE, 0), TransactionLogValue: (_TRANSACTION_LOG_VALUE, 1),
    ShareSnapshotValue: (_SHARE_SNAPSHOT_VALUE, 0), **cg.VALUE_WRITERS,
}


# The offset commit records, written once per committed partition, packed directly at the versions the writer
# tables name: the bytes the schema's builder gives (checked field by field in the tests), without its dicts.
# Strings too long for an int16 length, or numbers out of their field's range, go through the builder and its
# error.
_OFFSET_KEY_HEAD = struct.Struct(">hh")     # key version (1), group length
_PARTITION = struct.Struct(">i")
_OFFSET_VALUE_V3_HEAD = struct.Struct(">hqih")  # version 3, offset, leader epoch, metadata length
_OFFSET_VALUE_V1_HEAD = struct.Struct(">hqh")   # version 1, offset, metadata length
_TIMESTAMP = struct.Struct(">q")
_TIMESTAMPS = struct.Struct(">qq")
_MAX_STRING = 0x7FFF


def _offset_commit_key(key: OffsetCommitKey, version: int) -> bytes | None:
    group, topic = key.group.encode(), key.topic.encode()
    if len(group) > _MAX_STRING or len(topic) > _MAX_STRING:
        return None
    try:
        return b"".join((_OFFSET_KEY_HEAD.pack(version, len(group)), group, _INT16.pack(len(topic)), topic,
                         _PARTITION.pack(key.partition)))
    except struct.error:
        return None


def _offset_commit_value(value: OffsetCommitValue, version: int) -> bytes | None:
    metadata = value.metadata.encode()
    if len(metadata) > _MAX_STRING:
        return None
    try:
        if version == 1:
            return b"".join((_OFFSET_VALUE_V1_HEAD.pack(version, value.offset, len(metadata)), metadata,
                             _TIMESTAMPS.pack(value.commit_timestamp, value.expire_timestamp)))
        return b"".join((_OFFSET_VALUE_V3_HEAD.pack(version, value.offset, value.leader_epoch, len(metadata)), metadata,
                         _TIMESTAMP.pack(value.commit_timestamp)))
    except struct.error:
        return None


def encode_key(key: CoordinatorKey) -> bytes:
    """The key bytes: the record type (key version) then the key struct."""
    writer = _KEY_WRITERS.get(type(key))
    if writer is None:
        raise TypeError(f"not a coordinator record key: {key!r}")
    if type(key) is OffsetCommitKey and (packed := _offset_commit_key(key, writer[1])) is not None:
        return packed
    return _prefixed(writer[0], writer[1], key)


def encode_value(value: CoordinatorValue | None) -> bytes | None:
    """The value bytes (version then struct), None for a tombstone. An offset commit with an expire
    timestamp is written at v1, the last version that carries one, as Kafka does."""
    if value is None:
        return None
    writer = _VALUE_WRITERS.get(type(value))
    if writer is None:
        raise TypeError(f"not a coordinator record value: {value!r}")
    message, version = writer
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp >= 0:
            version = 1
        if (packed := _offset_commit_value(value, version)) is not None:
            return packed
    if type(value) in cg.VALUE_WRITERS:
        return _INT16.pack(version) + message.build(cg.plain_value(value), version)  # type: ignore[arg-type]
    return _prefixed(message, version, value)


def encode_record(key: CoordinatorKey, value: CoordinatorValue | None) -> tuple[bytes, bytes | None]:
    """``(key bytes, value bytes or None)`` of one record; a None value is a tombstone."""
    return encode_key(key), encode_value(value)


# -- decoding -----------------------------------------------------------------------------------------------
def _split(data: bytes | memoryview, what: str) -> tuple[int, memoryview]:
    view = memoryview(data)
    if len(view) < 2:
        raise CoordinatorRecordError(f"could not read the version of the record's {what}")
    return _INT16.unpack_from(view)[0], view[2:]


def _parse(message: Message, version: int, body: memoryview, what: str) -> Any:
    if not message.supports(version):
        raise CoordinatorRecordError(f"unknown {message.name} version {version}")
    try:
        return message.parse(body, version)
    except ProtocolError as exc:  # Message.parse raises only ProtocolError for bytes that do not parse
        raise CoordinatorRecordError(f"could not read {message.name} v{version} from the {what}: {exc}") from exc


def _value(data: bytes | memoryview | None, message: Message) -> Any:
    if data is None:
        return None
    version, body = _split(data, "value")
    return _parse(message, version, body, "value")


def decode_group_record(key: bytes | memoryview, value: bytes | memoryview | None
                        ) -> tuple[GroupRecordKey, GroupRecordValue | None]:
    """A ``__consumer_offsets`` record (Kafka's ``GroupCoordinatorRecordSerde``); value None: a tombstone.
    Record types this coordinator does not keep (a consumer group's regular expressions, a share group's state
    partitions) raise
    :class:`CoordinatorRecordError`."""
    record_type, body = _split(key, "key")
    if record_type in cg.SCHEMAS:
        key_schema, value_schema = cg.SCHEMAS[record_type]
        return cg.typed_record(record_type, _parse(key_schema, record_type, body, "key"),
                               _value(value, value_schema))
    if record_type in (0, 1):
        k = _parse(_OFFSET_COMMIT_KEY, record_type, body, "key")
        v = _value(value, _OFFSET_COMMIT_VALUE)
        return (OffsetCommitKey(k.group, k.topic, k.partition),
                None if v is None else OffsetCommitValue(v.offset, v.metadata, v.commit_timestamp, v.leader_epoch,
                                                         v.expire_timestamp))
    if record_type == 2:
        k = _parse(_GROUP_METADATA_KEY, record_type, body, "key")
        v = _value(value, _GROUP_METADATA_VALUE)
        if v is None:
            return GroupMetadataKey(k.group), None
        members = tuple(GroupMemberMetadata(m.member_id, m.client_id, m.client_host, m.session_timeout,
                                            bytes(m.subscription), bytes(m.assignment), m.rebalance_timeout,
                                            m.group_instance_id) for m in v.members)
        return GroupMetadataKey(k.group), GroupMetadataValue(v.protocol_type, v.generation, v.protocol, v.leader,
                                                             v.current_state_timestamp, members)
    if record_type == 3:
        k = _parse(_CONSUMER_GROUP_METADATA_KEY, record_type, body, "key")
        v = _value(value, _CONSUMER_GROUP_METADATA_VALUE)
        return ConsumerGroupMetadataKey(k.group_id), None if v is None else ConsumerGroupMetadataValue(v.epoch)
    raise CoordinatorRecordError(f"unknown __consumer_offsets record type {record_type}")


def decode_transaction_record(key: bytes | memoryview, value: bytes | memoryview | None
                              ) -> tuple[TransactionLogKey, TransactionLogValue | None]:
    """A ``__transaction_state`` record (``TransactionLog.readTxnRecordKey`` / ``readTxnRecordValue``)."""
    record_type, body = _split(key, "key")
    if record_type != 0:
        raise CoordinatorRecordError(f"unknown __transaction_state record type {record_type}")
    k = _parse(_TRANSACTION_LOG_KEY, record_type, body, "key")
    v = _value(value, _TRANSACTION_LOG_VALUE)
    if v is None:
        return TransactionLogKey(k.transactional_id), None
    parts = (None if v.transaction_partitions is None else
             tuple(TransactionPartitions(p.topic, tuple(p.partition_ids)) for p in v.transaction_partitions))
    return TransactionLogKey(k.transactional_id), TransactionLogValue(
        v.producer_id, v.producer_epoch, v.transaction_timeout_ms, v.transaction_status, parts,
        v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms, v.previous_producer_id,
        v.next_producer_id, v.client_transaction_version)


def decode_share_record(key: bytes | memoryview, value: bytes | memoryview | None
                        ) -> tuple[ShareSnapshotKey, ShareSnapshotValue | None]:
    """A ``__share_group_state`` snapshot record (``ShareCoordinatorRecordSerde``); ShareUpdate records
    (type 1), which this broker never writes, raise :class:`CoordinatorRecordError`."""
    record_type, body = _split(key, "key")
    if record_type != 0:
        raise CoordinatorRecordError(f"unsupported __share_group_state record type {record_type}")
    k = _parse(_SHARE_SNAPSHOT_KEY, record_type, body, "key")
    v = _value(value, _SHARE_SNAPSHOT_VALUE)
    if v is None:
        return ShareSnapshotKey(k.group_id, k.topic_id, k.partition), None
    batches = tuple(ShareStateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                    for b in v.state_batches)
    return ShareSnapshotKey(k.group_id, k.topic_id, k.partition), ShareSnapshotValue(
        v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset, batches)


# -- the schemas by topic and record type -------------------------------------------------------------------
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
SHARE_GROUP_STATE_TOPIC = "__share_group_state"

#: Each coordinator topic's record types (the key version) -> (key schema, value schema), as Kafka's
#: ``CoordinatorRecordSerde`` of the topic maps them: what ``kafka-dump-log.sh``'s decoders print.  Types
#: this broker never writes (a consumer group's regular expressions, a share group's state partitions,
#: ShareUpdate) are absent.
RECORD_SCHEMAS: dict[str, dict[int, tuple[Message, Message]]] = {
    OFFSETS_TOPIC: {
        0: (_OFFSET_COMMIT_KEY, _OFFSET_COMMIT_VALUE),
        1: (_OFFSET_COMMIT_KEY, _OFFSET_COMMIT_VALUE),
        2: (_GROUP_METADATA_KEY, _GROUP_METADATA_VALUE),
        3: (_CONSUMER_GROUP_METADATA_KEY, _CONSUMER_GROUP_METADATA_VALUE),
        **cg.SCHEMAS,
    },
    TRANSACTION_STATE_TOPIC: {0: (_TRANSACTION_LOG_KEY, _TRANSACTION_LOG_VALUE)},
    SHARE_GROUP_STATE_TOPIC: {0: (_SHARE_SNAPSHOT_KEY, _SHARE_SNAPSHOT_VALUE)},
}
