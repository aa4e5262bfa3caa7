"""The classic consumer group coordinator.

Models Kafka's ``kafka.coordinator.group.GroupCoordinator`` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups) together with the in-memory half of
``GroupMetadataManager`` (the group cache, offset expiry).  This broker is the
coordinator of every group.

Deliberate differences from Kafka:

* The purgatories are replaced by deadlines on groups and members, served by
  one timer loop, :meth:`GroupCoordinator.run`, which sleeps until the next
  deadline or until poked by a request that set an earlier one.
* JoinGroup/SyncGroup responses that Kafka completes through callbacks are
  :class:`~.metadata.Reply` slots the async request methods await.  A member
  that is removed while a request of its is pending gets an error answer
  instead of no answer; a JoinGroup/SyncGroup superseded by a newer one from
  the same member is answered with REBALANCE_IN_PROGRESS.
* Group assignments are not persisted; only offsets and each group's
  generation/protocol type are (see :mod:`.offset_log`).  After a restart
  groups are Empty and their members rejoin.
* Static membership follows ``updateStaticMemberAndRebalance``: a static
  member rejoining with an unknown member id replaces its old id; in a Stable
  group that does not rebalance unless the selected protocol would change.
"""

from __future__ import annotations

import logging
import math
import time
import uuid
from pathlib import Path
from typing import Callable

import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from .metadata import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    UNKNOWN_MEMBER_ID,
    GroupMetadata,
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinResult,
    MemberMetadata,
    OffsetAndMetadata,
    Reply,
    SyncResult,
)
from .offset_log import OffsetLog, delete_record, group_record, offset_record, tombstone_record

log = logging.getLogger(__name__)

E = ErrorCode
S = GroupState

OFFSET_METADATA_MAX_SIZE = 4096  # offset.metadata.max.bytes
DEFAULT_RETENTION_CHECK_INTERVAL_S = 600.0  # offsets.retention.check.interval.ms

TopicPartition = tuple[str, int]


