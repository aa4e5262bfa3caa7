"""AlterPartitionReassignments (45) and ListPartitionReassignments (46): KIP-455 partition reassignment.

Kafka's brokers forward both to the controller (``ControllerApis``), which checks ALTER (alter) or DESCRIBE
(list) on the CLUSTER resource and answers from ``ReplicationControlManager``; here every broker answers from
the shared :class:`~minikafka.broker.metadata.ClusterMetadata`.  Without the ACL the request is answered as
Kafka's ``getErrorResponse`` answers a ``ClusterAuthorizationException``: CLUSTER_AUTHORIZATION_FAILED at the
top level and, for Alter, on every partition named.

Alter v1 (KIP-860) carries ``allow_replication_factor_change``: false refuses, with INVALID_REPLICATION_FACTOR,
a target whose size differs from the partition's replication factor; the response echoes the flag.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..request import RequestContext
from ..services import Authorizer, PartitionReassignments
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B


class AlterPartitionReassignmentsHandler:
    """Kafka's ``ControllerApis.handleAlterPartitionReassignments``: ALTER on the cluster, then each
    partition's change (a target replica list, or null to cancel) on its own."""

    def __init__(self, reassignments: PartitionReassignments, authorizer: Authorizer | None = None) -> None:
        self.reassignments = reassignments
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.AlterPartitionReassignmentsRequestBody
                     ) -> B.AlterPartitionReassignmentsResponseBody:
        allow_rf_change = req["allow_replication_factor_change"] if ctx.api_version >= 1 else True
        if not authorize(self.authorizer, ctx, AclOperation.ALTER):
            return cast("B.AlterPartitionReassignmentsResponseBody", error_response(
                ApiKey.ALTER_PARTITION_REASSIGNMENTS, ctx.api_version, req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        changes = [(t["name"], p["partition_index"], None if p["replicas"] is None else list(p["replicas"]))
                   for t in req["topics"] for p in t["partitions"]]
        results = iter(self.reassignments.alter_partition_reassignments(changes, allow_rf_change))
        responses: list[B.AlterPartitionReassignmentsResponseResponses] = []
        for t in req["topics"]:
            partitions: list[B.AlterPartitionReassignmentsResponseResponsesPartitions] = []
            for p in t["partitions"]:
                code, message = next(results)
                partitions.append({"partition_index": p["partition_index"], "error_code": code,
                                   "error_message": message})
            responses.append({"name": t["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "allow_replication_factor_change": allow_rf_change, "error_code": 0,
                "error_message": None, "responses": responses}


class ListPartitionReassignmentsHandler:
    """Kafka's ``ControllerApis.handleListPartitionReassignments``: DESCRIBE on the cluster, then the ongoing
    reassignments of the partitions named (every one when ``topics`` is null)."""

    def __init__(self, reassignments: PartitionReassignments, authorizer: Authorizer | None = None) -> None:
        self.reassignments = reassignments
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.ListPartitionReassignmentsRequestBody
                     ) -> B.ListPartitionReassignmentsResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE):
            return cast("B.ListPartitionReassignmentsResponseBody", error_response(
                ApiKey.LIST_PARTITION_REASSIGNMENTS, ctx.api_version, req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
        wanted = None if req["topics"] is None else {t["name"]: list(t["partition_indexes"]) for t in req["topics"]}
        topics: list[B.ListPartitionReassignmentsResponseTopics] = [
            {"name": name, "partitions": [
                {"partition_index": pm.partition, "replicas": list(pm.replicas),
                 "adding_replicas": list(pm.adding_replicas), "removing_replicas": list(pm.removing_replicas)}
                for pm in parts]}
            for name, parts in self.reassignments.list_partition_reassignments(wanted)]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "topics": topics}
