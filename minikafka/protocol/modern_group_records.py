"""The records the modern groups keep in ``__consumer_offsets`` (Kafka's ``GroupCoordinatorRecordHelpers``).

A KIP-848 consumer group, besides its epoch (type 3): its subscribed topics' metadata (type 4), each member's
metadata (type 5), the target assignment's epoch (type 6) and each member's target (type 7), and each member's
current assignment (type 8).  A KIP-932 share group likewise: its subscribed topics' metadata (type 9), each
member's metadata (10), its epoch (11), the target assignment's epoch (12) and each member's target (13), and
each member's current assignment (14).  Declared field by field as Kafka's record JSON (``group-coordinator``)
has them; every value is written at v0.  :mod:`.coordinator_records` encodes and decodes them with the other
coordinator records.

A member's partitions are ``(topic id, partitions)`` pairs, as the records name topics by id.  Pure: no I/O.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from .schema import Message, f, struct

_NO_API_KEY = -1

# -- the schemas -------------------------------------------------------------------------------------------
_TOPIC_PARTITIONS = [
    f("topic_id", "uuid", "0+", entity="topicId"),
    f("partitions", "[]int32", "0+", entity="partitionIndex"),
]
_TOPICS_METADATA = [
    f("topics", [
        f("topic_id", "uuid", "0+", entity="topicId"),
        f("topic_name", "string", "0+", entity="topicName"),
        f("num_partitions", "int32", "0+"),
        f("partition_metadata", [
            f("partition", "int32", "0+", entity="partitionIndex"),
            f("racks", "[]string", "0+"),
        ], "0+"),
    ], "0+"),
]
PARTITION_METADATA_KEY = Message("ConsumerGroupPartitionMetadataKey", _NO_API_KEY, "4", None, [
    f("group_id", "string", "4", entity="groupId"),
])
PARTITION_METADATA_VALUE = Message("ConsumerGroupPartitionMetadataValue", _NO_API_KEY, "0", "0+", _TOPICS_METADATA)
MEMBER_METADATA_KEY = Message("ConsumerGroupMemberMetadataKey", _NO_API_KEY, "5", None, [
    f("group_id", "string", "5", entity="groupId"),
    f("member_id", "string", "5"),
])
MEMBER_METADATA_VALUE = Message("ConsumerGroupMemberMetadataValue", _NO_API_KEY, "0", "0+", [
    f("instance_id", "string", "0+", nullable="0+"),
    f("rack_id", "string", "0+", nullable="0+"),
    f("client_id", "string", "0+", entity="clientId"),
    f("client_host", "string", "0+"),
    f("subscribed_topic_names", "[]string", "0+", entity="topicName"),
    f("subscribed_topic_regex", "string", "0+", nullable="0+", entity="topicRegex"),
    f("rebalance_timeout_ms", "int32", "0+", default=-1),
    f("server_assignor", "string", "0+", nullable="0+"),
    f("classic_member_metadata", struct(
        f("session_timeout_ms", "int32", "0+"),
        f("supported_protocols", [
            f("name", "string", "0+"),
            f("metadata", "bytes", "0+"),
        ], "0+"),
    ), "0+", nullable="0+", default=None, tag=0),
])
TARGET_ASSIGNMENT_METADATA_KEY = Message("ConsumerGroupTargetAssignmentMetadataKey", _NO_API_KEY, "6", None, [
    f("group_id", "string", "6", entity="groupId"),
])
TARGET_ASSIGNMENT_METADATA_VALUE = Message("ConsumerGroupTargetAssignmentMetadataValue", _NO_API_KEY, "0", "0+", [
    f("assignment_epoch", "int32", "0+"),
])
TARGET_ASSIGNMENT_MEMBER_KEY = Message("ConsumerGroupTargetAssignmentMemberKey", _NO_API_KEY, "7", None, [
    f("group_id", "string", "7", entity="groupId"),
    f("member_id", "string", "7"),
])
TARGET_ASSIGNMENT_MEMBER_VALUE = Message("ConsumerGroupTargetAssignmentMemberValue", _NO_API_KEY, "0", "0+", [
    f("topic_partitions", _TOPIC_PARTITIONS, "0+"),
])
CURRENT_MEMBER_ASSIGNMENT_KEY = Message("ConsumerGroupCurrentMemberAssignmentKey", _NO_API_KEY, "8", None, [
    f("group_id", "string", "8", entity="groupId"),
    f("member_id", "string", "8"),
])
CURRENT_MEMBER_ASSIGNMENT_VALUE = Message("ConsumerGroupCurrentMemberAssignmentValue", _NO_API_KEY, "0", "0+", [
    f("member_epoch", "int32", "0+"),
    f("previous_member_epoch", "int32", "0+"),
    f("state", "int8", "0+"),
    f("assigned_partitions", _TOPIC_PARTITIONS, "0+"),
    f("partitions_pending_revocation", _TOPIC_PARTITIONS, "0+"),
])


def _group_key(name: str, record_type: int, member: bool = False) -> Message:
    fields = [f("group_id", "string", str(record_type), entity="groupId")]
    if member:
        fields.append(f("member_id", "string", str(record_type)))
    return Message(name, _NO_API_KEY, str(record_type), None, fields)


SHARE_PARTITION_METADATA_KEY = _group_key("ShareGroupPartitionMetadataKey", 9)
SHARE_PARTITION_METADATA_VALUE = Message("ShareGroupPartitionMetadataValue", _NO_API_KEY, "0", "0+", _TOPICS_METADATA)
SHARE_MEMBER_METADATA_KEY = _group_key("ShareGroupMemberMetadataKey", 10, member=True)
SHARE_MEMBER_METADATA_VALUE = Message("ShareGroupMemberMetadataValue", _NO_API_KEY, "0", "0+", [
    f("rack_id", "string", "0+", nullable="0+"),
    f("client_id", "string", "0+", entity="clientId"),
    f("client_host", "string", "0+"),
    f("subscribed_topic_names", "[]string", "0+", entity="topicName"),
])
SHARE_METADATA_KEY = _group_key("ShareGroupMetadataKey", 11)
SHARE_METADATA_VALUE = Message("ShareGroupMetadataValue", _NO_API_KEY, "0", "0+", [f("epoch", "int32", "0+")])
SHARE_TARGET_ASSIGNMENT_METADATA_KEY = _group_key("ShareGroupTargetAssignmentMetadataKey", 12)
SHARE_TARGET_ASSIGNMENT_METADATA_VALUE = Message("ShareGroupTargetAssignmentMetadataValue", _NO_API_KEY, "0", "0+",
                                                 [f("assignment_epoch", "int32", "0+")])
SHARE_TARGET_ASSIGNMENT_MEMBER_KEY = _group_key("ShareGroupTargetAssignmentMemberKey", 13, member=True)
SHARE_TARGET_ASSIGNMENT_MEMBER_VALUE = Message("ShareGroupTargetAssignmentMemberValue", _NO_API_KEY, "0", "0+", [
    f("topic_partitions", _TOPIC_PARTITIONS, "0+"),
])
SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY = _group_key("ShareGroupCurrentMemberAssignmentKey", 14, member=True)
SHARE_CURRENT_MEMBER_ASSIGNMENT_VALUE = Message("ShareGroupCurrentMemberAssignmentValue", _NO_API_KEY, "0", "0+", [
    f("member_epoch", "int32", "0+"),
    f("previous_member_epoch", "int32", "0+"),
    f("state", "int8", "0+"),
    f("assigned_partitions", _TOPIC_PARTITIONS, "0+"),
])

# -- typed keys and values ---------------------------------------------------------------------------------
TopicPartitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]


class ConsumerGroupPartitionMetadataKey(NamedTuple):
    """The metadata of a consumer group's subscribed topics (record type 4)."""

    group_id: str


