"""ShareFetch (78) and ShareAcknowledge (79): KIP-932 share consumers fetch, acquire and acknowledge.

Kafka's ``KafkaApis.handleShareFetchRequest`` / ``handleShareAcknowledgeRequest`` with
``SharePartitionManager.fetchMessages`` and ``DelayedShareFetch``:

* READ on the group (else a top-level GROUP_AUTHORIZATION_FAILED), a member id of 1 to 36 characters
  (else INVALID_REQUEST), then the share-session step (:mod:`~minikafka.broker.share.session`); READ
  on each topic, else that partition is TOPIC_AUTHORIZATION_FAILED.
* Piggybacked acknowledgements are applied first (their outcome is the partition's
  ``acknowledge_error_code``); then each partition of the session this broker leads is read from
  its share-partition's next fetch offset (to the high watermark, or the last stable offset for a
  read_committed group) and the records acquired (up to MaxRecords, BatchSize, ShareAcquireMode).
  The stored batches go out as they are, by reference: only those overlapping an acquired range.
* Nothing acquired and MinBytes not reached: the request waits up to MaxWaitMs in the fetch
  purgatory, watching its partitions (woken by appends and high watermark moves) and their
  share-partitions (woken by acknowledgements, releases and lock expiry), and tries again.
* A partition led elsewhere is NOT_LEADER_OR_FOLLOWER with its current leader, and that leader's
  endpoint on the request's listener is in ``node_endpoints``.
* The final epoch (-1) fetches nothing and releases the member's records after its acknowledgements.

Deliberate differences: no fetch quota throttling of share fetches (MaxBytes is only capped by the
quota window, as Kafka does before fetching); the session's partitions are read in order, rotated by
the session epoch (Kafka's round-robin ``PartitionRotateStrategy``), with one byte budget for all; a
waiting fetch completes as soon as it acquired something (Kafka's ``DelayedShareFetch`` estimates
MinBytes from log offsets before acquiring: the same for the MinBytes=1 clients send); the member is
not checked against the share group's membership (neither does Kafka: share sessions and locks are
keyed by the member id alone).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from ...common import TopicPartition
from ...protocol.errors import ErrorCode
from ...protocol.records import RecordBatchHeader, iter_batches
from ..config import BrokerConfig
from ..log import OffsetOutOfRangeError
from ..partition import Partition
from ..request import RequestContext
from ..services import Authorizer, ClientQuota, DelayedOperations, FetchLog, MetadataCache, SharePartitions
from ..share.partition import AckBatch, AcquiredRecords, FetchedBatch, ShareAcquireMode, validate_ack_batches
from ..share.partition_state import ShareStateError, ShareStateKey
from ..share.session import FINAL_EPOCH, ShareSessionError, TopicIdPartition
from .authorization import AclOperation, ResourceType, authorize, filter_authorized

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

MAX_MEMBER_ID_LENGTH = 36  # Kafka's share member ids are UUID strings


def member_id_valid(member_id: str | None) -> bool:
    """Kafka's member id check of the share APIs: non-empty, at most 36 characters."""
    return bool(member_id) and len(member_id or "") <= MAX_MEMBER_ID_LENGTH


@dataclass(slots=True, eq=False)
class _Partition:
    """One partition's share fetch result."""

    key: TopicIdPartition
    name: str | None
    error: ErrorCode = ErrorCode.NONE
    ack_error: ErrorCode | None = None  # None: no acknowledgements for it in the request
    records: list[bytes | bytearray | memoryview] = field(default_factory=list)
    size: int = 0
    acquired: list[AcquiredRecords] = field(default_factory=list)
    part: Partition | None = None


def _ack_batches(batches: list[Any]) -> list[AckBatch]:
    return [AckBatch(b["first_offset"], b["last_offset"], list(b["acknowledge_types"])) for b in batches]


def _aborted(h: RecordBatchHeader, aborted: list[Any]) -> bool:
    """A data batch of a transaction that aborted (read_committed never delivers it)."""
    if not h.is_transactional or h.is_control:
        return False
    return any(t.producer_id == h.producer_id and t.first_offset <= h.base_offset <= t.last_offset for t in aborted)


