"""Small helpers shared by handlers: leader and leader-epoch checks, the client host."""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from ..partition import Partition
from ..services import PartitionLookup

# The authorized-operations fields' default when the request did not ask for them (Integer.MIN_VALUE); the
# bits themselves come from .authorization.authorized_operations.
UNREQUESTED_OPERATIONS = -2147483648


def check_leader_epoch(part: Partition, current_leader_epoch: int) -> ErrorCode:
    """Kafka's current-leader-epoch fencing: -1 skips the check."""
    if current_leader_epoch < 0 or current_leader_epoch == part.leader_epoch:
        return ErrorCode.NONE
    if current_leader_epoch < part.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


def check_leader(part: Partition) -> ErrorCode:
    """NOT_LEADER_OR_FOLLOWER unless this broker leads the partition."""
    return ErrorCode.NONE if part.is_leader else ErrorCode.NOT_LEADER_OR_FOLLOWER


def leader_partition(partitions: PartitionLookup, topic: str, index: int,
                     current_leader_epoch: int = -1) -> tuple[Partition | None, ErrorCode]:
    """The partition a leader-only request addresses, or the error Kafka answers with
    (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH)."""
    part = partitions.get(topic, index)
    if part is None:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    err = check_leader(part) or check_leader_epoch(part, current_leader_epoch)
    return (None, err) if err else (part, ErrorCode.NONE)


def client_host(peer: str) -> str:
    """Kafka's ``clientAddress.toString`` form ("/127.0.0.1") from a "host:port" peer."""
    if not peer or peer == "?":
        return ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")
