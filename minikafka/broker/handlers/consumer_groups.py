"""ConsumerGroupHeartbeat (68, v0-1) and ConsumerGroupDescribe (69, v0-1): the KIP-848 half of Kafka's
``KafkaApis`` group handling.

Both go to the :class:`~minikafka.broker.services.ConsumerGroupCoordinatorApi` (the group coordinator),
which works on topic ids; the handlers map ids to names with the metadata cache where the response
needs names.  As Kafka's ``KafkaApis`` does, with an authorizer: the heartbeat needs READ on the group
(GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic name (TOPIC_AUTHORIZATION_FAILED);
topics a regex resolves to are kept only when the member may DESCRIBE them.  ConsumerGroupDescribe needs
DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and on every topic its members subscribe to or are
assigned (TOPIC_AUTHORIZATION_FAILED for the group).  A broker that does not coordinate the group
(``coordinator_error``) answers NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads it).
The group's ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` come from the group configs when given, else the broker's
``group.consumer.*`` defaults.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..groups.consumer.model import (
    Assignment,
    ConsumerGroupHeartbeatRequest,
    DescribedConsumerGroup,
)
from ..request import RequestContext
from ..services import (
    Authorizer,
    ConsumerGroupCoordinatorApi,
    GroupConfigs,
    MetadataCache,
)
from .authorization import (
    AclOperation,
    ResourceType,
    authorize,
    authorized_operations,
    filter_authorized,
)
from .common import (UNREQUESTED_OPERATIONS, client_host, coordinates_every_group, failed_group_description,
                     group_write_error)

if TYPE_CHECKING:
    from ...protocol import bodies as B

    _DescribedTopicPartitions = B.ConsumerGroupDescribeResponseGroupsMembersAssignmentTopicPartitions

E = ErrorCode


class ConsumerGroupHeartbeatHandler:
    """Joins, heartbeats and leaves KIP-848 consumer groups; the answer carries the member's assignment
    when it changed (or the member sent a full request)."""

    def __init__(self, coordinator: ConsumerGroupCoordinatorApi, metadata: MetadataCache,
                 group_configs: GroupConfigs | None = None, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group) -> None:
        self.coordinator = coordinator
        self.metadata = metadata
        self.group_configs = group_configs
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error

    @staticmethod
    def _error(ctx: RequestContext, code: int, message: str | None = None) -> B.ConsumerGroupHeartbeatResponseBody:
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": code, "error_message": message,
                "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}

    async def handle(self, ctx: RequestContext, req: B.ConsumerGroupHeartbeatRequestBody
                     ) -> B.ConsumerGroupHeartbeatResponseBody:
        group_id = req["group_id"]
        subscribed = req["subscribed_topic_names"]
        authorized_topics: Callable[[set[str]], set[str]] | None = None
        if self.authorizer is not None:
            authorizer = self.authorizer
            if not authorize(authorizer, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
                return self._error(ctx, E.GROUP_AUTHORIZATION_FAILED)
            if subscribed and len(filter_authorized(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                    subscribed)) < len(set(subscribed)):
                return self._error(ctx, E.TOPIC_AUTHORIZATION_FAILED)

            def authorized_topics(names: set[str]) -> set[str]:
                return set(filter_authorized(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names,
                                             log_if_denied=False))
        if code := self.coordinator_error(group_id):
            return self._error(ctx, code)
        owned: Assignment | None = None
        if req["topic_partitions"] is not None:
            owned = {}
            for tp in req["topic_partitions"]:
                owned.setdefault(tp["topic_id"], set()).update(tp["partitions"])
        request = ConsumerGroupHeartbeatRequest(
            group_id=group_id, member_id=req["member_id"], member_epoch=req["member_epoch"],
            instance_id=req["instance_id"], rack_id=req["rack_id"],
            rebalance_timeout_ms=req["rebalance_timeout_ms"], subscribed_topic_names=subscribed,
            subscribed_topic_regex=req["subscribed_topic_regex"], server_assignor=req["server_assignor"],
            owned_partitions=owned, client_id=ctx.client_id or "", client_host=client_host(ctx.peer),
            api_version=ctx.api_version)
        session_ms = interval_ms = None
        if self.group_configs is not None and group_id:
            cfg = self.group_configs.group_config(group_id)
            session_ms, interval_ms = cfg.consumer_session_timeout_ms, cfg.consumer_heartbeat_interval_ms
        result = self.coordinator.consumer_group_heartbeat(
            request, self.metadata, session_timeout_ms=session_ms, heartbeat_interval_ms=interval_ms,
            authorized_topics=authorized_topics)
        if result.error != E.NONE:
            return self._error(ctx, result.error, result.error_message)
        if code := await group_write_error(self.coordinator, group_id):  # answered once its records are replicated
            return self._error(ctx, code)
        assignment: B.ConsumerGroupHeartbeatResponseAssignment | None = None
        if result.assignment is not None:
            assignment = {"topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(parts)}
                for topic_id, parts in sorted(result.assignment.items(), key=lambda kv: str(kv[0])) if parts]}
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": E.NONE, "error_message": None,
                "member_id": result.member_id, "member_epoch": result.member_epoch,
                "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": assignment}


class ConsumerGroupDescribeHandler:
    """Describes KIP-848 consumer groups: state, epochs, assignor, members with current and target
    assignments (GROUP_ID_NOT_FOUND for groups that do not exist or are classic groups)."""

    def __init__(self, coordinator: ConsumerGroupCoordinatorApi, metadata: MetadataCache,
                 authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group) -> None:
        self.coordinator = coordinator
        self.metadata = metadata
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error

    _failed = staticmethod(failed_group_description)

    def _topic_partitions(self, a: Assignment) -> list[_DescribedTopicPartitions]:
        out: list[_DescribedTopicPartitions] = []
        for topic_id, parts in sorted(a.items(), key=lambda kv: str(kv[0])):
            topic = self.metadata.get_topic_by_id(topic_id)
            if topic is not None and parts:
                out.append({"topic_id": topic_id, "topic_name": topic.name, "partitions": sorted(parts)})
        return out

    def _topic_names(self, d: DescribedConsumerGroup) -> set[str]:
        names: set[str] = set()
        ids: set[uuid.UUID] = set()
        for m in d.members:
            names.update(m.subscribed_topic_names)
            ids.update(m.assignment)
            ids.update(m.target_assignment)
        for topic_id in ids:
            topic = self.metadata.get_topic_by_id(topic_id)
            if topic is not None:
                names.add(topic.name)
        return names

    def _described(self, ctx: RequestContext, d: DescribedConsumerGroup, include_operations: bool
                   ) -> B.ConsumerGroupDescribeResponseGroups:
        if d.error != E.NONE:
            return self._failed(d.group_id, d.error, d.error_message)
        if self.authorizer is not None:
            topics = self._topic_names(d)
            if topics and len(filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                topics)) < len(topics):
                return self._failed(d.group_id, E.TOPIC_AUTHORIZATION_FAILED,
                                    "The group has described topic(s) that the client is not authorized to describe.")
        ops = (authorized_operations(self.authorizer, ctx, ResourceType.GROUP, d.group_id)
               if include_operations else UNREQUESTED_OPERATIONS)
        return {
            "error_code": E.NONE, "error_message": None, "group_id": d.group_id, "group_state": d.group_state,
            "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch, "assignor_name": d.assignor_name,
            "authorized_operations": ops,
            "members": [{
                "member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": m.subscribed_topic_names,
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": {"topic_partitions": self._topic_partitions(m.assignment)},
                "target_assignment": {"topic_partitions": self._topic_partitions(m.target_assignment)},
                "member_type": m.member_type,
            } for m in d.members],
        }

    async def handle(self, ctx: RequestContext, req: B.ConsumerGroupDescribeRequestBody
                     ) -> B.ConsumerGroupDescribeResponseBody:
        answers: list[B.ConsumerGroupDescribeResponseGroups | None] = []
        to_describe: list[str] = []
        for gid in req["group_ids"]:
            if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                             ResourceType.GROUP, gid):
                answers.append(self._failed(gid, E.GROUP_AUTHORIZATION_FAILED))
            elif not gid:
                answers.append(self._failed(gid, E.INVALID_GROUP_ID))
            elif code := self.coordinator_error(gid):
                answers.append(self._failed(gid, code))
            else:
                answers.append(None)
                to_describe.append(gid)
        described = iter(self.coordinator.consumer_group_describe(to_describe))
        include_ops = req["include_authorized_operations"]
        groups = [a if a is not None else self._described(ctx, next(described), include_ops) for a in answers]
        return {"throttle_time_ms": ctx.throttle_time_ms, "groups": groups}