class GroupCoordinator:
    """Kafka's classic ``GroupCoordinator`` for one broker.

    ``clock`` gives seconds for timers (session, rebalance and join-delay
    timeouts) and must advance with trio's clock (``trio.current_time`` under
    a ``MockClock``); ``wall_clock`` gives the epoch seconds stamped on offset
    commits and used for offset retention.
    """

    def __init__(
        self,
        config: BrokerConfig,
        data_dir: Path | None,
        clock: Callable[[], float] = time.monotonic,
        *,
        wall_clock: Callable[[], float] = time.time,
        retention_check_interval_s: float = DEFAULT_RETENTION_CHECK_INTERVAL_S,
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.retention_check_interval_s = retention_check_interval_s
        self.groups: dict[str, GroupMetadata] = {}
        self._closed = False
        self._wake = trio.Event()
        self._wakeup_at = -math.inf  # nothing scheduled until run() computes it
        self._next_cleanup = clock() + retention_check_interval_s
        self._log: OffsetLog | None = OffsetLog(Path(data_dir)) if data_dir is not None else None
        if self._log is not None:
            self._load()

    # ------------------------------------------------------------------ infra

    def _now_ms(self) -> int:
        return int(self.wall_clock() * 1000)

    def _deadline(self, timeout_ms: int) -> float:
        return self.clock() + timeout_ms / 1000.0

    def _schedule(self, deadline: float) -> None:
        """Wake the timer loop if ``deadline`` is earlier than its planned wake-up."""
        if deadline < self._wakeup_at:
            self._wake.set()

    def _load(self) -> None:
        assert self._log is not None
        for gid, loaded in self._log.load().items():
            group = GroupMetadata(gid, self._now_ms())
            group.current_state_timestamp = None  # retention counts from commit times
            group.protocol_type = loaded.protocol_type
            group.generation_id = loaded.generation_id
            group.offsets = loaded.offsets
            self.groups[gid] = group

    def _persist(self, records: list[dict]) -> None:
        if self._log is not None and records:
            self._log.append(records)

    def _inactive_error(self, group_id: str | None, need_non_empty: bool) -> ErrorCode | None:
        """Kafka's ``validateGroupStatus``."""
        if group_id is None or (need_non_empty and group_id == ""):
            return E.INVALID_GROUP_ID
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        return None

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    async def run(self) -> None:
        """The timer loop: expire deadlines, then sleep until the next one or a poke."""
        log.debug("group coordinator timer loop started")
        try:
            while not self._closed:
                self._fire_due(self.clock())
                nxt = self._next_deadline()
                self._wakeup_at = nxt
                self._wake = trio.Event()
                with trio.move_on_at(trio.current_time() + max(0.0, nxt - self.clock())):
                    await self._wake.wait()
        finally:
            self._wakeup_at = -math.inf

    def close(self) -> None:
        """Stop the timer loop, answer pending requests with NOT_COORDINATOR, close the log."""
        if self._closed:
            return
        self._closed = True
        for group in self.groups.values():
            for member in group.members.values():
                member.resolve_join(JoinResult(member.member_id, E.NOT_COORDINATOR))
                member.resolve_sync(SyncResult(E.NOT_COORDINATOR))
        self._wake.set()
        if self._log is not None:
            self._log.close()

    def _next_deadline(self) -> float:
        nxt = self._next_cleanup
        for g in self.groups.values():
            if g.join_deadline is not None:
                nxt = min(nxt, g.join_deadline)
            if g.sync_deadline is not None:
                nxt = min(nxt, g.sync_deadline)
            for dl in g.pending_members.values():
                nxt = min(nxt, dl)
            for m in g.members.values():
                if m.heartbeat_deadline is not None:
                    nxt = min(nxt, m.heartbeat_deadline)
        return nxt

    def _fire_due(self, now: float) -> None:
        due: list[tuple[float, int, str, str]] = []
        for gid, g in self.groups.items():
            if g.join_deadline is not None and g.join_deadline <= now:
                due.append((g.join_deadline, 0, gid, ""))
            if g.sync_deadline is not None and g.sync_deadline <= now:
                due.append((g.sync_deadline, 1, gid, ""))
            for mid, dl in g.pending_members.items():
                if dl <= now:
                    due.append((dl, 2, gid, mid))
            for mid, m in g.members.items():
                if m.heartbeat_deadline is not None and m.heartbeat_deadline <= now:
                    due.append((m.heartbeat_deadline, 3, gid, mid))
        due.sort()
        for deadline, kind, gid, mid in due:
            g = self.groups.get(gid)
            if g is None:
                continue
            if kind == 0 and g.join_deadline == deadline:
                self._on_join_expired(g)
            elif kind == 1 and g.sync_deadline == deadline:
                self._on_expire_pending_sync(g)
            elif kind == 2 and g.pending_members.get(mid) == deadline:
                log.info("pending member %s of group %s removed after session timeout", mid, gid)
                self._remove_pending_member_and_update_group(g, mid)
            elif kind == 3 and mid in g.members and g.members[mid].heartbeat_deadline == deadline:
                self._on_expire_heartbeat(g, g.members[mid])
        if now >= self._next_cleanup:
            self._next_cleanup = now + self.retention_check_interval_s
            self.cleanup_group_metadata()

    # ------------------------------------------------------------- JoinGroup

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
    ) -> JoinResult:
        """Kafka's ``handleJoinGroup``; returns when the join completes (or fails)."""
        reply: Reply[JoinResult] = Reply()
        self._handle_join_group(
            reply, group_id, member_id, group_instance_id, require_known_member_id,
            support_skipping_assignment, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, protocol_type, protocols, reason or "not provided",
        )
        return await reply.wait()

    def _handle_join_group(
        self, reply: Reply[JoinResult], group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, support_skipping_assignment: bool, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], reason: str,
    ) -> None:
        err = self._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            reply.set(JoinResult(member_id, err))
            return
        cfg = self.config
        if not cfg.group_min_session_timeout_ms <= session_timeout_ms <= cfg.group_max_session_timeout_ms:
            reply.set(JoinResult(member_id, E.INVALID_SESSION_TIMEOUT))
            return
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                reply.set(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))
                return
            group = self.groups[group_id] = GroupMetadata(group_id, self._now_ms())
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
            self._try_complete_join(group)

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        max_size = self.config.group_max_size
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
            deadline = self._deadline(session_timeout_ms)
            group.pending_members[new_member_id] = deadline
            self._schedule(deadline)
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
        err = self._validate_current_member(group, member_id, group_instance_id)
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
                reply.set(self._join_result(group, member, include_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  reply, f"member {member_id} changed metadata; reason: {reason}")
        elif group.state == S.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining forces a rebalance (e.g. for topic metadata changes).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  reply, f"member {member_id} rejoining Stable group; reason: {reason}")
            else:
                reply.set(self._join_result(group, member, include_members=False))
        else:
            log.warning("group %s in unexpected state %s on join of %s", group.group_id, group.state.value, member_id)
            reply.set(JoinResult(member_id, E.UNKNOWN_MEMBER_ID))

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

    def _validate_current_member(
        self, group: GroupMetadata, member_id: str, group_instance_id: str | None
    ) -> ErrorCode | None:
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
        self._schedule_heartbeat(member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id}; reason: {reason}")

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int, session_timeout_ms: int, reply: Reply[JoinResult], reason: str,
    ) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)
        self._maybe_prepare_rebalance(group, reason)

    def _update_static_member_and_rebalance(
        self, group: GroupMetadata, old_member_id: str, new_member_id: str, group_instance_id: str,
        protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int, session_timeout_ms: int,
        reply: Reply[JoinResult], reason: str, support_skipping_assignment: bool,
    ) -> None:
        current_leader = group.leader_id or ""
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(member)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, reply)
        if group.state == S.STABLE:
            if group.protocol_name == group.select_protocol():
                log.info("static member %s rejoined Stable group %s without a rebalance",
                         group_instance_id, group.group_id)
                if support_skipping_assignment:
                    # v9+: the leader learns it leads, but skips the assignor while Stable.
                    is_leader = group.is_leader(new_member_id)
                    member.resolve_join(self._join_result(group, member, include_members=is_leader,
                                                          skip_assignment=is_leader))
                else:
                    # Older clients are told the old leader id so they never run the assignor.
                    member.resolve_join(self._join_result(group, member, include_members=False,
                                                          leader_id=current_leader))
            else:
                self._maybe_prepare_rebalance(group, f"static member {group_instance_id} changed the protocol")
        elif group.state == S.COMPLETING_REBALANCE:
            self._prepare_rebalance(group, f"static member {group_instance_id} rejoined; reason: {reason}")
        elif group.state != S.PREPARING_REBALANCE:
            raise RuntimeError(f"group {group.group_id} in state {group.state} on static member rejoin")

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
            delay = self.config.group_initial_rebalance_delay_ms
            group.join_initial = True
            group.join_delay_ms = delay
            group.join_remaining_ms = max(group.rebalance_timeout_ms - delay, 0)
            group.join_deadline = self._deadline(delay)
        else:
            group.join_initial = False
            group.join_deadline = self._deadline(group.rebalance_timeout_ms)
        group.transition_to(S.PREPARING_REBALANCE, self._now_ms())
        log.info("preparing to rebalance group %s with old generation %d (%s)",
                 group.group_id, group.generation_id, reason)
        self._schedule(group.join_deadline)
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
            delay = min(self.config.group_initial_rebalance_delay_ms, group.join_remaining_ms)
            group.join_remaining_ms = max(group.join_remaining_ms - group.join_delay_ms, 0)
            group.join_delay_ms = delay
            group.join_deadline = self._deadline(delay)
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
            group.join_deadline = self._deadline(group.rebalance_timeout_ms)
            self._schedule(group.join_deadline)
            return
        group.init_next_generation(self._now_ms())
        self._persist([group_record(group.group_id, group.protocol_type, group.generation_id)])
        if group.state == S.EMPTY:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation_id)
            return
        log.info("stabilized group %s generation %d with %d members",
                 group.group_id, group.generation_id, group.size)
        for member in list(group.members.values()):
            member.resolve_join(self._join_result(group, member, include_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_generation = group.generation_id
        group.sync_deadline = self._deadline(group.rebalance_timeout_ms)
        self._schedule(group.sync_deadline)

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
                self._schedule_heartbeat(member)

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

    def _schedule_heartbeat(self, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """Kafka's ``completeAndScheduleNextExpiration``."""
        member.heartbeat_deadline = self._deadline(member.session_timeout_ms if timeout_ms is None else timeout_ms)
        self._schedule(member.heartbeat_deadline)

    def _on_expire_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            # Members awaiting a JoinGroup/SyncGroup response satisfy heartbeats; a new
            # expectation is scheduled when that response is sent.
            member.heartbeat_deadline = None
            return
        log.info("member %s in group %s has failed (session timeout), removing it", member.member_id, group.group_id)
        self._remove_member_and_update_group(group, member, f"member {member.member_id} session expired")

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
        err = self._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            reply.set(SyncResult(err))
            return
        group = self.groups.get(group_id)
        if group is None:
            reply.set(SyncResult(E.UNKNOWN_MEMBER_ID))
            return
        if group.state == S.DEAD:
            err = E.COORDINATOR_NOT_AVAILABLE
        else:
            err = self._validate_current_member(group, member_id, group_instance_id)
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
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("assignment received from leader %s for group %s generation %d",
                         member_id, group.group_id, group.generation_id)
                missing = [m for m in group.members if m not in assignments]
                if missing:
                    log.warning("group %s: empty assignment for members %s", group.group_id, missing)
                for mid, m in group.members.items():
                    m.assignment = bytes(assignments.get(mid, b""))
                self._propagate_assignment(group, E.NONE)
                group.transition_to(S.STABLE, self._now_ms())
        elif group.state == S.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            reply.set(SyncResult(E.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self._schedule_heartbeat(member)

    # ----------------------------------------------------------- Heartbeat

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        """Kafka's ``handleHeartbeat``."""
        err = self._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return E.UNKNOWN_MEMBER_ID
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        err = self._validate_current_member(group, member_id, group_instance_id)
        if err is not None:
            return err
        if generation_id != group.generation_id:
            return E.ILLEGAL_GENERATION
        if group.state == S.EMPTY:
            return E.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group.get(member_id))
        return E.REBALANCE_IN_PROGRESS if group.state == S.PREPARING_REBALANCE else E.NONE

    # ---------------------------------------------------------- LeaveGroup

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None, str | None]]
    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        """Kafka's ``handleLeaveGroup``; ``members`` are (member_id, group_instance_id, reason)."""
        err = self._inactive_error(group_id, need_non_empty=True)
        if err is not None:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, [(mid, iid, E.UNKNOWN_MEMBER_ID) for mid, iid, _ in members]
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
                self._remove_member_and_update_group(group, group.get(current), why)
                out.append((member_id, instance_id, E.NONE))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                out.append((member_id, instance_id, E.NONE))
            else:
                err = self._validate_current_member(group, member_id, instance_id)
                if err is None:
                    log.info("member %s leaves group %s (reason: %s)", member_id, group_id, reason or "not provided")
                    self._remove_member_and_update_group(group, group.get(member_id), why)
                    err = E.NONE
                out.append((member_id, instance_id, err))
        return E.NONE, out

    # -------------------------------------------------------- OffsetCommit

    def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's ``handleCommitOffsets``; per-partition errors."""

        def all_(err: ErrorCode) -> dict[TopicPartition, ErrorCode]:
            return {tp: err for tp in offsets}

        err = self._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(E.ILLEGAL_GENERATION)
            # A group that does not use group management: allow the commit.
            group = self.groups[group_id] = GroupMetadata(group_id, self._now_ms())
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err is not None:
            return all_(err)
        if group.state == S.COMPLETING_REBALANCE:
            return all_(E.REBALANCE_IN_PROGRESS)
        if group.state in (S.STABLE, S.PREPARING_REBALANCE):
            self._schedule_heartbeat(group.get(member_id))
        return self._store_offsets(group, offsets)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            err = self._validate_current_member(group, member_id, group_instance_id)
            if err is None and generation_id != group.generation_id:
                err = E.ILLEGAL_GENERATION
            return err
        if group.state != S.EMPTY:
            return E.UNKNOWN_MEMBER_ID  # only members may commit to a group with members
        return None

    def _store_offsets(
        self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, ErrorCode]:
        out: dict[TopicPartition, ErrorCode] = {}
        records = []
        for tp, om in offsets.items():
            if len(om.metadata) > OFFSET_METADATA_MAX_SIZE:
                out[tp] = E.OFFSET_METADATA_TOO_LARGE
                continue
            group.offsets[tp] = om
            records.append(offset_record(group.group_id, tp[0], tp[1], om))
            out[tp] = E.NONE
        self._persist(records)
        return out

    def now_ms(self) -> int:
        """Wall-clock milliseconds, as stamped on offset commits."""
        return self._now_ms()

    # --------------------------------------------------------- OffsetFetch

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Kafka's ``handleFetchOffsets``: ``partitions`` None means every committed one.

        An unknown partition maps to None (offset -1, metadata "", no error).
        """
        err = self._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.state == S.DEAD:
            return E.NONE, {tp: None for tp in (partitions or [])}
        if partitions is None:
            return E.NONE, dict(sorted(group.offsets.items()))
        return E.NONE, {tp: group.offsets.get(tp) for tp in partitions}

    # -------------------------------------- ListGroups / DescribeGroups / DeleteGroups

    def list_groups(self, states: set[str] | None = None) -> tuple[ErrorCode, list[GroupOverview]]:
        """Kafka's ``handleListGroups``; ``states`` filters by state name (case-insensitive)."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE, []
        wanted = {s.lower() for s in states} if states else None
        return E.NONE, [
            g.overview() for g in self.groups.values() if wanted is None or g.state.value.lower() in wanted
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        """Kafka's ``handleDescribeGroup``; an unknown group is reported as Dead."""
        err = self._inactive_error(group_id, need_non_empty=False)
        if err is not None:
            return err, GroupSummary("", "", "", [])
        group = self.groups.get(group_id)
        if group is None:
            return E.NONE, GroupSummary(S.DEAD.value, "", "", [])
        return E.NONE, group.summary()

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Kafka's ``handleDeleteGroups``: only Empty groups can be deleted."""
        out: dict[str, ErrorCode] = {}
        for gid in group_ids:
            err = self._inactive_error(gid, need_non_empty=False)
            if err is not None:
                out[gid] = err
                continue
            group = self.groups.get(gid)
            if group is None or group.state == S.DEAD:
                out[gid] = E.GROUP_ID_NOT_FOUND
            elif group.state == S.EMPTY:
                self._remove_group(group)
                log.info("deleted group %s", gid)
                out[gid] = E.NONE
            else:
                out[gid] = E.NON_EMPTY_GROUP
        return out

    def _remove_group(self, group: GroupMetadata) -> None:
        group.transition_to(S.DEAD, self._now_ms())
        group.offsets.clear()
        group.pending_members.clear()
        self.groups.pop(group.group_id, None)
        self._persist([delete_record(group.group_id)])

    # ---------------------------------------------------------- retention

    def cleanup_group_metadata(self) -> int:
        """Expire offsets past ``offsets.retention.minutes`` and drop Empty groups without offsets.

        Kafka's ``GroupMetadataManager.cleanupGroupMetadata``; returns the number
        of offsets removed.
        """
        now_ms = self._now_ms()
        retention_ms = self.config.offsets_retention_minutes * 60_000
        removed = 0
        for group in list(self.groups.values()):
            expired = group.remove_expired_offsets(now_ms, retention_ms)
            if expired:
                removed += len(expired)
                log.info("group %s: removed %d expired offsets", group.group_id, len(expired))
                self._persist([tombstone_record(group.group_id, t, p) for t, p in expired])
            if group.state == S.EMPTY and not group.offsets and not group.pending_members:
                log.info("group %s is empty and has no offsets: removing it", group.group_id)
                self._remove_group(group)
        return removed
