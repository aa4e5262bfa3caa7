"""JoinGroup handling of the group coordinator.

Models Kafka's ``GroupCoordinator.handleJoinGroup`` with ``doNewMemberJoinGroup``,
``doCurrentMemberJoinGroup``, ``addMemberAndRebalance``,
``updateMemberAndRebalance`` and ``updateStaticMemberAndRebalance``; a JoinGroup
to a KIP-848 consumer group goes to :mod:`.consumer.classic_members` (Kafka 4's
``classicGroupJoin`` dispatch).
"""

from __future__ import annotations

import uuid

from .consumer.classic_members import ClassicMembersOfConsumerGroups
from .consumer.migration import ConsumerGroupMigration
from .rebalance import ClassicGroupRebalance, validate_current_member
from .consumer.subscription import TopicsImage
from .core import CoordinatorCore, E, S, log
from .metadata import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    JoinResult,
    MemberMetadata,
    Reply,
)


class ClassicGroupJoin:
    """JoinGroup: new, current and static members joining a classic group (a consumer group's classic members
    go to ``bridge``); part of the classic-groups part of the group coordinator."""

    def __init__(self, core: CoordinatorCore, rebalance: ClassicGroupRebalance, migration: ConsumerGroupMigration,
                 bridge: ClassicMembersOfConsumerGroups) -> None:
        self.core, self.rebalance, self.migration, self.bridge = core, rebalance, migration, bridge

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        support_skipping_assignment: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        reason: str | None = None,
        topics: TopicsImage | None = None,
    ) -> JoinResult:
        """Kafka's ``handleJoinGroup``; returns when the join completes (or fails).

        ``topics`` (the broker's metadata) lets a classic member of a consumer group be assigned
        partitions by topic id."""
        reply: Reply[JoinResult] = Reply()
        self._handle_join_group(
            reply, group_id, member_id, group_instance_id, require_known_member_id,
            support_skipping_assignment, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, protocol_type, protocols, reason or "not provided", topics,
        )
        return await reply.wait()

    def _handle_join_group(
        self, reply: Reply[JoinResult], group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, support_skipping_assignment: bool, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], reason: str, topics: TopicsImage | None = None,
    ) -> None:
        err = self.core._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            reply.set(JoinResult(member_id, err))
            return
        cfg = self.core.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            reply.set(JoinResult(member_id, E.INVALID_SESSION_TIMEOUT))
            return
        if self.core._share_group_error(group_id) is not None:  # a share group: not joinable with JoinGroup
            reply.set(JoinResult(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.core.groups.get(group_id)
        if group is not None and group.consumer is not None:
            if group.consumer.members:
                self.bridge._classic_join_to_consumer_group(
                    group, reply, member_id, group_instance_id, require_known_member_id, client_id, client_host,
                    rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, topics)
                return
            self.migration._convert_empty_consumer_group(group)
        if group is None:
            if not is_unknown:
                reply.set(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            group = self.core.groups[group_id] = GroupMetadata(group_id, self.core._now_ms())
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                member.resolve_join(JoinResult(UNKNOWN_MEMBER_ID, E.GROUP_MAX_SIZE_REACHED))
            group.remove(member_id)
            reply.set(JoinResult(UNKNOWN_MEMBER_ID, E.GROUP_MAX_SIZE_REACHED))
        elif is_unknown:
            self._do_new_member_join(
                group, reply, group_instance_id, require_known_member_id, support_skipping_assignment,
                client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason,
            )
        else:
            self._do_current_member_join(
                group, reply, member_id, group_instance_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason,
            )
        if group.state == S.PREPARING_REBALANCE:
            self.rebalance._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.core.config.group_max_size
        if group.state in (S.EMPTY, S.DEAD):
            return True
        if group.state == S.PREPARING_REBALANCE:
            rejoining = group.has(member_id) and group.get(member_id).is_awaiting_join
            return rejoining or group.num_awaiting_join < max_size
        return group.has(member_id) or group.size < max_size

    def _do_new_member_join(
        self, group: GroupMetadata, reply: Reply[JoinResult], group_instance_id: str | None,
        require_known_member_id: bool, support_skipping_assignment: bool, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], reason: str,
    ) -> None:
        if group.state == S.DEAD:
            reply.set(JoinResult(UNKNOWN_MEMBER_ID, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            reply.set(JoinResult(UNKNOWN_MEMBER_ID, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = f"{group_instance_id if group_instance_id is not None else client_id}-{uuid.uuid4()}"
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info(
                    "static member %s of group %s rejoins with unknown member id in state %s; replacing %s with %s",
                    group_instance_id, group.group_id, group.state.value, old_member_id, new_member_id,
                )
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, group_instance_id, protocols, rebalance_timeout_ms,
                    session_timeout_ms, reply, reason, support_skipping_assignment,
                )
            else:
                self._add_member_and_rebalance(
                    group, reply, new_member_id, group_instance_id, client_id, client_host,
                    rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason,
                )
        elif require_known_member_id:
            deadline = self.core._deadline(session_timeout_ms)
            group.pending_members[new_member_id] = deadline
            self.core._schedule(deadline)
            reply.set(JoinResult(new_member_id, E.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(
                group, reply, new_member_id, None, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason,
            )

    def _do_current_member_join(
        self, group: GroupMetadata, reply: Reply[JoinResult], member_id: str, group_instance_id: str | None,
        client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], reason: str,
    ) -> None:
        if group.state == S.DEAD:
            reply.set(JoinResult(member_id, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            reply.set(JoinResult(member_id, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                # Kafka treats this as an illegal state; make the client start over.
                reply.set(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            self._add_member_and_rebalance(
                group, reply, member_id, None, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, reason,
            )
            return
        err = validate_current_member(group, member_id, group_instance_id)
        if err is not None:
            reply.set(JoinResult(member_id, err))
            return
        member = group.get(member_id)
        if group.state == S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, reply,
                                              f"member {member_id} joining during PreparingRebalance; reason: {reason}")
        elif group.state == S.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # A retried JoinGroup with the same metadata: answer with the current generation.
                reply.set(self.rebalance._join_result(group, member, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  reply, f"member {member_id} changed metadata; reason: {reason}")
        elif group.state == S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining forces a rebalance (e.g. for topic metadata changes).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  reply, f"member {member_id} rejoining Stable group; reason: {reason}")
            else:
                reply.set(self.rebalance._join_result(group, member, include_members=False))
        else:
            log.warning("group %s in unexpected state %s on join of %s", group.group_id, group.state.value, member_id)
            reply.set(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(
        self, group: GroupMetadata, reply: Reply[JoinResult], member_id: str, group_instance_id: str | None,
        client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], reason: str,
    ) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host,
                                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.state == S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, reply)
        # New members cannot heartbeat; expire them if the join never completes.
        self.core._schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self.rebalance._maybe_prepare_rebalance(group, f"adding new member {member_id}; reason: {reason}")

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int, session_timeout_ms: int, reply: Reply[JoinResult], reason: str,
    ) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)
        self.rebalance._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, old_member_id: str, new_member_id: str, group_instance_id: str,
        protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int, session_timeout_ms: int,
        reply: Reply[JoinResult], reason: str, support_skipping_assignment: bool,
    ) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self.core._schedule_heartbeat(member)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)
        if group.state == S.STABLE:
            if group.protocol_name == group.select_protocol():
                log.info("static member %s rejoined Stable group %s without a rebalance",
                         group_instance_id, group.group_id)
                if support_skipping_assignment:
                    # v9+: the leader learns it leads, but skips the assignor while Stable.
                    is_leader = group.is_leader(new_member_id)
                    member.resolve_join(self.rebalance._join_result(group, member, include_members=is_leader,
                                                          skip_assignment=is_leader))
                else:
                    # Older clients are told the old leader id so they never run the assignor.
                    member.resolve_join(self.rebalance._join_result(group, member, include_members=False,
                                                          leader_id=current_leader))
            else:
                self.rebalance._maybe_prepare_rebalance(
                    group, f"static member {group_instance_id} changed the protocol")
        elif group.state == S.COMPLETING_REBALANCE:
            self.rebalance._prepare_rebalance(group, f"static member {group_instance_id} rejoined; reason: {reason}")
        elif group.state != S.PREPARING_REBALANCE:
            raise RuntimeError(f"group {group.group_id} in state {group.state} on static member rejoin")
