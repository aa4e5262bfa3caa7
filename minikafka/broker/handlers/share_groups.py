"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77), v1 (KIP-932, the share-group half of Kafka's
``KafkaApis``).

Both go to the :class:`~minikafka.broker.services.ShareGroupMembership` service (the registry leaves them
out when ``group.coordinator.rebalance.protocols`` lacks ``share``).  As Kafka's ``KafkaApis``: with an
authorizer the heartbeat needs READ on the group
(GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (TOPIC_AUTHORIZATION_FAILED), the
describe DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED) and on every topic its members subscribe to
or hold (TOPIC_AUTHORIZATION_FAILED for the group).  A broker that does not coordinate the group
(``coordinator_error``) answers NOT_COORDINATOR.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..services import Authorizer, GroupCoordinatorApi, ShareGroupMembership
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
    from ..share.coordinator import ShareGroupDescription
    from ...protocol import bodies as B

E = ErrorCode


class ShareGroupHeartbeatHandler:
    """Joins, heartbeats and leaves a share group; the answer carries the member's assignment when it
    changed."""

    def __init__(self, coordinator: ShareGroupMembership, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 group_writes: GroupCoordinatorApi | None = None) -> None:
        """``group_writes``: where the group's records are written (answered once they are replicated)."""
        self.coordinator = coordinator
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error
        self.group_writes = group_writes

    def _error(self, ctx: RequestContext, code: ErrorCode, message: str | None = None
               ) -> B.ShareGroupHeartbeatResponseBody:
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": code, "error_message": message,
                "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}

    async def handle(self, ctx: RequestContext, req: B.ShareGroupHeartbeatRequestBody
                     ) -> B.ShareGroupHeartbeatResponseBody:
        group_id = req["group_id"]
        subscribed = req["subscribed_topic_names"]
        if self.authorizer is not None:
            if not authorize(self.authorizer, ctx, AclOperation.READ, ResourceType.GROUP, group_id):
                return self._error(ctx, E.GROUP_AUTHORIZATION_FAILED)
            if subscribed and len(filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                    subscribed)) < len(set(subscribed)):
                return self._error(ctx, E.TOPIC_AUTHORIZATION_FAILED)
        if code := self.coordinator_error(group_id):
            return self._error(ctx, code)
        result = self.coordinator.heartbeat(group_id, req["member_id"], req["member_epoch"], req["rack_id"],
                                            subscribed, ctx.client_id or "", client_host(ctx.peer))
        if result.error != E.NONE:
            return self._error(ctx, result.error, result.error_message)
        if self.group_writes is not None and (code := await group_write_error(self.group_writes, group_id)):
            return self._error(ctx, code)  # (answered once the group's records are replicated)
        assignment: B.ShareGroupHeartbeatResponseAssignment | None = None
        if result.assignment is not None:
            assignment = {"topic_partitions": [{"topic_id": topic_id, "partitions": sorted(parts)}
                                               for topic_id, parts in sorted(result.assignment.items(),
                                                                             key=lambda kv: str(kv[0]))]}
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": E.NONE, "error_message": None,
                "member_id": result.member_id, "member_epoch": result.member_epoch,
                "heartbeat_interval_ms": result.heartbeat_interval_ms, "assignment": assignment}


class ShareGroupDescribeHandler:
    """Describes share groups: state, epochs, assignor and members with their assignments."""

    def __init__(self, coordinator: ShareGroupMembership, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 group_writes: GroupCoordinatorApi | None = None) -> None:
        """``group_writes``: where the group's records are written (answered once they are replicated)."""
        self.coordinator = coordinator
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error
        self.group_writes = group_writes

    _failed = staticmethod(failed_group_description)

    def _described(self, ctx: RequestContext, d: ShareGroupDescription, include_operations: bool
                   ) -> B.ShareGroupDescribeResponseGroups:
        if d.error != E.NONE:
            return self._failed(d.group_id, d.error, d.error_message)
        topics = d.topic_names()
        if self.authorizer is not None and topics and len(
                filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)
        ) < len(topics):
            return self._failed(d.group_id, E.TOPIC_AUTHORIZATION_FAILED,
                                "The group has described topic(s) that the client is not authorized to describe.")
        ops = (authorized_operations(self.authorizer, ctx, ResourceType.GROUP, d.group_id)
               if include_operations else UNREQUESTED_OPERATIONS)
        return {
            "error_code": E.NONE, "error_message": None, "group_id": d.group_id, "group_state": d.state,
            "group_epoch": d.group_epoch, "assignment_epoch": d.assignment_epoch,
            "assignor_name": d.assignor_name, "authorized_operations": ops,
            "members": [{
                "member_id": m.member_id, "rack_id": m.rack_id, "member_epoch": m.member_epoch,
                "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": m.subscribed_topic_names,
                "assignment": {"topic_partitions": [
                    {"topic_id": topic_id, "topic_name": name, "partitions": parts}
                    for topic_id, name, parts in m.assignment]},
            } for m in d.members],
        }

    async def handle(self, ctx: RequestContext, req: B.ShareGroupDescribeRequestBody
                     ) -> B.ShareGroupDescribeResponseBody:
        # Answers in request order: refused ids at once, the others as the coordinator describes them.
        answers: list[B.ShareGroupDescribeResponseGroups | None] = []
        to_describe: list[str] = []
        for gid in req["group_ids"]:
            if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP, gid):
                answers.append(self._failed(gid, E.GROUP_AUTHORIZATION_FAILED))
            elif code := self.coordinator_error(gid):
                answers.append(self._failed(gid, code))
            else:
                answers.append(None)
                to_describe.append(gid)
        described = iter(self.coordinator.describe(to_describe))
        groups = [a if a is not None else self._described(ctx, next(described), req["include_authorized_operations"])
                  for a in answers]
        return {"throttle_time_ms": ctx.throttle_time_ms, "groups": groups}
