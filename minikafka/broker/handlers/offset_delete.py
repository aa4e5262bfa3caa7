"""OffsetDelete (47, KIP-496): delete a group's committed offsets, Kafka's ``handleOffsetDeleteRequest``.

DELETE on the group (else GROUP_AUTHORIZATION_FAILED at the top level), READ on each topic (else its
partitions get TOPIC_AUTHORIZATION_FAILED); a topic or partition that does not exist gets
UNKNOWN_TOPIC_OR_PARTITION.  The rest goes to the group's coordinator (NOT_COORDINATOR on another broker),
which deletes what the group is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC for the rest).  A group-level
error from the coordinator (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, INVALID_GROUP_ID, NOT_COORDINATOR) is the
whole answer, as Kafka's ``OffsetDeleteResponse.Builder.merge`` makes it: no partitions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..services import Authorizer, GroupCoordinatorApi, MetadataCache
from .authorization import AclOperation, ResourceType, authorize, filter_authorized
from .common import coordinates_every_group

if TYPE_CHECKING:
    from ...protocol import bodies as B


class OffsetDeleteHandler:
    def __init__(self, coordinator: GroupCoordinatorApi, metadata: MetadataCache, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group) -> None:
        self.coordinator = coordinator
        self.metadata = metadata
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error

    async def handle(self, ctx: RequestContext, req: B.OffsetDeleteRequestBody) -> B.OffsetDeleteResponseBody:
        group_id = req["group_id"]
        if not authorize(self.authorizer, ctx, AclOperation.DELETE, ResourceType.GROUP, group_id):
            return _group_error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        readable = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC,
                                     (t["name"] for t in req["topics"]))
        answered: dict[str, list[B.OffsetDeleteResponseTopicsPartitions]] = {}
        valid: dict[str, list[int]] = {}
        for t in req["topics"]:
            name = t["name"]
            indexes = [p["partition_index"] for p in t["partitions"]]
            topic = self.metadata.get_topic(name) if name in readable else None
            if name not in readable or topic is None:
                code = (ErrorCode.TOPIC_AUTHORIZATION_FAILED if name not in readable
                        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                answered.setdefault(name, []).extend({"partition_index": i, "error_code": code} for i in indexes)
                continue
            for i in indexes:
                if 0 <= i < topic.num_partitions:
                    valid.setdefault(name, []).append(i)
                else:
                    answered.setdefault(name, []).append(
                        {"partition_index": i, "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
        if not_coordinator := self.coordinator_error(group_id):
            return _group_error(not_coordinator)
        code, results = self.coordinator.delete_offsets(group_id, valid)
        if code:
            return _group_error(code)
        for name, partitions in results.items():
            answered.setdefault(name, []).extend({"partition_index": i, "error_code": err}
                                                 for i, err in partitions.items())
        return {"error_code": ErrorCode.NONE, "throttle_time_ms": 0,
                "topics": [{"name": name, "partitions": parts} for name, parts in answered.items()]}


def _group_error(code: ErrorCode) -> B.OffsetDeleteResponseBody:
    return {"error_code": code, "throttle_time_ms": 0, "topics": []}
