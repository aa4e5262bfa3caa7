"""DescribeQuorum (55) and UnregisterBroker (64): the KRaft controller's quorum and broker registrations, as a
cluster with a single controller answers them.

Kafka 4 brokers forward both to the controller (``ControllerApis``); here every broker answers from the shared
cluster metadata, which plays the controller.  Deliberate differences, since minikafka has no metadata quorum:

* DescribeQuorum describes a notional ``__cluster_metadata``-0 log (Kafka's ``KafkaRaftClient`` answer for a
  single-voter quorum): the one voter and leader is the controller Metadata names (the lowest running broker),
  the observers are the other running brokers.  The log's end offset and high watermark count the changes the
  controller made (topics, partitions, configs, leaders, ISRs, broker registrations; see
  :attr:`~minikafka.broker.metadata.ClusterMetadata.metadata_offset`): every broker sees each change at once,
  so every replica is at that offset and caught up now.  The leader epoch goes up each time another broker
  becomes the controller.  Replica directory ids are zero (Kafka's for a quorum of static voters), and the
  voter's listeners (v2 ``nodes``) are its broker listeners: there is no separate controller listener.
* UnregisterBroker removes a broker's registration
  (:meth:`~minikafka.broker.metadata.ClusterMetadata.unregister_broker`):
  new replicas are no longer placed on it; a running broker is fenced (its partitions' leadership and ISR
  membership move off it) until it restarts and registers again, as a Kafka broker's heartbeats fail after it.

ACLs (Kafka's ``authorizeClusterOperation``): DESCRIBE on the cluster for DescribeQuorum, ALTER on the cluster
for UnregisterBroker (else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import Clock
from ...protocol.errors import ErrorCode
from ...protocol.types import ZERO_UUID
from ..metadata import MetadataError
from ..request import RequestContext
from ..services import Authorizer, MetadataQuorum
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0


class DescribeQuorumHandler:
    def __init__(self, quorum: MetadataQuorum, clock: Clock, authorizer: Authorizer | None = None) -> None:
        self.quorum = quorum
        self.clock = clock
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeQuorumRequestBody) -> B.DescribeQuorumResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE):
            return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": "Cluster authorization failed.", "topics": []}
        topics = req["topics"]
        if not (len(topics) == 1 and topics[0]["topic_name"] == METADATA_TOPIC and len(topics[0]["partitions"]) == 1
                and topics[0]["partitions"][0]["partition_index"] == METADATA_PARTITION):
            # KafkaRaftClient: a request for anything but the metadata partition.
            return {"error_code": ErrorCode.NONE, "error_message": None, "topics": [
                {"topic_name": t["topic_name"], "partitions": [
                    {"partition_index": p["partition_index"], "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     "error_message": "This server does not host this topic-partition."} for p in t["partitions"]]}
                for t in topics]}
        now = self.clock.time_ms()
        offset = self.quorum.metadata_offset
        leader = self.quorum.controller_id()

        def replica(node_id: int) -> B.DescribeQuorumResponseTopicsPartitionsCurrentVoters:
            return {"replica_id": node_id, "replica_directory_id": ZERO_UUID, "log_end_offset": offset,
                    "last_fetch_timestamp": now, "last_caught_up_timestamp": now}

        observers = [b.node_id for b in self.quorum.alive_brokers() if b.node_id != leader]
        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "topics": [{"topic_name": METADATA_TOPIC, "partitions": [{
                "partition_index": METADATA_PARTITION,
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "leader_id": leader,
                "leader_epoch": self.quorum.controller_epoch,
                "high_watermark": offset,
                "current_voters": [replica(leader)],
                "observers": [replica(b) for b in observers],
            }]}],
            "nodes": [{"node_id": leader, "listeners": [
                {"name": name, "host": node.host, "port": node.port}
                for name, node in sorted(self.quorum.broker_endpoints(leader).items())]}],
        }


class UnregisterBrokerHandler:
    def __init__(self, quorum: MetadataQuorum, authorizer: Authorizer | None = None) -> None:
        self.quorum = quorum
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.UnregisterBrokerRequestBody
                     ) -> B.UnregisterBrokerResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.ALTER):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
        try:
            self.quorum.unregister_broker(req["broker_id"])
        except MetadataError as exc:
            # Kafka answers the error code alone.
            return {"throttle_time_ms": 0, "error_code": exc.code, "error_message": None}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None}
