"""The consumer's embedded group protocol (Java's ``ConsumerProtocol``) with the client's types: a member's
:class:`Subscription` and :class:`Assignment`, their partitions as ``TopicPartition``\\ s.  The wire format
(versions, declarations, reading newer versions as the newest we know) is
:mod:`minikafka.protocol.consumer_protocol`, which the broker reads too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...protocol.consumer_protocol import (ASSIGNMENT_VERSION, PROTOCOL_TYPE, SUBSCRIPTION_VERSION,
                                           ConsumerProtocolAssignment, ConsumerProtocolSubscription,
                                           build_assignment, build_subscription, parse_assignment,
                                           parse_subscription, topic_partitions)
from ..fetch_session import TopicPartition

__all__ = [
    "ConsumerProtocolSubscription", "ConsumerProtocolAssignment", "Subscription", "Assignment",
    "PROTOCOL_TYPE", "SUBSCRIPTION_VERSION", "ASSIGNMENT_VERSION",
    "encode_subscription", "decode_subscription", "encode_assignment", "decode_assignment",
]


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


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    return build_subscription(sub.topics, sub.user_data, sub.owned_partitions, sub.generation_id, sub.rack_id,
                              version)


def decode_subscription(data: bytes) -> Subscription:
    """A member's subscription from JoinGroup protocol metadata; a ProtocolError if it does not parse."""
    m = parse_subscription(data)
    owned = [TopicPartition(t, p) for t, p in topic_partitions(m.owned_partitions)]
    user_data = bytes(m.user_data) if m.user_data is not None else None
    return Subscription(list(m.topics), user_data, owned, m.generation_id, m.rack_id)


def encode_assignment(asg: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    return build_assignment(asg.partitions, asg.user_data, version)


def decode_assignment(data: bytes) -> Assignment:
    """A member's assignment from SyncGroup bytes (empty bytes: no partitions); a ProtocolError if it does not
    parse."""
    m = parse_assignment(data)
    if m is None:
        return Assignment([])
    tps = [TopicPartition(t, p) for t, p in topic_partitions(m.assigned_partitions)]
    return Assignment(tps, bytes(m.user_data) if m.user_data is not None else None)
