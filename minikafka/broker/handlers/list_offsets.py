"""ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21): offsets of a leader's log.

ListOffsets answers Kafka's special timestamps as Kafka 4.2 answers them for a topic without tiered storage
(``UnifiedLog.fetchOffsetByTimestamp``): -2 (earliest) and -4 (earliest local, v8+: without tiered storage
the whole log is local) the log start offset, with the epoch of the leader epoch cache's first entry;
-1 (latest) the high watermark (the last stable offset for read_committed) with the leader epoch; -3
(v7+) the record with the largest timestamp; -5 (latest tiered, v9+) and -6 (earliest pending upload,
v11+) no offset: offset, timestamp and leader epoch -1, and no error.  A special timestamp sent at a
version older than its own, or a negative timestamp that is none of them, is answered UNSUPPORTED_VERSION
(``ReplicaManager.isListOffsetsTimestampUnsupported``).  v10's ``timeout_ms`` bounds lookups in remote
storage, which minikafka does not have: it is read and not needed.

With an authorizer (as Kafka): ListOffsets needs DESCRIBE on the topic; OffsetForLeaderEpoch CLUSTER_ACTION
on the cluster (followers) or DESCRIBE on the topic (consumers, KIP-320); DeleteRecords DELETE on the
topic.  A topic that is not authorized gets TOPIC_AUTHORIZATION_FAILED on each of its partitions, whether
it exists or not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..log import OffsetOutOfRangeError
from ..partition import Partition
from ..request import RequestContext
from ..services import Authorizer, PartitionLookup, RecordsDeleter
from .authorization import AclOperation, ResourceType, authorize, filter_authorized
from .common import leader_partition

if TYPE_CHECKING:
    from ...protocol import bodies as B

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

#: The first ListOffsets version of each special timestamp (Kafka's ``timestampMinSupportedVersion``).
TIMESTAMP_MIN_VERSION = {EARLIEST: 0, LATEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                         EARLIEST_PENDING_UPLOAD: 11}


def timestamp_unsupported(timestamp: int, version: int) -> bool:
    """Kafka's ``isListOffsetsTimestampUnsupported``: a negative timestamp that is no special timestamp of
    ``version`` (UNSUPPORTED_VERSION)."""
    return timestamp < 0 and version < TIMESTAMP_MIN_VERSION.get(timestamp, 1 << 15)


def lookup_offset(part: Partition, timestamp: int, isolation_level: int) -> tuple[int, int, int]:
    """(timestamp, offset, leader_epoch) for one ListOffsets query, Kafka's fetchOffsetForTimestamp."""
    lg = part.log
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return -1, lg.log_start_offset, earliest_epoch(part)
    if timestamp == LATEST:  # read_committed (isolation 1) sees up to the LSO
        return -1, part.last_stable_offset if isolation_level == 1 else lg.high_watermark, part.leader_epoch
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # nothing is (or waits to be) in tiered storage
        return -1, -1, -1
    if timestamp == MAX_TIMESTAMP:
        ts, off = lg.max_timestamp_and_offset()
        return (ts, off, part.leader_epoch) if off >= 0 else (-1, -1, -1)
    found = lg.offset_for_timestamp(timestamp)
    if found is None:
        return -1, -1, -1
    offset, ts, epoch = found
    return ts, offset, epoch


def earliest_epoch(part: Partition) -> int:
    """The leader epoch of the log start offset: the epoch cache's first entry when it starts at or before the
    log start offset, else unknown (-1), as ``UnifiedLog.fetchOffsetByTimestamp`` reads it for -2 and -4."""
    cache = part.log.epoch_cache
    if cache.epochs and cache.start_offsets[0] <= part.log.log_start_offset:
        return cache.epochs[0]
    return -1


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
                if timestamp_unsupported(p["timestamp"], version):
                    entry.update({"error_code": ErrorCode.UNSUPPORTED_VERSION, "timestamp": -1, "offset": -1})
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
