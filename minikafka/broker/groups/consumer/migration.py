"""Conversions between classic and KIP-848 consumer groups (Kafka 4's online migration).

Models Kafka 4.1's ``GroupMetadataManager``:

* The online upgrade (``validateOnlineUpgrade``, ``convertToConsumerGroup``,
  ``ConsumerGroup.fromClassicGroup``): a ConsumerGroupHeartbeat to a non-empty classic group converts it,
  its members becoming classic members of the consumer group at the generation as member epoch, with
  their current assignment (so no partition changes hands until they give it up).
* The online downgrade (``validateOnlineDowngradeWith{Fenced,Replaced}Member(s)``,
  ``convertToClassicGroup``, ``ClassicGroup.fromConsumerGroup``): when the last KIP-848 member leaves and
  only classic members remain, the group becomes a classic group again (Stable, each member holding its
  target assignment) and rebalances, so its members rejoin.
* A classic JoinGroup into an *empty* consumer group replaces it by a new classic group
  (``maybeDeleteEmptyConsumerGroup``); committed offsets are kept, as they are in Kafka.

``group.consumer.migration.policy`` gates the online upgrade (``upgrade``/``bidirectional``) and downgrade
(``downgrade``/``bidirectional``); as in Kafka, converting an *empty* group either way is not gated.

Deliberate differences from Kafka: the coordinator keeps the last topic metadata it was handed (Kafka's
``metadataImage``, here refreshed by every ConsumerGroupHeartbeat and JoinGroup that carries the broker's
metadata cache) to translate the topic names of classic assignments to topic ids and back; the classic
group made by a downgrade takes the members' epoch as its generation (Kafka: the group epoch before the
leaving members bumped it, the same number once the group was stable).
"""

from __future__ import annotations

import logging
import struct
import uuid
from dataclasses import dataclass
from collections.abc import Callable, Iterable

from ....common import TopicPartition
from ....protocol.consumer_protocol import (MAX_VERSION, build_assignment, parse_assignment, parse_subscription,
                                            topic_partitions)
from ....protocol.errors import ErrorCode
from ....protocol.exceptions import ProtocolError
from ..metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GROUP_TYPE_CLASSIC,
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from ..core import CoordinatorCore
from ..rebalance import ClassicGroupRebalance
from .heartbeat import ConsumerGroupManager
from .model import (
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupMember,
    ConsumerGroupState,
    MemberState,
    copy_assignment,
)
from .subscription import TopicsImage

log = logging.getLogger("minikafka.broker.groups.coordinator")

E = ErrorCode
S = GroupState

_MAX_ASSIGNMENT_VERSION = MAX_VERSION  # the ConsumerProtocolAssignment versions the encoder knows


def _migration_policy(config_value: str) -> str:
    return config_value.strip().lower()


@dataclass(frozen=True, slots=True)
class ClassicSubscription:
    """What the coordinator reads of a classic member's ConsumerProtocolSubscription."""

    topics: list[str]
    owned_partitions: list[TopicPartition]
    rack_id: str | None


def read_subscription(metadata: bytes) -> ClassicSubscription | None:
    """A JoinGroup protocol's ConsumerProtocolSubscription, or None when it cannot be read."""
    try:
        m = parse_subscription(metadata)
        return ClassicSubscription(list(m.topics), [TopicPartition(t, p) for t, p in topic_partitions(
            m.owned_partitions)], m.rack_id)
    except ProtocolError:  # malformed client bytes: refuse them, never fail the broker
        return None


def read_assignment(data: bytes) -> list[TopicPartition] | None:
    """A classic member's ConsumerProtocolAssignment as partitions, or None when it cannot be read."""
    try:
        m = parse_assignment(data)
    except ProtocolError:  # malformed client bytes
        return None
    return [] if m is None else [TopicPartition(t, p) for t, p in topic_partitions(m.assigned_partitions)]


def to_topic_ids(partitions: Iterable[TopicPartition], topics: TopicsImage | None) -> Assignment:
    """Partitions by topic name as an :data:`Assignment` by topic id (unknown topics and partitions are
    left out, as Kafka's ``toTopicPartitionMap`` does)."""
    out: Assignment = {}
    if topics is None:
        return out
    for topic, partition in partitions:
        meta = topics.get_topic(topic)
        if meta is not None and 0 <= partition < meta.num_partitions:
            out.setdefault(meta.topic_id, set()).add(partition)
    return out


