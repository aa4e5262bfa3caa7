"""ListOffsets (2) and OffsetForLeaderEpoch (23)."""

from __future__ import annotations

from ...protocol.api import ApiKey
from ..apis import handles
from .common import leader_partition

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def _lookup(part, timestamp: int, isolation_level: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one ListOffsets query, Kafka's fetchOffsetForTimestamp."""
    lg = part.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, lg.log_start_offset, part.leader_epoch
    if timestamp in (LATEST, LATEST_TIERED):
        return -1, lg.high_watermark, part.leader_epoch
    if timestamp == MAX_TIMESTAMP:
        ts, off = lg.max_timestamp_and_offset()
        return (ts, off, part.leader_epoch) if off >= 0 else (-1, -1, -1)
    found = lg.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts, epoch = found
    return ts, offset, epoch


@handles(ApiKey.LIST_OFFSETS)
async def handle_list_offsets(broker, ctx, req) -> dict:
    version = ctx.api_version
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = {"partition_index": p.partition_index, "error_code": 0}
            part, err = leader_partition(broker, t.name, p.partition_index, p.current_leader_epoch)
            if err:
                entry["error_code"] = err
            else:
                ts, offset, epoch = _lookup(part, p.timestamp, req.isolation_level)
                if version == 0:
                    entry["old_style_offsets"] = [offset] if offset >= 0 else []
                entry.update(timestamp=ts, offset=offset, leader_epoch=epoch)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
async def handle_offset_for_leader_epoch(broker, ctx, req) -> dict:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            entry = {"partition": p.partition, "error_code": 0}
            part, err = leader_partition(broker, t.topic, p.partition, p.current_leader_epoch)
            if err:
                entry["error_code"] = err
            else:
                epoch, end = part.log.end_offset_for_epoch(p.leader_epoch)
                entry.update(leader_epoch=epoch, end_offset=end)
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
