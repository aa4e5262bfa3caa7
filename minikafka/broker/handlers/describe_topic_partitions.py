"""DescribeTopicPartitions (75, KIP-966): topics and their partitions, paged by a cursor.

Kafka's ``DescribeTopicPartitionsRequestHandler`` and ``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``:
the topics named (all topics for an empty list) from the cursor's topic on, sorted by name, each from the
cursor's partition (0 for the topics after it), until ``response_partition_limit`` partitions (capped by
``max.request.partition.size.limit``, at least 1) are described.  ``next_cursor`` names the first partition
left out: inside a topic that did not fit, or partition 0 of the next topic when the limit ended exactly at
a topic's end.  A topic named that does not exist answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
for an illegal name); an all-topics listing only lists existing ones.  A cursor whose topic is not among the
topics named, or whose partition is negative, makes the request INVALID_REQUEST.

Partitions are described as Metadata describes them, without partition errors: a leader that is not running
is -1, replicas and ISR are the assigned ones, ``offline_replicas`` those on brokers not running.  Eligible
leader replicas (KIP-966's ELR) are off, as in a cluster without ``eligible.leader.replicas.version``: both
ELR lists are empty.

ACLs: DESCRIBE on each topic.  A named topic the principal may not describe is answered
TOPIC_AUTHORIZATION_FAILED (with a zero topic id, after the described topics, whether it exists or not); an
all-topics listing leaves such topics out.  ``topic_authorized_operations`` is always filled in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import TopicMetadata
from ...common.types import INTERNAL_TOPICS
from ...protocol.errors import ErrorCode
from ...protocol.types import ZERO_UUID
from ..config import BrokerConfig
from ..error_responses import error_response
from ..metadata import MetadataError, validate_topic_name
from ..request import RequestContext
from ..services import Authorizer, MetadataCache
from .authorization import AclOperation, ResourceType, authorize, authorized_operations

if TYPE_CHECKING:
    from ...protocol import bodies as B


class DescribeTopicPartitionsHandler:
    def __init__(self, metadata: MetadataCache, config: BrokerConfig, authorizer: Authorizer | None = None) -> None:
        self.metadata = metadata
        self.config = config
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeTopicPartitionsRequestBody
                     ) -> B.DescribeTopicPartitionsResponseBody:
        cursor = req["cursor"]
        cursor_topic = cursor["topic_name"] if cursor is not None else ""
        fetch_all = not req["topics"]
        candidates = ([t.name for t in self.metadata.all_topics()] if fetch_all
                      else [t["name"] for t in req["topics"]])
        names = sorted({n for n in candidates if n >= cursor_topic})
        if cursor is not None and ((not fetch_all and cursor_topic not in names) or cursor["partition_index"] < 0):
            # Kafka's InvalidRequestException: the topic list should contain the cursor topic, the cursor
            # partition must be valid.
            return error_response(ctx.api_key, ctx.api_version, req,  # type: ignore[return-value]
                                  ErrorCode.INVALID_REQUEST)
        limit = max(min(self.config.max_request_partition_size_limit, req["response_partition_limit"]), 1)
        live = {b.node_id for b in self.metadata.alive_brokers(ctx.listener)}
        topics: list[B.DescribeTopicPartitionsResponseTopics] = []
        denied: list[B.DescribeTopicPartitionsResponseTopics] = []
        next_cursor: B.DescribeTopicPartitionsResponseNextCursor | None = None
        remaining = limit
        # As Kafka's lazily filtered stream: the topics after the page's end are not authorized (nor answered
        # TOPIC_AUTHORIZATION_FAILED) in this response, but in the one their cursor leads to.
        for name in names:
            if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                if not fetch_all:  # the topic id is not disclosed to a principal that may not describe the topic
                    denied.append({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name,
                                   "topic_id": ZERO_UUID, "is_internal": False, "partitions": []})
                continue
            if remaining == 0:
                # The limit ended exactly at the previous topic's end: go on from this one (existing or not).
                next_cursor = {"topic_name": name, "partition_index": 0}
                break
            topic = self.metadata.get_topic(name)
            if topic is None:
                if not fetch_all:
                    topics.append(_missing_topic(name))
                continue
            start = cursor["partition_index"] if cursor is not None and name == cursor_topic else 0
            upper = min(topic.num_partitions, start + remaining)
            topics.append(_topic_entry(topic, range(start, upper), live))
            if upper < topic.num_partitions:
                next_cursor = {"topic_name": name, "partition_index": upper}
                break
            remaining -= max(upper - start, 0)
        for entry in topics:
            entry["topic_authorized_operations"] = authorized_operations(self.authorizer, ctx, ResourceType.TOPIC,
                                                                         entry["name"] or "")
        return {"throttle_time_ms": 0, "topics": topics + denied, "next_cursor": next_cursor}


def _topic_entry(topic: TopicMetadata, indexes: range, live: set[int]) -> B.DescribeTopicPartitionsResponseTopics:
    partitions: list[B.DescribeTopicPartitionsResponseTopicsPartitions] = []
    for i in indexes:
        p = topic.partitions[i]
        partitions.append({
            "error_code": ErrorCode.NONE,
            "partition_index": p.partition,
            "leader_id": p.leader if p.leader in live else -1,
            "leader_epoch": p.leader_epoch,
            "replica_nodes": list(p.replicas),
            "isr_nodes": list(p.isr),
            "eligible_leader_replicas": [],
            "last_known_elr": [],
            "offline_replicas": [b for b in p.replicas if b not in live],
        })
    return {"error_code": ErrorCode.NONE, "name": topic.name, "topic_id": topic.topic_id,
            "is_internal": topic.is_internal, "partitions": partitions}


def _missing_topic(name: str) -> B.DescribeTopicPartitionsResponseTopics:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except MetadataError as exc:
        code = exc.code
    return {"error_code": code, "name": name, "topic_id": ZERO_UUID, "is_internal": name in INTERNAL_TOPICS,
            "partitions": []}
