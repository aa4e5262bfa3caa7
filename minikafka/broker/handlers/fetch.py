"""Fetch (1): stored batches as opaque bytes, fetch sessions (KIP-227), and a long poll.

The request picks a fetch context (:mod:`minikafka.broker.fetch_session`):
sessionless, full (creating a session), incremental (only what changed) or a
session error.  Like Kafka's ``DelayedFetch``, a fetch with fewer than
``min_bytes`` waits up to ``max_wait_ms`` and completes early when an append
brings enough data or a partition has an error.

Follower fetches (replica_id >= 0) go through the leader replication quota
(Kafka's ``ReplicationQuotaManager``): a throttled partition of an out-of-ISR
follower is answered without records while the quota is exceeded, and every
follower fetch records ``sizeOfThrottledPartitions`` (see
:func:`size_of_throttled_partitions`) into the quota.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any, Callable

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.messages.fetch import FetchResponse
from ..apis import handles
from ..fetch_session import FetchContext, PartitionKey, PartitionRequest
from ..log import OffsetOutOfRangeError
from .common import check_leader, check_leader_epoch

log = logging.getLogger(__name__)


def request_partitions(broker, req, version: int):
    """The request's partitions and forgotten partitions, keyed as fetch sessions key them."""
    fetch_data: OrderedDict[PartitionKey, PartitionRequest] = OrderedDict()
    for t in req.topics:
        # Sessions at v13+ are keyed by topic id alone, before that by name.
        key_id, key_name = (t.topic_id, None) if version >= 13 else (None, t.topic)
        for p in t.partitions:
            fetch_data[PartitionKey(key_id, key_name, p.partition)] = PartitionRequest(
                p.fetch_offset, p.partition_max_bytes, p.log_start_offset, p.current_leader_epoch,
                p.last_fetched_epoch)
    to_forget = []
    for t in req.forgotten_topics_data if version >= 7 else []:
        for p in t.partitions:
            if version >= 13:
                to_forget.append(PartitionKey(t.topic_id, None, p))
            else:
                to_forget.append(PartitionKey(None, t.topic, p))
    return fetch_data, to_forget


def read_partitions(broker, fctx: FetchContext, req, version: int, limit: int,
                    throttle: Callable[[Any], bool] | None = None):
    """One pass over the context's partitions: (per-partition response data, bytes read, any error).

    ``throttle(part)`` true: the partition is answered with no records (leader-side replication
    throttling, Kafka's ``ReplicaManager.readFromLocalLog`` returning ``MemoryRecords.EMPTY``), and
    its bytes do not count towards ``min_bytes`` (as in Kafka's ``DelayedFetch``)."""
    rm = broker.replica_manager
    is_follower = req.replica_id >= 0
    total = 0
    any_error = False
    data: OrderedDict[PartitionKey, dict] = OrderedDict()
    for key, preq in fctx.partitions():
        entry: dict = {"partition_index": key.partition, "records": b"", "_size": 0}
        data[key] = entry
        if version >= 13:
            topic = broker.metadata.get_topic_by_id(key.topic_id)
            name = topic.name if topic else None
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            name = key.topic
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        part = rm.get(name, key.partition) if name is not None else None
        if part is None:
            entry.update(error_code=missing if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         high_watermark=-1)
            any_error = True
            continue
        lg = part.log
        entry.update(high_watermark=lg.high_watermark, last_stable_offset=lg.high_watermark,
                     log_start_offset=lg.log_start_offset, error_code=0)
        err = check_leader(part) or check_leader_epoch(part, preq.current_leader_epoch)
        if err:
            entry["error_code"] = err
            any_error = True
            continue
        max_offset = lg.log_end_offset if is_follower else lg.high_watermark
        if preq.fetch_offset == max_offset and preq.fetch_offset >= lg.log_start_offset:
            continue  # caught up: nothing to read (the common case of an idle partition)
        if throttle is not None and throttle(part):
            if not lg.log_start_offset <= preq.fetch_offset <= lg.log_end_offset:
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                any_error = True
            continue
        try:
            got = lg.read(preq.fetch_offset, min(preq.max_bytes, max(limit - total, 0)),
                          max_offset=max_offset, min_one_batch=total == 0)
        except OffsetOutOfRangeError:
            entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            any_error = True
            continue
        if got.size:
            entry["records"] = got.chunks  # stored batches, sent by reference
            entry["_size"] = got.size
            total += got.size
    return data, total, any_error