class ConsumerGroupPartitionMetadataValue(NamedTuple):
    topics: tuple[tuple[uuid.UUID, str, int], ...]  # (topic id, name, partition count)


class ConsumerGroupMemberMetadataKey(NamedTuple):
    """A consumer group member's metadata (record type 5)."""

    group_id: str
    member_id: str


class ClassicMemberMetadataValue(NamedTuple):
    """A classic-protocol member's session timeout and protocols, in a consumer group."""

    session_timeout_ms: int
    supported_protocols: tuple[tuple[str, bytes], ...]


class ConsumerGroupMemberMetadataValue(NamedTuple):
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadataValue | None = None


class ConsumerGroupTargetAssignmentMetadataKey(NamedTuple):
    """The epoch of a consumer group's target assignment (record type 6)."""

    group_id: str


class ConsumerGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


class ConsumerGroupTargetAssignmentMemberKey(NamedTuple):
    """A member's target assignment (record type 7)."""

    group_id: str
    member_id: str


class ConsumerGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: TopicPartitions


class ConsumerGroupCurrentMemberAssignmentKey(NamedTuple):
    """A member's current assignment and where it is in reconciling (record type 8)."""

    group_id: str
    member_id: str


class ConsumerGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS, 127 UNKNOWN
    assigned_partitions: TopicPartitions
    partitions_pending_revocation: TopicPartitions


