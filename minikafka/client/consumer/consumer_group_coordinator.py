"""The consumer's side of a KIP-848 consumer group (``group_protocol="consumer"``): Java's
``ConsumerHeartbeatRequestManager`` and the reconciliation half of ``ConsumerMembershipManager``
(the decisions are in :mod:`.membership_manager`), on Trio.

Two background tasks under ``heartbeat_loop``:

- the heartbeat task sends ConsumerGroupHeartbeat to the coordinator, one at a
  time: at once when joining, acknowledging or leaving, else every
  ``heartbeat_interval_ms`` the broker asked for; errors back off
  (``retry_backoff_ms``, doubling up to ``retry_backoff_max_ms`` = 1 s),
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE look the coordinator up again,
  FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID lose the partitions and rejoin;
- the reconciliation task takes each new target assignment: topic ids are
  named from metadata (a full Metadata request when an id is unknown, e.g.
  under a regex subscription), partitions to revoke stop being fetched, their
  offsets are committed (auto-commit, retried up to the rebalance timeout,
  STALE_MEMBER_EPOCH included) and ``on_partitions_revoked`` runs; then the new
  assignment is installed (new partitions start from their committed offsets,
  resolved by ``poll``), ``on_partitions_assigned`` runs, and the next
  heartbeat acknowledges it.

OffsetCommit (v9) carries the member id and member epoch, OffsetFetch (v9) too.
``close`` commits (auto-commit), releases the partitions (``on_partitions_revoked``)
and leaves with member epoch -1 (-2 for a static member, whose assignment the
broker keeps for its session timeout).

Deliberate differences from Java: rebalance callbacks run in this background
task (see :mod:`.listener`); ``poll`` never waits for the join (Java neither,
but its poll drives the background thread's callbacks); no poll timer: a
member that stops polling stays in the group while it heartbeats; a
subscription change is sent with an immediate heartbeat (Java waits for the
next interval); commits hitting STALE_MEMBER_EPOCH are retried until
``default_api_timeout_ms`` (Java retries only the commit before revocation).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..fetch_session import TopicPartition
from ..network import KafkaClientError, NetworkClient
from .config import ConsumerConfig
from .coordinator_base import CoordinatorBase, error_name, refresh_all_topics
from .errors import CommitFailedError, GroupError
from .group_metadata import ConsumerGroupMetadata
from .listener import invoke_listener
from .membership_manager import (ConsumerMembershipManager, HeartbeatError, HeartbeatResult, MemberState,
                                 Reconciliation)
from .metrics import ConsumerMetrics
from .subscription import SubscriptionState, SubscriptionType

log = logging.getLogger(__name__)

__all__ = ["ConsumerGroupCoordinator"]

_RETRY_BACKOFF_MAX_S = 1.0  # Java's retry.backoff.max.ms default
_FENCED_COMMIT_ERRORS = {ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID}


class ConsumerGroupCoordinator(CoordinatorBase):
    """Membership of a KIP-848 consumer group, reconciliation and offsets."""

    offset_commit_max_version = 9
    offset_fetch_max_version = 9

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 metrics: ConsumerMetrics) -> None:
        super().__init__(client, subscriptions, config, metrics)
        self.membership = ConsumerMembershipManager(
            self.group_id, group_instance_id=config.group_instance_id, server_assignor=config.group_remote_assignor,
            rebalance_timeout_ms=config.max_poll_interval_ms)
        self._changed = trio.Event()
        self._hb_lock = trio.Lock()
        self._last_sent = -1e9
        self._backoff_until = 0.0
        self._failures = 0
        self._asap = False
        self._tasks: trio.Nursery | None = None
        self.heartbeats_sent = 0

    # -- identity ----------------------------------------------------------------------------------
    @property
    def member_id(self) -> str:
        return self.membership.member_id

    @property
    def generation(self) -> int:
        """The member epoch (what Java's ``groupMetadata().generationId()`` returns for this protocol)."""
        return self.membership.member_epoch

    @property
    def state(self) -> MemberState:
        return self.membership.state

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.membership.member_epoch, self.membership.member_id,
                                     self.config.group_instance_id)

    def _wakeup(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- what poll, subscribe and unsubscribe call -------------------------------------------------
    async def ensure_active_group(self) -> None:
        """Raise a fatal group error or a callback's exception; join if the subscription changed while out
        of the group (Java's ``onConsumerPoll``).  Never waits for the join."""
        m = self.membership
        if m.fatal_error is not None:
            raise GroupError(str(m.fatal_error), m.fatal_error.code, retriable=False)
        self.raise_listener_error()
        if self.subscriptions.has_auto_assigned_partitions_mode:
            before = m.state
            m.on_consumer_poll()
            if m.state != before:
                self._wakeup()

    def on_subscription_updated(self) -> None:
        self.membership.on_subscription_updated()
        if self.membership.in_group:
            self._asap = True
            self._wakeup()

    def on_unsubscribe(self) -> None:
        """Leave in the background, running ``on_partitions_revoked`` for what was owned (Java's
        ``unsubscribe`` → ``leaveGroup``); call before the subscription state is cleared."""
        owned = self.subscriptions.assigned_partitions()
        listener = self.subscriptions.rebalance_listener
        if self.membership.leave_group() and self._tasks is not None:
            self._tasks.start_soon(self._leave, owned, listener, False)

    # -- offsets (who commits) ---------------------------------------------------------------------
    def commit_identity(self) -> tuple[int, str]:
        m = self.membership
        if m.member_epoch <= 0 or not m.in_group:
            raise CommitFailedError(f"group {self.group_id}: not a member of the group (state {m.state.name})",
                                    ErrorCode.UNKNOWN_MEMBER_ID)
        return m.member_epoch, m.member_id

    def can_auto_commit(self) -> bool:
        m = self.membership
        return m.member_epoch > 0 and m.in_group

    def on_commit_member_error(self, err: int) -> None:
        if err == ErrorCode.STALE_MEMBER_EPOCH:
            raise KafkaClientError(f"group {self.group_id}: commit with a stale member epoch", err)
        if err in _FENCED_COMMIT_ERRORS:
            raise CommitFailedError(f"group {self.group_id}: commit failed with {error_name(err)}; the member was "
                                    "fenced", err)

    def offset_fetch_member(self) -> tuple[str | None, int]:
        m = self.membership
        if m.member_epoch > 0 and m.in_group:
            return m.member_id, m.member_epoch
        return None, -1

    # -- background tasks --------------------------------------------------------------------------
    async def heartbeat_loop(self) -> None:
        async with trio.open_nursery() as nursery:
            self._tasks = nursery
            nursery.start_soon(self._reconcile_loop)
            while True:
                await self._wait_for_heartbeat_due()
                await self._heartbeat_once()

    def _interval_s(self) -> float:
        ms = self.membership.heartbeat_interval_ms or self.config.heartbeat_interval_ms
        return ms / 1000

    async def _wait_for_heartbeat_due(self) -> None:
        while True:
            changed = self._changed
            m = self.membership
            now = trio.current_time()
            if m.should_skip_heartbeat():
                due = float("inf")
            elif m.should_heartbeat_now() or self._asap:
                due = self._backoff_until
            else:
                due = max(self._last_sent + self._interval_s(), self._backoff_until)
            if due <= now:
                return
            with trio.move_on_at(due):
                await changed.wait()

    def _heartbeat_subscription(self) -> tuple[list[str], str | None]:
        subs = self.subscriptions
        if subs.type == SubscriptionType.AUTO_PATTERN:
            return [], subs.pattern_string
        return sorted(subs.subscription), None

    def _backoff(self) -> None:
        self._failures += 1
        delay = min(self.backoff_s * 2 ** (self._failures - 1), max(_RETRY_BACKOFF_MAX_S, self.backoff_s))
        self._backoff_until = trio.current_time() + delay

    async def _heartbeat_once(self) -> None:
        """Send one heartbeat and apply its response (Java's ``AbstractHeartbeatRequestManager.poll``)."""
        async with self._hb_lock:
            m = self.membership
            if m.should_skip_heartbeat():
                return
            conn = await self.ensure_coordinator_ready()
            try:
                version = conn.pick_version(ApiKey.CONSUMER_GROUP_HEARTBEAT)
                topics, pattern = self._heartbeat_subscription()
                body = m.heartbeat_request(topics, pattern, version)
            except KafkaClientError as exc:
                m.transition_to_fatal(HeartbeatError(
                    f"group {self.group_id}: the broker does not support the consumer group protocol "
                    f"(ConsumerGroupHeartbeat): {exc}", ErrorCode.UNSUPPORTED_VERSION))
                return
            except HeartbeatError as exc:
                m.transition_to_fatal(exc)
                return
            leaving = m.state == MemberState.LEAVING
            m.on_heartbeat_sent()
            self._last_sent = trio.current_time()
            self._asap = False
            self.heartbeats_sent += 1
            started = trio.current_time()
            try:
                resp = await conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, version=version)
            except KafkaClientError as exc:
                log.info("group %s: heartbeat failed: %s", self.group_id, exc)
                self.coordinator_dead(str(exc))
                m.on_heartbeat_failure()
                self._backoff()
                return
            finally:
                if leaving:
                    self._wakeup()
            self.metrics.heartbeat.record((trio.current_time() - started) * 1000)
            result = m.on_heartbeat_response(resp)
            await self._after_response(result, resp, joining=body["member_epoch"] == 0)

    async def _after_response(self, result: HeartbeatResult, resp: Any, joining: bool) -> None:
        m = self.membership
        if result in (HeartbeatResult.OK, HeartbeatResult.IGNORED):
            self._failures = 0
            self._backoff_until = 0.0
        elif result == HeartbeatResult.RETRY:
            self._backoff()
        elif result == HeartbeatResult.FIND_COORDINATOR:
            self.coordinator_dead(error_name(resp.error_code))
            # at once when the coordinator is known again (Java skips the backoff); backed off if the
            # new one says the same (its metadata may lag behind a coordinator move)
            if self._failures:
                self._backoff()
            else:
                self._failures = 1
            self._asap = True
        elif result == HeartbeatResult.FENCED:
            if joining:  # fenced on a join: something is wrong on the broker's side, do not hammer it
                self._backoff()
            await self._release_lost_partitions()
            m.on_partitions_released()
        self._wakeup()

    async def _release_lost_partitions(self) -> None:
        """Fenced: the partitions may already be someone else's; no commit (Java's ``transitionToFenced``)."""
        lost = self.subscriptions.assigned_partitions()
        if lost:
            log.info("group %s: member %s lost %d partition(s)", self.group_id, self.member_id, len(lost))
            self._record_listener_error(await invoke_listener(self.subscriptions.rebalance_listener,
                                                              "on_partitions_lost", lost))
        self._drop_assignment()

    def _drop_assignment(self) -> None:
        dropped = self.subscriptions.assigned_partitions()
        if self.subscriptions.has_auto_assigned_partitions_mode:
            self.subscriptions.assign_from_subscribed([])
        for tp in dropped:
            self.metrics.remove_partition(tp)

    # -- reconciliation ----------------------------------------------------------------------------
    async def _reconcile_loop(self) -> None:
        while True:
            changed = self._changed
            m = self.membership
            if m.state == MemberState.RECONCILING and not m.reconciliation_in_progress:
                if await self._reconcile_once():
                    continue
            await changed.wait()

    async def _reconcile_once(self) -> bool:
        """One reconciliation step; True if it made progress (look again at once)."""
        m = self.membership
        step = m.start_reconciliation(self.subscriptions.assigned_partitions(), self.client.metadata.topic_name)
        if step is None:
            return False
        if not m.reconciliation_in_progress:  # only unresolved topic ids, or a partial ack
            self._wakeup()
            if step.unresolved:
                await self._resolve_topic_ids(step.unresolved)
            return False
        try:
            await self._revoke_and_assign(step)
        except BaseException:
            m.fail_reconciliation()
            raise
        if step.unresolved:
            await self._resolve_topic_ids(step.unresolved)
        return True

    async def _revoke_and_assign(self, step: Reconciliation) -> None:
        m = self.membership
        subs = self.subscriptions
        if step.revoked:
            subs.mark_pending_revocation(step.revoked)
            if self.config.enable_auto_commit:
                await self._commit_before_revocation()
            if m.should_abort_reconciliation():
                return
            self._record_listener_error(await invoke_listener(subs.rebalance_listener, "on_partitions_revoked",
                                                              step.revoked))
            for tp in step.revoked:
                self.metrics.remove_partition(tp)
        if m.should_abort_reconciliation():
            return
        if not subs.has_auto_assigned_partitions_mode:  # unsubscribed meanwhile
            m.fail_reconciliation()
            return
        subs.assign_from_subscribed(step.assigned)
        self.client.want_topics(sorted({tp.topic for tp in step.assigned}))
        self._record_listener_error(await invoke_listener(subs.rebalance_listener, "on_partitions_assigned",
                                                          step.added))
        m.complete_reconciliation(step)
        self.rebalances = m.rebalances
        self._wakeup()  # the heartbeat task acknowledges now

    async def _commit_before_revocation(self) -> None:
        """Commit the consumed positions before giving partitions up (Java's
        ``maybeAutoCommitSyncBeforeRevocation``), retried up to the rebalance timeout."""
        offsets = {tp: om for tp, om in self.subscriptions.all_consumed().items()
                   if self._last_committed.get(tp) != om}
        if not offsets:
            return
        try:
            await self.commit_offsets(offsets, timeout_s=self.config.max_poll_interval_ms / 1000)
        except KafkaClientError as exc:
            log.warning("group %s: commit before revocation failed, revoking anyway: %s", self.group_id, exc)

    async def _resolve_topic_ids(self, ids: set[uuid.UUID]) -> None:
        """Learn the names of assigned topic ids with a Metadata request for every topic (the ids may be of
        topics the consumer never named, e.g. under a regex subscription)."""
        try:
            await refresh_all_topics(self.client)
        except KafkaClientError as exc:
            log.info("group %s: metadata refresh for topic ids %s failed: %s", self.group_id, sorted(map(str, ids)),
                     exc)
        names = [n for n in map(self.client.metadata.topic_name, ids) if n is not None]
        if names:
            self.client.want_topics(names)
        if len(names) < len(ids):
            await trio.sleep(self.backoff_s)
        self._wakeup()

    # -- leaving -----------------------------------------------------------------------------------
    async def leave_group(self, reason: str = "the consumer is being closed") -> None:
        """Release the partitions (``on_partitions_revoked``) and send the leave heartbeat (epoch -1, a
        static member -2); called by ``close`` after the final auto-commit."""
        if self.membership.leave_group():
            await self._leave(self.subscriptions.assigned_partitions(), self.subscriptions.rebalance_listener, True)
        else:
            self._drop_assignment()

    async def _leave(self, owned: set[TopicPartition], listener: Any, wait_for_response: bool) -> None:
        m = self.membership
        if owned:
            method = "on_partitions_revoked" if m.member_epoch > 0 else "on_partitions_lost"
            self._record_listener_error(await invoke_listener(listener, method, owned))
        self._drop_assignment()
        m.transition_to_sending_leave_group()
        if m.state != MemberState.LEAVING:
            return
        log.info("group %s: member %s leaving with epoch %d", self.group_id, m.member_id, m.member_epoch)
        with trio.move_on_after(self.config.request_timeout_ms / 1000):
            if wait_for_response:
                await self._heartbeat_once()
            else:
                self._wakeup()
                return
        m.on_heartbeat_skipped()  # no coordinator in time: out of the group anyway
