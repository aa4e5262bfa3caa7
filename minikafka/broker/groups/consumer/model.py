"""KIP-848 consumer group state: groups, members, their assignments.

Models Kafka's ``org.apache.kafka.coordinator.group.modern.consumer.ConsumerGroup`` and
``ConsumerGroupMember`` (plus ``MemberState`` and ``ConsumerGroup.ConsumerGroupState``).  Partitions
are kept by topic id (``uuid.UUID``) as Kafka keeps them; ``Assignment`` maps topic id -> partitions.

The records Kafka writes to ``__consumer_offsets`` to rebuild this state (ConsumerGroupMemberMetadata,
TargetAssignment, CurrentMemberAssignment, ...) are made from it and back in :mod:`.records`.

Deliberate differences from Kafka: members are mutable objects updated in place instead of immutable values
rebuilt through builders; ``session_deadline`` and ``rebalance_deadline`` are the timers Kafka schedules in its
timer (coordinator clock seconds).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import Enum

# topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]

LEAVE_GROUP_MEMBER_EPOCH = -1  # ConsumerGroupHeartbeatRequest.LEAVE_GROUP_MEMBER_EPOCH
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # ConsumerGroupHeartbeatRequest.LEAVE_GROUP_STATIC_MEMBER_EPOCH
JOIN_GROUP_MEMBER_EPOCH = 0  # ConsumerGroupHeartbeatRequest.JOIN_GROUP_MEMBER_EPOCH
NO_PARTITION_EPOCH = -1


class ConsumerGroupState(str, Enum):
    """Kafka's ``ConsumerGroup.ConsumerGroupState``; the value is the name Describe/ListGroups report."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(str, Enum):
    """Kafka's ``MemberState``: where a member is in reconciling towards its target assignment."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # must revoke partitions first
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for partitions other members still own
    UNKNOWN = "unknown"


def copy_assignment(a: Assignment) -> Assignment:
    return {t: set(p) for t, p in a.items() if p}


def assignment_equal(a: Assignment, b: Assignment) -> bool:
    return {t: p for t, p in a.items() if p} == {t: p for t, p in b.items() if p}


def assignment_size(a: Assignment) -> int:
    return sum(len(p) for p in a.values())


@dataclass
class ClassicMemberMetadata:
    """Kafka's ``ConsumerGroupMemberMetadataValue.ClassicMemberMetadata``: a classic-protocol
    (JoinGroup/SyncGroup) member living in a consumer group after an online upgrade."""

    session_timeout_ms: int
    # (protocol name, subscription metadata) as sent in JoinGroup
    supported_protocols: list[tuple[str, bytes]] = field(default_factory=list)
    # Kafka's classic-member timers in a consumer group (coordinator clock seconds; None = not armed):
    # the join timeout (rejoin after REBALANCE_IN_PROGRESS) and the sync timeout (SyncGroup after JoinGroup).
    join_deadline: float | None = None
    sync_deadline: float | None = None


@dataclass(eq=False)
class ConsumerGroupMember:
    """One member of a consumer group (Kafka's ``ConsumerGroupMember``)."""

    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] = field(default_factory=list)
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)
    # None for KIP-848 members; the classic protocol's metadata for classic members of the group.
    classic_protocols: ClassicMemberMetadata | None = None
    # Timers (coordinator clock seconds; None = not armed).
    session_deadline: float | None = None
    rebalance_deadline: float | None = None
    # The member epoch the rebalance timer was armed for (Kafka keys it by epoch too).
    rebalance_deadline_epoch: int = -1

    @property
    def is_static(self) -> bool:
        return self.instance_id is not None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        """Kafka's ``isReconciledTo``: stable at ``target_epoch``."""
        return self.state == MemberState.STABLE and self.member_epoch == target_epoch

    def owns(self, topic_id: uuid.UUID, partition: int) -> bool:
        return partition in self.assigned_partitions.get(topic_id, ())