def group_by_topic(broker, version: int, data: "OrderedDict[PartitionKey, dict]") -> list[dict]:
    """Consecutive partitions of one topic share a topic entry (as Kafka's FetchResponse.of builds it)."""
    responses: list[dict] = []
    prev = None
    for key, entry in data.items():
        ident = key.topic_id if version >= 13 else key.topic
        if prev is None or ident != prev:
            responses.append({"topic": key.topic or "", "topic_id": key.topic_id, "partitions": []})
            prev = ident
        responses[-1]["partitions"].append(entry)
    return responses


def response_size(version: int, body: dict) -> int:
    """Kafka's ``FetchResponse.sizeOf``: 4 + the size of the response body (records included)."""
    segments = FetchResponse.build_segments(body, version)
    return 4 + sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in segments)


def _charge_consumer_quotas(broker, ctx, version: int, fctx: FetchContext, data) -> int:
    """Record a consumer fetch against its byte-rate and request quotas (Kafka's processResponseCallback).

    Returns the throttle time; when throttled, the fetched bytes are un-recorded
    because the client will get an empty response.
    """
    quotas = broker.quotas
    user, client_id = ctx.user, ctx.quota_client_id
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": fctx.session_id,
            "responses": group_by_topic(broker, version, fctx.peek_response(data))}
    size = response_size(version, body)
    handler_ns = broker.task_time.task_ns() - ctx.notes.get("task_ns_start", 0)
    request_throttle = quotas.request.maybe_record_request_time(user, client_id, handler_ns)
    ctx.notes["request_quota_done"] = True
    bandwidth_throttle = quotas.fetch.maybe_record_and_get_throttle_time_ms(user, client_id, size)
    throttle = max(bandwidth_throttle, request_throttle)
    if throttle > 0:
        quotas.fetch.unrecord_quota_sensor(user, client_id, size)
        ctx.throttle("Fetch" if bandwidth_throttle > request_throttle else "Request", throttle)
    return throttle


def record_follower_fetch(broker, fctx: FetchContext, replica_id: int, version: int) -> None:
    """Leader side of a follower fetch (Kafka's ``updateFollowerFetchState``): once per request,
    before any long-poll wait, record each partition's fetch position."""
    rm = broker.replica_manager
    now_ms = int(time.time() * 1000)
    for key, preq in fctx.partitions():
        if version >= 13:
            topic = broker.metadata.get_topic_by_id(key.topic_id)
            name = topic.name if topic else None
        else:
            name = key.topic
        part = rm.get(name, key.partition) if name is not None else None
        if part is not None and part.is_leader:
            rm.record_follower_fetch(part, replica_id, preq.fetch_offset, now_ms)


def leader_throttle(broker, replica_id: int) -> Callable[[Any], bool] | None:
    """Kafka's ``ReplicaManager.shouldLeaderThrottle`` for one follower fetch pass: a partition is
    throttled when the follower is not in its ISR, the partition is in the leader's throttled
    replicas and the leader quota is exceeded (checked once per pass, without recording)."""
    quota = broker.leader_quota
    if not quota.limited or not quota.throttled_partitions:
        return None
    exceeded: list[bool] = []
    rm = broker.replica_manager

    def throttle(part) -> bool:
        if not quota.is_throttled(part.topic, part.index) or replica_id in rm.isr(part):
            return False
        if not exceeded:
            exceeded.append(quota.is_quota_exceeded())
        return exceeded[0]

    return throttle


