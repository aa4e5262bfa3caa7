"""The consumer's embedded group protocol (Java's ``ConsumerProtocol``).

JoinGroup carries each member's :data:`ConsumerProtocolSubscription` as the
protocol metadata and SyncGroup each member's :data:`ConsumerProtocolAssignment`,
both prefixed by an int16 version.  Versions 0-3 are declared (never flexible).

As in Java, a version newer than ours is read as the newest we know (the
later fields are ignorable and trailing bytes are skipped).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Iterable

from ...common import partitions_by_topic
from ...protocol.schema import Message, f
from ..fetch_session import TopicPartition

__all__ = [
    "ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "Subscription", "Assignment",
    "PROTOCOL_TYPE", "SUBSCRIPTION_VERSION", "ASSIGNMENT_VERSION",
    "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
]

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
_MAX_VERSION = 3
_VERSION = struct.Struct(">h")

ConsumerProtocolSubscription = Message("ConsumerProtocolSubscription", -1, "0-3", None, [
    f("topics", "[]string"),
    f("user_data", "bytes", nullable="0+", default=None),
    f("owned_partitions", [
        f("topic", "string", "1+"),
        f("partitions", "[]int32", "1+"),
    ], "1+"),
    f("generation_id", "int32", "2+", default=-1),
    f("rack_id", "string", "3+", nullable="3+", default=None),
])

ConsumerProtocolAssignment = Message("ConsumerProtocolAssignment", -1, "0-3", None, [
    f("assigned_partitions", [
        f("topic", "string"),
        f("partitions", "[]int32"),
    ]),
    f("user_data", "bytes", nullable="0+", default=None),
])


@dataclass
class Subscription:
    """A member's subscription (Java's ``ConsumerPartitionAssignor.Subscription``)."""

    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = field(default_factory=list)
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None  # not on the wire here: from the JoinGroup member entry


@dataclass
class Assignment:
    """A member's assignment (Java's ``ConsumerPartitionAssignor.Assignment``)."""

    partitions: list[TopicPartition]
    user_data: bytes | None = None


def _group(tps: Iterable[TopicPartition]) -> list[dict]:
    return [{"topic": t, "partitions": ps} for t, ps in partitions_by_topic(tps).items()]


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    body = {"topics": list(sub.topics), "user_data": sub.user_data, "owned_partitions": _group(sub.owned_partitions),
            "generation_id": sub.generation_id, "rack_id": sub.rack_id}
    return _VERSION.pack(version) + ConsumerProtocolSubscription.build(body, version)


def decode_subscription(data: bytes) -> Subscription:
    version = min(_VERSION.unpack_from(data)[0], _MAX_VERSION)
    if version < 0:
        raise ValueError(f"bad ConsumerProtocolSubscription version {version}")
    m = ConsumerProtocolSubscription.parse(bytes(data[2:]), version)
    owned = [TopicPartition(t.topic, p) for t in (m.owned_partitions or []) for p in t.partitions]
    user_data = bytes(m.user_data) if m.user_data is not None else None
    return Subscription(list(m.topics), user_data, owned, m.generation_id, m.rack_id)


def encode_assignment(asg: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    body = {"assigned_partitions": _group(asg.partitions), "user_data": asg.user_data}
    return _VERSION.pack(version) + ConsumerProtocolAssignment.build(body, version)


def decode_assignment(data: bytes) -> Assignment:
    if not data:  # an empty assignment (e.g. the member subscribed to nothing the leader knew)
        return Assignment([])
    version = min(_VERSION.unpack_from(data)[0], _MAX_VERSION)
    m = ConsumerProtocolAssignment.parse(bytes(data[2:]), version)
    tps = [TopicPartition(t.topic, p) for t in m.assigned_partitions for p in t.partitions]
    return Assignment(tps, bytes(m.user_data) if m.user_data is not None else None)