class ShareHandlerBase:
    """What ShareFetch and ShareAcknowledge share: topic names, leadership, acknowledgements."""

    def __init__(self, log: FetchLog, metadata: MetadataCache, shares: SharePartitions, config: BrokerConfig,
                 authorizer: Authorizer | None = None) -> None:
        self.log = log
        self.metadata = metadata
        self.shares = shares
        self.config = config
        self.authorizer = authorizer

    def _names(self, topic_ids: set[uuid.UUID]) -> dict[uuid.UUID, str | None]:
        out: dict[uuid.UUID, str | None] = {}
        for topic_id in topic_ids:
            topic = self.metadata.get_topic_by_id(topic_id)
            out[topic_id] = topic.name if topic is not None else None
        return out

    def _request_error(self, ctx: RequestContext, group_id: str | None,
                       member_id: str | None) -> tuple[ErrorCode, str | None] | None:
        """The error of a ShareFetch/ShareAcknowledge as a whole: a null group or a member id Kafka refuses
        (INVALID_REQUEST), no READ on the group (GROUP_AUTHORIZATION_FAILED); None when it may go on."""
        if group_id is None:
            return ErrorCode.INVALID_REQUEST, "the group id is null"
        if not authorize(self.authorizer, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, None
        if not member_id_valid(member_id):
            return ErrorCode.INVALID_REQUEST, "invalid member id"
        return None

    def _lock_timeout_ms(self, group_id: str) -> int:
        return self.shares.settings(group_id).record_lock_duration_ms

    def _leader(self, name: str, index: int) -> tuple[Partition | None, ErrorCode]:
        part = self.log.get(name, index)
        if part is None:
            topic = self.metadata.get_topic(name)
            if topic is None or index >= topic.num_partitions or index < 0:
                return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not part.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return part, ErrorCode.NONE

    def _acknowledge(self, ctx: RequestContext, group_id: str, member_id: str, name: str | None, index: int,
                     batches: list[AckBatch], authorized: set[str], allow_renew: bool) -> ErrorCode:
        """One request partition's acknowledgements (Kafka's ``handleAcknowledgements``)."""
        if name is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if name not in authorized:
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        err = validate_ack_batches(batches, allow_renew)
        if err:
            return err
        part, err = self._leader(name, index)
        if part is None:
            return err
        return self.shares.acknowledge(group_id, member_id, part, batches)

    async def _persisted(self, group_id: str, acknowledged: list[_Partition]) -> None:
        """Wait until the acknowledgements applied are durable (their share-partition state replicated): an
        acknowledgement is answered only then, or with COORDINATOR_NOT_AVAILABLE."""
        for entry in acknowledged:
            if entry.ack_error == ErrorCode.NONE and entry.name is not None:
                entry.ack_error = await self.shares.persisted(group_id, entry.name, entry.key.partition)

    def _current_leader(self, name: str | None, index: int) -> tuple[int, int]:
        topic = self.metadata.get_topic(name) if name is not None else None
        if topic is None or not 0 <= index < topic.num_partitions:
            return -1, -1
        pm = topic.partitions[index]
        return pm.leader, pm.leader_epoch

    def _node_endpoints(self, ctx: RequestContext, leaders: set[int]) -> list[B.ShareFetchResponseNodeEndpoints]:
        if not leaders:
            return []
        return [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
                for n in self.metadata.alive_brokers(ctx.listener) if n.node_id in leaders]


class ShareFetchHandler(ShareHandlerBase):
    """Kafka's ``handleShareFetchRequest``."""

    def __init__(self, log: FetchLog, metadata: MetadataCache, shares: SharePartitions, delayed: DelayedOperations,
                 fetch_quota: ClientQuota, config: BrokerConfig, authorizer: Authorizer | None = None) -> None:
        super().__init__(log, metadata, shares, config, authorizer)
        self.delayed = delayed
        self.fetch_quota = fetch_quota

    @staticmethod
    def _error(code: ErrorCode, lock_ms: int = 0, message: str | None = None) -> B.ShareFetchResponseBody:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "acquisition_lock_timeout_ms": lock_ms, "responses": [], "node_endpoints": []}

    async def handle(self, ctx: RequestContext, req: B.ShareFetchRequestBody) -> B.ShareFetchResponseBody:
        version = ctx.api_version
        group_id, member_id = req["group_id"], req["member_id"]
        failed = self._request_error(ctx, group_id, member_id)
        if failed is not None:
            return self._error(failed[0], message=failed[1])
        assert group_id is not None and member_id is not None
        lock_ms = self._lock_timeout_ms(group_id)
        renew_only = version >= 2 and bool(req.get("is_renew_ack"))
        if renew_only and (req["max_wait_ms"] or req["min_bytes"] or req["max_bytes"] or req["max_records"]):
            return self._error(ErrorCode.INVALID_REQUEST, lock_ms,
                               "a renew acknowledgement fetch must ask for no records and no wait")
        epoch = req["share_session_epoch"]
        requested: list[TopicIdPartition] = []
        acks: dict[TopicIdPartition, list[AckBatch]] = {}
        for t in req["topics"]:
            for p in t["partitions"]:
                key = TopicIdPartition(t["topic_id"], p["partition_index"])
                requested.append(key)
                if p["acknowledgement_batches"]:
                    acks[key] = _ack_batches(p["acknowledgement_batches"])
        forgotten = [TopicIdPartition(f["topic_id"], index) for f in req["forgotten_topics_data"]
                     for index in f["partitions"]]
        session_partitions = self.shares.session_partitions(group_id, member_id) if epoch == FINAL_EPOCH else []
        try:
            fctx = self.shares.new_context(group_id, member_id, epoch, requested, forgotten, bool(acks),
                                           ctx.connection_id)
        except ShareSessionError as exc:
            if exc.code == ErrorCode.SHARE_SESSION_LIMIT_REACHED and req["max_wait_ms"] > 0:
                # Kafka's idle share fetch timer: the client does not spin on a full session cache.
                await trio.sleep(min(req["max_wait_ms"], 30000) / 1000)
            return self._error(exc.code, lock_ms, str(exc))
        fetching = [] if fctx.final or renew_only else fctx.partitions
        if fetching and epoch > 0:  # round robin over the session's partitions
            shift = epoch % len(fetching)
            fetching = fetching[shift:] + fetching[:shift]
        names = self._names({k.topic_id for k in [*requested, *fetching, *session_partitions]})
        authorized = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC,
                                       (n for n in names.values() if n is not None))
        results: dict[TopicIdPartition, _Partition] = {}
        for key, batches in acks.items():
            name = names.get(key.topic_id)
            entry = results[key] = _Partition(key, name)
            entry.ack_error = self._acknowledge(ctx, group_id, member_id, name, key.partition, batches, authorized,
                                                allow_renew=version >= 2)
        fetched = await self._fetch(ctx, req, group_id, member_id, fetching, names, authorized)
        await self._persisted(group_id, list(results.values()))
        if epoch == FINAL_EPOCH:
            self.shares.close_session(group_id, member_id, [(n, k.partition) for k in session_partitions
                                                            if (n := names.get(k.topic_id)) is not None])
        order: list[TopicIdPartition] = []
        for entry in fetched:
            if fctx.incremental and not entry.acquired and not entry.error and entry.key not in results:
                continue  # an incremental response leaves out partitions with nothing to say
            if entry.key in results:
                ack = results[entry.key]
                entry.ack_error = ack.ack_error
            results[entry.key] = entry
            order.append(entry.key)
        order.extend(k for k in results if k not in order)
        return self._response(ctx, lock_ms, [results[k] for k in order])

    # -- fetching ------------------------------------------------------------------------------------
    async def _fetch(self, ctx: RequestContext, req: B.ShareFetchRequestBody, group_id: str, member_id: str,
                     keys: list[TopicIdPartition], names: dict[uuid.UUID, str | None],
                     authorized: set[str]) -> list[_Partition]:
        out = [_Partition(k, names.get(k.topic_id)) for k in keys]
        fetchable: list[_Partition] = []
        for entry in out:
            if entry.name is None:
                entry.error = ErrorCode.UNKNOWN_TOPIC_ID
            elif entry.name not in authorized:
                entry.error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                entry.part, entry.error = self._leader(entry.name, entry.key.partition)
                if entry.part is not None:
                    fetchable.append(entry)
        max_records = req["max_records"] if ctx.api_version >= 1 else 500
        max_bytes = int(min(req["max_bytes"], self.config.fetch_max_bytes,
                            self.fetch_quota.get_max_value_in_quota_window(ctx.user, ctx.quota_client_id)))
        if not fetchable or max_records <= 0 or max_bytes <= 0:
            return out
        mode = ShareAcquireMode.BATCH_OPTIMIZED
        if ctx.api_version >= 2 and req.get("share_acquire_mode") == ShareAcquireMode.RECORD_LIMIT:
            mode = ShareAcquireMode.RECORD_LIMIT
        batch_size = max(req["batch_size"], 0) if ctx.api_version >= 1 else 0
        read_committed = self.shares.settings(group_id).read_committed
        budget = _Budget(max_bytes, max_records)

        def read(entries: list[_Partition]) -> None:
            for entry in entries:
                if budget.records <= 0:
                    return
                self._read(entry, group_id, member_id, budget, batch_size, mode, read_committed)

        read(fetchable)
        min_bytes = min(max(req["min_bytes"], 1), max_bytes)
        deadline = trio.current_time() + max(req["max_wait_ms"], 0) / 1000
        if (budget.used_bytes >= min_bytes or budget.acquired or any(e.error for e in fetchable)
                or trio.current_time() >= deadline):
            return out
        watch_keys: dict[Hashable, _Partition] = {}
        for entry in fetchable:
            assert entry.part is not None and entry.name is not None
            watch_keys[TopicPartition(entry.name, entry.key.partition)] = entry
            watch_keys[ShareStateKey(group_id, entry.name, entry.key.partition)] = entry
        with self.delayed.watch(watch_keys) as watch:
            while True:
                fired = await watch.wait(deadline)
                if not fired:
                    break
                woken = list(dict.fromkeys(watch_keys[k] for k in fired if k in watch_keys))
                for entry in woken:  # leadership may have moved while waiting
                    assert entry.name is not None
                    entry.part, entry.error = self._leader(entry.name, entry.key.partition)
                read([e for e in woken if e.part is not None])
                if (budget.used_bytes >= min_bytes or budget.acquired or any(e.error for e in woken)
                        or trio.current_time() >= deadline):
                    break
        return out

    def _read(self, entry: _Partition, group_id: str, member_id: str, budget: _Budget, batch_size: int,
              mode: ShareAcquireMode, read_committed: bool) -> None:
        """Read one partition from its share-partition's next fetch offset and acquire what it can."""
        part = entry.part
        assert part is not None
        try:
            sp = self.shares.share_partition(group_id, part)
        except ShareStateError as exc:  # its share coordinator cannot be read: the consumer fetches again
            entry.error = exc.code
            return
        lg = part.log
        max_offset = part.last_stable_offset if read_committed else lg.high_watermark
        offset = sp.next_fetch_offset()
        if offset >= max_offset or not sp.can_acquire(self.config.group_share_partition_max_record_locks):
            return
        try:
            got = lg.read(offset, max(budget.bytes - budget.used_bytes, 0), max_offset=max_offset,
                          min_one_batch=budget.used_bytes == 0)
        except OffsetOutOfRangeError:
            return  # the log start moved after share_partition() looked: the next fetch catches up
        if not got.size:
            return
        batches = [(h, view) for chunk in got.chunks for h, view in iter_batches(chunk, check_crc=False)]
        if not batches:
            return
        aborted = lg.txn_index.collect_aborted(offset, max_offset) if read_committed else []
        fetched = [FetchedBatch(h.base_offset, h.last_offset, bool(aborted) and _aborted(h, aborted))
                   for h, _ in batches]
        acquired = self.shares.acquire(group_id, member_id, part, fetched, max_records=budget.records,
                                       batch_size=batch_size, mode=mode)
        if not acquired:
            return
        entry.acquired.extend(acquired)
        budget.acquired = True
        for h, view in batches:
            if any(a.first_offset <= h.last_offset and a.last_offset >= h.base_offset for a in acquired):
                entry.records.append(view)
                entry.size += view.nbytes
        budget.used_bytes += entry.size
        budget.records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)

    # -- the response ----------------------------------------------------------------------------------
    def _response(self, ctx: RequestContext, lock_ms: int, entries: list[_Partition]) -> B.ShareFetchResponseBody:
        responses: list[B.ShareFetchResponseResponses] = []
        by_topic: dict[uuid.UUID, list[B.ShareFetchResponseResponsesPartitions]] = {}
        leaders: set[int] = set()
        for e in entries:
            leader_id, leader_epoch = -1, -1
            if e.error == ErrorCode.NOT_LEADER_OR_FOLLOWER or e.ack_error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                leader_id, leader_epoch = self._current_leader(e.name, e.key.partition)
                if leader_id >= 0:
                    leaders.add(leader_id)
            parts = by_topic.get(e.key.topic_id)
            if parts is None:
                parts = by_topic[e.key.topic_id] = []
                responses.append({"topic_id": e.key.topic_id, "partitions": parts})
            parts.append({
                "partition_index": e.key.partition, "error_code": e.error, "error_message": None,
                "acknowledge_error_code": e.ack_error or ErrorCode.NONE, "acknowledge_error_message": None,
                "current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch},
                "records": e.records or b"",
                "acquired_records": [{"first_offset": a.first_offset, "last_offset": a.last_offset,
                                      "delivery_count": a.delivery_count} for a in e.acquired]})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "acquisition_lock_timeout_ms": lock_ms, "responses": responses,
                "node_endpoints": self._node_endpoints(ctx, leaders)}


