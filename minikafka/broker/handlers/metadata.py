"""Metadata (3) and DescribeCluster (60): brokers, cluster id, controller, topic/partition leadership.

With an authorizer (Kafka's ``handleTopicMetadataRequest``): topics the principal may not DESCRIBE are left
out of an all-topics listing and answered TOPIC_AUTHORIZATION_FAILED when named (by name or, v10+, by id),
whether they exist or not; a missing topic is auto-created only with CREATE on the cluster or on the topic
(else TOPIC_AUTHORIZATION_FAILED); the authorized-operations fields report what the principal may do
(cluster operations only with DESCRIBE on the cluster, else 0).

Versions: topics can be asked for by id from v12 (a null name or a topic id before v12 is an
INVALID_REQUEST, as Kafka's ``handleTopicMetadataRequest`` refuses them); v13 (KIP-1102) has a top-level
``error_code``: 0 in an answer, the request's error when the whole request fails (Kafka's
``MetadataRequest.getErrorResponse``, see :mod:`minikafka.broker.error_responses`), e.g. REBOOTSTRAP_REQUIRED
injected to make clients rebootstrap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import TopicMetadata
from ...protocol.errors import ErrorCode
from ...protocol.types import ZERO_UUID
from ..config import BrokerConfig
from ..error_responses import KafkaError
from ..metadata import MetadataError, validate_topic_name
from ..request import RequestContext
from ..services import Authorizer, MetadataCache, TopicLookup
from .authorization import (CLUSTER_NAME, AclOperation, ResourceType, authorize, authorized_operations,
                            creatable_topics, filter_authorized)
from .common import UNREQUESTED_OPERATIONS

if TYPE_CHECKING:
    from ...protocol import bodies as B


_NAME_CHECKS: dict[str, int] = {}  # topic name -> its validation's error code (0: legal), as met (bounded)


def name_error(name: str) -> int:
    """The error code Kafka's ``Topic.validate`` answers for ``name`` (0 for a legal name), remembered: a client
    asks for the same few topics over and over."""
    code = _NAME_CHECKS.get(name)
    if code is None:
        try:
            validate_topic_name(name)
            code = 0
        except MetadataError as exc:
            code = exc.code
        if len(_NAME_CHECKS) >= 4096:
            _NAME_CHECKS.clear()
        _NAME_CHECKS[name] = code
    return code


def cluster_operations(authorizer: Authorizer | None, ctx: RequestContext, requested: bool) -> int:
    """``cluster_authorized_operations``: unrequested, 0 without DESCRIBE on the cluster, else the bits."""
    if not requested:
        return UNREQUESTED_OPERATIONS
    if not authorize(authorizer, ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(authorizer, ctx, ResourceType.CLUSTER, CLUSTER_NAME)


def topic_entry(topic: TopicMetadata, ops: int, live: set[int]) -> B.MetadataResponseTopics:
    """A topic's metadata; ``ops`` its authorized-operations bits (or UNREQUESTED_OPERATIONS)."""
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
        "topic_authorized_operations": ops,
    }


