"""Metadata (3) and DescribeCluster (60): brokers, cluster id, controller, topic/partition leadership."""

from __future__ import annotations

from ...common import TopicMetadata
from ...protocol import bodies as B
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..metadata import MetadataError, validate_topic_name
from ..request import RequestContext
from ..services import MetadataCache, TopicLookup
from .common import ALL_CLUSTER_OPERATIONS, ALL_TOPIC_OPERATIONS, UNREQUESTED_OPERATIONS


def topic_entry(topic: TopicMetadata, include_ops: bool, live: set[int]) -> B.MetadataResponseTopics:
    return {
        "error_code": 0,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [
            {
                "error_code": ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0,
                "partition_index": p.partition,
                "leader_id": p.leader,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": p.replicas,
                "isr_nodes": p.isr,
                "offline_replicas": [b for b in p.replicas if b not in live],
            }
            for p in topic.partitions
        ],
        "topic_authorized_operations": ALL_TOPIC_OPERATIONS if include_ops else UNREQUESTED_OPERATIONS,
    }


class MetadataHandler:
    def __init__(self, metadata: MetadataCache, topics: TopicLookup, config: BrokerConfig) -> None:
        self.metadata = metadata
        self.topics = topics
        self.config = config

    async def handle(self, ctx: RequestContext, req: B.MetadataRequestBody) -> B.MetadataResponseBody:
        version = ctx.api_version
        include_ops = bool(req["include_topic_authorized_operations"])
        requested = req["topics"]
        # v0: empty list = all topics; v1+: null = all topics.
        all_topics = requested is None or (version == 0 and not requested)
        auto_create = req["allow_auto_topic_creation"] if version >= 4 else True
        brokers = self.metadata.alive_brokers()
        live = {b.node_id for b in brokers}
        topics: list[B.MetadataResponseTopics] = []
        if all_topics:
            topics = [topic_entry(t, include_ops, live) for t in self.metadata.all_topics()]
        else:
            invalid: dict[str, int] = {}
            for t in requested or []:
                if t["name"] is not None:
                    try:
                        validate_topic_name(t["name"])
                    except MetadataError as exc:
                        invalid[t["name"]] = exc.code
            found = self.topics.lookup_many((t["name"] for t in requested or []
                                             if t["name"] is not None and t["name"] not in invalid), auto_create)
            for t in requested or []:
                name = t["name"]
                if name is None:  # v10+: by topic id
                    topic = self.metadata.get_topic_by_id(t["topic_id"])
                    if topic is None:
                        # The response's name is nullable from v12 only.
                        topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                                       "name": None if version >= 12 else "", "topic_id": t["topic_id"]})
                    else:
                        topics.append(topic_entry(topic, include_ops, live))
                    continue
                if name in invalid:
                    topics.append({"error_code": invalid[name], "name": name, "is_internal": False})
                    continue
                code, topic = found[name]
                if topic is None:
                    topics.append({"error_code": code, "name": name})
                else:
                    topics.append(topic_entry(topic, include_ops, live))
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in brokers],
            "cluster_id": self.config.cluster_id,
            "controller_id": self.metadata.controller_id(),
            "topics": topics,
            "cluster_authorized_operations": (
                ALL_CLUSTER_OPERATIONS if req["include_cluster_authorized_operations"] else UNREQUESTED_OPERATIONS
            ),
        }


class DescribeClusterHandler:
    def __init__(self, metadata: MetadataCache, config: BrokerConfig) -> None:
        self.metadata = metadata
        self.config = config

    async def handle(self, ctx: RequestContext, req: B.DescribeClusterRequestBody) -> B.DescribeClusterResponseBody:
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "endpoint_type": req["endpoint_type"] if ctx.api_version >= 1 else 1,
            "cluster_id": self.config.cluster_id,
            "controller_id": self.metadata.controller_id(),
            "brokers": [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                        for b in self.metadata.alive_brokers()],
            "cluster_authorized_operations": (
                ALL_CLUSTER_OPERATIONS if req["include_cluster_authorized_operations"] else UNREQUESTED_OPERATIONS
            ),
        }