@dataclass
class TopicImage:
    """What a group needs to know about one subscribed topic: id, name, partition count, racks."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int
    # partition -> racks of its replicas (for rack-aware assignment; empty when unknown)
    partition_racks: dict[int, set[str]] = field(default_factory=dict)


class ConsumerGroup:
    """A KIP-848 consumer group (Kafka's ``ConsumerGroup``).

    ``group_epoch`` bumps on every change of membership, subscription or subscribed-topic metadata;
    ``assignment_epoch`` (Kafka's target assignment epoch) is the group epoch the current
    ``target_assignment`` was computed for.  ``partition_epochs`` is Kafka's
    ``currentPartitionEpoch``: the member epoch of the member currently owning each partition
    (its assigned or pending-revocation partitions); a partition is free when absent.
    """

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}  # member id -> target assignment
        self.partition_epochs: dict[uuid.UUID, dict[int, int]] = {}
        # Subscribed topics as last resolved: name -> TopicImage, and their metadata hash.
        self.subscribed_topics: dict[str, TopicImage] = {}
        self.metadata_hash = 0
        # regex -> topic names it resolved to at the last refresh, and the topic names it was resolved against
        self.resolved_regexes: dict[str, set[str]] = {}
        self.regex_topic_names: frozenset[str] | None = None
        self.state = ConsumerGroupState.EMPTY
        self.state_timestamp_ms = -1
        # The assignor used for the last target assignment (ConsumerGroupDescribe reports it).
        self.assignor_name: str | None = None

    def __repr__(self) -> str:
        return (f"ConsumerGroup(group_id={self.group_id!r}, state={self.state.value}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")

    # -- members -------------------------------------------------------------

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def num_classic_members(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    def subscribed_topic_names(self) -> set[str]:
        """Every topic a member names or one of its regexes resolved to."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex is not None:
                names.update(self.resolved_regexes.get(m.subscribed_topic_regex, ()))
        return names

    def member_subscription(self, member: ConsumerGroupMember) -> set[str]:
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex is not None:
            topics |= self.resolved_regexes.get(member.subscribed_topic_regex, set())
        return topics

    # -- partition epochs (Kafka's currentPartitionEpoch) ---------------------

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get(topic_id, {}).get(partition, NO_PARTITION_EPOCH)

    def add_partition_epochs(self, assignment: Assignment, epoch: int) -> None:
        for t, parts in assignment.items():
            epochs = self.partition_epochs.setdefault(t, {})
            for p in parts:
                epochs[p] = epoch

    def remove_partition_epochs(self, assignment: Assignment, expected_epoch: int) -> None:
        for t, parts in assignment.items():
            epochs = self.partition_epochs.get(t)
            if epochs is None:
                continue
            for p in parts:
                if epochs.get(p) == expected_epoch:
                    del epochs[p]
            if not epochs:
                del self.partition_epochs[t]

    # -- state ---------------------------------------------------------------

    def compute_state(self) -> ConsumerGroupState:
        """Kafka's ``maybeUpdateGroupState``."""
        if self.state == ConsumerGroupState.DEAD:
            return self.state
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if not m.is_reconciled_to(self.assignment_epoch):
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def update_state(self, now_ms: int) -> None:
        new = self.compute_state()
        if new != self.state:
            self.state = new
            self.state_timestamp_ms = now_ms


# -- the coordinator's API (Kafka's ConsumerGroupHeartbeat/ConsumerGroupDescribe data, by topic id) --------


@dataclass
class ConsumerGroupHeartbeatRequest:
    """One ConsumerGroupHeartbeat as the coordinator reads it (Kafka's ``ConsumerGroupHeartbeatRequestData``
    plus the request context's client id/host and version).  ``owned_partitions`` is the request's
    ``TopicPartitions`` (None when the member did not send them)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass
class ConsumerGroupHeartbeatResult:
    """Kafka's ``ConsumerGroupHeartbeatResponseData`` (``assignment`` None: not sent)."""

    error: int = 0
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass
class DescribedConsumerGroupMember:
    """One member of a ConsumerGroupDescribe answer (``member_type``: 0 classic, 1 consumer)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: Assignment
    target_assignment: Assignment
    member_type: int


@dataclass
class DescribedConsumerGroup:
    """One group of a ConsumerGroupDescribe answer (Kafka's ``DescribedGroup``)."""

    group_id: str
    error: int = 0
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: list[DescribedConsumerGroupMember] = field(default_factory=list)