class MetadataHandler:
    def __init__(self, metadata: MetadataCache, topics: TopicLookup, config: BrokerConfig,
                 authorizer: Authorizer | None = None) -> None:
        self.metadata = metadata
        self.topics = topics
        self.config = config
        self.authorizer = authorizer

    def _ops(self, ctx: RequestContext, include_ops: bool, name: str) -> int:
        if not include_ops:
            return UNREQUESTED_OPERATIONS
        return authorized_operations(self.authorizer, ctx, ResourceType.TOPIC, name)

    def _denied(self, ctx: RequestContext, names: set[str], auto_create: bool) -> set[str]:
        """Named topics to answer TOPIC_AUTHORIZATION_FAILED: those without DESCRIBE, and missing ones
        that would be auto-created without CREATE on the cluster or the topic."""
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        denied = names - allowed
        if auto_create and self.config.auto_create_topics_enable:
            missing = [n for n in allowed if self.metadata.get_topic(n) is None]
            if missing:
                denied.update(set(missing) - creatable_topics(self.authorizer, ctx, missing))
        return denied

    async def handle(self, ctx: RequestContext, req: B.MetadataRequestBody) -> B.MetadataResponseBody:
        version = ctx.api_version
        include_ops = bool(req["include_topic_authorized_operations"])
        requested = req["topics"]
        # v0: empty list = all topics; v1+: null = all topics.
        all_topics = requested is None or (version == 0 and not requested)
        if not all_topics and version < 12:
            for t in requested or []:
                if t["name"] is None or t["topic_id"] != ZERO_UUID:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Topic IDs are not supported in requests for version {version}")
        auto_create = req["allow_auto_topic_creation"] if version >= 4 else True
        brokers = self.metadata.alive_brokers(ctx.listener)
        live = {b.node_id for b in brokers}
        topics: list[B.MetadataResponseTopics] = []
        if all_topics:
            listed = list(self.metadata.all_topics())
            if self.authorizer is not None:
                visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            (t.name for t in listed), log_if_denied=False)
                listed = [t for t in listed if t.name in visible]
            topics = [topic_entry(t, self._ops(ctx, include_ops, t.name), live) for t in listed]
        else:
            invalid: dict[str, int] = {}
            for t in requested or []:
                if t["name"] is not None and (code := name_error(t["name"])):
                    invalid[t["name"]] = code
            denied: set[str] = set()
            if self.authorizer is not None:
                denied = self._denied(ctx, {t["name"] for t in requested or [] if t["name"] is not None},
                                      auto_create)
            found = self.topics.lookup_many((t["name"] for t in requested or [] if t["name"] is not None
                                             and t["name"] not in invalid and t["name"] not in denied), auto_create)
            for t in requested or []:
                name = t["name"]
                if name is None:  # v10+: by topic id
                    topic = self.metadata.get_topic_by_id(t["topic_id"])
                    if topic is None:
                        # The response's name is nullable from v12 only.
                        topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID,
                                       "name": None if version >= 12 else "", "topic_id": t["topic_id"]})
                    elif not authorize(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name):
                        # Topic ids are not secret: the id is answered, the name is not.
                        topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       "name": None if version >= 12 else "", "topic_id": t["topic_id"]})
                    else:
                        topics.append(topic_entry(topic, self._ops(ctx, include_ops, topic.name), live))
                    continue
                if name in denied:
                    topics.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                   "is_internal": False})
                    continue
                if name in invalid:
                    topics.append({"error_code": invalid[name], "name": name, "is_internal": False})
                    continue
                code, topic = found[name]
                if topic is None:
                    topics.append({"error_code": code, "name": name})
                else:
                    topics.append(topic_entry(topic, self._ops(ctx, include_ops, name), live))
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in brokers],
            "cluster_id": self.config.cluster_id,
            "controller_id": self.metadata.controller_id(),
            "topics": topics,
            "cluster_authorized_operations": cluster_operations(
                self.authorizer, ctx, version <= 10 and req["include_cluster_authorized_operations"]),
            "error_code": ErrorCode.NONE,
        }


class DescribeClusterHandler:
    """Kafka's ``handleDescribeCluster``: no authorization of its own; the cluster's authorized operations
    need DESCRIBE on the cluster (0 without it).  v2 (KIP-1073) can add the registered brokers that are not
    running, which a KRaft controller has fenced, at their last address with ``is_fenced``."""

    def __init__(self, metadata: MetadataCache, config: BrokerConfig, authorizer: Authorizer | None = None) -> None:
        self.metadata = metadata
        self.config = config
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeClusterRequestBody) -> B.DescribeClusterResponseBody:
        brokers: list[B.DescribeClusterResponseBrokers] = [
            {"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "is_fenced": False}
            for b in self.metadata.alive_brokers(ctx.listener)]
        if ctx.api_version >= 2 and req["include_fenced_brokers"]:  # KIP-1073: stopped brokers, fenced
            brokers += [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "is_fenced": True}
                        for b in self.metadata.fenced_brokers(ctx.listener)]
            brokers.sort(key=lambda b: b["broker_id"])
        return {
            "throttle_time_ms": 0,
            "error_code": 0,
            "endpoint_type": req["endpoint_type"] if ctx.api_version >= 1 else 1,
            "cluster_id": self.config.cluster_id,
            "controller_id": self.metadata.controller_id(),
            "brokers": brokers,
            "cluster_authorized_operations": cluster_operations(
                self.authorizer, ctx, req["include_cluster_authorized_operations"]),
        }
