"""Handlers of the classic group APIs (the group half of Kafka's ``KafkaApis``).

FindCoordinator (v0-4), JoinGroup (v0-9), SyncGroup (v0-5), Heartbeat (v0-4),
LeaveGroup (v0-5), OffsetCommit (v0-8), OffsetFetch (v0-8), ListGroups (v0-4),
DescribeGroups (v0-5) and DeleteGroups (v0-2).  Each maps its request version's
fields onto :class:`~minikafka.broker.services.GroupCoordinatorApi` calls and
the result back onto the response version's fields, as ``KafkaApis`` does.
They take the group coordinator, plus the metadata cache where they need it
(FindCoordinator names the coordinator; OffsetCommit answers
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist).
"""

from __future__ import annotations

import logging

from ...common import OffsetAndMetadata, TopicPartition
from ...protocol import bodies as B
from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..services import GroupCoordinatorApi, MetadataCache
from .common import GROUP_AUTHORIZED_OPERATIONS, UNREQUESTED_OPERATIONS, client_host

log = logging.getLogger(__name__)

E = ErrorCode
COORDINATOR_KEY_TYPES = (0, 1)  # 0: group, 1: transaction


class FindCoordinatorHandler:
    """The coordinator of every group and transactional id: the lowest live broker; v4 answers a batch."""

    def __init__(self, metadata: MetadataCache) -> None:
        self.metadata = metadata

    async def handle(self, ctx: RequestContext, req: B.FindCoordinatorRequestBody) -> B.FindCoordinatorResponseBody:
        key_type = req["key_type"]

        def coordinator() -> B.FindCoordinatorResponseCoordinators:
            if key_type not in COORDINATOR_KEY_TYPES:
                return {"error_code": E.INVALID_REQUEST, "error_message": f"unknown key type {key_type}",
                        "node_id": -1, "host": "", "port": -1}
            node = self.metadata.coordinator()
            return {"error_code": E.NONE, "error_message": "NONE", "node_id": node.node_id, "host": node.host,
                    "port": node.port}

        if ctx.api_version >= 4:
            return {"throttle_time_ms": ctx.throttle_time_ms,
                    "coordinators": [{"key": key, **coordinator()} for key in req["coordinator_keys"]]}
        return {"throttle_time_ms": ctx.throttle_time_ms, **coordinator()}  # type: ignore[typeddict-unknown-key]


class _GroupHandler:
    def __init__(self, coordinator: GroupCoordinatorApi) -> None:
        self.coordinator = coordinator


class JoinGroupHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.JoinGroupRequestBody) -> B.JoinGroupResponseBody:
        """Waits until the join completes (rebalance), then answers."""
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
        err = self.coordinator.heartbeat(req["group_id"], req["generation_id"], req["member_id"],
                                         req["group_instance_id"])
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err}


class LeaveGroupHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.LeaveGroupRequestBody) -> B.LeaveGroupResponseBody:
        """v0-2 name one member; v3+ a batch (by member id or group.instance.id)."""
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

    def __init__(self, coordinator: GroupCoordinatorApi, metadata: MetadataCache) -> None:
        super().__init__(coordinator)
        self.metadata = metadata

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.metadata.get_topic(topic)
        return t is not None and 0 <= partition < t.num_partitions

    async def handle(self, ctx: RequestContext, req: B.OffsetCommitRequestBody) -> B.OffsetCommitResponseBody:
        now = self.coordinator.now_ms()
        retention_ms = req["retention_time_ms"]  # v2-4
        errors: dict[TopicPartition, ErrorCode] = {}
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        for topic in req["topics"]:
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
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
                   partition_error: ErrorCode, unstable: set[TopicPartition] | None = None
                   ) -> list[B.OffsetFetchResponseTopics]:
    """``unstable``: partitions with transactional offsets pending (KIP-447 ``require_stable``), answered
    UNSTABLE_OFFSET_COMMIT without an offset."""
    by_topic: dict[str, list[B.OffsetFetchResponseTopicsPartitions]] = {}
    for tp, om in offsets.items():
        if unstable and tp in unstable:
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
    async def handle(self, ctx: RequestContext, req: B.OffsetFetchRequestBody) -> B.OffsetFetchResponseBody:
        """Null ``topics`` (v2+) means every committed partition; v8 batches groups."""
        v = ctx.api_version
        require_stable = req["require_stable"]
        if v >= 8:
            groups: list[B.OffsetFetchResponseGroups] = []
            for g in req["groups"]:
                err, offsets = self.coordinator.fetch_offsets(g["group_id"], _requested(g["topics"]), require_stable)
                unstable = self.coordinator.pending_txn_partitions(g["group_id"]) if require_stable else None
                groups.append({"group_id": g["group_id"], "error_code": err,
                               "topics": _offset_topics(offsets, E.NONE, unstable) if err == E.NONE else []})
            return {"throttle_time_ms": ctx.throttle_time_ms, "groups": groups}
        requested = _requested(req["topics"])
        err, offsets = self.coordinator.fetch_offsets(req["group_id"], requested, require_stable)
        if err != E.NONE:
            if v >= 2:
                return {"throttle_time_ms": ctx.throttle_time_ms, "topics": [], "error_code": err}
            # v0-1 have no top-level error: report it on every requested partition.
            return {"throttle_time_ms": ctx.throttle_time_ms,
                    "topics": _offset_topics(dict.fromkeys(requested or []), err)}
        unstable = self.coordinator.pending_txn_partitions(req["group_id"]) if require_stable else None
        return {"throttle_time_ms": ctx.throttle_time_ms, "topics": _offset_topics(offsets, E.NONE, unstable),
                "error_code": E.NONE}


class ListGroupsHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.ListGroupsRequestBody) -> B.ListGroupsResponseBody:
        """v4 filters by state name."""
        err, groups = self.coordinator.list_groups(set(req["states_filter"] or []))
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err,
                "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state}
                           for g in groups]}


class DescribeGroupsHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.DescribeGroupsRequestBody) -> B.DescribeGroupsResponseBody:
        """Members with metadata and assignment are shown for Stable groups, as Kafka does."""
        include_ops = req["include_authorized_operations"]
        out: list[B.DescribeGroupsResponseGroups] = []
        for gid in req["groups"]:
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
                "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if include_ops else UNREQUESTED_OPERATIONS,
            })
        return {"throttle_time_ms": ctx.throttle_time_ms, "groups": out}


class DeleteGroupsHandler(_GroupHandler):
    async def handle(self, ctx: RequestContext, req: B.DeleteGroupsRequestBody) -> B.DeleteGroupsResponseBody:
        names = list(req["groups_names"])
        results = self.coordinator.delete_groups(names)
        return {"throttle_time_ms": ctx.throttle_time_ms,
                "results": [{"group_id": gid, "error_code": results[gid]} for gid in dict.fromkeys(names)]}