class ShareGroupPartitionMetadataKey(NamedTuple):
    """The metadata of a share group's subscribed topics (record type 9)."""

    group_id: str


class ShareGroupPartitionMetadataValue(NamedTuple):
    topics: tuple[tuple[uuid.UUID, str, int], ...]  # (topic id, name, partition count)


class ShareGroupMemberMetadataKey(NamedTuple):
    """A share group member's metadata (record type 10)."""

    group_id: str
    member_id: str


class ShareGroupMemberMetadataValue(NamedTuple):
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]


class ShareGroupMetadataKey(NamedTuple):
    """A share group's epoch (record type 11)."""

    group_id: str


class ShareGroupMetadataValue(NamedTuple):
    epoch: int


class ShareGroupTargetAssignmentMetadataKey(NamedTuple):
    """The epoch of a share group's target assignment (record type 12)."""

    group_id: str


class ShareGroupTargetAssignmentMetadataValue(NamedTuple):
    assignment_epoch: int


class ShareGroupTargetAssignmentMemberKey(NamedTuple):
    """A share group member's target assignment (record type 13)."""

    group_id: str
    member_id: str


class ShareGroupTargetAssignmentMemberValue(NamedTuple):
    topic_partitions: TopicPartitions


class ShareGroupCurrentMemberAssignmentKey(NamedTuple):
    """A share group member's current assignment (record type 14)."""

    group_id: str
    member_id: str


class ShareGroupCurrentMemberAssignmentValue(NamedTuple):
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState (a share group member is always STABLE, 0)
    assigned_partitions: TopicPartitions


# What each key is written as (its version is the record type), and each value's message (written at v0).
KEY_WRITERS: dict[type, tuple[Message, int]] = {
    ConsumerGroupPartitionMetadataKey: (PARTITION_METADATA_KEY, 4),
    ConsumerGroupMemberMetadataKey: (MEMBER_METADATA_KEY, 5),
    ConsumerGroupTargetAssignmentMetadataKey: (TARGET_ASSIGNMENT_METADATA_KEY, 6),
    ConsumerGroupTargetAssignmentMemberKey: (TARGET_ASSIGNMENT_MEMBER_KEY, 7),
    ConsumerGroupCurrentMemberAssignmentKey: (CURRENT_MEMBER_ASSIGNMENT_KEY, 8),
    ShareGroupPartitionMetadataKey: (SHARE_PARTITION_METADATA_KEY, 9),
    ShareGroupMemberMetadataKey: (SHARE_MEMBER_METADATA_KEY, 10),
    ShareGroupMetadataKey: (SHARE_METADATA_KEY, 11),
    ShareGroupTargetAssignmentMetadataKey: (SHARE_TARGET_ASSIGNMENT_METADATA_KEY, 12),
    ShareGroupTargetAssignmentMemberKey: (SHARE_TARGET_ASSIGNMENT_MEMBER_KEY, 13),
    ShareGroupCurrentMemberAssignmentKey: (SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY, 14),
}
VALUE_WRITERS: dict[type, tuple[Message, int]] = {
    ConsumerGroupPartitionMetadataValue: (PARTITION_METADATA_VALUE, 0),
    ConsumerGroupMemberMetadataValue: (MEMBER_METADATA_VALUE, 0),
    ConsumerGroupTargetAssignmentMetadataValue: (TARGET_ASSIGNMENT_METADATA_VALUE, 0),
    ConsumerGroupTargetAssignmentMemberValue: (TARGET_ASSIGNMENT_MEMBER_VALUE, 0),
    ConsumerGroupCurrentMemberAssignmentValue: (CURRENT_MEMBER_ASSIGNMENT_VALUE, 0),
    ShareGroupPartitionMetadataValue: (SHARE_PARTITION_METADATA_VALUE, 0),
    ShareGroupMemberMetadataValue: (SHARE_MEMBER_METADATA_VALUE, 0),
    ShareGroupMetadataValue: (SHARE_METADATA_VALUE, 0),
    ShareGroupTargetAssignmentMetadataValue: (SHARE_TARGET_ASSIGNMENT_METADATA_VALUE, 0),
    ShareGroupTargetAssignmentMemberValue: (SHARE_TARGET_ASSIGNMENT_MEMBER_VALUE, 0),
    ShareGroupCurrentMemberAssignmentValue: (SHARE_CURRENT_MEMBER_ASSIGNMENT_VALUE, 0),
}
#: Record type -> (key schema, value schema).
SCHEMAS: dict[int, tuple[Message, Message]] = {
    4: (PARTITION_METADATA_KEY, PARTITION_METADATA_VALUE),
    5: (MEMBER_METADATA_KEY, MEMBER_METADATA_VALUE),
    6: (TARGET_ASSIGNMENT_METADATA_KEY, TARGET_ASSIGNMENT_METADATA_VALUE),
    7: (TARGET_ASSIGNMENT_MEMBER_KEY, TARGET_ASSIGNMENT_MEMBER_VALUE),
    8: (CURRENT_MEMBER_ASSIGNMENT_KEY, CURRENT_MEMBER_ASSIGNMENT_VALUE),
    9: (SHARE_PARTITION_METADATA_KEY, SHARE_PARTITION_METADATA_VALUE),
    10: (SHARE_MEMBER_METADATA_KEY, SHARE_MEMBER_METADATA_VALUE),
    11: (SHARE_METADATA_KEY, SHARE_METADATA_VALUE),
    12: (SHARE_TARGET_ASSIGNMENT_METADATA_KEY, SHARE_TARGET_ASSIGNMENT_METADATA_VALUE),
    13: (SHARE_TARGET_ASSIGNMENT_MEMBER_KEY, SHARE_TARGET_ASSIGNMENT_MEMBER_VALUE),
    14: (SHARE_CURRENT_MEMBER_ASSIGNMENT_KEY, SHARE_CURRENT_MEMBER_ASSIGNMENT_VALUE),
}

