"""Console API: consumer groups (classic and KIP-848) and share groups (KIP-932).

What ``kafka-consumer-groups --describe`` and ``kafka-share-groups --describe`` show, read straight from
the coordinators: each group's type, protocol, state and members (with their assignments), committed
offsets and the lag (the leader's high watermark minus the committed offset; for a share group the
high watermark minus the share-partition start offset minus the records already delivered).  Offsets are
reset as ``kafka-consumer-groups --reset-offsets`` does (only while the group is empty) through the
coordinator's ``commit_offsets`` (what OffsetCommit uses) or, for a share group, the share-partition
state (what AlterShareGroupOffsets uses); groups are deleted as DeleteGroups deletes them.

* ``GET /console/api/groups``: every group the caller may DESCRIBE;
* ``GET /console/api/groups/{id}``: members, assignment, offsets and lag per partition;
* ``POST /console/api/groups/{id}/reset-offsets`` ``{"to": "earliest"|"latest"|"timestamp"|"offset",
  "value": N, "topic": optional}``: READ on the group and the topics;
* ``DELETE /console/api/groups/{id}``: DELETE on the group.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ...common import OffsetAndMetadata, TopicPartition
from ...protocol.errors import ErrorCode
from ..groups.admin import is_empty
from ..groups.consumer.migration import read_assignment
from ..groups.metadata import GROUP_TYPE_CONSUMER, GroupMetadata
from ..handlers.list_offsets import lookup_offset
from ..security.acl import AclOperation, ResourceType
from ..share.group import ShareGroup
from .context import ConsoleContext, ConsoleError, api, read_json
from .kafka import field
from .state import any_broker, leader_partition, log_offsets

RESET_TARGETS = ("earliest", "latest", "timestamp", "offset")


def _topic_names(ctx: ConsoleContext, assignment: dict[uuid.UUID, set[int]]) -> list[list[Any]]:
    """An assignment by topic id as sorted ``[topic, partition]`` pairs (unknown topics left out)."""
    out: list[list[Any]] = []
    for topic_id, partitions in assignment.items():
        meta = ctx.target.metadata.get_topic_by_id(topic_id)
        if meta is not None:
            out.extend([meta.name, p] for p in sorted(partitions))
    return sorted(out)


class GroupsView:
    """The groups of one broker or cluster as the console shows them."""

    def __init__(self, ctx: ConsoleContext) -> None:
        self.ctx = ctx

    @property
    def coordinator(self) -> Any:
        return any_broker(self.ctx.target).group_coordinator

    @property
    def share(self) -> Any:
        return any_broker(self.ctx.target).share_groups

    @property
    def share_offsets(self) -> Any:
        return any_broker(self.ctx.target).share_partitions

    # -- reading ---------------------------------------------------------------------------------
    def find(self, group_id: str) -> GroupMetadata | ShareGroup:
        group = self.coordinator.get_group(group_id)
        if group is not None:
            return group
        share = self.share.groups.get(group_id)
        if share is not None and not share.dead:
            return share
        raise ConsoleError(404, "GROUP_ID_NOT_FOUND", f"no group {group_id!r}")

    def all_groups(self) -> Iterable[GroupMetadata | ShareGroup]:
        yield from list(self.coordinator.groups.values())
        yield from [g for g in self.share.groups.values() if not g.dead]

    def summary(self, group: GroupMetadata | ShareGroup, request: Request) -> dict[str, Any]:
        lags = [o["lag"] for o in self.offsets(group, request) if o["lag"] is not None]
        if isinstance(group, ShareGroup):
            return {"group_id": group.group_id, "type": "share", "protocol_type": "share", "protocol": "simple",
                    "state": group.state.value, "members": len(group.members), "epoch": group.group_epoch,
                    "total_lag": sum(lags) if lags else None, "empty": not group.members}
        if group.consumer is not None:
            cg = group.consumer
            return {"group_id": group.group_id, "type": GROUP_TYPE_CONSUMER, "protocol_type": "consumer",
                    "protocol": cg.assignor_name or "", "state": cg.state.value, "members": len(cg.members),
                    "epoch": cg.group_epoch, "total_lag": sum(lags) if lags else None, "empty": is_empty(group)}
        return {"group_id": group.group_id, "type": "classic", "protocol_type": group.protocol_type or "",
                "protocol": group.protocol_name or "", "state": group.state.value, "members": len(group.members),
                "epoch": group.generation_id, "total_lag": sum(lags) if lags else None, "empty": is_empty(group)}

    def members(self, group: GroupMetadata | ShareGroup) -> list[dict[str, Any]]:
        if isinstance(group, ShareGroup):
            return [{"member_id": m.member_id, "instance_id": None, "client_id": m.client_id,
                     "host": m.client_host, "epoch": m.member_epoch,
                     "assignment": _topic_names(self.ctx, group.assignment_of(m.member_id))}
                    for _, m in sorted(group.members.items())]
        if group.consumer is not None:
            return [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id,
                     "host": m.client_host, "epoch": m.member_epoch,
                     "assignment": _topic_names(self.ctx, m.assigned_partitions)}
                    for _, m in sorted(group.consumer.members.items())]
        out = []
        for _, m in sorted(group.members.items()):
            tps = read_assignment(m.assignment) if group.protocol_type == "consumer" and m.assignment else None
            out.append({"member_id": m.member_id, "instance_id": m.group_instance_id, "client_id": m.client_id,
                        "host": m.client_host, "epoch": group.generation_id,
                        "assignment": sorted([tp.topic, tp.partition] for tp in tps or [])})
        return out

    def offsets(self, group: GroupMetadata | ShareGroup, request: Request) -> list[dict[str, Any]]:
        """Committed offsets (share: start offsets) and lag per partition, of the topics the caller may
        DESCRIBE; partitions assigned but never committed have no offset and no lag."""
        rows: dict[tuple[str, int], dict[str, Any]] = {}
        if isinstance(group, ShareGroup):
            offsets = self.share_offsets
            for topic, index in offsets.initialized_partitions(group.group_id):
                start = offsets.start_offset(group.group_id, topic, index)
                done = offsets.delivery_complete_count(group.group_id, topic, index)
                rows[(topic, index)] = {"committed": start, "delivered": done}
        else:
            for tp, om in group.offsets.items():
                rows[(tp.topic, tp.partition)] = {"committed": om.offset, "metadata": om.metadata,
                                                  "commit_timestamp": om.commit_timestamp}
        for member in self.members(group):
            for topic, index in member["assignment"]:
                rows.setdefault((topic, index), {"committed": None})["member_id"] = member["member_id"]
                rows[(topic, index)]["client_id"] = member["client_id"]
        out = []
        for (topic, index), row in sorted(rows.items()):
            if not self.ctx.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
                continue
            start, hw, leo = log_offsets(self.ctx.target, topic, index)
            committed = row["committed"]
            lag = None
            if committed is not None and committed >= 0 and hw >= 0:
                lag = max(hw - committed - row.get("delivered", 0), 0)
            out.append({"topic": topic, "partition": index, "log_start_offset": start, "high_watermark": hw,
                        "log_end_offset": leo, "lag": lag, "member_id": None, "client_id": None, **row})
        return out

    # -- changing --------------------------------------------------------------------------------
    async def reset_offsets(self, group: GroupMetadata | ShareGroup, to: str, value: int | None, topic: str | None,
                            request: Request) -> list[dict[str, Any]]:
        """``--reset-offsets --to-earliest|--to-latest|--to-datetime|--to-offset`` of every partition with an
        offset (or every partition of ``topic``); the group must be empty.  Offsets are clamped to the log
        (as the tool does) and a timestamp with no record after it resets to the log end."""
        if isinstance(group, ShareGroup):
            if group.members:
                raise ConsoleError(409, "NON_EMPTY_GROUP", f"share group {group.group_id} has members: stop them first")
            current = [TopicPartition(t, p) for t, p in self.share_offsets.initialized_partitions(group.group_id)]
        else:
            if not is_empty(group):
                raise ConsoleError(409, "NON_EMPTY_GROUP", f"group {group.group_id} has members: stop them first")
            current = list(group.offsets)
        if topic:
            # Kafka answers TOPIC_AUTHORIZATION_FAILED before UNKNOWN_TOPIC: do not tell who may not read
            # it whether it exists.
            self.ctx.require(request, AclOperation.READ, ResourceType.TOPIC, topic)
            meta = self.ctx.target.metadata.get_topic(topic)
            if meta is None:
                raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no topic {topic!r}")
            current = [TopicPartition(topic, p) for p in range(meta.num_partitions)]
        if not current:
            raise ConsoleError(400, "NOTHING_TO_RESET", "the group has no offsets: name a topic")
        for name in {tp.topic for tp in current}:
            self.ctx.require(request, AclOperation.READ, ResourceType.TOPIC, name)
        new: dict[TopicPartition, int] = {}
        for tp in sorted(current):
            part = leader_partition(self.ctx.target, tp.topic, tp.partition)
            if part is None:
                raise ConsoleError(409, "LEADER_NOT_AVAILABLE", f"{tp.topic}-{tp.partition} has no running leader")
            low, high = part.log.log_start_offset, part.log.high_watermark
            if to == "earliest":
                offset = low
            elif to == "latest":
                offset = high
            elif to == "timestamp":
                assert value is not None
                found = lookup_offset(part, value, 0)[1]
                offset = high if found < 0 else found
            else:
                assert value is not None
                offset = value
            new[tp] = min(max(offset, low), high)
        if isinstance(group, ShareGroup):
            for tp, offset in new.items():
                code = await self.share_offsets.alter_start_offset(group.group_id, tp.topic, tp.partition, offset)
                if code:
                    raise ConsoleError(409, ErrorCode(code).name, f"{tp.topic}-{tp.partition}: {ErrorCode(code).name}")
        else:
            now = self.coordinator.now_ms()
            errors = self.coordinator.commit_offsets(
                group.group_id, "", None, -1,
                {tp: OffsetAndMetadata(offset, commit_timestamp=now) for tp, offset in new.items()})
            failed = {tp: e for tp, e in errors.items() if e != ErrorCode.NONE}
            if failed:
                tp, err = next(iter(failed.items()))
                raise ConsoleError(409, ErrorCode(err).name, f"{tp.topic}-{tp.partition}: {ErrorCode(err).name}")
        return [{"topic": tp.topic, "partition": tp.partition, "offset": o} for tp, o in sorted(new.items())]

    def delete(self, group: GroupMetadata | ShareGroup) -> None:
        if isinstance(group, ShareGroup):
            err = self.share.delete_group(group.group_id)
        else:
            err = self.coordinator.delete_groups([group.group_id])[group.group_id]
        if err == ErrorCode.NON_EMPTY_GROUP:
            raise ConsoleError(409, "NON_EMPTY_GROUP", f"group {group.group_id} has members: stop them first")
        if err != ErrorCode.NONE:
            raise ConsoleError(409, ErrorCode(err).name, f"could not delete group {group.group_id}")


def _reset_request(data: dict[str, Any]) -> tuple[str, int | None, str | None]:
    to = data.get("to")
    if to not in RESET_TARGETS:
        raise ConsoleError(400, "INVALID_REQUEST", f"'to' must be one of {', '.join(RESET_TARGETS)}")
    value = field(data, "value", int, low=0) if to in ("timestamp", "offset") else None
    topic = data.get("topic") or None
    if topic is not None and not isinstance(topic, str):
        raise ConsoleError(400, "INVALID_REQUEST", "'topic' must be a topic name")
    return to, value, topic


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    view = GroupsView(ctx)

    async def list_groups(request: Request) -> Any:
        groups = [view.summary(g, request) for g in view.all_groups()
                  if ctx.allowed(request, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        return {"groups": sorted(groups, key=lambda g: g["group_id"])}

    async def describe(request: Request) -> Any:
        group_id = request.path_params["group_id"]
        ctx.require(request, AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
        group = view.find(group_id)
        return {**view.summary(group, request), "members": view.members(group),
                "offsets": view.offsets(group, request)}

    async def reset(request: Request) -> Any:
        group_id = request.path_params["group_id"]
        to, value, topic = _reset_request(await read_json(request))
        ctx.require(request, AclOperation.READ, ResourceType.GROUP, group_id)
        return {"reset": await view.reset_offsets(view.find(group_id), to, value, topic, request)}

    async def delete(request: Request) -> Any:
        group_id = request.path_params["group_id"]
        ctx.require(request, AclOperation.DELETE, ResourceType.GROUP, group_id)
        view.delete(view.find(group_id))
        return {"deleted": group_id}

    # Group ids are any string, "/" included (``{group_id:path}``; the page sends them URL-encoded).
    return [Route("/console/api/groups", api(ctx, list_groups), methods=["GET"]),
            Route("/console/api/groups/{group_id:path}/reset-offsets", api(ctx, reset), methods=["POST"]),
            Route("/console/api/groups/{group_id:path}", api(ctx, describe), methods=["GET"]),
            Route("/console/api/groups/{group_id:path}", api(ctx, delete), methods=["DELETE"])]
