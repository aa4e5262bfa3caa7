"""What both group protocols share on the consumer side: the coordinator connection and the
group's offsets (Java's ``CoordinatorRequestManager`` + ``CommitRequestManager``, the offset
half of the classic ``ConsumerCoordinator``), on Trio.

- FindCoordinator, then a dedicated connection to the coordinator (as Java's
  coordinator connection, so group requests never queue behind fetches);
  NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE forget it (``coordinator_dead``)
  and the next request looks it up again.
- OffsetCommit / OffsetFetch, auto-commit every ``auto_commit_interval_ms``.
  Each protocol says who commits: the classic member sends its generation,
  the KIP-848 member its member epoch (OffsetCommit v9 / OffsetFetch v9 when
  the broker offers them).

Subclasses (:class:`~.coordinator.ConsumerCoordinator`, classic, and
:class:`~.consumer_group_coordinator.ConsumerGroupCoordinator`, KIP-848) add
the membership: ``ensure_active_group`` (from ``poll``), ``heartbeat_loop``
(a background task), ``leave_group`` (from ``close``).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

import trio

from ...common import partitions_by_topic
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..fetch_session import TopicPartition
from ..network import BrokerConnection, KafkaClientError, Metadata, NetworkClient
from .config import ConsumerConfig
from .errors import CommitFailedError
from .group_metadata import ConsumerGroupMetadata
from .metrics import ConsumerMetrics
from .subscription import OffsetAndMetadata, SubscriptionState

log = logging.getLogger(__name__)

__all__ = ["CoordinatorBase", "COORDINATOR_ERRORS", "RETRY_ERRORS", "error_name", "refresh_all_topics"]

COORDINATOR_ERRORS = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
RETRY_ERRORS = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                ErrorCode.UNSTABLE_OFFSET_COMMIT}


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


async def refresh_all_topics(client: NetworkClient) -> Metadata:
    """A Metadata request for every topic of the cluster (pattern subscriptions, topic ids to name)."""
    conn = await client.any_connection()
    version = conn.pick_version(ApiKey.METADATA)
    resp = await conn.request(ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False}, version=version)
    client.metadata.update_from(resp, None)
    return client.metadata


class _Retry(Exception):
    """Internal: the request must be retried (after ``backoff`` seconds)."""

    def __init__(self, backoff: bool = True) -> None:
        self.backoff = backoff


class CoordinatorBase:
    """The coordinator connection and the offsets of one group, for either group protocol."""

    #: the highest OffsetCommit / OffsetFetch versions this protocol's member sends
    offset_commit_max_version = 8
    offset_fetch_max_version = 8

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 metrics: ConsumerMetrics) -> None:
        assert config.group_id is not None
        self.client = client
        self.subscriptions = subscriptions
        self.config = config
        self.metrics = metrics
        self.group_id: str = config.group_id
        self.coordinator_id: int | None = None
        self._conn: BrokerConnection | None = None
        self._coord_lock = trio.Lock()
        self._last_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.backoff_s = config.retry_backoff_ms / 1000
        self.rebalances = 0
        self._listener_error: BaseException | None = None

    # -- what each protocol provides ---------------------------------------------------------------
    async def ensure_active_group(self) -> None:
        """Called by every ``poll``: join or rejoin as the protocol needs."""
        raise NotImplementedError

    async def heartbeat_loop(self) -> None:
        """The background membership task."""
        raise NotImplementedError

    async def leave_group(self, reason: str = "the consumer is being closed") -> None:
        raise NotImplementedError

    def on_subscription_updated(self) -> None:
        """``subscribe`` changed the subscription."""

    def on_unsubscribe(self) -> None:
        """``unsubscribe`` was called (the subscription state is already cleared)."""

    def group_metadata(self) -> ConsumerGroupMetadata:
        raise NotImplementedError

    def commit_identity(self) -> tuple[int, str]:
        """(generation or member epoch, member id) for OffsetCommit; CommitFailedError if not a member."""
        raise NotImplementedError

    def can_auto_commit(self) -> bool:
        """Whether the member is in a state to auto-commit now."""
        return True

    def on_commit_member_error(self, err: int) -> None:
        """OffsetCommit answered with an error about the member (generation/epoch, member id): raise."""
        raise CommitFailedError(f"group {self.group_id}: commit failed with {error_name(err)}", err)

    def offset_fetch_member(self) -> tuple[str | None, int]:
        """(member id, member epoch) for OffsetFetch v9+ (None, -1: not sent by this protocol)."""
        return None, -1

    # -- rebalance listener errors -----------------------------------------------------------------
    def _record_listener_error(self, exc: BaseException | None) -> None:
        if exc is not None and self._listener_error is None:
            self._listener_error = exc

    def raise_listener_error(self) -> None:
        """Raise (once) what a rebalance callback raised, as Java's ``poll`` does."""
        exc, self._listener_error = self._listener_error, None
        if exc is not None:
            raise exc

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
            raise KafkaClientError(f"FindCoordinator for group {self.group_id}: {error_name(err)}", err)
        timeout = max(self.config.request_timeout_ms, self.config.max_poll_interval_ms + 5000)
        coord = BrokerConnection(node, host, port, self.client.client_id, timeout, self.client.security)
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

    @property
    def coordinator_known(self) -> bool:
        return self._conn is not None and not self._conn.closed

    async def _request(self, api_key: int, body: dict, max_version: int | None = None) -> tuple[Any, int]:
        conn = await self.ensure_coordinator_ready()
        version = conn.pick_version(api_key, max_version)
        try:
            return await conn.request(api_key, body, version=version), version
        except KafkaClientError as exc:
            self.coordinator_dead(str(exc))
            raise

    # -- offsets -----------------------------------------------------------------------------------
    async def commit_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata], *, retries: bool = True,
                             timeout_s: float | None = None) -> None:
        """OffsetCommit, retrying coordinator errors (Java's ``commitOffsetsSync``)."""
        if not offsets:
            return
        if timeout_s is None:
            timeout_s = self.config.default_api_timeout_ms / 1000
        deadline = trio.current_time() + timeout_s
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
            generation, member = self.commit_identity()
        else:
            generation, member = -1, ""
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
        resp, _ = await self._request(ApiKey.OFFSET_COMMIT, body, self.offset_commit_max_version)
        self.metrics.commit_latency.record((trio.current_time() - started) * 1000)
        errors = {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions if p.error_code}
        if not errors:
            self._last_committed.update(offsets)
            return
        err = next(iter(errors.values()))
        if err in COORDINATOR_ERRORS:
            self.coordinator_dead(error_name(err))
            raise _Retry()
        if err in RETRY_ERRORS:
            raise _Retry()
        self.on_commit_member_error(err)
        raise KafkaClientError(f"group {self.group_id}: commit failed: {errors}", err, retriable=False)

    async def fetch_committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """OffsetFetch (Java's ``fetchCommittedOffsets``); partitions without a commit are left out."""
        partitions = list(partitions)
        if not partitions:
            return {}
        tlist = [{"name": t, "partition_indexes": ps} for t, ps in partitions_by_topic(partitions).items()]
        deadline = trio.current_time() + self.config.default_api_timeout_ms / 1000
        while True:
            group: dict[str, Any] = {"group_id": self.group_id, "topics": tlist}
            body = {"group_id": self.group_id, "topics": tlist, "groups": [group], "require_stable": True}
            try:
                conn = await self.ensure_coordinator_ready()
                version = conn.pick_version(ApiKey.OFFSET_FETCH, self.offset_fetch_max_version)
                member_id, member_epoch = self.offset_fetch_member()
                if version >= 9 and member_id is not None:
                    group.update(member_id=member_id, member_epoch=member_epoch)
                resp, version = await self._request(ApiKey.OFFSET_FETCH, body, version)
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
            if err in COORDINATOR_ERRORS or err in RETRY_ERRORS or err == ErrorCode.STALE_MEMBER_EPOCH:
                if err in COORDINATOR_ERRORS:
                    self.coordinator_dead(error_name(err))
                if trio.current_time() > deadline:
                    raise KafkaClientError(f"OffsetFetch for group {self.group_id}: {error_name(err)}", err)
                await trio.sleep(self.backoff_s)
                continue
            if err and err != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                raise KafkaClientError(f"OffsetFetch for group {self.group_id}: {error_name(err)}", err,
                                       retriable=False)
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
        if self.subscriptions.has_auto_assigned_partitions_mode and not self.can_auto_commit():
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

    async def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            await conn.aclose()