def size_of_throttled_partitions(broker, version: int, selected: "OrderedDict[PartitionKey, dict]") -> int:
    """Kafka's ``KafkaApis.sizeOfThrottledPartitions``: ``FetchResponse.sizeOf`` (4 + the body) of a
    response of the request's version holding only the response's partitions the leader quota
    throttles (``SelectingIterator``).  With none that is the empty response: 18 bytes at v7-v11,
    12 at v4-v6, 16 at v12+ (compact array and tagged fields)."""
    quota = broker.leader_quota
    throttled: OrderedDict[PartitionKey, dict] = OrderedDict()
    if quota.throttled_partitions:
        for key, entry in selected.items():
            if version >= 13:
                topic = broker.metadata.get_topic_by_id(key.topic_id)
                name = topic.name if topic else None
            else:
                name = key.topic
            if name is not None and quota.is_throttled(name, key.partition):
                throttled[key] = entry
    # throttle_time_ms and session_id are fixed-size: any value gives the same size (Kafka uses 0 / INVALID).
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": group_by_topic(broker, version, throttled)}
    return response_size(version, body)


def record_leader_quota(broker, ctx, version: int, selected) -> int:
    """Leader side of a follower fetch, after the response is chosen (Kafka's
    ``processResponseCallback`` for followers): record ``sizeOfThrottledPartitions`` into the
    leader quota.  Done on every follower fetch, throttled partitions or not."""
    size = size_of_throttled_partitions(broker, version, selected)
    broker.leader_quota.record(size)
    ctx.notes["leader_quota_recorded"] = size
    return size


@handles(ApiKey.FETCH)
async def handle_fetch(broker, ctx, req) -> dict:
    version = ctx.api_version
    is_follower = req.replica_id >= 0
    # Kafka answers replica fetches with sendResponseExemptThrottle: never charged to the request quota.
    ctx.exempt_request_quota = ctx.exempt_request_quota or is_follower
    fetch_data, to_forget = request_partitions(broker, req, version)
    fctx = broker.fetch_manager.new_context(version, req.session_id, req.session_epoch, is_follower,
                                            fetch_data, to_forget)
    ctx.notes["fetch_context"] = fctx.kind
    if fctx.error:
        if is_follower:  # Kafka records even a session error's (empty) response for a follower
            record_leader_quota(broker, ctx, version, OrderedDict())
        return {"throttle_time_ms": 0, "error_code": fctx.error, "session_id": 0, "responses": []}
    if is_follower and broker.cluster is not None:
        record_follower_fetch(broker, fctx, req.replica_id, version)
    max_bytes = min(req.max_bytes, broker.config.fetch_max_bytes)
    if not is_follower:
        # Never ask for more than the quota window can hold: that would guarantee throttling.
        max_bytes = int(min(max_bytes, broker.quotas.fetch.get_max_value_in_quota_window(
            ctx.user, ctx.quota_client_id)))
    min_bytes = min(req.min_bytes, max_bytes)
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    rm = broker.replica_manager
    while True:
        generation = rm.append_generation
        skip = leader_throttle(broker, req.replica_id) if is_follower else None
        data, total, any_error = read_partitions(broker, fctx, req, version, max_bytes, skip)
        if total >= min_bytes or any_error or trio.current_time() >= deadline:
            break
        with trio.move_on_at(deadline):
            await rm.wait_for_append()
        if rm.append_generation == generation:
            break  # timed out and nothing was appended meanwhile: the pass above still holds
    if not is_follower and broker.quotas.fetch.quotas_enabled:
        throttle = _charge_consumer_quotas(broker, ctx, version, fctx, data)
        if throttle:
            # KIP-219: a throttled consumer fetch gets an empty response; the session is left as it was.
            return {"throttle_time_ms": throttle, "error_code": 0, "session_id": fctx.throttled_session_id(),
                    "responses": []}
    session_id, selected = fctx.update_and_generate_response(data)
    ctx.notes["fetch_session_id"] = session_id
    if is_follower:
        record_leader_quota(broker, ctx, version, selected)
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": session_id,
            "responses": group_by_topic(broker, version, selected)}
