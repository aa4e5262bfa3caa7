"""Classic-protocol members in KIP-848 consumer groups (Kafka 4's mixed groups).

Models the parts of Kafka 4.1's ``GroupMetadataManager`` where the classic protocol (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup) meets a consumer group:

* ``classicGroupJoinToConsumerGroup``: a classic JoinGroup (protocol type ``consumer``) into a non-empty
  consumer group makes the client a *classic member* of it.  Its subscription is read from the
  ConsumerProtocolSubscription it sends; the broker's assignor (not the client's) computes the target
  assignment, and the member reconciles towards it as a KIP-848 member does (the partitions it owns come
  from the subscription's owned partitions).  The JoinGroup is answered at once (no rebalance barrier)
  with the member epoch as the generation and no leader, so the client is a follower whose SyncGroup
  returns its assignment.
* ``classicGroupSyncToConsumerGroup``: SyncGroup returns the member's assigned partitions as a
  ConsumerProtocolAssignment (in the version of its subscription), or REBALANCE_IN_PROGRESS when the
  group epoch moved past the member's epoch.
* ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when the member must rejoin to catch
  up (a newer group epoch, partitions to revoke, or withheld partitions that were released).
* ``classicGroupLeaveToConsumerGroup``, the session timeout, and the join and sync timeouts of classic
  members (``consumerGroupJoinKey``/``consumerGroupSyncKey``): the member is fenced from the group (which
  may then be downgraded, :mod:`.migration`).

Deliberate difference from Kafka: a malformed subscription in a JoinGroup is answered
INCONSISTENT_GROUP_PROTOCOL (Kafka fails the request with an internal error).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ....protocol.errors import ErrorCode
from ..metadata import CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID, GroupMetadata, JoinResult, Reply, SyncResult
from .heartbeat import ConsumerGroupError, new_member_id
from ..core import CoordinatorCore
from .heartbeat import ConsumerGroupManager
from .migration import ConsumerGroupMigration, read_subscription, to_topic_ids
from .model import NO_PARTITION_EPOCH, ClassicMemberMetadata, ConsumerGroup, ConsumerGroupMember, MemberState
from .reconciliation import MemberFencedError, reconcile
from .subscription import TopicsImage

log = logging.getLogger("minikafka.broker.groups.coordinator")

E = ErrorCode


def supports_classic_protocols(cg: ConsumerGroup, protocol_type: str, protocols: Iterable[str]) -> bool:
    """Kafka's ``ConsumerGroup.supportsClassicProtocols``: protocol type ``consumer`` and, unless the group is
    empty, one protocol every classic member supports."""
    names = set(protocols)
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    if not cg.members:
        return bool(names)
    classic = [m.classic_protocols for m in cg.members.values() if m.classic_protocols is not None]
    counts: dict[str, int] = {}
    for cm in classic:
        for name in {n for n, _ in cm.supported_protocols}:
            counts[name] = counts.get(name, 0) + 1
    return any(counts.get(name, 0) == len(classic) for name in names)


def waiting_on_unreleased_partition(cg: ConsumerGroup, member: ConsumerGroupMember) -> bool:
    """Kafka's ``ConsumerGroup.waitingOnUnreleasedPartition``: a target partition the member does not have
    yet is still owned by another member."""
    if member.state != MemberState.UNRELEASED_PARTITIONS:
        return False
    for topic_id, partitions in cg.target_assignment.get(member.member_id, {}).items():
        assigned = member.assigned_partitions.get(topic_id, set())
        if any(p not in assigned and cg.partition_epoch(topic_id, p) != NO_PARTITION_EPOCH for p in partitions):
            return True
    return False


class ClassicMembersOfConsumerGroups:
    """The classic protocol's requests to consumer groups and the classic members' timers: part of the
    consumer-groups part of the group coordinator, over ``consumer`` and ``migration``."""

    def __init__(self, core: CoordinatorCore, consumer: ConsumerGroupManager,
                 migration: ConsumerGroupMigration) -> None:
        self.core, self.consumer, self.migration = core, consumer, migration

    # ------------------------------------------------------------------ JoinGroup

    def _classic_join_to_consumer_group(
        self, gm: GroupMetadata, reply: Reply[JoinResult], member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, client_id: str, client_host: str, rebalance_timeout_ms: int,
        session_timeout_ms: int, protocol_type: str, protocols: list[tuple[str, bytes]], topics: TopicsImage | None,
    ) -> None:
        """Kafka's ``classicGroupJoinToConsumerGroup``; answers ``reply`` at once."""
        cg = gm.consumer
        assert cg is not None
        request_member_id = member_id
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        if is_unknown:
            member_id = new_member_id()
        max_size = self.core.config.group_consumer_max_size
        if len(cg.members) >= max_size and member_id not in cg.members:
            reply.set(JoinResult(request_member_id, E.GROUP_MAX_SIZE_REACHED))
            return
        if not supports_classic_protocols(cg, protocol_type, (name for name, _ in protocols)):
            reply.set(JoinResult(request_member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if require_known_member_id and is_unknown:
            log.info("classic member with unknown member id joins consumer group %s: asking it to rejoin as %s",
                     gm.group_id, member_id)
            reply.set(JoinResult(member_id, E.MEMBER_ID_REQUIRED))
            return
        subscription = read_subscription(protocols[0][1])
        if subscription is None:
            log.info("classic member %s of consumer group %s sent a malformed subscription", member_id, gm.group_id)
            reply.set(JoinResult(request_member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return

        replaced: ConsumerGroupMember | None = None
        existing: ConsumerGroupMember | None = None
        if group_instance_id is None:
            existing = cg.members.get(member_id)
        else:
            static = cg.static_member(group_instance_id)
            if is_unknown:
                replaced = static
            elif static is None:
                reply.set(JoinResult(request_member_id, E.UNKNOWN_MEMBER_ID))
                return
            elif static.member_id != member_id:
                log.info("static member %s with instance id %s of group %s is fenced by member %s",
                         member_id, group_instance_id, gm.group_id, static.member_id)
                reply.set(JoinResult(request_member_id, E.FENCED_INSTANCE_ID))
                return
            else:
                existing = static
        downgrade = (replaced is not None and self.migration._downgrade_enabled()
                     and all(m.uses_classic_protocol for m in cg.members.values() if m is not replaced)
                     and len(cg.members) <= self.core.config.group_max_size)

        topics = self.consumer._topics(topics)
        if replaced is not None:
            member = self.consumer._replace_static_member(cg, replaced, member_id)
            log.info("static member with instance id %s rejoins consumer group %s as classic member %s "
                     "(replacing %s)", group_instance_id, gm.group_id, member_id, replaced.member_id)
        elif existing is not None:
            member = existing
        else:
            member = ConsumerGroupMember(member_id)
            cg.members[member_id] = member
            if group_instance_id is not None:
                cg.static_members[group_instance_id] = member_id
            log.info("member %s joins consumer group %s using the classic protocol", member_id, gm.group_id)
        old_names = set(member.subscribed_topic_names) if replaced is None else set(replaced.subscribed_topic_names)
        old_regex = member.subscribed_topic_regex or None

        if group_instance_id is not None:
            member.instance_id = group_instance_id
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        if rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = rebalance_timeout_ms
        member.subscribed_topic_names = sorted(set(subscription.topics))
        member.subscribed_topic_regex = None  # a classic member subscribes by topic names only
        member.client_id = client_id
        member.client_host = client_host
        member.classic_protocols = ClassicMemberMetadata(session_timeout_ms, list(protocols))

        subscription_changed = old_names != set(member.subscribed_topic_names) or old_regex is not None
        bump = subscription_changed
        if topics is not None:
            if self.consumer._refresh_regexes(cg, topics, None):
                bump = True
            if self.consumer._refresh_subscribed_topics(cg, topics):
                bump = True
        if bump:
            self.consumer._bump_group_epoch(gm, cg)
        owned = to_topic_ids(subscription.owned_partitions, topics)
        try:
            if downgrade and bump:
                pass  # the downgrade below rebalances the new classic group
            else:
                target_epoch = cg.assignment_epoch
                if not downgrade and cg.group_epoch > cg.assignment_epoch:
                    self.consumer._update_target_assignment(cg)
                    target_epoch = cg.assignment_epoch
                if subscription_changed or not member.is_reconciled_to(target_epoch):
                    nxt = reconcile(member, target_epoch, cg.target_assignment.get(member.member_id, {}),
                                    self.consumer._subscribed_topic_ids(cg, member), cg.partition_epoch, owned,
                                    subscription_changed)
                    self.consumer._apply_reconciliation(cg, member, nxt)
        except ConsumerGroupError as exc:
            reply.set(JoinResult(request_member_id, exc.code))
            return
        except MemberFencedError:
            reply.set(JoinResult(request_member_id, E.FENCED_MEMBER_EPOCH))
            return

        result = JoinResult(member_id, E.NONE, generation_id=member.member_epoch,
                            protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0])
        if downgrade:
            self.migration._convert_to_classic_group(gm, rebalance=bump,
                                           reason=f"static member {group_instance_id} replaced by a classic member")
            reply.set(result)
            return
        cm = member.classic_protocols
        cm.join_deadline = None
        cm.sync_deadline = self.core._deadline(member.rebalance_timeout_ms)
        member.session_deadline = self.core._deadline(session_timeout_ms)
        self.core._schedule(min(cm.sync_deadline, member.session_deadline))
        cg.update_state(self.core._now_ms())
        self.core._persist_group_metadata(gm)
        reply.set(result)

    # ------------------------------------------------------------------ SyncGroup, Heartbeat, LeaveGroup

    def _consumer_group_member(self, cg: ConsumerGroup, member_id: str, instance_id: str | None
                               ) -> tuple[ConsumerGroupMember | None, ErrorCode]:
        """Kafka's ``validateConsumerGroupMember`` (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) and
        ``throwIfMemberDoesNotUseClassicProtocol`` (UNKNOWN_MEMBER_ID)."""
        if instance_id is None:
            member = cg.members.get(member_id)
        else:
            member = cg.static_member(instance_id)
            if member is not None and member.member_id != member_id:
                return None, E.FENCED_INSTANCE_ID
        if member is None or not member.uses_classic_protocol:
            return None, E.UNKNOWN_MEMBER_ID
        return member, E.NONE

    def _schedule_join_timeout(self, member: ConsumerGroupMember) -> None:
        """Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent``: rejoin within the rebalance timeout."""
        cm = member.classic_protocols
        if cm is not None and cm.join_deadline is None:
            cm.join_deadline = self.core._deadline(member.rebalance_timeout_ms)
            self.core._schedule(cm.join_deadline)

    def _classic_sync_to_consumer_group(self, gm: GroupMetadata, reply: Reply[SyncResult], generation_id: int,
                                        member_id: str, protocol_type: str | None, protocol_name: str | None,
                                        group_instance_id: str | None) -> None:
        """Kafka's ``classicGroupSyncToConsumerGroup``: the member's assignment, encoded."""
        cg = gm.consumer
        assert cg is not None
        if not cg.members:
            reply.set(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        member, err = self._consumer_group_member(cg, member_id, group_instance_id)
        if member is None:
            reply.set(SyncResult(err))
            return
        cm = member.classic_protocols
        assert cm is not None
        if generation_id != member.member_epoch:
            reply.set(SyncResult(E.ILLEGAL_GENERATION))
            return
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != cm.supported_protocols[0][0]):
            reply.set(SyncResult(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if cg.group_epoch > member.member_epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._schedule_join_timeout(member)
            reply.set(SyncResult(E.REBALANCE_IN_PROGRESS))
            return
        cm.sync_deadline = None
        self.migration._refresh_classic_session(member)
        assignment = self.migration._encode_assignment(cg, member.assigned_partitions, cm.supported_protocols[0][1])
        reply.set(SyncResult(E.NONE, assignment, protocol_type, protocol_name))

    def _classic_heartbeat_to_consumer_group(self, gm: GroupMetadata, generation_id: int, member_id: str,
                                             group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``classicGroupHeartbeatToConsumerGroup``: REBALANCE_IN_PROGRESS when the member must
        rejoin (the group epoch moved on, it has partitions to revoke, or released partitions await it)."""
        cg = gm.consumer
        assert cg is not None
        member, err = self._consumer_group_member(cg, member_id, group_instance_id)
        if member is None:
            return err
        if generation_id != member.member_epoch:
            return E.ILLEGAL_GENERATION
        self.migration._refresh_classic_session(member)
        if (member.member_epoch < cg.group_epoch or member.state == MemberState.UNREVOKED_PARTITIONS
                or (member.state == MemberState.UNRELEASED_PARTITIONS
                    and not waiting_on_unreleased_partition(cg, member))):
            self._schedule_join_timeout(member)
            return E.REBALANCE_IN_PROGRESS
        return E.NONE

    def _classic_leave_consumer_group(self, gm: GroupMetadata, members: list[tuple[str, str | None, str | None]]
                                      ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Kafka's ``classicGroupLeaveToConsumerGroup``: the members named (by id, or by instance id for an
        administrative removal) are fenced from the group."""
        cg = gm.consumer
        assert cg is not None
        out: list[tuple[str, str | None, ErrorCode]] = []
        leaving: list[ConsumerGroupMember] = []
        for member_id, instance_id, reason in members:
            if instance_id is None:
                member = cg.members.get(member_id)
                err = E.NONE if member is not None else E.UNKNOWN_MEMBER_ID
            else:
                member = cg.static_member(instance_id)
                if member is None:
                    err = E.UNKNOWN_MEMBER_ID
                elif member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id:
                    err, member = E.FENCED_INSTANCE_ID, None
                else:
                    err = E.NONE
            if member is not None:
                log.info("member %s%s has left consumer group %s through explicit LeaveGroup; client reason: %s",
                         member.member_id, f" (instance id {instance_id})" if instance_id else "", gm.group_id,
                         reason or "not provided")
                leaving.append(member)
            out.append((member_id, instance_id, err))
        if leaving:
            self.consumer._fence_consumer_members(gm, leaving)
        return E.NONE, out

    # ------------------------------------------------------------------ timers

    def next_deadline(self) -> float:
        """The earliest join or sync deadline of a classic member of a consumer group."""
        nxt = float("inf")
        for g in self.core.groups.values():
            if g.consumer is None:
                continue
            for m in g.consumer.members.values():
                cm = m.classic_protocols
                if cm is not None:
                    for deadline in (cm.join_deadline, cm.sync_deadline):
                        if deadline is not None and deadline < nxt:
                            nxt = deadline
        return nxt

    def fire_timers(self, now: float) -> None:
        """Fence classic members that did not rejoin, or send SyncGroup, within their rebalance timeout."""
        for gid in list(self.core.groups):
            gm = self.core.groups.get(gid)
            if gm is None or gm.consumer is None:
                continue
            cg = gm.consumer
            expired = []
            for m in cg.members.values():
                cm = m.classic_protocols
                if cm is None:
                    continue
                if cm.join_deadline is not None and cm.join_deadline <= now:
                    log.info("member %s fenced from consumer group %s because the classic member failed to join "
                             "within the rebalance timeout", m.member_id, gid)
                    expired.append(m)
                elif cm.sync_deadline is not None and cm.sync_deadline <= now:
                    log.info("member %s fenced from consumer group %s because the member failed to sync within "
                             "timeout", m.member_id, gid)
                    expired.append(m)
            for m in expired:
                assert m.classic_protocols is not None
                m.classic_protocols.join_deadline = m.classic_protocols.sync_deadline = None
            if expired:
                self.consumer._fence_consumer_members(gm, expired)
