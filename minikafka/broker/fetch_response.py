"""What a Fetch response weighs, for the replication quota: Kafka's ``KafkaApis.sizeOfThrottledPartitions``
and the helpers it needs (topic entries of a response, its size).  Pure functions of the response's
partitions: the Fetch handler uses them, and so does the analysis (:mod:`minikafka.analysis.jobs.replication`)
to replay the broker's own arithmetic on a capture.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..protocol.messages.fetch import FetchResponse
from ..protocol.types import ZERO_UUID
from .fetch_session import FetchPartitionData, PartitionKey
from .services import LeaderReplicationQuota

if TYPE_CHECKING:
    from ..protocol import bodies as B

TopicName = Callable[[uuid.UUID], str | None]


def key_name(key: PartitionKey, version: int, topic_name: TopicName) -> str | None:
    """The topic name a fetch key refers to (v13+ keys carry only the topic id)."""
    if version >= 13:
        return topic_name(key.topic_id) if key.topic_id is not None else None
    return key.topic


def group_by_topic(version: int, data: OrderedDict[PartitionKey, FetchPartitionData]) -> list[B.FetchResponseResponses]:
    """Consecutive partitions of one topic share a topic entry (as Kafka's FetchResponse.of builds it)."""
    responses: list[B.FetchResponseResponses] = []
    prev = None
    partitions: list[B.FetchResponseResponsesPartitions] = []
    for key, entry in data.items():
        ident = key.topic_id if version >= 13 else key.topic
        if prev is None or ident != prev:
            partitions = []
            responses.append({"topic": key.topic or "", "topic_id": key.topic_id or ZERO_UUID,
                              "partitions": partitions})
            prev = ident
        partitions.append(entry.to_response())  # type: ignore[arg-type]
    return responses


def response_size(version: int, body: B.FetchResponseBody) -> int:
    """Kafka's ``FetchResponse.sizeOf``: 4 + the size of the response body (records included)."""
    segments = FetchResponse.build_segments(body, version)
    return 4 + sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in segments)


def size_of_throttled_partitions(quota: LeaderReplicationQuota, topic_name: TopicName, version: int,
                                 selected: OrderedDict[PartitionKey, FetchPartitionData]) -> int:
    """Kafka's ``KafkaApis.sizeOfThrottledPartitions``: ``FetchResponse.sizeOf`` (4 + the body) of a
    response of the request's version holding only the response's partitions the leader quota
    throttles (``SelectingIterator``).  With none that is the empty response: 18 bytes at v7-v11,
    12 at v4-v6, 16 at v12+ (compact array and tagged fields)."""
    throttled: OrderedDict[PartitionKey, FetchPartitionData] = OrderedDict()
    if quota.throttled_partitions:
        for key, entry in selected.items():
            name = key_name(key, version, topic_name)
            if name is not None and quota.is_throttled(name, key.partition):
                throttled[key] = entry
    # throttle_time_ms and session_id are fixed-size: any value gives the same size (Kafka uses 0 / INVALID).
    body: B.FetchResponseBody = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                                 "responses": group_by_topic(version, throttled)}
    return response_size(version, body)
