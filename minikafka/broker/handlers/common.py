"""Small helpers shared by handlers: leader-epoch checks and topic lookup with auto-creation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..metadata import MetadataError, TopicMetadata

if TYPE_CHECKING:
    from ..broker import Broker
    from ..replica_manager import Partition

# AclOperation bits Kafka reports when authorized operations are asked for
# (READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS ...).
ALL_TOPIC_OPERATIONS = sum(1 << b for b in (3, 4, 5, 6, 7, 8, 10, 11))
ALL_CLUSTER_OPERATIONS = sum(1 << b for b in (4, 5, 7, 8, 9, 10, 11, 12, 13))
UNREQUESTED_OPERATIONS = -2147483648


def check_leader_epoch(part: "Partition", current_leader_epoch: int) -> ErrorCode:
    """Kafka's current-leader-epoch fencing: -1 skips the check."""
    if current_leader_epoch < 0 or current_leader_epoch == part.leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch < part.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def check_leader(part: "Partition") -> ErrorCode:
    """NOT_LEADER_OR_FOLLOWER unless this broker leads the partition."""
    return ErrorCode.NONE if part.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER


def leader_partition(
    broker: "Broker", topic: str, index: int, current_leader_epoch: int = -1
) -> tuple["Partition | None", ErrorCode]:
    """The partition a leader-only request addresses, or the error Kafka answers with
    (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH)."""
    part = broker.replica_manager.get(topic, index)
    if part is None:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    err = check_leader(part) or check_leader_epoch(part, current_leader_epoch)
    return (None, err) if err else (part, ErrorCode.NONE)


def lookup_topic(broker: "Broker", name: str, auto_create: bool) -> tuple[ErrorCode, TopicMetadata | None]:
    """Find a topic, creating it when auto-creation is enabled and asked for."""
    topic = broker.metadata.get_topic(name)
    if topic is not None:
        return ErrorCode.NONE, topic
    if auto_create and broker.config.auto_create_topics_enable:
        try:
            return ErrorCode.NONE, broker.auto_create_topic(name)
        except MetadataError as exc:
            return exc.code, None
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
