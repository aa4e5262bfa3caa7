"""Rebalance stages and member expiry of the group coordinator.

Models the parts of Kafka's ``GroupCoordinator`` that JoinGroup, SyncGroup,
Heartbeat, LeaveGroup and OffsetCommit share: ``validateCurrentMember``,
``prepareRebalance`` / ``onCompleteJoin`` (``DelayedJoin`` and
``InitialDelayedJoin``), the pending-sync expiry (``DelayedSync``),
``propagateAssignment``, member removal and the session timeouts
(``DelayedHeartbeat``).
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from .core import CoordinatorCore, E, S, log
from .metadata import (
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    JoinResult,
    MemberMetadata,
    SyncResult,
)


def validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
    """Kafka's ``validateCurrentMember``: static id maps to ``member_id`` and the member exists."""
    if group_instance_id is not None:
        current = group.current_static_member_id(group_instance_id)
        if current is None:
            return E.UNKNOWN_MEMBER_ID
        if current != member_id:
            log.info("member %s of static instance %s fenced by %s", member_id, group_instance_id, current)
            return E.FENCED_INSTANCE_ID
        return None
    return None if group.has(member_id) else E.UNKNOWN_MEMBER_ID


class ClassicGroupRebalance:
    """A classic group's rebalance stages, member removal and heartbeat expiry (the rebalance half of Kafka's
    classic ``GroupCoordinator``), over the groups of ``core``: part of the classic-groups part of the group
    coordinator."""

    def __init__(self, core: CoordinatorCore) -> None:
        self.core = core

    def _join_result(self, group: GroupMetadata, member: MemberMetadata, include_members: bool,
                     leader_id: str | None = None, skip_assignment: bool = False) -> JoinResult:
        return JoinResult(
            member_id=member.member_id,
            error=E.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=(group.leader_id or "") if leader_id is None else leader_id,
            skip_assignment=skip_assignment,
            members=group.current_member_metadata() if include_members else [],
        )

    # ------------------------------------------------------- rebalance stages

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.state == S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, E.REBALANCE_IN_PROGRESS)
        group.pending_sync_members.clear()
        group.sync_deadline = None
        if group.state == S.EMPTY:
            delay = self.core.config.group_initial_rebalance_delay_ms
            group.join_initial = True
            group.join_delay_ms = delay
            group.join_remaining_ms = max(group.rebalance_timeout_ms - delay, 0)
            group.join_deadline = self.core._deadline(delay)
        else:
            group.join_initial = False
            group.join_deadline = self.core._deadline(group.rebalance_timeout_ms)
        group.transition_to(S.PREPARING_REBALANCE, self.core._now_ms())
        log.info("preparing to rebalance group %s with old generation %d (%s)",
                 group.group_id, group.generation_id, reason)
        self.core._schedule(group.join_deadline)
        self._try_complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """DelayedJoin.tryComplete: finish early once every member (and no pending one) has joined."""
        if group.state == S.PREPARING_REBALANCE and not group.join_initial and group.has_all_members_joined:
            self._on_complete_join(group)

    def _on_join_expired(self, group: GroupMetadata) -> None:
        """The DelayedJoin / InitialDelayedJoin deadline passed."""
        group.join_deadline = None
        if group.state != S.PREPARING_REBALANCE:
            return
        if group.join_initial and group.new_member_added and group.join_remaining_ms != 0:
            # InitialDelayedJoin: members are still arriving, wait a little longer.
            group.new_member_added = False
            delay = min(self.core.config.group_initial_rebalance_delay_ms, group.join_remaining_ms)
            group.join_remaining_ms = max(group.join_remaining_ms - group.join_delay_ms, 0)
            group.join_delay_ms = delay
            group.join_deadline = self.core._deadline(delay)
            return
        self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        group.join_deadline = None
        group.join_initial = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s removes member %s which did not rejoin", group.group_id, member.member_id)
                self._drop_member(group, member.member_id)
        if group.state == S.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete rebalance because no members rejoined", group.group_id)
            group.join_deadline = self.core._deadline(group.rebalance_timeout_ms)
            self.core._schedule(group.join_deadline)
            return
        group.init_next_generation(self.core._now_ms())
        if group.state == S.EMPTY:
            self.core._persist_group_metadata(group)  # (one with members: once its leader's assignment is in)
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            return
        log.info("stabilized group %s generation %d with %d members",
                 group.group_id, group.generation_id, group.size)
        for member in list(group.members.values()):
            member.resolve_join(self._join_result(group, member, include_members=group.is_leader(member.member_id)))
            self.core._schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_generation = group.generation_id
        group.sync_deadline = self.core._deadline(group.rebalance_timeout_ms)
        self.core._schedule(group.sync_deadline)

    def _on_expire_pending_sync(self, group: GroupMetadata) -> None:
        group.sync_deadline = None
        if group.sync_generation != group.generation_id:
            return
        if group.state in (S.COMPLETING_REBALANCE, S.STABLE) and group.pending_sync_members:
            pending = sorted(group.pending_sync_members)
            for member_id in pending:
                self._drop_member(group, member_id)
            log.info("group %s removed members that sent no SyncGroup: %s", group.group_id, pending)
            self._prepare_rebalance(group, f"removing {pending} on pending sync expiration")

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline = None

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error == E.NONE
        for member in group.members.values():
            result = SyncResult(
                error, member.assignment,
                group.protocol_type if ok else None, group.protocol_name if ok else None,
            )
            if member.resolve_sync(result):
                self.core._schedule_heartbeat(member)

    # ------------------------------------------------------ member removal

    def _drop_member(self, group: GroupMetadata, member_id: str) -> None:
        """Remove a member, answering any request of its still pending."""
        member = group.remove(member_id)
        if member is not None:
            member.resolve_join(JoinResult(UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID))
            member.resolve_sync(SyncResult(E.UNKNOWN_MEMBER_ID))
            member.heartbeat_deadline = None

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        self._drop_member(group, member.member_id)
        if group.state in (S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.state == S.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            # Members awaiting a JoinGroup/SyncGroup response satisfy heartbeats; a new
            # expectation is scheduled when that response is sent.
            member.heartbeat_deadline = None
            return
        log.info("member %s in group %s has failed (session timeout), removing it", member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"member {member.member_id} session expired")