@dataclass(slots=True)
class _Budget:
    """What is left of a request's MaxBytes and MaxRecords."""

    bytes: int
    records: int
    used_bytes: int = 0
    acquired: bool = False


class ShareAcknowledgeHandler(ShareHandlerBase):
    """Kafka's ``handleShareAcknowledgeRequest``."""

    @staticmethod
    def _error(code: ErrorCode, lock_ms: int = 0, message: str | None = None) -> B.ShareAcknowledgeResponseBody:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": message,
                "acquisition_lock_timeout_ms": lock_ms, "responses": [], "node_endpoints": []}

    async def handle(self, ctx: RequestContext, req: B.ShareAcknowledgeRequestBody
                     ) -> B.ShareAcknowledgeResponseBody:
        group_id, member_id = req["group_id"], req["member_id"]
        failed = self._request_error(ctx, group_id, member_id)
        if failed is not None:
            return self._error(failed[0], message=failed[1])
        assert group_id is not None and member_id is not None
        lock_ms = self._lock_timeout_ms(group_id)
        epoch = req["share_session_epoch"]
        session_partitions = self.shares.session_partitions(group_id, member_id) if epoch == FINAL_EPOCH else []
        try:
            self.shares.acknowledge_session_update(group_id, member_id, epoch)
        except ShareSessionError as exc:
            return self._error(exc.code, lock_ms, str(exc))
        names = self._names({t["topic_id"] for t in req["topics"]} | {k.topic_id for k in session_partitions})
        authorized = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC,
                                       (n for n in names.values() if n is not None))
        responses: list[B.ShareAcknowledgeResponseResponses] = []
        leaders: set[int] = set()
        for t in req["topics"]:
            name = names.get(t["topic_id"])
            parts: list[B.ShareAcknowledgeResponseResponsesPartitions] = []
            for p in t["partitions"]:
                index = p["partition_index"]
                err = self._acknowledge(ctx, group_id, member_id, name, index,
                                        _ack_batches(p["acknowledgement_batches"]), authorized,
                                        allow_renew=ctx.api_version >= 2)
                leader_id, leader_epoch = -1, -1
                if err == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    leader_id, leader_epoch = self._current_leader(name, index)
                    if leader_id >= 0:
                        leaders.add(leader_id)
                parts.append({"partition_index": index, "error_code": err, "error_message": None,
                              "current_leader": {"leader_id": leader_id, "leader_epoch": leader_epoch}})
            responses.append({"topic_id": t["topic_id"], "partitions": parts})
            for part in parts:  # answered once durable
                if part["error_code"] == ErrorCode.NONE and name is not None:
                    part["error_code"] = await self.shares.persisted(group_id, name, part["partition_index"])
        if epoch == FINAL_EPOCH:
            self.shares.close_session(group_id, member_id, [(n, k.partition) for k in session_partitions
                                                            if (n := names.get(k.topic_id)) is not None])
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "acquisition_lock_timeout_ms": lock_ms, "responses": responses,
                "node_endpoints": self._node_endpoints(ctx, leaders)}