class ConsumerGroupMigration:
    """The group-type conversions (Kafka's online upgrade and downgrade), the coordinator's topic metadata and
    the classic assignment encoding, between the consumer-groups part (``consumer``) and the classic groups'
    rebalance (``rebalance``) of the group coordinator."""

    def __init__(self, core: CoordinatorCore, consumer: ConsumerGroupManager, rebalance: ClassicGroupRebalance) -> None:
        self.core, self.consumer, self.rebalance = core, consumer, rebalance

    # ------------------------------------------------------------------ policy and metadata

    def _upgrade_enabled(self) -> bool:
        return _migration_policy(self.core.config.group_consumer_migration_policy) in ("upgrade", "bidirectional")

    def _downgrade_enabled(self) -> bool:
        return _migration_policy(self.core.config.group_consumer_migration_policy) in ("downgrade", "bidirectional")

    @staticmethod
    def _topic_names(cg: ConsumerGroup, topics: TopicsImage | None) -> Callable[[uuid.UUID], str | None]:
        by_id = {img.topic_id: name for name, img in cg.subscribed_topics.items()}

        def name(topic_id: uuid.UUID) -> str | None:
            if topic_id in by_id:
                return by_id[topic_id]
            meta = topics.get_topic_by_id(topic_id) if topics is not None else None
            return meta.name if meta is not None else None
        return name

    def _encode_assignment(self, cg: ConsumerGroup, assignment: Assignment, subscription: bytes) -> bytes:
        """Kafka's ``prepareAssignment``: the partitions as a ConsumerProtocolAssignment in the version of the
        member's subscription."""
        name_of = self._topic_names(cg, self.consumer._metadata_image)
        tps: list[TopicPartition] = []
        for topic_id in sorted(assignment, key=str):
            name = name_of(topic_id)
            if name is not None:
                tps.extend(TopicPartition(name, p) for p in sorted(assignment[topic_id]))
        try:
            (version,) = struct.unpack_from(">h", subscription, 0)
        except struct.error:
            version = 0
        return build_assignment(tps, None, max(0, min(version, _MAX_ASSIGNMENT_VERSION)))

    def _refresh_classic_session(self, member: ConsumerGroupMember) -> None:
        assert member.classic_protocols is not None
        member.session_deadline = self.core._deadline(member.classic_protocols.session_timeout_ms)
        self.core._schedule(member.session_deadline)

    # ------------------------------------------------------------------ empty consumer group

    def _convert_empty_consumer_group(self, gm: GroupMetadata) -> None:
        """Kafka's ``maybeDeleteEmptyConsumerGroup``: a classic JoinGroup replaces an empty consumer group by a
        new classic group; the committed offsets stay."""
        assert gm.consumer is not None
        gm.consumer.state = ConsumerGroupState.DEAD
        gm.consumer = None
        gm.group_type = GROUP_TYPE_CLASSIC
        gm.protocol_type = gm.protocol_name = gm.leader_id = None
        gm.generation_id = 0
        gm.state = S.EMPTY
        gm.current_state_timestamp = self.core._now_ms()
        log.info("converted the empty consumer group %s to a classic group", gm.group_id)
        self.core._persist_group_metadata(gm)

    # ------------------------------------------------------------------ online upgrade

    def online_upgrade(self, group: GroupMetadata, request: ConsumerGroupHeartbeatRequest) -> bool:
        """Kafka's ``validateOnlineUpgrade`` + ``convertToConsumerGroup``: a ConsumerGroupHeartbeat joining a
        non-empty classic group converts it when the policy allows upgrades, the group uses the ``consumer``
        protocol type and is within ``group.consumer.max.size``; its members become classic members of the
        consumer group at the generation as member epoch, keeping their assignments.  False otherwise (the
        heartbeat is answered GROUP_ID_NOT_FOUND)."""
        gid = group.group_id
        if not self._upgrade_enabled():
            log.info("cannot upgrade classic group %s to consumer group because online upgrade is disabled", gid)
            return False
        if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            log.info("cannot upgrade classic group %s to consumer group because the group does not use the "
                     "consumer embedded protocol", gid)
            return False
        if group.size > self.core.config.group_consumer_max_size:
            log.info("cannot upgrade classic group %s to consumer group because the group size exceeds the "
                     "consumer group maximum size", gid)
            return False
        topics = self.consumer._metadata_image
        cg = ConsumerGroup(gid)
        cg.group_epoch = cg.assignment_epoch = group.generation_id
        converted: list[tuple[ConsumerGroupMember, Assignment]] = []
        for mm in group.members.values():
            try:
                metadata = mm.metadata(group.protocol_name) if group.protocol_name else mm.protocols[0][1]
            except (KeyError, IndexError):
                metadata = mm.protocols[0][1] if mm.protocols else b""
            subscription = read_subscription(metadata)
            assigned = read_assignment(mm.assignment) if mm.assignment else []
            if subscription is None or assigned is None:
                log.warning("cannot upgrade classic group %s to consumer group because the embedded consumer "
                            "protocol of member %s is malformed", gid, mm.member_id)
                return False
            partitions = to_topic_ids(assigned, topics)
            member = ConsumerGroupMember(
                mm.member_id, instance_id=mm.group_instance_id, rack_id=subscription.rack_id,
                client_id=mm.client_id, client_host=mm.client_host, rebalance_timeout_ms=mm.rebalance_timeout_ms,
                subscribed_topic_names=sorted(set(subscription.topics)), member_epoch=group.generation_id,
                previous_member_epoch=group.generation_id, state=MemberState.STABLE,
                assigned_partitions=partitions,
                classic_protocols=ClassicMemberMetadata(mm.session_timeout_ms, list(mm.protocols)))
            converted.append((member, partitions))
        # The group converts: answer the classic requests still pending so those members rejoin.
        for mm in group.members.values():
            mm.resolve_join(JoinResult(mm.member_id, E.REBALANCE_IN_PROGRESS))
            mm.resolve_sync(SyncResult(E.REBALANCE_IN_PROGRESS))
            mm.heartbeat_deadline = None
        for member, partitions in converted:
            cg.members[member.member_id] = member
            if member.instance_id is not None:
                cg.static_members[member.instance_id] = member.member_id
            cg.target_assignment[member.member_id] = copy_assignment(partitions)
            cg.add_partition_epochs(partitions, member.member_epoch)
            self._refresh_classic_session(member)
        if topics is not None:
            self.consumer._refresh_subscribed_topics(cg, topics)
        self._clear_classic_state(group)
        self.consumer._install_consumer_group(group, cg)
        cg.update_state(self.core._now_ms())
        log.info("converted the classic group %s to a consumer group (%d classic members at epoch %d)",
                 gid, len(cg.members), cg.group_epoch)
        return True

    def _clear_classic_state(self, group: GroupMetadata) -> None:
        group.members.clear()
        group.static_members.clear()
        group.pending_members.clear()
        group.pending_sync_members.clear()
        group.supported_protocols.clear()
        group.leader_id = group.protocol_name = None
        group.join_deadline = group.sync_deadline = None
        group.state = S.EMPTY
        group.current_state_timestamp = self.core._now_ms()

    # ------------------------------------------------------------------ online downgrade

    def maybe_downgrade(self, group: GroupMetadata) -> bool:
        """Kafka's ``validateOnlineDowngradeWithFencedMembers`` + ``convertToClassicGroup``, called once
        members were removed: when only classic members remain, the policy allows downgrades and they fit
        ``group.max.size``, the group becomes a classic group again and rebalances.  True if converted."""
        cg = group.consumer
        if cg is None or not cg.members or not all(m.uses_classic_protocol for m in cg.members.values()):
            return False
        if not self._downgrade_enabled():
            log.info("cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled", group.group_id)
            return False
        if len(cg.members) > self.core.config.group_max_size:
            log.info("cannot downgrade consumer group %s to classic group because its group size is greater "
                     "than classic group max size", group.group_id)
            return False
        return self._convert_to_classic_group(group, rebalance=True, reason="downgrade for member leaving")

    def _convert_to_classic_group(self, group: GroupMetadata, rebalance: bool, reason: str) -> bool:
        """Kafka's ``ClassicGroup.fromConsumerGroup``: a Stable classic group at the members' epoch whose
        members hold their target assignments (encoded), then a rebalance when asked.  False if the members share no
        protocol (the group stays a consumer group)."""
        cg = group.consumer
        assert cg is not None
        members = []
        for m in cg.members.values():
            cm = m.classic_protocols
            assert cm is not None
            members.append(MemberMetadata(
                m.member_id, m.instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else cm.session_timeout_ms,
                cm.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(cm.supported_protocols)))
        common = set.intersection(*({name for name, _ in mm.protocols} for mm in members))
        if not common:
            log.warning("cannot downgrade consumer group %s: its members share no protocol", group.group_id)
            return False
        targets = {mid: copy_assignment(cg.target_assignment.get(mid, {})) for mid in cg.members}
        # Kafka's generation is the group epoch before the leaving members bumped it, which is the epoch the
        # remaining members are at when the group was stable: their heartbeats then match it.
        generation = max(m.member_epoch for m in cg.members.values())
        for m in cg.members.values():
            m.session_deadline = m.rebalance_deadline = None
        cg.state = ConsumerGroupState.DEAD
        group.consumer = None
        group.group_type = GROUP_TYPE_CLASSIC
        self._clear_classic_state(group)
        group.generation_id = generation
        group.protocol_type = CONSUMER_PROTOCOL_TYPE
        for mm in members:
            group.add(mm, None)
        group.protocol_name = group.select_protocol()
        group.subscribed_topics = group.compute_subscribed_topics()
        for mm in members:
            mm.assignment = self._encode_assignment(cg, targets[mm.member_id], mm.metadata(group.protocol_name))
            self.core._schedule_heartbeat(mm)
        group.state = S.STABLE
        self.core._persist_group_metadata(group)
        log.info("converted the consumer group %s to a classic group (generation %d, %d members)",
                 group.group_id, group.generation_id, group.size)
        if rebalance:
            self.rebalance._prepare_rebalance(
                group, f"downgrade group {group.group_id} from consumer to classic: {reason}")
        return True
