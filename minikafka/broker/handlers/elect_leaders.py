"""ElectLeaders (43, KIP-183, KIP-460): preferred and unclean leader elections, on the controller.

Kafka 4 forwards ElectLeaders to the controller (``ControllerApis.handleElectLeaders``,
``ReplicationControlManager.electLeaders``); here every broker answers from the shared cluster metadata,
which plays the controller (:meth:`~minikafka.broker.metadata.ClusterMetadata.elect_leaders`: a new leader
comes with leader epoch + 1 and every broker follows it; a request's elections are persisted and announced
once).

ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED on the top level and every partition named).  An
election type other than 0 (preferred) or 1 (unclean) makes the request INVALID_REQUEST.  Null
``topic_partitions`` elects for every partition of every topic: each topic is answered, its partitions that
need no election (ELECTION_NOT_NEEDED) left out.  The request's timeout is not waited on: elections take
effect at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..request import RequestContext
from ..services import Authorizer, LeaderElection, MetadataCache
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

PREFERRED, UNCLEAN = 0, 1  # Kafka's ElectionType


class ElectLeadersHandler:
    def __init__(self, election: LeaderElection, metadata: MetadataCache, authorizer: Authorizer | None = None) -> None:
        self.election = election
        self.metadata = metadata
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.ElectLeadersRequestBody) -> B.ElectLeadersResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.ALTER):
            return error_response(ctx.api_key, ctx.api_version, req,  # type: ignore[return-value]
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        election_type = req["election_type"] if ctx.api_version >= 1 else PREFERRED
        if election_type not in (PREFERRED, UNCLEAN):  # Kafka: InvalidRequestException("Unknown election type")
            return error_response(ctx.api_key, ctx.api_version, req,  # type: ignore[return-value]
                                  ErrorCode.INVALID_REQUEST)
        unclean = election_type == UNCLEAN
        # One batch for the whole request: the metadata is persisted and announced once, not per partition.
        named = req["topic_partitions"]
        every = named is None
        if named is None:
            wanted = [(topic.name, [p.partition for p in topic.partitions])
                      for topic in sorted(self.metadata.all_topics(), key=lambda t: t.name)]
        else:
            wanted = [(t["topic"], list(t["partitions"])) for t in named]
        outcomes = iter(self.election.elect_leaders([(name, i) for name, indexes in wanted for i in indexes], unclean))
        results: list[B.ElectLeadersResponseReplicaElectionResults] = []
        for name, indexes in wanted:
            partitions: list[B.ElectLeadersResponseReplicaElectionResultsPartitionResult] = []
            for index in indexes:
                code, message = next(outcomes)
                if not (every and code == ErrorCode.ELECTION_NOT_NEEDED):
                    partitions.append({"partition_id": index, "error_code": code, "error_message": message})
            results.append({"topic": name, "partition_result": partitions})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "replica_election_results": results}
