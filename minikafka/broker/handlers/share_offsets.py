"""The share-group offsets admin APIs (KIP-932): DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92).

Kafka's ``KafkaApis.handle{Describe,Alter,Delete}ShareGroupOffsetsRequest`` and the group coordinator's
halves of them, which read and write the share coordinator's state (ReadShareGroupStateSummary,
InitializeShareGroupState, DeleteShareGroupState); here they read and write the share-partition state
store through :class:`~minikafka.broker.services.ShareGroupOffsets`.

* Describe: DESCRIBE on the group (else the group's GROUP_AUTHORIZATION_FAILED) and on each topic
  (else its partitions' TOPIC_AUTHORIZATION_FAILED); GROUP_ID_NOT_FOUND for a group that is no share
  group; each partition's share-partition start offset (-1 when never initialized) and, at v1, its lag
  (the high watermark minus the start offset minus the in-flight records already acknowledged or
  archived; -1 when unknown).  No topics (null) means every initialized share-partition of the group.
* Alter: READ on the group and the topics; the group must be Empty (NON_EMPTY_GROUP); each
  share-partition restarts at the given offset with nothing in flight.  A group that does not exist yet
  becomes an Empty share group whose share-partitions start at the given offsets (Kafka 4.2, KAFKA-19662:
  offsets set before a share group is first used initialise it); a group of another type (classic or
  consumer) is GROUP_ID_NOT_FOUND.
* Delete: DELETE on the group, READ on the topics; the group must be Empty; the share-partitions of
  each topic are forgotten (a later fetch initializes them from ``share.auto.offset.reset``).

Cluster mode: a broker that does not coordinate the group answers NOT_COORDINATOR (``coordinator_error``).
A group the share-group coordinator does not know but that has persisted share state (its members all gone and
the group deleted, say) is treated as an Empty share group.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ...protocol.types import ZERO_UUID
from ..request import RequestContext
from ..services import Authorizer, FetchLog, MetadataCache, ShareGroupMembership, ShareGroupOffsets
from .authorization import AclOperation, ResourceType, authorize, filter_authorized
from .common import coordinates_every_group

if TYPE_CHECKING:
    from ...protocol import bodies as B


class _ShareOffsetsBase:
    def __init__(self, offsets: ShareGroupOffsets, groups: ShareGroupMembership, metadata: MetadataCache,
                 log: FetchLog, coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 authorizer: Authorizer | None = None) -> None:
        self.offsets = offsets
        self.groups = groups
        self.metadata = metadata
        self.log = log
        self.coordinator_error = coordinator_error
        self.authorizer = authorizer

    def _group_error(self, ctx: RequestContext, group_id: str, operation: AclOperation,
                     need_empty: bool, create: bool = False) -> ErrorCode:
        """GROUP_AUTHORIZATION_FAILED (no ``operation`` on the group), NOT_COORDINATOR, GROUP_ID_NOT_FOUND (no
        such share group; with ``create`` only when another kind of group has the id: else it is created
        Empty) or NON_EMPTY_GROUP."""
        if not authorize(self.authorizer, ctx, operation, ResourceType.GROUP, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if not_coordinator := self.coordinator_error(group_id):
            return not_coordinator
        if not self.groups.exists(group_id):
            if create:
                return self.groups.create_group(group_id) if group_id else ErrorCode.INVALID_GROUP_ID
            return ErrorCode.NONE if self.offsets.initialized_partitions(group_id) else ErrorCode.GROUP_ID_NOT_FOUND
        if need_empty:
            described = self.groups.describe([group_id])
            if described and described[0].members:
                return ErrorCode.NON_EMPTY_GROUP
        return ErrorCode.NONE

    def _topic_id(self, name: str) -> uuid.UUID:
        topic = self.metadata.get_topic(name)
        return topic.topic_id if topic is not None else ZERO_UUID

    def _partition_count(self, name: str) -> int:
        topic = self.metadata.get_topic(name)
        return topic.num_partitions if topic is not None else -1


class DescribeShareGroupOffsetsHandler(_ShareOffsetsBase):
    """Kafka's ``handleDescribeShareGroupOffsetsRequest``."""

    async def handle(self, ctx: RequestContext, req: B.DescribeShareGroupOffsetsRequestBody
                     ) -> B.DescribeShareGroupOffsetsResponseBody:
        groups: list[B.DescribeShareGroupOffsetsResponseGroups] = []
        for g in req["groups"]:
            groups.append(self._describe(ctx, g))
        return {"throttle_time_ms": 0, "groups": groups}

    def _describe(self, ctx: RequestContext, g: B.DescribeShareGroupOffsetsRequestGroups
                  ) -> B.DescribeShareGroupOffsetsResponseGroups:
        group_id = g["group_id"]
        out: B.DescribeShareGroupOffsetsResponseGroups = {"group_id": group_id, "topics": [],
                                                          "error_code": ErrorCode.NONE, "error_message": None}
        err = self._group_error(ctx, group_id, AclOperation.DESCRIBE, need_empty=False)
        if err:
            out["error_code"] = err
            return out
        requested: dict[str, list[int]] = {}
        if g["topics"] is None:
            for topic, partition in self.offsets.initialized_partitions(group_id):
                requested.setdefault(topic, []).append(partition)
        else:
            for t in g["topics"]:
                requested.setdefault(t["topic_name"], []).extend(t["partitions"])
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, requested)
        for name, partitions in requested.items():
            count = self._partition_count(name)
            parts: list[B.DescribeShareGroupOffsetsResponseGroupsTopicsPartitions] = []
            for index in partitions:
                entry: B.DescribeShareGroupOffsetsResponseGroupsTopicsPartitions = {
                    "partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                    "error_code": ErrorCode.NONE, "error_message": None}
                if name not in allowed:
                    entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not 0 <= index < count:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    start = self.offsets.start_offset(group_id, name, index)
                    entry["start_offset"] = start
                    if start >= 0:
                        entry["leader_epoch"], entry["lag"] = self._epoch_and_lag(group_id, name, index, start)
                parts.append(entry)
            out["topics"].append({"topic_name": name, "topic_id": self._topic_id(name), "partitions": parts})
        return out

    def _epoch_and_lag(self, group_id: str, name: str, index: int, start: int) -> tuple[int, int]:
        topic = self.metadata.get_topic(name)
        epoch = topic.partitions[index].leader_epoch if topic is not None else -1
        part = self.log.get(name, index)
        if part is None:
            return epoch, -1
        done = self.offsets.delivery_complete_count(group_id, name, index)
        return epoch, max(part.log.high_watermark - start - done, 0)


class AlterShareGroupOffsetsHandler(_ShareOffsetsBase):
    """Kafka's ``handleAlterShareGroupOffsetsRequest``: only while the share group is Empty (a group that
    does not exist yet is created)."""

    async def handle(self, ctx: RequestContext, req: B.AlterShareGroupOffsetsRequestBody
                     ) -> B.AlterShareGroupOffsetsResponseBody:
        group_id = req["group_id"]
        err = self._group_error(ctx, group_id, AclOperation.READ, need_empty=True, create=True)
        if err:
            return self._error(err)
        names = [t["topic_name"] for t in req["topics"]]
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, names)
        responses: list[B.AlterShareGroupOffsetsResponseResponses] = []
        for t in req["topics"]:
            name = t["topic_name"]
            count = self._partition_count(name)
            parts: list[B.AlterShareGroupOffsetsResponseResponsesPartitions] = []
            for p in t["partitions"]:
                index, offset = p["partition_index"], p["start_offset"]
                code = ErrorCode.NONE
                if name not in allowed:
                    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif not 0 <= index < count:
                    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif offset < 0:
                    code = ErrorCode.INVALID_REQUEST
                else:
                    code = await self.offsets.alter_start_offset(group_id, name, index, offset)
                parts.append({"partition_index": index, "error_code": code, "error_message": None})
            responses.append({"topic_name": name, "topic_id": self._topic_id(name), "partitions": parts})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}

    @staticmethod
    def _error(code: ErrorCode) -> B.AlterShareGroupOffsetsResponseBody:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": []}


