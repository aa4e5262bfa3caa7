"""The consumer's embedded group protocol on the wire (Java's ``ConsumerProtocol``): what the client writes
into JoinGroup/SyncGroup and the broker reads when it moves a classic group to the consumer protocol.

JoinGroup carries each member's :data:`ConsumerProtocolSubscription` as the protocol metadata and SyncGroup
each member's :data:`ConsumerProtocolAssignment`, both prefixed by an int16 version.  Versions 0-3 are
declared (never flexible).  As in Java, a version newer than ours is read as the newest we know (the later
fields are ignorable and trailing bytes are skipped).

Partitions are ``(topic, partition)`` pairs here; the client's
:mod:`minikafka.client.consumer.protocol` gives them as ``TopicPartition``\\ s.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from typing import Any

from .exceptions import MalformedMessage, UnsupportedVersion
from .schema import Message, f

__all__ = [
    "ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "PROTOCOL_TYPE", "SUBSCRIPTION_VERSION",
    "ASSIGNMENT_VERSION", "MAX_VERSION", "build_subscription", "parse_subscription", "build_assignment",
    "parse_assignment", "topic_partitions",
]

PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
MAX_VERSION = 3  # the newest version declared below
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


def _by_topic(partitions: Iterable[tuple[str, int]]) -> list[dict[str, Any]]:
    """Partitions as the protocol's topic entries, topics in first-seen order."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return [{"topic": t, "partitions": ps} for t, ps in out.items()]


def topic_partitions(entries: Iterable[Any] | None) -> list[tuple[str, int]]:
    """The ``(topic, partition)`` pairs of parsed topic entries (``owned_partitions``, ``assigned_partitions``)."""
    return [(t.topic, p) for t in (entries or []) for p in t.partitions]


def _version(data: bytes, what: str) -> int:
    """The int16 version ``data`` starts with, capped at the newest we know (a ProtocolError if unreadable)."""
    if len(data) < 2:
        raise MalformedMessage(f"{what} of {len(data)} bytes has no version")
    version = min(_VERSION.unpack_from(data)[0], MAX_VERSION)
    if version < 0:
        raise UnsupportedVersion(f"bad {what} version {version}", None, version)
    return version


def build_subscription(topics: Iterable[str], user_data: bytes | None, owned: Iterable[tuple[str, int]],
                       generation_id: int, rack_id: str | None, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """A versioned ConsumerProtocolSubscription."""
    body = {"topics": list(topics), "user_data": user_data, "owned_partitions": _by_topic(owned),
            "generation_id": generation_id, "rack_id": rack_id}
    return _VERSION.pack(version) + ConsumerProtocolSubscription.build(body, version)


def parse_subscription(data: bytes) -> Any:
    """The parsed ConsumerProtocolSubscription of JoinGroup protocol metadata; a ProtocolError if it does not
    parse."""
    version = _version(data, "ConsumerProtocolSubscription")
    return ConsumerProtocolSubscription.parse(bytes(data[2:]), version)


def build_assignment(partitions: Iterable[tuple[str, int]], user_data: bytes | None,
                     version: int = ASSIGNMENT_VERSION) -> bytes:
    """A versioned ConsumerProtocolAssignment."""
    body = {"assigned_partitions": _by_topic(partitions), "user_data": user_data}
    return _VERSION.pack(version) + ConsumerProtocolAssignment.build(body, version)


def parse_assignment(data: bytes) -> Any | None:
    """The parsed ConsumerProtocolAssignment of SyncGroup bytes (None for empty bytes: an empty assignment);
    a ProtocolError if it does not parse."""
    if not data:  # an empty assignment (e.g. the member subscribed to nothing the leader knew)
        return None
    version = _version(data, "ConsumerProtocolAssignment")
    return ConsumerProtocolAssignment.parse(bytes(data[2:]), version)
