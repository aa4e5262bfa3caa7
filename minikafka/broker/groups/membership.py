"""SyncGroup, Heartbeat and LeaveGroup handling of the group coordinator.

Models Kafka's ``GroupCoordinator.handleSyncGroup``, ``handleHeartbeat`` and
``handleLeaveGroup``; those to a KIP-848 consumer group go to
:mod:`.consumer.classic_members` (Kafka 4's classic-member dispatch).
"""

from __future__ import annotations

from ...protocol.errors import ErrorCode
from .core import CoordinatorCore, E, S, log
from .metadata import UNKNOWN_MEMBER_ID, Reply, SyncResult
from .consumer.classic_members import ClassicMembersOfConsumerGroups
from .rebalance import ClassicGroupRebalance, validate_current_member


class ClassicGroupMembership:
    """SyncGroup, Heartbeat and LeaveGroup of a classic group's current members (a consumer group's classic
    members go to ``bridge``); part of the classic-groups part of the group coordinator."""

    def __init__(self, core: CoordinatorCore, rebalance: ClassicGroupRebalance,
                 bridge: ClassicMembersOfConsumerGroups) -> None:
        self.core, self.rebalance, self.bridge = core, rebalance, bridge

    # ----------------------------------------------------------- SyncGroup

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> SyncResult:
        """Kafka's ``handleSyncGroup``; followers wait for the leader's assignment."""
        reply: Reply[SyncResult] = Reply()
        self._handle_sync_group(reply, group_id, generation_id, member_id, protocol_type, protocol_name,
                                group_instance_id, assignments)
        return await reply.wait()

    def _handle_sync_group(
        self, reply: Reply[SyncResult], group_id: str, generation_id: int, member_id: str,
        protocol_type: str | None, protocol_name: str | None, group_instance_id: str | None,
        assignments: dict[str, bytes],
    ) -> None:
        err = self.core._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            reply.set(SyncResult(err))
            return
        group = self.core.groups.get(group_id)
        if group is None:
            reply.set(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if group.consumer is not None:
            self.bridge._classic_sync_to_consumer_group(group, reply, generation_id, member_id, protocol_type,
                                                        protocol_name, group_instance_id)
            return
        if group.state == S.DEAD:
            err = E.COORDINATOR_NOT_AVAILABLE
        else:
            err = validate_current_member(group, member_id, group_instance_id)
            if err is None:
                if generation_id != group.generation_id:
                    err = E.ILLEGAL_GENERATION
                elif protocol_type is not None and protocol_type != group.protocol_type:
                    err = E.INCONSISTENT_GROUP_PROTOCOL
                elif protocol_name is not None and protocol_name != group.protocol_name:
                    err = E.INCONSISTENT_GROUP_PROTOCOL
        if err is not None:
            reply.set(SyncResult(err))
            return
        if group.state == S.EMPTY:
            reply.set(SyncResult(E.UNKNOWN_MEMBER_ID))
        elif group.state == S.PREPARING_REBALANCE:
            reply.set(SyncResult(E.REBALANCE_IN_PROGRESS))
        elif group.state == S.COMPLETING_REBALANCE:
            member = group.get(member_id)
            if member.sync_reply is not None:
                member.sync_reply.set(SyncResult(E.REBALANCE_IN_PROGRESS))
            member.sync_reply = reply
            self.rebalance._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("assignment received from leader %s for group %s generation %d",
                         member_id, group.group_id, group.generation_id)
                missing = [m for m in group.members if m not in assignments]
                if missing:
                    log.warning("group %s: empty assignment for members %s", group.group_id, missing)
                for mid, m in group.members.items():
                    m.assignment = bytes(assignments.get(mid, b""))
                self.rebalance._propagate_assignment(group, E.NONE)
                group.transition_to(S.STABLE, self.core._now_ms())
                self.core._persist_group_metadata(group)  # the members answered once it is replicated (storeGroup)
        elif group.state == S.STABLE:
            self.rebalance._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            reply.set(SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self.core._schedule_heartbeat(member)

    # ----------------------------------------------------------- Heartbeat

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``handleHeartbeat``."""
        err = self.core._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            return err
        group = self.core.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.consumer is not None:
            return self.bridge._classic_heartbeat_to_consumer_group(group, generation_id, member_id, group_instance_id)
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        err = validate_current_member(group, member_id, group_instance_id)
        if err is not None:
            return err
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.state == S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self.core._schedule_heartbeat(group.get(member_id))
        return E.REBALANCE_IN_PROGRESS if group.state == S.PREPARING_REBALANCE else E.NONE

    # ---------------------------------------------------------- LeaveGroup

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Kafka's ``handleLeaveGroup``; ``members`` are (member_id, group_instance_id, reason)."""
        err = self.core._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            return err, []
        group = self.core.groups.get(group_id)
        if group is None:
            return E.NONE, [(mid, iid, E.UNKNOWN_MEMBER_ID) for mid, iid, _ in members]
        if group.consumer is not None:
            return self.bridge._classic_leave_consumer_group(group, members)
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE, []
        out: list[tuple[str, str | None, ErrorCode]] = []
        for member_id, instance_id, reason in members:
            why = f"member left via LeaveGroup; reason: {reason or 'not provided'}"
            if member_id == UNKNOWN_MEMBER_ID:
                current = group.current_static_member_id(instance_id)
                if current is None:
                    out.append((member_id, instance_id, E.UNKNOWN_MEMBER_ID))
                    continue
                log.info("static member %s (%s) leaves group %s", instance_id, current, group_id)
                self.rebalance._remove_member_and_update_group(group, group.get(current), why)
                out.append((member_id, instance_id, E.NONE))
            elif group.is_pending_member(member_id):
                self.rebalance._remove_pending_member_and_update_group(group, member_id)
                out.append((member_id, instance_id, E.NONE))
            else:
                err = validate_current_member(group, member_id, instance_id)
                if err is None:
                    log.info("member %s leaves group %s (reason: %s)", member_id, group_id, reason or "not provided")
                    self.rebalance._remove_member_and_update_group(group, group.get(member_id), why)
                    err = E.NONE
                out.append((member_id, instance_id, err))
        return E.NONE, out
