"""Handlers of the classic group APIs (the group half of Kafka's ``KafkaApis``).

FindCoordinator (v0-4), JoinGroup (v0-9), SyncGroup (v0-5), Heartbeat (v0-4),
LeaveGroup (v0-5), OffsetCommit (v0-8), OffsetFetch (v0-8), ListGroups (v0-4),
DescribeGroups (v0-5) and DeleteGroups (v0-2).  Each maps its request version's
fields onto :class:`~minikafka.broker.services.GroupCoordinatorApi` calls and
the result back onto the response version's fields, as ``KafkaApis`` does.
They take the group coordinator, plus the metadata cache where they need it
(FindCoordinator names the coordinator; OffsetCommit answers
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist).

With an authorizer, each checks what Kafka's ``KafkaApis`` checks: FindCoordinator DESCRIBE on the group
or transactional id; JoinGroup, SyncGroup, Heartbeat and LeaveGroup READ on the group; OffsetCommit READ on
the group and on each topic; OffsetFetch DESCRIBE on the group and on each topic (an all-partitions fetch
leaves out the topics it may not describe); DescribeGroups DESCRIBE and DeleteGroups DELETE on each group;
ListGroups lists every group with DESCRIBE on the cluster, else only the groups it may DESCRIBE.  Errors:
GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
from typing import Any

from ...common import OffsetAndMetadata, TopicPartition
from ...protocol import bodies as B
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..request import RequestContext
from ..services import Authorizer, GroupCoordinatorApi, MetadataCache
from .authorization import AclOperation, ResourceType, authorize, authorized_operations, filter_authorized
from .common import UNREQUESTED_OPERATIONS, client_host

log = logging.getLogger(__name__)

E = ErrorCode
COORDINATOR_KEY_TYPES = (0, 1)  # 0: group, 1: transaction
# What FindCoordinator needs DESCRIBE on, per key type, and the error without it.
_COORDINATOR_RESOURCE = {0: (ResourceType.GROUP, E.GROUP_AUTHORIZATION_FAILED),
                         1: (ResourceType.TRANSACTIONAL_ID, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}


class FindCoordinatorHandler:
    """The coordinator of every group and transactional id: the lowest live broker; v4 answers a batch."""

    def __init__(self, metadata: MetadataCache, authorizer: Authorizer | None = None) -> None:
        self.metadata = metadata
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.FindCoordinatorRequestBody) -> B.FindCoordinatorResponseBody:
        key_type = req["key_type"]

        def coordinator(key: str) -> B.FindCoordinatorResponseCoordinators:
            if key_type not in COORDINATOR_KEY_TYPES:
                return {"error_code": E.INVALID_REQUEST, "error_message": f"unknown key type {key_type}",
                        "node_id": -1, "host": "", "port": -1}
            if self.authorizer is not None:
                resource_type, denied = _COORDINATOR_RESOURCE[key_type]
                if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE, resource_type, key):
                    return {"error_code": denied, "error_message": denied.name, "node_id": -1, "host": "",
                            "port": -1}
            node = self.metadata.coordinator(ctx.listener)  # its address on the client's listener
            if node.node_id >= 0 and node.port < 0:  # the coordinator has no such listener
                return {"error_code": E.COORDINATOR_NOT_AVAILABLE, "error_message": E.COORDINATOR_NOT_AVAILABLE.name,
                        "node_id": -1, "host": "", "port": -1}
            return {"error_code": E.NONE, "error_message": "NONE", "node_id": node.node_id, "host": node.host,
                    "port": node.port}

        if ctx.api_version >= 4:
            return {"throttle_time_ms": ctx.throttle_time_ms,
                    "coordinators": [{"key": key, **coordinator(key)} for key in req["coordinator_keys"]]}
        return {"throttle_time_ms": ctx.throttle_time_ms,  # type: ignore[typeddict-unknown-key]
                **coordinator(req["key"])}


class _GroupHandler:
    def __init__(self, coordinator: GroupCoordinatorApi, authorizer: Authorizer | None = None) -> None:
        self.coordinator = coordinator
        self.authorizer = authorizer

    def _denied(self, ctx: RequestContext, req: Any, operation: AclOperation = AclOperation.READ) -> Any:
        """The request's error response (GROUP_AUTHORIZATION_FAILED) when the principal may not do
        ``operation`` on its group, else None."""
        if self.authorizer is None or authorize(self.authorizer, ctx, operation, ResourceType.GROUP,
                                                req["group_id"]):
            return None
        return error_response(ctx.api_key, ctx.api_version, req, E.GROUP_AUTHORIZATION_FAILED, ctx.throttle_time_ms)


class JoinGroupHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.JoinGroupRequestBody) -> B.JoinGroupResponseBody:
        """Waits until the join completes (rebalance), then answers."""
        if (denied := self._denied(ctx, req)) is not None:
            denied["member_id"] = ""  # Kafka's JoinGroupRequest.getErrorResponse: UNKNOWN_MEMBER_ID
            return denied
        v = ctx.api_version
        instance_id = req["group_instance_id"]
        # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
        rebalance_timeout_ms = req["rebalance_timeout_ms"] if v >= 1 else req["session_timeout_ms"]
        result = await self.coordinator.join_group(
            group_id=req["group_id"],
            member_id=req["member_id"],
            group_instance_id=instance_id,
            require_known_member_id=v >= 4 and instance_id is None,
            support_skipping_assignment=v >= 9,
            client_id=ctx.client_id or "",
            client_host=client_host(ctx.peer),
            rebalance_timeout_ms=rebalance_timeout_ms,
            session_timeout_ms=req["session_timeout_ms"],
            protocol_type=req["protocol_type"],
            protocols=[(p["name"], bytes(p["metadata"])) for p in req["protocols"]],
            reason=req["reason"],
        )
        return {
            "throttle_time_ms": ctx.throttle_time_ms,
            "error_code": result.error,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            # Null only from v7; older versions get "" for no protocol.
            "protocol_name": result.protocol_name if v >= 7 else (result.protocol_name or ""),
            "leader": result.leader_id,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [{"member_id": mid, "group_instance_id": iid, "metadata": meta}
                        for mid, iid, meta in result.members],
        }


class SyncGroupHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.SyncGroupRequestBody) -> B.SyncGroupResponseBody:
        """Followers wait until the leader's SyncGroup brings the assignments."""
        if (denied := self._denied(ctx, req)) is not None:
            return denied
        result = await self.coordinator.sync_group(
            group_id=req["group_id"],
            generation_id=req["generation_id"],
            member_id=req["member_id"],
            protocol_type=req["protocol_type"],
            protocol_name=req["protocol_name"],
            group_instance_id=req["group_instance_id"],
            assignments={a["member_id"]: bytes(a["assignment"]) for a in req["assignments"]},
        )
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": result.error,
                "protocol_type": result.protocol_type, "protocol_name": result.protocol_name,
                "assignment": result.assignment}


class HeartbeatHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.HeartbeatRequestBody) -> B.HeartbeatResponseBody:
        if (denied := self._denied(ctx, req)) is not None:
            return denied
        err = self.coordinator.heartbeat(req["group_id"], req["generation_id"], req["member_id"],
                                         req["group_instance_id"])
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err}


class LeaveGroupHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.LeaveGroupRequestBody) -> B.LeaveGroupResponseBody:
        """v0-2 name one member; v3+ a batch (by member id or group.instance.id)."""
        if (denied := self._denied(ctx, req)) is not None:
            return denied
        v = ctx.api_version
        if v <= 2:
            members: list[tuple[str, str | None, str | None]] = [(req["member_id"], None, None)]
        else:
            members = [(m["member_id"], m["group_instance_id"], m["reason"]) for m in req["members"]]
        err, results = self.coordinator.leave_group(req["group_id"], members)
        if v <= 2:
            # LeaveGroupResponse for old versions folds the member error into the top level.
            if err == E.NONE:
                err = next((e for _, _, e in results if e != E.NONE), E.NONE)
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err}
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err,
                "members": [{"member_id": mid, "group_instance_id": iid, "error_code": e}
                            for mid, iid, e in results]}


class OffsetCommitHandler(_GroupHandler):
    """v0 and generation -1 with an empty member id are standalone commits."""

    def __init__(self, coordinator: GroupCoordinatorApi, metadata: MetadataCache,
                 authorizer: Authorizer | None = None) -> None:
        super().__init__(coordinator, authorizer)
        self.metadata = metadata

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.metadata.get_topic(topic)
        return t is not None and 0 <= partition < t.num_partitions

    async def handle(self, ctx: RequestContext, req: B.OffsetCommitRequestBody) -> B.OffsetCommitResponseBody:
        if (denied := self._denied(ctx, req)) is not None:
            return denied
        now = self.coordinator.now_ms()
        retention_ms = req["retention_time_ms"]  # v2-4
        errors: dict[TopicPartition, ErrorCode] = {}
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        readable = None if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, (t["name"] for t in req["topics"]))
        for topic in req["topics"]:
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                if readable is not None and tp.topic not in readable:
                    errors[tp] = E.TOPIC_AUTHORIZATION_FAILED
                    continue
                if not self._partition_exists(*tp):
                    errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                commit_ts = p["commit_timestamp"]  # v1 only
                offsets[tp] = OffsetAndMetadata(
                    offset=p["committed_offset"],
                    leader_epoch=p["committed_leader_epoch"],
                    metadata=p["committed_metadata"] or "",
                    commit_timestamp=now if commit_ts == -1 else commit_ts,
                    expire_timestamp=None if retention_ms == -1 else now + retention_ms,
                )
        if offsets:
            errors.update(self.coordinator.commit_offsets(
                group_id=req["group_id"],
                member_id=req["member_id"],
                group_instance_id=req["group_instance_id"],
                generation_id=req["generation_id_or_member_epoch"],
                offsets=offsets,
            ))
        return {
            "throttle_time_ms": ctx.throttle_time_ms,
            "topics": [
                {"name": topic["name"],
                 "partitions": [{"partition_index": p["partition_index"],
                                 "error_code": errors[TopicPartition(topic["name"], p["partition_index"])]}
                                for p in topic["partitions"]]}
                for topic in req["topics"]
            ],
        }


