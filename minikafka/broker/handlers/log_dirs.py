"""DescribeLogDirs (35) and AlterReplicaLogDirs (34): the broker's log directories (KIP-113).

As Kafka's ``KafkaApis``: DescribeLogDirs needs DESCRIBE on the cluster (otherwise no directories and, from
v3, CLUSTER_AUTHORIZATION_FAILED at the top level); topics null describes every partition.
AlterReplicaLogDirs needs ALTER on the cluster (otherwise CLUSTER_AUTHORIZATION_FAILED on every partition);
a partition named under several directories goes to the last one.  The work is the broker's
:class:`~minikafka.broker.services.LogDirs` (see :mod:`minikafka.broker.replica_alter_log_dirs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import TopicPartition
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..request import RequestContext
from ..services import Authorizer, LogDirs
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B


class DescribeLogDirsHandler:
    def __init__(self, log_dirs: LogDirs, authorizer: Authorizer | None = None) -> None:
        self.log_dirs = log_dirs
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeLogDirsRequestBody) -> B.DescribeLogDirsResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
        topics = req["topics"]
        wanted = None if topics is None else {TopicPartition(t["topic"], p) for t in topics for p in t["partitions"]}
        results: list[B.DescribeLogDirsResponseResults] = []
        for d in self.log_dirs.describe_log_dirs(wanted):
            results.append({
                "error_code": d.error, "log_dir": d.path, "total_bytes": d.total_bytes,
                "usable_bytes": d.usable_bytes,
                "topics": [{"name": name, "partitions": [
                    {"partition_index": r.partition, "partition_size": r.size, "offset_lag": r.offset_lag,
                     "is_future_key": r.is_future} for r in replicas]}
                    for name, replicas in d.topics.items() if replicas],
            })
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


class AlterReplicaLogDirsHandler:
    def __init__(self, log_dirs: LogDirs, authorizer: Authorizer | None = None) -> None:
        self.log_dirs = log_dirs
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.AlterReplicaLogDirsRequestBody
                     ) -> B.AlterReplicaLogDirsResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.ALTER):
            return error_response(ApiKey.ALTER_REPLICA_LOG_DIRS, ctx.api_version, req,  # type: ignore[return-value]
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        dirs: dict[TopicPartition, str] = {}
        for d in req["dirs"]:
            for t in d["topics"]:
                for p in t["partitions"]:
                    dirs[TopicPartition(t["name"], p)] = d["path"]
        by_topic: dict[str, list[B.AlterReplicaLogDirsResponseResultsPartitions]] = {}
        for tp, code in self.log_dirs.alter_replica_log_dirs(dirs).items():
            by_topic.setdefault(tp.topic, []).append({"partition_index": tp.partition, "error_code": code})
        return {"throttle_time_ms": 0,
                "results": [{"topic_name": name, "partitions": parts} for name, parts in by_topic.items()]}
