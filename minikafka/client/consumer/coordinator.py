"""Group membership with the classic protocol (Java's ``AbstractCoordinator`` +
``ConsumerCoordinator``, eager rebalancing), on Trio.

The coordinator connection and the offsets live in :mod:`.coordinator_base`
(shared with the KIP-848 member in :mod:`.consumer_group_coordinator`).

- JoinGroup (a MEMBER_ID_REQUIRED answer is retried with the given member id,
  KIP-394), the leader runs the chosen assignor over every member's
  subscription, SyncGroup hands out the assignment.
- A heartbeat task; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and
  UNKNOWN_MEMBER_ID (from heartbeats, syncs and commits) make the member rejoin
  on the next ``poll`` (Java: the heartbeat thread requests a rejoin which
  ``poll`` performs).
- Auto-commit before a rebalance, LeaveGroup on close (dynamic members only);
  the rebalance listener's ``on_partitions_revoked`` before the join,
  ``on_partitions_assigned`` after the sync (both from ``poll``).

Deliberate differences: eager protocol only (no cooperative-sticky), no
poll-interval enforcement, no rejoin on metadata changes of subscribed topics
(a pattern subscription's matching topics are looked up by ``KafkaConsumer``
and a change rejoins, as Java's ``subscribe(Pattern)``).
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any, Iterable

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..network import KafkaClientError, NetworkClient
from .assignors import PartitionAssignor, assignor_for
from .config import ConsumerConfig
from .coordinator_base import COORDINATOR_ERRORS, RETRY_ERRORS, CoordinatorBase, _Retry
from .coordinator_base import error_name as _name
from .errors import CommitFailedError, GroupError
from .group_metadata import ConsumerGroupMetadata
from .listener import invoke_listener
from .metrics import ConsumerMetrics
from .protocol import (PROTOCOL_TYPE, Assignment, Subscription, decode_assignment, decode_subscription,
                       encode_assignment, encode_subscription)
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

__all__ = ["ConsumerCoordinator", "MemberState", "NO_GENERATION", "UNKNOWN_MEMBER_ID"]

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
REJOIN_ERRORS = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}


class MemberState(Enum):
    UNJOINED = "unjoined"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    STABLE = "stable"


class ConsumerCoordinator(CoordinatorBase):
    """The consumer's side of the classic group protocol."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 metrics: ConsumerMetrics) -> None:
        super().__init__(client, subscriptions, config, metrics)
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.joined_subscription: set[str] = set()
        self.assignors: list[PartitionAssignor] = [assignor_for(n) for n in config.partition_assignment_strategy]
        self._join_lock = trio.Lock()

    # -- membership --------------------------------------------------------------------------------
    def need_rejoin(self) -> bool:
        if not self.subscriptions.has_auto_assigned_partitions_mode:
            return False
        return self.rejoin_needed or self.subscriptions.subscription != self.joined_subscription

    def request_rejoin(self, why: str) -> None:
        if not self.rejoin_needed:
            log.info("group %s: member %s rejoining: %s", self.group_id, self.member_id, why)
        self.rejoin_needed = True

    def _reset_generation(self, reset_member_id: bool) -> None:
        self.generation = NO_GENERATION
        if reset_member_id:
            self.member_id = UNKNOWN_MEMBER_ID
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True

    async def ensure_active_group(self) -> None:
        """Join (or rejoin) the group if needed (Java's ``ensureActiveGroup``)."""
        if not self.need_rejoin():
            return
        async with self._join_lock:
            prepared = False
            while self.need_rejoin():
                await self.ensure_coordinator_ready()
                if not prepared:
                    await self._on_join_prepare()
                    prepared = True
                try:
                    await self._join_and_sync()
                except _Retry as r:
                    if r.backoff:
                        await trio.sleep(self.backoff_s)
                except KafkaClientError as exc:
                    if not exc.retriable:
                        raise
                    log.info("group %s: join failed: %s", self.group_id, exc)
                    await trio.sleep(self.backoff_s)

    async def _on_join_prepare(self) -> None:
        """Commit consumed offsets, then revoke everything (eager protocol)."""
        if self.config.enable_auto_commit and self.generation != NO_GENERATION:
            try:
                await self.commit_offsets(self.subscriptions.all_consumed(), retries=False)
            except KafkaClientError as exc:
                log.info("group %s: offset commit before rebalance failed: %s", self.group_id, exc)
        revoked = self.subscriptions.assigned_partitions()
        if revoked:
            log.info("group %s: revoking %d partition(s)", self.group_id, len(revoked))
            # Java's onJoinPrepare: partitions of a member that lost its generation are lost, not revoked
            method = "on_partitions_revoked" if self.generation != NO_GENERATION else "on_partitions_lost"
            self._record_listener_error(await invoke_listener(self.subscriptions.rebalance_listener, method, revoked))
        self.subscriptions.assign_from_subscribed([])
        for tp in revoked:
            self.metrics.remove_partition(tp)

    async def _join_and_sync(self) -> None:
        subs = self.subscriptions
        topics = sorted(subs.subscription)
        if topics:
            try:
                await self.client.refresh_metadata(topics)
            except KafkaClientError as exc:
                log.info("metadata refresh before join failed: %s", exc)
        self.state = MemberState.PREPARING_REBALANCE
        protocols = [{"name": a.name,
                      "metadata": encode_subscription(Subscription(topics, a.subscription_user_data(set(topics)),
                                                                   [], self.generation))}
                     for a in self.assignors]
        body = {"group_id": self.group_id, "session_timeout_ms": self.config.session_timeout_ms,
                "rebalance_timeout_ms": self.config.max_poll_interval_ms, "member_id": self.member_id,
                "group_instance_id": self.config.group_instance_id, "protocol_type": PROTOCOL_TYPE,
                "protocols": protocols, "reason": "minikafka consumer joining"}
        started = trio.current_time()
        resp, version = await self._request(ApiKey.JOIN_GROUP, body)
        err = resp.error_code
        if err == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            log.debug("group %s: member id %s required, rejoining", self.group_id, self.member_id)
            raise _Retry(backoff=False)
        if err:
            self._join_error("JoinGroup", err)
        self.metrics.join.record((trio.current_time() - started) * 1000)
        self.member_id = resp.member_id
        self.generation = resp.generation_id
        self.protocol_name = resp.protocol_name
        self.leader_id = resp.leader
        self.state = MemberState.COMPLETING_REBALANCE
        assignments: list[dict] = []
        if resp.leader == resp.member_id and not getattr(resp, "skip_assignment", False):
            assignments = await self._on_leader_elected(resp.protocol_name, resp.members)
        body = {"group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                "group_instance_id": self.config.group_instance_id, "protocol_type": PROTOCOL_TYPE,
                "protocol_name": self.protocol_name, "assignments": assignments}
        started = trio.current_time()
        resp, _ = await self._request(ApiKey.SYNC_GROUP, body)
        if resp.error_code:
            self._join_error("SyncGroup", resp.error_code)
        self.metrics.sync.record((trio.current_time() - started) * 1000)
        assignment = decode_assignment(bytes(resp.assignment or b""))
        self._on_join_complete(assignment, set(topics))
        self._record_listener_error(await invoke_listener(self.subscriptions.rebalance_listener,
                                                          "on_partitions_assigned",
                                                          self.subscriptions.assigned_partitions()))

    def _join_error(self, api: str, err: int) -> None:
        log.info("group %s: %s failed: %s", self.group_id, api, _name(err))
        if err == ErrorCode.UNKNOWN_MEMBER_ID:
            self._reset_generation(True)
            raise _Retry(backoff=False)
        if err == ErrorCode.ILLEGAL_GENERATION:
            self._reset_generation(False)
            raise _Retry(backoff=False)
        if err == ErrorCode.REBALANCE_IN_PROGRESS:
            raise _Retry(backoff=False)
        if err in COORDINATOR_ERRORS:
            self.coordinator_dead(_name(err))
            raise _Retry()
        if err in RETRY_ERRORS:
            raise _Retry()
        self.state = MemberState.UNJOINED
        raise GroupError(f"group {self.group_id}: {api} failed: {_name(err)}", err, retriable=False)

    async def _on_leader_elected(self, protocol: str, members: Iterable[Any]) -> list[dict]:
        """Run the assignor over every member's subscription (Java's ``onLeaderElected``)."""
        assignor = next((a for a in self.assignors if a.name == protocol), None)
        if assignor is None:
            raise GroupError(f"group {self.group_id}: coordinator chose unknown protocol {protocol!r}",
                             ErrorCode.INCONSISTENT_GROUP_PROTOCOL, retriable=False)
        subscriptions: dict[str, Subscription] = {}
        for m in members:
            sub = decode_subscription(bytes(m.metadata))
            sub.group_instance_id = m.group_instance_id
            subscriptions[m.member_id] = sub
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        md = await self.client.refresh_metadata(all_topics, force=True)
        partitions_per_topic = {t: len(md.partitions_for(t)) for t in all_topics if md.partitions_for(t)}
        result = assignor.assign(partitions_per_topic, subscriptions)
        log.info("group %s: leader %s assigned with %s: %s", self.group_id, self.member_id, protocol,
                 {m: [f"{tp.topic}-{tp.partition}" for tp in tps] for m, tps in result.items()})
        return [{"member_id": m, "assignment": encode_assignment(Assignment(tps))} for m, tps in result.items()]

    def _on_join_complete(self, assignment: Assignment, joined: set[str]) -> None:
        subs = self.subscriptions
        tps = [tp for tp in assignment.partitions if tp.topic in subs.subscription or subs.matches_pattern(tp.topic)]
        subs.assign_from_subscribed(tps)
        self.joined_subscription = joined
        self.rejoin_needed = False
        self.state = MemberState.STABLE
        self.rebalances += 1
        log.info("group %s: member %s generation %d assigned %s", self.group_id, self.member_id, self.generation,
                 sorted(f"{tp.topic}-{tp.partition}" for tp in tps))

    # -- heartbeats --------------------------------------------------------------------------------
    async def heartbeat_loop(self) -> None:
        """Heartbeat every ``heartbeat_interval_ms`` while stable (Java's ``HeartbeatThread``)."""
        interval = self.config.heartbeat_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            if self.state != MemberState.STABLE or self.rejoin_needed or self._conn is None:
                continue
            body = {"group_id": self.group_id, "generation_id": self.generation, "member_id": self.member_id,
                    "group_instance_id": self.config.group_instance_id}
            generation = self.generation
            started = trio.current_time()
            try:
                resp, _ = await self._request(ApiKey.HEARTBEAT, body)
            except KafkaClientError as exc:
                log.info("group %s: heartbeat failed: %s", self.group_id, exc)
                continue
            self.metrics.heartbeat.record((trio.current_time() - started) * 1000)
            err = resp.error_code
            if not err or generation != self.generation:
                continue
            if err == ErrorCode.REBALANCE_IN_PROGRESS:
                self.request_rejoin("the group is rebalancing")
            elif err == ErrorCode.ILLEGAL_GENERATION:
                self._reset_generation(False)
            elif err in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                self._reset_generation(True)
            elif err in COORDINATOR_ERRORS:
                self.coordinator_dead(_name(err))
            else:
                log.warning("group %s: heartbeat error %s", self.group_id, _name(err))

    # -- offsets (who commits) ---------------------------------------------------------------------
    def commit_identity(self) -> tuple[int, str]:
        if self.state != MemberState.STABLE and self.generation == NO_GENERATION:
            raise CommitFailedError(f"group {self.group_id}: not a member of the group (rebalancing)",
                                    ErrorCode.REBALANCE_IN_PROGRESS)
        return self.generation, self.member_id

    def can_auto_commit(self) -> bool:
        return self.state == MemberState.STABLE

    def on_commit_member_error(self, err: int) -> None:
        if err in REJOIN_ERRORS:
            if err == ErrorCode.UNKNOWN_MEMBER_ID:
                self._reset_generation(True)
            elif err == ErrorCode.ILLEGAL_GENERATION:
                self._reset_generation(False)
            else:
                self.request_rejoin("commit found the group rebalancing")
            raise CommitFailedError(f"group {self.group_id}: commit failed with {_name(err)}; the group rebalanced",
                                    err)

    def group_metadata(self) -> ConsumerGroupMetadata:
        return ConsumerGroupMetadata(self.group_id, self.generation, self.member_id, self.config.group_instance_id)

    def on_unsubscribe(self) -> None:
        self.joined_subscription = set()

    async def leave_group(self, reason: str = "the consumer is being closed") -> None:
        """LeaveGroup (dynamic members only, as Java), then forget the generation."""
        if (self.config.group_instance_id is None and self.member_id != UNKNOWN_MEMBER_ID
                and self._conn is not None and not self._conn.closed):
            body = {"group_id": self.group_id, "member_id": self.member_id,
                    "members": [{"member_id": self.member_id, "group_instance_id": None, "reason": reason}]}
            try:
                resp, _ = await self._request(ApiKey.LEAVE_GROUP, body)
                if resp.error_code:
                    log.info("group %s: LeaveGroup: %s", self.group_id, _name(resp.error_code))
                else:
                    log.info("group %s: member %s left the group", self.group_id, self.member_id)
            except KafkaClientError as exc:
                log.info("group %s: LeaveGroup failed: %s", self.group_id, exc)
        self._reset_generation(True)