def _offset_topics(offsets: dict[TopicPartition, OffsetAndMetadata | None],
                   partition_error: ErrorCode, unstable: set[TopicPartition] | None = None,
                   errors: dict[TopicPartition, ErrorCode] | None = None) -> list[B.OffsetFetchResponseTopics]:
    """``unstable``: partitions with transactional offsets pending (KIP-447 ``require_stable``), answered
    UNSTABLE_OFFSET_COMMIT without an offset; ``errors``: partitions answered with an error (and no
    offset) instead, after those in ``offsets``."""
    by_topic: dict[str, list[B.OffsetFetchResponseTopicsPartitions]] = {}
    for tp, om in [*offsets.items(), *dict.fromkeys(errors or ()).items()]:
        if errors and tp in errors:
            om, code = None, errors[tp]
        elif unstable and tp in unstable:
            om, code = None, E.UNSTABLE_OFFSET_COMMIT
        else:
            code = partition_error
        by_topic.setdefault(tp[0], []).append({
            "partition_index": tp[1],
            "committed_offset": om.offset if om is not None else -1,
            "committed_leader_epoch": om.leader_epoch if om is not None else -1,
            "metadata": om.metadata if om is not None else "",
            "error_code": code,
        })
    return [{"name": t, "partitions": parts} for t, parts in by_topic.items()]


def _requested(topics: list[B.OffsetFetchRequestTopics] | list[B.OffsetFetchRequestGroupsTopics] | None
               ) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]


