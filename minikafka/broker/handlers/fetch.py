"""Fetch (1): stored batches as opaque bytes, fetch sessions (KIP-227), and a long poll.

The request picks a fetch context (:mod:`minikafka.broker.fetch_session`):
sessionless, full (creating a session), incremental (only what changed) or a
session error.  Like Kafka's ``DelayedFetch``, a fetch with fewer than
``min_bytes`` waits up to ``max_wait_ms`` in the fetch purgatory, watching its
own partitions only: a change to one of them re-reads just the partitions that
changed, in the task that changed them (``DelayedFetch.tryComplete``), and the
fetch completes when it has enough data or a partition has an error.  A
consumer fetch (without quotas) is then answered from that task, before the
request that completed it is; otherwise its own task is woken to answer.

Follower fetches (replica_id >= 0) go through the leader replication quota
(Kafka's ``ReplicationQuotaManager``): a throttled partition of an out-of-ISR
follower is answered without records while the quota is exceeded, and every
follower fetch records ``sizeOfThrottledPartitions`` (see
:func:`~minikafka.broker.fetch_response.size_of_throttled_partitions`) into the quota.

Versions (Kafka 4.2's): a follower names itself in ``replica_state`` from v15 (KIP-903), with its broker
epoch, which the leader keeps with the follower's fetch state: a follower fetching with a broker epoch
the cluster no longer has for it (a stale incarnation) cannot join the ISR.  v16+ answers a partition
refused with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH with its ``current_leader``, and lists that
leader's endpoint on the request's listener in ``node_endpoints`` (KIP-951).  v17's
``replica_directory_id`` (KIP-853) is read and not used; v18's ``high_watermark`` (KIP-1166) is the one the
follower knows: a follower fetch that has every record up to the leader's high watermark but not that
high watermark itself is answered at once instead of long-polling, so the follower learns it a fetch
earlier.

With an authorizer (Kafka's ``handleFetchRequest``): a follower fetch needs CLUSTER_ACTION on the cluster
(else every partition is answered TOPIC_AUTHORIZATION_FAILED); a consumer needs READ on each topic (the
others are answered TOPIC_AUTHORIZATION_FAILED, and do not cut the long poll short).
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import TYPE_CHECKING

import trio

from ...common import Clock, TopicPartition
from ...protocol.errors import ErrorCode
from ...protocol.messages.fetch import fetch_replica_epoch, fetch_replica_id
from ..config import BrokerConfig
from ..fetch_session import FetchContext, FetchPartitionData, PartitionKey, PartitionRequest
from ..fetch_response import group_by_topic, key_name, response_size, size_of_throttled_partitions
from ..log import OffsetOutOfRangeError
from ..partition import Partition
from ..request import FetchTrace, RequestContext
from ..services import (Authorizer, ClientQuota, DelayedOperations, FetchLog, FetchSessions, HandlerTimer,
                        LeaderReplicationQuota, MetadataCache, RequestQuota)
from .authorization import AclOperation, ResourceType, authorize, filter_authorized
from .common import check_leader, check_leader_epoch, current_leader, node_endpoints

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

#: The first Fetch version with KIP-951 leader discovery (``node_endpoints``).
LEADER_DISCOVERY_VERSION = 16
#: The high watermark a fetching replica reports when it does not take part in KIP-1166.
HIGH_WATERMARK_UNKNOWN = 0x7FFFFFFFFFFFFFFF
_LEADERSHIP_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def request_partitions(req: B.FetchRequestBody, version: int
                       ) -> tuple[OrderedDict[PartitionKey, PartitionRequest], list[PartitionKey]]:
    """The request's partitions and forgotten partitions, keyed as fetch sessions key them."""
    fetch_data: OrderedDict[PartitionKey, PartitionRequest] = OrderedDict()
    for t in req["topics"]:
        # Sessions at v13+ are keyed by topic id alone, before that by name.
        key_id, key_name = (t["topic_id"], None) if version >= 13 else (None, t["topic"])
        for p in t["partitions"]:
            fetch_data[PartitionKey(key_id, key_name, p["partition"])] = PartitionRequest(
                p["fetch_offset"], p["partition_max_bytes"], p["log_start_offset"], p["current_leader_epoch"],
                p["last_fetched_epoch"], p.get("high_watermark", HIGH_WATERMARK_UNKNOWN))
    to_forget = []
    for f in req["forgotten_topics_data"] if version >= 7 else []:
        for index in f["partitions"]:
            if version >= 13:
                to_forget.append(PartitionKey(f["topic_id"], None, index))
            else:
                to_forget.append(PartitionKey(None, f["topic"], index))
    return fetch_data, to_forget


