"""ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21): offsets of a leader's log.

With an authorizer (as Kafka): ListOffsets needs DESCRIBE on the topic; OffsetForLeaderEpoch CLUSTER_ACTION
on the cluster (followers) or DESCRIBE on the topic (consumers, KIP-320); DeleteRecords DELETE on the
topic.  A topic that is not authorized gets TOPIC_AUTHORIZATION_FAILED on each of its partitions, whether
it exists or not.
"""

from __future__ import annotations

from ...protocol import bodies as B
from ...protocol.errors import ErrorCode
from ..log import OffsetOutOfRangeError
from ..partition import Partition
from ..request import RequestContext
from ..services import Authorizer, PartitionLookup, RecordsDeleter
from .authorization import AclOperation, ResourceType, authorize, filter_authorized
from .common import leader_partition

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5


def lookup_offset(part: Partition, timestamp: int, isolation_level: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one ListOffsets query, Kafka's fetchOffsetForTimestamp."""
    lg = part.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, lg.log_start_offset, part.leader_epoch
    if timestamp in (LATEST, LATEST_TIERED):  # read_committed (isolation 1) sees up to the LSO
        return -1, part.last_stable_offset if isolation_level == 1 else lg.high_watermark, part.leader_epoch
    if timestamp == MAX_TIMESTAMP:
        ts, off = lg.max_timestamp_and_offset()
        return (ts, off, part.leader_epoch) if off >= 0 else (-1, -1, -1)
    found = lg.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts, epoch = found
    return ts, offset, epoch


class ListOffsetsHandler:
    def __init__(self, partitions: PartitionLookup, authorizer: Authorizer | None = None) -> None:
        self.partitions = partitions
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.ListOffsetsRequestBody) -> B.ListOffsetsResponseBody:
        version = ctx.api_version
        topics: list[B.ListOffsetsResponseTopics] = []
        allowed = None if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t["name"] for t in req["topics"]))
        for t in req["topics"]:
            parts: list[B.ListOffsetsResponseTopicsPartitions] = []
            for p in t["partitions"]:
                entry: B.ListOffsetsResponseTopicsPartitions = {"partition_index": p["partition_index"],
                                                                "error_code": 0}
                if allowed is not None and t["name"] not in allowed:
                    entry.update({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "timestamp": -1, "offset": -1})
                    parts.append(entry)
                    continue
                part, err = leader_partition(self.partitions, t["name"], p["partition_index"],
                                             p["current_leader_epoch"])
                if part is None:
                    entry["error_code"] = err
                else:
                    ts, offset, epoch = lookup_offset(part, p["timestamp"], req["isolation_level"])
                    if version == 0:
                        entry["old_style_offsets"] = [offset] if offset >= 0 else []
                    entry.update({"timestamp": ts, "offset": offset, "leader_epoch": epoch})
                parts.append(entry)
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}


class OffsetForLeaderEpochHandler:
    def __init__(self, partitions: PartitionLookup, authorizer: Authorizer | None = None) -> None:
        self.partitions = partitions
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.OffsetForLeaderEpochRequestBody
                     ) -> B.OffsetForLeaderEpochResponseBody:
        topics: list[B.OffsetForLeaderEpochResponseTopics] = []
        allowed = None
        if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.CLUSTER_ACTION,
                                                         log_if_denied=False):
            allowed = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        (t["topic"] for t in req["topics"]))
        for t in req["topics"]:
            parts: list[B.OffsetForLeaderEpochResponseTopicsPartitions] = []
            for p in t["partitions"]:
                entry: B.OffsetForLeaderEpochResponseTopicsPartitions = {"partition": p["partition"],
                                                                         "error_code": 0}
                if allowed is not None and t["topic"] not in allowed:
                    entry.update({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "leader_epoch": -1,
                                  "end_offset": -1})
                    parts.append(entry)
                    continue
                part, err = leader_partition(self.partitions, t["topic"], p["partition"], p["current_leader_epoch"])
                if part is None:
                    entry["error_code"] = err
                else:
                    epoch, end = part.log.end_offset_for_epoch(p["leader_epoch"])
                    entry.update({"leader_epoch": epoch, "end_offset": end})
                parts.append(entry)
            topics.append({"topic": t["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}


class DeleteRecordsHandler:
    def __init__(self, log: RecordsDeleter, authorizer: Authorizer | None = None) -> None:
        self.log = log
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DeleteRecordsRequestBody) -> B.DeleteRecordsResponseBody:
        topics: list[B.DeleteRecordsResponseTopics] = []
        allowed = None if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.DELETE, ResourceType.TOPIC, (t["name"] for t in req["topics"]))
        for t in req["topics"]:
            parts: list[B.DeleteRecordsResponseTopicsPartitions] = []
            for p in t["partitions"]:
                if allowed is not None and t["name"] not in allowed:
                    parts.append({"partition_index": p["partition_index"], "low_watermark": -1,
                                  "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
                    continue
                part, err = leader_partition(self.log, t["name"], p["partition_index"])
                entry: B.DeleteRecordsResponseTopicsPartitions = {
                    "partition_index": p["partition_index"], "low_watermark": -1, "error_code": err}
                if part is not None:
                    try:
                        entry["low_watermark"] = self.log.delete_records(part, p["offset"])
                    except OffsetOutOfRangeError:
                        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                parts.append(entry)
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}
