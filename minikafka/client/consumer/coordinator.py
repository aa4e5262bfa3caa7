"""Group membership and offsets (Java's ``AbstractCoordinator`` + ``ConsumerCoordinator``,
classic protocol, eager rebalancing), on Trio.

- FindCoordinator, then a dedicated connection to the coordinator (as Java's
  coordinator connection, so group requests never queue behind fetches).
- JoinGroup (a MEMBER_ID_REQUIRED answer is retried with the given member id,
  KIP-394), the leader runs the chosen assignor over every member's
  subscription, SyncGroup hands out the assignment.
- A heartbeat task; REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and
  UNKNOWN_MEMBER_ID (from heartbeats, syncs and commits) make the member rejoin
  on the next ``poll`` (Java: the heartbeat thread requests a rejoin which
  ``poll`` performs).
- OffsetCommit / OffsetFetch, auto-commit every ``auto_commit_interval_ms``
  and before a rebalance, LeaveGroup on close (dynamic members only).

Deliberate differences: eager protocol only (no cooperative-sticky), no
rebalance listener callbacks, no poll-interval enforcement, no rejoin on
metadata changes of subscribed topics, no regex subscription on the wire.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any, Iterable

import trio

from ...common import partitions_by_topic
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..fetch_session import TopicPartition
from ..network import BrokerConnection, KafkaClientError, NetworkClient
from .assignors import PartitionAssignor, assignor_for
from .config import ConsumerConfig
from .errors import CommitFailedError, GroupError
from .metrics import ConsumerMetrics
from .protocol import (PROTOCOL_TYPE, Assignment, Subscription, decode_assignment, decode_subscription,
                       encode_assignment, encode_subscription)
from .subscription import OffsetAndMetadata, SubscriptionState

log = logging.getLogger(__name__)

__all__ = ["ConsumerCoordinator", "MemberState", "NO_GENERATION", "UNKNOWN_MEMBER_ID"]

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
COORDINATOR_ERRORS = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
RETRY_ERRORS = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                ErrorCode.UNSTABLE_OFFSET_COMMIT}
REJOIN_ERRORS = {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}


class MemberState(Enum):
    UNJOINED = "unjoined"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    STABLE = "stable"


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class _Retry(Exception):
    """Internal: the join round must be retried (after ``backoff`` seconds)."""

    def __init__(self, backoff: bool = True) -> None:
        self.backoff = backoff


class ConsumerCoordinator:
    """The consumer's side of the classic group protocol."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 metrics: ConsumerMetrics) -> None:
        assert config.group_id is not None
        self.client = client
        self.subscriptions = subscriptions
        self.config = config
        self.metrics = metrics
        self.group_id: str = config.group_id
        self.member_id = UNKNOWN_MEMBER_ID
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self.joined_subscription: set[str] = set()
        self.assignors: list[PartitionAssignor] = [assignor_for(n) for n in config.partition_assignment_strategy]
        self.coordinator_id: int | None = None
        self._conn: BrokerConnection | None = None
        self._join_lock = trio.Lock()
        self._coord_lock = trio.Lock()
        self._last_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.backoff_s = config.retry_backoff_ms / 1000
        self.rebalances = 0

    # -- coordinator discovery ---------------------------------------------------------------------
    async def ensure_coordinator_ready(self) -> BrokerConnection:
        """FindCoordinator until a coordinator answers (Java's ``ensureCoordinatorReady``)."""
        async with self._coord_lock:
            while self._conn is None or self._conn.closed:
                try:
                    await self._find_coordinator()
                except KafkaClientError as exc:
                    log.info("group %s: coordinator lookup failed: %s", self.group_id, exc)
                    self.client.invalidate()
                    await trio.sleep(self.backoff_s)
            return self._conn

    async def _find_coordinator(self) -> None:
        conn = await self.client.any_connection()
        version = conn.pick_version(ApiKey.FIND_COORDINATOR)
        body = {"key": self.group_id, "key_type": 0, "coordinator_keys": [self.group_id]}
        resp = await conn.request(ApiKey.FIND_COORDINATOR, body, version=version)
        if version >= 4:
            c = resp.coordinators[0]
            err, node, host, port = c.error_code, c.node_id, c.host, c.port
        else:
            err, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
        if err:
            raise KafkaClientError(f"FindCoordinator for group {self.group_id}: {_name(err)}", err)
        timeout = max(self.config.request_timeout_ms, self.config.max_poll_interval_ms + 5000)
        coord = BrokerConnection(node, host, port, self.client.client_id, timeout)
        try:
            await coord.open(self.client.nursery)
        except (OSError, ConnectionError) as exc:
            await coord.aclose()
            raise KafkaClientError(f"cannot connect to coordinator {node} at {host}:{port}: {exc}") from exc
        log.info("group %s: discovered coordinator %d (%s:%d)", self.group_id, node, host, port)
        self.coordinator_id = node
        self._conn = coord

    def coordinator_dead(self, why: str = "") -> None:
        """Forget the coordinator (Java's ``markCoordinatorUnknown``)."""
        if self._conn is not None:
            log.info("group %s: marking coordinator %s dead: %s", self.group_id, self.coordinator_id, why)
            conn, self._conn = self._conn, None
            self.client.nursery.start_soon(conn.aclose)

    async def _request(self, api_key: int, body: dict, max_version: int | None = None) -> tuple[Any, int]:
        conn = await self.ensure_coordinator_ready()
        version = conn.pick_version(api_key, max_version)
        try:
            return await conn.request(api_key, body, version=version), version
        except KafkaClientError as exc:
            self.coordinator_dead(str(exc))
            raise

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

    # -- offsets -----------------------------------------------------------------------------------
    async def commit_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata], *, retries: bool = True) -> None:
        """OffsetCommit, retrying coordinator errors (Java's ``commitOffsetsSync``)."""
        if not offsets:
            return
        deadline = trio.current_time() + self.config.default_api_timeout_ms / 1000
        while True:
            try:
                await self._commit_once(offsets)
                return
            except _Retry:
                if not retries or trio.current_time() > deadline:
                    raise KafkaClientError(f"group {self.group_id}: offset commit timed out",
                                           ErrorCode.REQUEST_TIMED_OUT)
                await trio.sleep(self.backoff_s)
            except KafkaClientError as exc:
                if not exc.retriable or not retries or trio.current_time() > deadline:
                    raise
                await trio.sleep(self.backoff_s)

    async def _commit_once(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if self.subscriptions.has_auto_assigned_partitions_mode:
            if self.state != MemberState.STABLE and self.generation == NO_GENERATION:
                raise CommitFailedError(f"group {self.group_id}: not a member of the group (rebalancing)",
                                        ErrorCode.REBALANCE_IN_PROGRESS)
            generation, member = self.generation, self.member_id
        else:
            generation, member = NO_GENERATION, UNKNOWN_MEMBER_ID
        topics: dict[str, list[dict]] = {}
        for tp, om in offsets.items():
            topics.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": om.offset,
                "committed_leader_epoch": om.leader_epoch, "committed_metadata": om.metadata,
                "commit_timestamp": -1})
        body = {"group_id": self.group_id, "generation_id_or_member_epoch": generation, "member_id": member,
                "group_instance_id": self.config.group_instance_id, "retention_time_ms": -1,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        started = trio.current_time()
        resp, _ = await self._request(ApiKey.OFFSET_COMMIT, body, 8)
        self.metrics.commit_latency.record((trio.current_time() - started) * 1000)
        errors = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions if p.error_code}
        if not errors:
            self._last_committed.update(offsets)
            return
        err = next(iter(errors.values()))
        if err in COORDINATOR_ERRORS:
            self.coordinator_dead(_name(err))
            raise _Retry()
        if err in RETRY_ERRORS:
            raise _Retry()
        if err in REJOIN_ERRORS:
            if err == ErrorCode.UNKNOWN_MEMBER_ID:
                self._reset_generation(True)
            elif err == ErrorCode.ILLEGAL_GENERATION:
                self._reset_generation(False)
            else:
                self.request_rejoin("commit found the group rebalancing")
            raise CommitFailedError(f"group {self.group_id}: commit failed with {_name(err)}; the group rebalanced",
                                    err)
        raise KafkaClientError(f"group {self.group_id}: commit failed: {errors}", err, retriable=False)

    async def fetch_committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """OffsetFetch (Java's ``fetchCommittedOffsets``); partitions without a commit are left out."""
        partitions = list(partitions)
        if not partitions:
            return {}
        tlist = [{"name": t, "partition_indexes": ps} for t, ps in partitions_by_topic(partitions).items()]
        body = {"group_id": self.group_id, "topics": tlist, "groups": [{"group_id": self.group_id, "topics": tlist}],
                "require_stable": True}
        deadline = trio.current_time() + self.config.default_api_timeout_ms / 1000
        while True:
            try:
                resp, version = await self._request(ApiKey.OFFSET_FETCH, body, 8)
            except KafkaClientError:
                if trio.current_time() > deadline:
                    raise
                await trio.sleep(self.backoff_s)
                continue
            if version >= 8:
                g = resp.groups[0]
                top_err, rtopics = g.error_code, g.topics
            else:
                top_err, rtopics = resp.error_code, resp.topics
            errs = [top_err] + [p.error_code for t in rtopics for p in t.partitions]
            err = next((e for e in errs if e), 0)
            if err in COORDINATOR_ERRORS or err in RETRY_ERRORS:
                if err in COORDINATOR_ERRORS:
                    self.coordinator_dead(_name(err))
                if trio.current_time() > deadline:
                    raise KafkaClientError(f"OffsetFetch for group {self.group_id}: {_name(err)}", err)
                await trio.sleep(self.backoff_s)
                continue
            if err and err != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise KafkaClientError(f"OffsetFetch for group {self.group_id}: {_name(err)}", err, retriable=False)
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in rtopics:
                for p in t.partitions:
                    if p.error_code == 0 and p.committed_offset >= 0:
                        out[TopicPartition(t.name, p.partition_index)] = OffsetAndMetadata(
                            p.committed_offset, leader_epoch=p.committed_leader_epoch, metadata=p.metadata or "")
            return out

    async def auto_commit_loop(self) -> None:
        """Commit consumed positions every ``auto_commit_interval_ms`` (Java's ``maybeAutoCommitOffsetsAsync``)."""
        interval = self.config.auto_commit_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            await self.maybe_auto_commit()

    async def maybe_auto_commit(self) -> None:
        if not self.config.enable_auto_commit:
            return
        if self.subscriptions.has_auto_assigned_partitions_mode and self.state != MemberState.STABLE:
            return
        offsets = {tp: om for tp, om in self.subscriptions.all_consumed().items()
                   if self._last_committed.get(tp) != om}
        if not offsets:
            return
        try:
            await self.commit_offsets(offsets, retries=False)
            log.debug("group %s: auto-committed %d offset(s)", self.group_id, len(offsets))
        except (KafkaClientError, _Retry) as exc:
            log.info("group %s: auto-commit failed: %s", self.group_id, exc)

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

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.aclose()