class FetchHandler:
    """Kafka's ``handleFetchRequest``: fetch contexts, the delayed fetch, consumer and replication quotas."""

    def __init__(self, log: FetchLog, metadata: MetadataCache, sessions: FetchSessions, delayed: DelayedOperations,
                 fetch_quota: ClientQuota, request_quota: RequestQuota, leader_quota: LeaderReplicationQuota,
                 timer: HandlerTimer, config: BrokerConfig, clock: Clock,
                 authorizer: Authorizer | None = None) -> None:
        self.log = log
        self.authorizer = authorizer
        self.metadata = metadata
        self.sessions = sessions
        self.delayed = delayed
        self.fetch_quota = fetch_quota
        self.request_quota = request_quota
        self.leader_quota = leader_quota
        self.timer = timer
        self.config = config
        self.clock = clock

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.metadata.get_topic_by_id(topic_id)
        return topic.name if topic is not None else None

    # -- reading -------------------------------------------------------------------------------
    def _read_partition(self, key: PartitionKey, preq: PartitionRequest, name: str | None, version: int,
                        is_follower: bool, limit: int, first: bool,
                        throttle: Callable[[Partition], bool] | None, read_committed: bool = False
                        ) -> FetchPartitionData:
        """One partition's response data.  ``throttle(part)`` true: answered with no records (leader-side
        replication throttling, Kafka's ``readFromLocalLog`` returning ``MemoryRecords.EMPTY``), its bytes
        not counting towards ``min_bytes`` (as in Kafka's ``DelayedFetch``).  ``read_committed``: read up to
        the last stable offset, with the aborted transactions overlapping what was read."""
        entry = FetchPartitionData(key.partition)
        part = self.log.get(name, key.partition) if name is not None else None
        if part is None:
            topic = self.metadata.get_topic(name) if name is not None else None
            if topic is not None and topic.partition(key.partition) is not None:
                # Kafka's getPartitionOrError: known, but not hosted here (a reassignment moved it away).
                entry.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                entry.error_code = (ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 and name is None
                                    else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            return entry
        lg = part.log
        entry.high_watermark = lg.high_watermark
        entry.last_stable_offset = lso = part.last_stable_offset
        entry.log_start_offset = lg.log_start_offset
        err = check_leader(part) or check_leader_epoch(part, preq.current_leader_epoch)
        if err:
            entry.error_code = err
            return entry
        max_offset = lg.log_end_offset if is_follower else lso if read_committed else lg.high_watermark
        if preq.fetch_offset == max_offset and preq.fetch_offset >= lg.log_start_offset:
            return entry  # caught up: nothing to read (the common case of an idle partition)
        if throttle is not None and throttle(part):
            if not lg.log_start_offset <= preq.fetch_offset <= lg.log_end_offset:
                entry.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            return entry
        try:
            got = lg.read(preq.fetch_offset, min(preq.max_bytes, max(limit, 0)), max_offset=max_offset,
                          min_one_batch=first)
        except OffsetOutOfRangeError:
            entry.error_code = ErrorCode.OFFSET_OUT_OF_RANGE
            return entry
        if got.size:
            entry.records = got.chunks  # stored batches, sent by reference
            entry.size = got.size
            if read_committed:
                entry.aborted_transactions = [
                    {"producer_id": t.producer_id, "first_offset": t.first_offset}
                    for t in lg.txn_index.collect_aborted(preq.fetch_offset, max_offset)]
        return entry

    def _leader_throttle(self, replica_id: int) -> Callable[[Partition], bool] | None:
        """Kafka's ``ReplicaManager.shouldLeaderThrottle`` for one follower read pass: a partition is
        throttled when the follower is not in its ISR, the partition is in the leader's throttled
        replicas and the leader quota is exceeded (checked once per pass, without recording)."""
        quota = self.leader_quota
        if not quota.limited or not quota.throttled_partitions:
            return None
        exceeded: list[bool] = []

        def throttle(part: Partition) -> bool:
            if not quota.is_throttled(part.topic, part.index) or replica_id in self.log.isr(part):
                return False
            if not exceeded:
                exceeded.append(quota.is_quota_exceeded())
            return exceeded[0]

        return throttle

    # -- the request ---------------------------------------------------------------------------
    async def handle(self, ctx: RequestContext, req: B.FetchRequestBody) -> B.FetchResponseBody:
        version = ctx.api_version
        replica_id = fetch_replica_id(req)
        is_follower = replica_id >= 0
        # Kafka answers replica fetches with sendResponseExemptThrottle: never charged to the request quota.
        ctx.exempt_request_quota = ctx.exempt_request_quota or is_follower
        fetch_data, to_forget = request_partitions(req, version)
        fctx = self.sessions.new_context(version, req["session_id"], req["session_epoch"], is_follower,
                                         fetch_data, to_forget)
        trace = ctx.fetch = FetchTrace(fctx.kind)
        if fctx.error:
            if is_follower:  # Kafka records even a session error's (empty) response for a follower
                self._record_leader_quota(trace, version, OrderedDict())
            return {"throttle_time_ms": 0, "error_code": fctx.error, "session_id": 0, "responses": []}
        partitions = fctx.partitions()
        names = {key: key_name(key, version, self._topic_name) for key, _ in partitions}
        denied = None if self.authorizer is None else self._denied(ctx, is_follower, names)
        if is_follower and not denied:
            self._record_follower_fetch(partitions, names, replica_id, fetch_replica_epoch(req))
        max_bytes = min(req["max_bytes"], self.config.fetch_max_bytes)
        if not is_follower:
            # Never ask for more than the quota window can hold: that would guarantee throttling.
            max_bytes = int(min(max_bytes, self.fetch_quota.get_max_value_in_quota_window(
                ctx.user, ctx.quota_client_id)))
        answered: list[B.FetchResponseBody] = []
        complete: Callable[[OrderedDict[PartitionKey, FetchPartitionData], bool], None] | None = None
        respond_early = ctx.respond_early
        if (respond_early is not None and not is_follower and not self.fetch_quota.quotas_enabled
                and not self.request_quota.quotas_enabled):
            def answer(data: OrderedDict[PartitionKey, FetchPartitionData], error: bool) -> None:
                # Completed by the task that changed a partition: answered from there (see _read_until_ready).
                body = self._respond(ctx, version, fctx, names, trace, is_follower, data, error)
                answered.append(body)
                respond_early(body)

            complete = answer

        data, error = await self._read_until_ready(partitions, names, version, replica_id, max_bytes,
                                                   min(req["min_bytes"], max_bytes), req["max_wait_ms"],
                                                   not is_follower and version >= 4 and req["isolation_level"] == 1,
                                                   denied, fetch_data if is_follower else None, complete)
        if answered:
            return answered[0]  # already sent (ctx.early_response)
        return self._respond(ctx, version, fctx, names, trace, is_follower, data, error)

    def _respond(self, ctx: RequestContext, version: int, fctx: FetchContext, names: dict[PartitionKey, str | None],
                 trace: FetchTrace, is_follower: bool, data: OrderedDict[PartitionKey, FetchPartitionData],
                 error: bool) -> B.FetchResponseBody:
        """The response once the fetch is complete (Kafka's ``processResponseCallback``): quotas, the fetch
        session's update, leader discovery."""
        if not is_follower and self.fetch_quota.quotas_enabled:
            throttle = self._charge_consumer_quotas(ctx, version, fctx, data)
            if throttle:
                # KIP-219: a throttled consumer fetch gets an empty response; the session is left as it was.
                return {"throttle_time_ms": throttle, "error_code": 0, "session_id": fctx.throttled_session_id(),
                        "responses": []}
        session_id, selected = fctx.update_and_generate_response(data)
        trace.session_id = session_id
        if is_follower:
            self._record_leader_quota(trace, version, selected)
        # Only a read with an error can have answered a leadership error (denied partitions are not read).
        leaders = self._discover_leaders(selected, names) if error and version >= LEADER_DISCOVERY_VERSION else None
        body: B.FetchResponseBody = {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id,
                                     "responses": group_by_topic(version, selected)}
        if leaders:
            body["node_endpoints"] = node_endpoints(self.metadata, ctx.listener, leaders)
        return body

    def _discover_leaders(self, selected: OrderedDict[PartitionKey, FetchPartitionData],
                          names: dict[PartitionKey, str | None]) -> set[int]:
        """KIP-951 (v16+): each partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH gets the
        leader this broker knows in ``current_leader``; returns the leader ids, whose endpoints the response
        lists.  (The entries were built for this response: filling them in changes no session state.)"""
        leaders: set[int] = set()
        for key, entry in selected.items():
            if entry.error_code not in _LEADERSHIP_ERRORS:
                continue
            name = names.get(key, key.topic)
            local = self.log.get(name, key.partition) if name is not None else None
            leader_id, leader_epoch = current_leader(self.metadata, local, name, key.partition)
            entry.current_leader = {"leader_id": leader_id, "leader_epoch": leader_epoch}
            if leader_id >= 0:
                leaders.add(leader_id)
        return leaders

    def _denied(self, ctx: RequestContext, is_follower: bool, names: dict[PartitionKey, str | None]
                ) -> set[PartitionKey]:
        """The partitions the principal may not fetch: all of a follower fetch without CLUSTER_ACTION on
        the cluster, a consumer's without READ on their topic (unknown topic ids are not asked about)."""
        if is_follower:
            return set() if authorize(self.authorizer, ctx, AclOperation.CLUSTER_ACTION) else set(names)
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC,
                                    (n for n in names.values() if n is not None))
        return {key for key, name in names.items() if name is not None and name not in allowed}

    async def _read_until_ready(self, partitions: list[tuple[PartitionKey, PartitionRequest]],
                                names: dict[PartitionKey, str | None], version: int, replica_id: int,
                                max_bytes: int, min_bytes: int, max_wait_ms: int, read_committed: bool = False,
                                denied: set[PartitionKey] | None = None,
                                follower_data: Mapping[PartitionKey, PartitionRequest] | None = None,
                                complete: Callable[[OrderedDict[PartitionKey, FetchPartitionData], bool], None]
                                | None = None) -> tuple[OrderedDict[PartitionKey, FetchPartitionData], bool]:
        """Read every partition; while below ``min_bytes`` and without errors, wait (Kafka's
        ``DelayedFetch``) and re-read only the partitions whose change woke the fetch.  ``denied``
        partitions are answered TOPIC_AUTHORIZATION_FAILED without being read or waited on.
        ``follower_data``: a follower's request partitions, with the high watermarks it reported (v18): one
        behind the leader's, for a follower that has the records below it, completes the fetch at once
        (KIP-1166).  Returns the data and whether a partition read answered an error (a read with an error
        ends the wait, so only the last pass's reads can hold one).

        The re-read runs in the task that changed the partitions (the watch's ``try_complete``, Kafka's
        ``DelayedFetch.tryComplete``): a change that does not complete the fetch does not wake its task, and
        one that does calls ``complete(data, error)`` there (the response leaves before the change's own
        request is answered); the task then only returns."""
        is_follower = replica_id >= 0
        throttle = self._leader_throttle(replica_id) if is_follower else None
        data: OrderedDict[PartitionKey, FetchPartitionData] = OrderedDict()
        total = 0
        error = False
        for key, preq in partitions:
            if denied and key in denied:
                data[key] = FetchPartitionData(key.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            entry = data[key] = self._read_partition(key, preq, names[key], version, is_follower,
                                                     max_bytes - total, total == 0, throttle, read_committed)
            total += entry.size
            error = error or bool(entry.error_code)
        deadline = trio.current_time() + max(max_wait_ms, 0) / 1000
        if total >= min_bytes or error or trio.current_time() >= deadline or (denied and len(denied) >= len(data)):
            return data, error
        # The fetch would wait: only now the lookups the wait needs.
        requests = dict(partitions)
        reported_hw = {key: preq.high_watermark for key, preq in follower_data.items()
                       if preq.high_watermark != HIGH_WATERMARK_UNKNOWN} if follower_data else None
        if reported_hw and _high_watermark_behind(reported_hw, requests, data):
            return data, error
        by_tp: dict[TopicPartition, list[PartitionKey]] = {}
        for key, name in names.items():
            if name is not None and not (denied and key in denied):
                by_tp.setdefault(TopicPartition(name, key.partition), []).append(key)

        def reread(fired: set[Hashable]) -> bool:
            """Re-read the partitions of the keys that fired; whether the fetch is complete."""
            nonlocal total, error
            throttle = self._leader_throttle(replica_id) if is_follower else None
            error = False
            for tp in fired:
                for key in by_tp.get(tp, ()):  # type: ignore[call-overload]
                    rest = total - data[key].size
                    entry = data[key] = self._read_partition(key, requests[key], names[key], version,
                                                             is_follower, max_bytes - rest, rest == 0, throttle,
                                                             read_committed)
                    total = rest + entry.size
                    error = error or bool(entry.error_code)
            return (total >= min_bytes or error or trio.current_time() >= deadline
                    or bool(reported_hw and _high_watermark_behind(reported_hw, requests, data)))

        def try_complete(fired: set[Hashable]) -> bool:
            if not reread(fired):
                return False
            if complete is not None:
                try:
                    complete(data, error)
                except Exception as exc:  # raised in the request's own task, which answers the error
                    failure.append(exc)
            return True

        failure: list[Exception] = []
        with self.delayed.watch(by_tp) as watch:
            watch.try_complete = try_complete
            while True:
                fired = await watch.wait(deadline)
                if watch.completed:
                    if failure:
                        raise failure[0]
                    break  # re-read (and answered, with ``complete``) by the task that changed a partition
                if not fired or reread(fired):
                    break  # timed out with nothing changed (the last read still holds), or complete
        return data, error

    # -- accounting ---------------------------------------------------------------------------
    def _record_follower_fetch(self, partitions: list[tuple[PartitionKey, PartitionRequest]],
                               names: dict[PartitionKey, str | None], replica_id: int, broker_epoch: int) -> None:
        """Leader side of a follower fetch (Kafka's ``updateFollowerFetchState``): once per request,
        before any long-poll wait, record each partition's fetch position (and the follower's broker
        epoch, v15+; -1 when not sent)."""
        now_ms = self.clock.time_ms()
        for key, preq in partitions:
            name = names[key]
            part = self.log.get(name, key.partition) if name is not None else None
            if part is not None and part.is_leader:
                self.log.record_follower_fetch(part, replica_id, preq.fetch_offset, now_ms, broker_epoch)

    def _record_leader_quota(self, trace: FetchTrace, version: int,
                             selected: OrderedDict[PartitionKey, FetchPartitionData]) -> int:
        """Leader side of a follower fetch, after the response is chosen (Kafka's
        ``processResponseCallback`` for followers): record ``sizeOfThrottledPartitions`` into the
        leader quota.  Done on every follower fetch, throttled partitions or not."""
        size = size_of_throttled_partitions(self.leader_quota, self._topic_name, version, selected)
        self.leader_quota.record(size)
        trace.leader_quota_recorded = size
        return size

    def _charge_consumer_quotas(self, ctx: RequestContext, version: int, fctx: FetchContext,
                                data: OrderedDict[PartitionKey, FetchPartitionData]) -> int:
        """Record a consumer fetch against its byte-rate and request quotas (Kafka's processResponseCallback).

        Returns the throttle time; when throttled, the fetched bytes are un-recorded
        because the client will get an empty response.
        """
        user, client_id = ctx.user, ctx.quota_client_id
        body: B.FetchResponseBody = {"throttle_time_ms": 0, "error_code": 0, "session_id": fctx.session_id,
                                     "responses": group_by_topic(version, fctx.peek_response(data))}
        size = response_size(version, body)
        handler_ns = self.timer.task_ns() - ctx.handler_started_ns
        request_throttle = self.request_quota.maybe_record_request_time(user, client_id, handler_ns)
        ctx.request_quota_recorded = True
        bandwidth_throttle = self.fetch_quota.maybe_record_and_get_throttle_time_ms(user, client_id, size)
        throttle = max(bandwidth_throttle, request_throttle)
        if throttle > 0:
            self.fetch_quota.unrecord_quota_sensor(user, client_id, size)
            ctx.throttle("Fetch" if bandwidth_throttle > request_throttle else "Request", throttle)
        return throttle


def _high_watermark_behind(reported_hw: dict[PartitionKey, int], requests: dict[PartitionKey, PartitionRequest],
                           data: OrderedDict[PartitionKey, FetchPartitionData]) -> bool:
    """KIP-1166: whether a follower that fetches from at or past the leader's high watermark reported an older
    high watermark for some partition (it has the records and only needs to learn the high watermark)."""
    for key, hw in reported_hw.items():
        entry = data.get(key)
        preq = requests.get(key)
        if entry is None or preq is None or entry.error_code:
            continue
        if hw < entry.high_watermark <= preq.fetch_offset:
            return True
    return False