ConsumerGroupRecordKey = (ConsumerGroupPartitionMetadataKey | ConsumerGroupMemberMetadataKey
                          | ConsumerGroupTargetAssignmentMetadataKey | ConsumerGroupTargetAssignmentMemberKey
                          | ConsumerGroupCurrentMemberAssignmentKey)
ConsumerGroupRecordValue = (ConsumerGroupPartitionMetadataValue | ConsumerGroupMemberMetadataValue
                            | ConsumerGroupTargetAssignmentMetadataValue | ConsumerGroupTargetAssignmentMemberValue
                            | ConsumerGroupCurrentMemberAssignmentValue)
ShareGroupRecordKey = (ShareGroupPartitionMetadataKey | ShareGroupMemberMetadataKey | ShareGroupMetadataKey
                       | ShareGroupTargetAssignmentMetadataKey | ShareGroupTargetAssignmentMemberKey
                       | ShareGroupCurrentMemberAssignmentKey)
ShareGroupRecordValue = (ShareGroupPartitionMetadataValue | ShareGroupMemberMetadataValue | ShareGroupMetadataValue
                         | ShareGroupTargetAssignmentMetadataValue | ShareGroupTargetAssignmentMemberValue
                         | ShareGroupCurrentMemberAssignmentValue)
SHARE_GROUP_KEYS = frozenset({ShareGroupPartitionMetadataKey, ShareGroupMemberMetadataKey, ShareGroupMetadataKey,
                              ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMemberKey,
                              ShareGroupCurrentMemberAssignmentKey})
ModernGroupRecordKey = ConsumerGroupRecordKey | ShareGroupRecordKey
ModernGroupRecordValue = ConsumerGroupRecordValue | ShareGroupRecordValue


def _partitions(items: Any) -> TopicPartitions:
    return tuple((t.topic_id, tuple(t.partitions)) for t in items)