class OffsetFetchHandler(_GroupHandler):
    def _fetch(self, ctx: RequestContext, group_id: str, requested: list[TopicPartition] | None,
               require_stable: bool) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None],
                                              dict[TopicPartition, ErrorCode]]:
        """One group's offsets: (error, offsets, partitions answered TOPIC_AUTHORIZATION_FAILED instead).
        An all-partitions fetch leaves out the topics the principal may not describe."""
        if self.authorizer is None:
            return *self.coordinator.fetch_offsets(group_id, requested, require_stable), {}
        if requested is None:
            err, offsets = self.coordinator.fetch_offsets(group_id, None, require_stable)
            visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        (tp.topic for tp in offsets), log_if_denied=False)
            return err, {tp: om for tp, om in offsets.items() if tp.topic in visible}, {}
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (tp.topic for tp in requested))
        denied = {tp: E.TOPIC_AUTHORIZATION_FAILED for tp in requested if tp.topic not in allowed}
        fetch = [tp for tp in requested if tp.topic in allowed]
        if not fetch and denied:
            return E.NONE, {}, denied
        return *self.coordinator.fetch_offsets(group_id, fetch, require_stable), denied

    def _group_denied(self, ctx: RequestContext, group_id: str) -> bool:
        return self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                             ResourceType.GROUP, group_id)

    async def handle(self, ctx: RequestContext, req: B.OffsetFetchRequestBody) -> B.OffsetFetchResponseBody:
        """Null ``topics`` (v2+) means every committed partition; v8 batches groups."""
        v = ctx.api_version
        require_stable = req["require_stable"]
        if v >= 8:
            groups: list[B.OffsetFetchResponseGroups] = []
            for g in req["groups"]:
                if self._group_denied(ctx, g["group_id"]):
                    groups.append({"group_id": g["group_id"], "error_code": E.GROUP_AUTHORIZATION_FAILED,
                                   "topics": []})
                    continue
                err, offsets, denied = self._fetch(ctx, g["group_id"], _requested(g["topics"]), require_stable)
                unstable = self.coordinator.pending_txn_partitions(g["group_id"]) if require_stable else None
                groups.append({"group_id": g["group_id"], "error_code": err,
                               "topics": _offset_topics(offsets, E.NONE, unstable, denied) if err == E.NONE else []})
            return {"throttle_time_ms": ctx.throttle_time_ms, "groups": groups}
        if self._group_denied(ctx, req["group_id"]):
            return error_response(ApiKey.OFFSET_FETCH, v, req,  # type: ignore[return-value]
                                  E.GROUP_AUTHORIZATION_FAILED, ctx.throttle_time_ms)
        requested = _requested(req["topics"])
        err, offsets, denied = self._fetch(ctx, req["group_id"], requested, require_stable)
        if err != E.NONE:
            if v >= 2:
                return {"throttle_time_ms": ctx.throttle_time_ms, "topics": [], "error_code": err}
            # v0-1 have no top-level error: report it on every requested partition.
            return {"throttle_time_ms": ctx.throttle_time_ms,
                    "topics": _offset_topics(dict.fromkeys(requested or []), err)}
        unstable = self.coordinator.pending_txn_partitions(req["group_id"]) if require_stable else None
        return {"throttle_time_ms": ctx.throttle_time_ms,
                "topics": _offset_topics(offsets, E.NONE, unstable, denied), "error_code": E.NONE}


class ListGroupsHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.ListGroupsRequestBody) -> B.ListGroupsResponseBody:
        """v4 filters by state name."""
        err, groups = self.coordinator.list_groups(set(req["states_filter"] or []))
        if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                         log_if_denied=False):
            # Without DESCRIBE on the cluster, only the groups the principal may describe.
            visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                        (g.group_id for g in groups), log_if_denied=False)
            groups = [g for g in groups if g.group_id in visible]
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err,
                "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state}
                           for g in groups]}


class DescribeGroupsHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.DescribeGroupsRequestBody) -> B.DescribeGroupsResponseBody:
        """Members with metadata and assignment are shown for Stable groups, as Kafka does."""
        include_ops = req["include_authorized_operations"]
        out: list[B.DescribeGroupsResponseGroups] = []
        for gid in req["groups"]:
            if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                             ResourceType.GROUP, gid):
                out.append({"error_code": E.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": "",
                            "protocol_type": "", "protocol_data": "", "members": []})
                continue
            err, summary = self.coordinator.describe_group(gid)
            out.append({
                "error_code": err,
                "group_id": gid,
                "group_state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol_data": summary.protocol,
                "members": [
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                     "client_host": m.client_host, "member_metadata": m.metadata, "member_assignment": m.assignment}
                    for m in summary.members
                ],
                "authorized_operations": (authorized_operations(self.authorizer, ctx, ResourceType.GROUP, gid)
                                          if include_ops else UNREQUESTED_OPERATIONS),
            })
        return {"throttle_time_ms": ctx.throttle_time_ms, "groups": out}


class DeleteGroupsHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.DeleteGroupsRequestBody) -> B.DeleteGroupsResponseBody:
        names = list(req["groups_names"])
        allowed = set(names) if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.DELETE, ResourceType.GROUP, names)
        results = dict.fromkeys(names, E.GROUP_AUTHORIZATION_FAILED)
        results.update(self.coordinator.delete_groups([n for n in names if n in allowed]))
        return {"throttle_time_ms": ctx.throttle_time_ms,
                "results": [{"group_id": gid, "error_code": results[gid]} for gid in dict.fromkeys(names)]}
