"""Metadata (3): brokers, cluster id, controller and topic/partition leadership."""

from __future__ import annotations

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from ..metadata import MetadataError, TopicMetadata, validate_topic_name
from .common import ALL_CLUSTER_OPERATIONS, ALL_TOPIC_OPERATIONS, UNREQUESTED_OPERATIONS, lookup_topic


def topic_entry(topic: TopicMetadata, include_ops: bool, live: set[int] | None = None) -> dict:
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
                "offline_replicas": [] if live is None else [b for b in p.replicas if b not in live],
            }
            for p in topic.partitions
        ],
        "topic_authorized_operations": ALL_TOPIC_OPERATIONS if include_ops else UNREQUESTED_OPERATIONS,
    }


@handles(ApiKey.METADATA)
async def handle_metadata(broker, ctx, req) -> dict:
    version = ctx.api_version
    include_ops = bool(req.include_topic_authorized_operations)
    # v0: empty list = all topics; v1+: null = all topics.
    all_topics = req.topics is None or (version == 0 and not req.topics)
    auto_create = req.allow_auto_topic_creation if version >= 4 else True
    topics = []
    live = set(broker.metadata.live) if broker.cluster is not None and broker.metadata.live else None
    if all_topics:
        topics = [topic_entry(t, include_ops, live) for t in broker.metadata.topics.values()]
    else:
        for t in req.topics:
            name = t.name
            if name is None:  # v10+: by topic id
                topic = broker.metadata.get_topic_by_id(t.topic_id)
                if topic is None:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None, "topic_id": t.topic_id})
                else:
                    topics.append(topic_entry(topic, include_ops, live))
                continue
            try:
                validate_topic_name(name)
            except MetadataError as exc:
                topics.append({"error_code": exc.code, "name": name, "is_internal": False})
                continue
            code, topic = lookup_topic(broker, name, auto_create)
            if topic is None:
                topics.append({"error_code": code, "name": name})
            else:
                topics.append(topic_entry(topic, include_ops, live))
    return {
        "throttle_time_ms": 0,
        "brokers": [
            {"node_id": nid, "host": host, "port": port, "rack": rack} for nid, host, port, rack in broker.brokers()
        ],
        "cluster_id": broker.config.cluster_id,
        "controller_id": broker.controller_id(),
        "topics": topics,
        "cluster_authorized_operations": (
            ALL_CLUSTER_OPERATIONS if req.include_cluster_authorized_operations else UNREQUESTED_OPERATIONS
        ),
    }