def typed_record(record_type: int, k: Any, v: Any) -> tuple[ModernGroupRecordKey, ModernGroupRecordValue | None]:
    """The typed key and value (None: a tombstone) of a parsed record of ``record_type`` (4 to 14)."""
    if record_type >= 9:
        return _typed_share_record(record_type, k, v)
    if record_type == 4:
        return ConsumerGroupPartitionMetadataKey(k.group_id), None if v is None else \
            ConsumerGroupPartitionMetadataValue(tuple((t.topic_id, t.topic_name, t.num_partitions) for t in v.topics))
    if record_type == 5:
        key5 = ConsumerGroupMemberMetadataKey(k.group_id, k.member_id)
        if v is None:
            return key5, None
        cm = v.classic_member_metadata
        classic = None if cm is None else ClassicMemberMetadataValue(
            cm.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in cm.supported_protocols))
        return key5, ConsumerGroupMemberMetadataValue(
            v.instance_id, v.rack_id, v.client_id, v.client_host, tuple(v.subscribed_topic_names),
            v.subscribed_topic_regex, v.rebalance_timeout_ms, v.server_assignor, classic)
    if record_type == 6:
        return ConsumerGroupTargetAssignmentMetadataKey(k.group_id), None if v is None else \
            ConsumerGroupTargetAssignmentMetadataValue(v.assignment_epoch)
    if record_type == 7:
        return ConsumerGroupTargetAssignmentMemberKey(k.group_id, k.member_id), None if v is None else \
            ConsumerGroupTargetAssignmentMemberValue(_partitions(v.topic_partitions))
    assert record_type == 8
    return ConsumerGroupCurrentMemberAssignmentKey(k.group_id, k.member_id), None if v is None else \
        ConsumerGroupCurrentMemberAssignmentValue(v.member_epoch, v.previous_member_epoch, v.state,
                                                  _partitions(v.assigned_partitions),
                                                  _partitions(v.partitions_pending_revocation))


def _typed_share_record(record_type: int, k: Any, v: Any) -> tuple[ShareGroupRecordKey, ShareGroupRecordValue | None]:
    if record_type == 9:
        return ShareGroupPartitionMetadataKey(k.group_id), None if v is None else \
            ShareGroupPartitionMetadataValue(tuple((t.topic_id, t.topic_name, t.num_partitions) for t in v.topics))
    if record_type == 10:
        return ShareGroupMemberMetadataKey(k.group_id, k.member_id), None if v is None else \
            ShareGroupMemberMetadataValue(v.rack_id, v.client_id, v.client_host, tuple(v.subscribed_topic_names))
    if record_type == 11:
        return ShareGroupMetadataKey(k.group_id), None if v is None else ShareGroupMetadataValue(v.epoch)
    if record_type == 12:
        return ShareGroupTargetAssignmentMetadataKey(k.group_id), None if v is None else \
            ShareGroupTargetAssignmentMetadataValue(v.assignment_epoch)
    if record_type == 13:
        return ShareGroupTargetAssignmentMemberKey(k.group_id, k.member_id), None if v is None else \
            ShareGroupTargetAssignmentMemberValue(_partitions(v.topic_partitions))
    assert record_type == 14
    return ShareGroupCurrentMemberAssignmentKey(k.group_id, k.member_id), None if v is None else \
        ShareGroupCurrentMemberAssignmentValue(v.member_epoch, v.previous_member_epoch, v.state,
                                               _partitions(v.assigned_partitions))


def _plain_partitions(parts: TopicPartitions) -> list[dict[str, Any]]:
    return [{"topic_id": t, "partitions": list(p)} for t, p in parts]


def plain_value(value: ModernGroupRecordValue) -> dict[str, Any]:
    """``value`` as the dict its schema builds (the topic lists as their structs)."""
    if isinstance(value, (ConsumerGroupPartitionMetadataValue, ShareGroupPartitionMetadataValue)):
        return {"topics": [{"topic_id": t, "topic_name": n, "num_partitions": c, "partition_metadata": []}
                           for t, n, c in value.topics]}
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        cm = value.classic_member_metadata
        out = value._asdict()
        out["subscribed_topic_names"] = list(value.subscribed_topic_names)
        out["classic_member_metadata"] = None if cm is None else {
            "session_timeout_ms": cm.session_timeout_ms,
            "supported_protocols": [{"name": n, "metadata": m} for n, m in cm.supported_protocols]}
        return out
    if isinstance(value, ShareGroupMemberMetadataValue):
        return {**value._asdict(), "subscribed_topic_names": list(value.subscribed_topic_names)}
    if isinstance(value, (ConsumerGroupTargetAssignmentMemberValue, ShareGroupTargetAssignmentMemberValue)):
        return {"topic_partitions": _plain_partitions(value.topic_partitions)}
    if isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        return {**value._asdict(), "assigned_partitions": _plain_partitions(value.assigned_partitions)}
    if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
        return {**value._asdict(), "assigned_partitions": _plain_partitions(value.assigned_partitions),
                "partitions_pending_revocation": _plain_partitions(value.partitions_pending_revocation)}
    return value._asdict()
