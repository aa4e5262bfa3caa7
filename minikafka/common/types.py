"""Kafka's small value types, one definition for the whole package.

``TopicPartition``, ``TopicIdPartition`` and ``OffsetAndMetadata`` as
``org.apache.kafka.common`` has them; ``Node``, ``PartitionMetadata`` and
``TopicMetadata`` are the cluster view that the broker's metadata store keeps
and that a client builds from Metadata responses.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicPartition(NamedTuple):
    """A partition of a topic by name."""

    topic: str
    partition: int


def partitions_by_topic(tps: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition indexes per topic, topics in first-seen order (how requests list them)."""
    out: dict[str, list[int]] = {}
    for topic, partition in tps:
        out.setdefault(topic, []).append(partition)
    return out


class TopicIdPartition(NamedTuple):
    """A partition with its topic id (Java's ``TopicIdPartition``)."""

    topic_id: uuid.UUID
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset (Kafka's ``OffsetAndMetadata``); timestamps in wall-clock ms.

    ``commit_timestamp`` and ``expire_timestamp`` are the broker's
    (``OffsetCommit`` v1 / v2-4 retention); clients leave them unset.
    """

    offset: int
    leader_epoch: int = -1  # -1: none
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


class Node(NamedTuple):
    """A broker endpoint (Kafka's ``Node``)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass
class PartitionMetadata:
    """One partition's leadership state."""

    partition: int
    leader: int
    leader_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    error: int = 0  # a client's view: the partition's error code in the Metadata response
    # KIP-455: an ongoing reassignment's replicas being added and removed (both within ``replicas``, which
    # holds the target replicas followed by the removing ones until the reassignment completes).
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)

    @property
    def is_reassigning(self) -> bool:
        """Kafka's ``isReassignmentInProgress``: some replica is being added or removed."""
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass
class TopicMetadata:
    """A topic: its id, partitions (indexed by partition number) and configs."""

    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionMetadata]
    configs: dict[str, str] = field(default_factory=dict)
    error: int = 0  # a client's view: the topic's error code in the Metadata response

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS

    def partition(self, index: int) -> PartitionMetadata | None:
        """Partition ``index``, or None if the topic has no such partition."""
        if 0 <= index < len(self.partitions):
            p = self.partitions[index]
            if p.partition == index:
                return p
        return next((p for p in self.partitions if p.partition == index), None)