class DeleteShareGroupOffsetsHandler(_ShareOffsetsBase):
    """Kafka's ``handleDeleteShareGroupOffsetsRequest``: only while the share group is Empty."""

    async def handle(self, ctx: RequestContext, req: B.DeleteShareGroupOffsetsRequestBody
                     ) -> B.DeleteShareGroupOffsetsResponseBody:
        group_id = req["group_id"]
        err = self._group_error(ctx, group_id, AclOperation.DELETE, need_empty=True)
        if err:
            return self._error(err)
        names = [t["topic_name"] for t in req["topics"]]
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, names)
        initialized = self.offsets.initialized_partitions(group_id)
        responses: list[B.DeleteShareGroupOffsetsResponseResponses] = []
        for name in dict.fromkeys(names):
            code = ErrorCode.NONE
            if name not in allowed:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif self.metadata.get_topic(name) is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                for topic, index in initialized:
                    if topic == name:
                        self.offsets.delete_state(group_id, topic, index)
            responses.append({"topic_name": name, "topic_id": self._topic_id(name), "error_code": code,
                              "error_message": None})
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "responses": responses}

    @staticmethod
    def _error(code: ErrorCode) -> B.DeleteShareGroupOffsetsResponseBody:
        return {"throttle_time_ms": 0, "error_code": code, "error_message": None, "responses": []}
