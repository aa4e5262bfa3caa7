"""Fetch (1): read stored batches as opaque bytes, with a long poll woken by produce.

Sessionless for now: every fetch is answered as a full fetch with session id
0 (the fetch-sessions issue adds KIP-227).  Like Kafka's ``DelayedFetch``, a
fetch that has fewer than ``min_bytes`` waits up to ``max_wait_ms`` and
completes early when an append brings enough data or a partition has an error.
"""

from __future__ import annotations

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from ..log import OffsetOutOfRangeError
from .common import check_leader_epoch


def _resolve(broker, version: int, t) -> tuple[ErrorCode, object]:
    if version >= 13:
        topic = broker.metadata.get_topic_by_id(t.topic_id)
        return (ErrorCode.NONE, topic) if topic else (ErrorCode.UNKNOWN_TOPIC_ID, None)
    topic = broker.metadata.get_topic(t.topic)
    return (ErrorCode.NONE, topic) if topic else (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)


def read_partitions(broker, req, version: int) -> tuple[list[dict], int, bool]:
    """One pass over the requested partitions: (responses, bytes read, any error)."""
    rm = broker.replica_manager
    limit = min(req.max_bytes, broker.config.fetch_max_bytes)
    is_follower = req.replica_id >= 0
    total = 0
    any_error = False
    responses = []
    for t in req.topics:
        code, topic = _resolve(broker, version, t)
        parts = []
        for p in t.partitions:
            entry = {"partition_index": p.partition, "records": b""}
            part = rm.get(topic.name, p.partition) if topic is not None else None
            if part is None:
                entry.update(error_code=code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, high_watermark=-1)
                any_error = True
                parts.append(entry)
                continue
            lg = part.log
            entry.update(high_watermark=lg.high_watermark, last_stable_offset=lg.high_watermark,
                         log_start_offset=lg.log_start_offset)
            err = check_leader_epoch(part, p.current_leader_epoch)
            if err:
                entry["error_code"] = err
                any_error = True
                parts.append(entry)
                continue
            max_offset = lg.log_end_offset if is_follower else lg.high_watermark
            try:
                data = lg.read(
                    p.fetch_offset,
                    min(p.partition_max_bytes, max(limit - total, 0)),
                    max_offset=max_offset,
                    min_one_batch=total == 0,
                )
            except OffsetOutOfRangeError:
                entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                any_error = True
                parts.append(entry)
                continue
            if data.size:
                entry["records"] = data.chunks  # stored batches, sent by reference
                total += data.size
            entry["error_code"] = 0
            parts.append(entry)
        responses.append({"topic": t.topic if version < 13 else "", "topic_id": t.topic_id, "partitions": parts})
    return responses, total, any_error


@handles(ApiKey.FETCH)
async def handle_fetch(broker, ctx, req) -> dict:
    version = ctx.api_version
    deadline = trio.current_time() + max(req.max_wait_ms, 0) / 1000
    rm = broker.replica_manager
    while True:
        responses, total, any_error = read_partitions(broker, req, version)
        if total >= req.min_bytes or any_error or trio.current_time() >= deadline:
            break
        with trio.move_on_at(deadline):
            await rm.wait_for_append()
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": responses}
