"""Handlers of the classic group APIs (the group half of Kafka's ``KafkaApis``).

FindCoordinator (v0-4), JoinGroup (v0-9), SyncGroup (v0-5), Heartbeat (v0-4),
LeaveGroup (v0-5), OffsetCommit (v0-8), OffsetFetch (v0-8), ListGroups (v0-4),
DescribeGroups (v0-5) and DeleteGroups (v0-2).  Each maps its request version's
fields onto :class:`~minikafka.broker.groups.GroupCoordinator` calls and the
result back onto the response version's fields, as ``KafkaApis`` does.

The handlers use ``broker.group_coordinator`` and ``broker.config`` only, plus
``broker.metadata.get_topic`` when the broker has one (OffsetCommit answers
UNKNOWN_TOPIC_OR_PARTITION for partitions that do not exist), so a tiny
stand-in broker object is enough to test them.  This broker is the coordinator
of every group and transactional id.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from ..groups import GroupCoordinator, OffsetAndMetadata
from ..request import RequestContext

if TYPE_CHECKING:
    from ..broker import Broker

log = logging.getLogger(__name__)

E = ErrorCode
COORDINATOR_KEY_TYPES = (0, 1)  # 0: group, 1: transaction
# AclOperation bits of a group when authorized operations are asked for: READ, DELETE, DESCRIBE.
GROUP_AUTHORIZED_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)
UNREQUESTED_OPERATIONS = -2147483648


def _coordinator(broker: "Broker") -> GroupCoordinator:
    return broker.group_coordinator


def client_host(peer: str) -> str:
    """Kafka's ``clientAddress.toString`` form ("/127.0.0.1") from a "host:port" peer."""
    if not peer or peer == "?":
        return ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")


# ---------------------------------------------------------------- FindCoordinator


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """This broker (in a cluster: the lowest live broker); v4 answers a batch of ``coordinator_keys``."""
    key_type = req.get("key_type", 0)

    def coordinator() -> dict:
        if key_type not in COORDINATOR_KEY_TYPES:
            return {"error_code": E.INVALID_REQUEST, "error_message": f"unknown key type {key_type}",
                    "node_id": -1, "host": "", "port": -1}
        if getattr(broker, "cluster", None) is not None:
            node_id, host, port = broker.coordinator()
        else:
            node_id, host, port = broker.config.node_id, broker.config.advertised, broker.config.port
        return {"error_code": E.NONE, "error_message": "NONE", "node_id": node_id,
                "host": host, "port": port}

    if ctx.api_version >= 4:
        return {
            "throttle_time_ms": ctx.throttle_time_ms,
            "coordinators": [{"key": key, **coordinator()} for key in req.coordinator_keys],
        }
    return {"throttle_time_ms": ctx.throttle_time_ms, **coordinator()}


# ---------------------------------------------------------------- JoinGroup


@handles(ApiKey.JOIN_GROUP)
async def handle_join_group(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """Waits until the join completes (rebalance), then answers."""
    v = ctx.api_version
    instance_id = req.get("group_instance_id")
    # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout.
    rebalance_timeout_ms = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms
    result = await _coordinator(broker).join_group(
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=instance_id,
        require_known_member_id=v >= 4 and instance_id is None,
        support_skipping_assignment=v >= 9,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx.peer),
        rebalance_timeout_ms=rebalance_timeout_ms,
        session_timeout_ms=req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        reason=req.get("reason"),
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
        "members": [
            {"member_id": mid, "group_instance_id": iid, "metadata": meta}
            for mid, iid, meta in result.members
        ],
    }


# ---------------------------------------------------------------- SyncGroup


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """Followers wait until the leader's SyncGroup brings the assignments."""
    result = await _coordinator(broker).sync_group(
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        protocol_type=req.get("protocol_type"),
        protocol_name=req.get("protocol_name"),
        group_instance_id=req.get("group_instance_id"),
        assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return {
        "throttle_time_ms": ctx.throttle_time_ms,
        "error_code": result.error,
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "assignment": result.assignment,
    }


# ---------------------------------------------------------------- Heartbeat


@handles(ApiKey.HEARTBEAT)
async def handle_heartbeat(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    err = _coordinator(broker).heartbeat(
        req.group_id, req.generation_id, req.member_id, req.get("group_instance_id")
    )
    return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err}


# ---------------------------------------------------------------- LeaveGroup


@handles(ApiKey.LEAVE_GROUP)
async def handle_leave_group(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """v0-2 name one member; v3+ a batch (by member id or group.instance.id)."""
    v = ctx.api_version
    if v <= 2:
        members: list[tuple[str, str | None, str | None]] = [(req.member_id, None, None)]
    else:
        members = [(m.member_id, m.get("group_instance_id"), m.get("reason")) for m in req.members]
    err, results = _coordinator(broker).leave_group(req.group_id, members)
    if v <= 2:
        # LeaveGroupResponse for old versions folds the member error into the top level.
        if err == E.NONE:
            err = next((e for _, _, e in results if e != E.NONE), E.NONE)
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err}
    return {
        "throttle_time_ms": ctx.throttle_time_ms,
        "error_code": err,
        "members": [
            {"member_id": mid, "group_instance_id": iid, "error_code": e} for mid, iid, e in results
        ],
    }


# ---------------------------------------------------------------- OffsetCommit


def _partition_exists(broker: "Broker", topic: str, partition: int) -> bool:
    metadata = getattr(broker, "metadata", None)
    if metadata is None:
        return True
    t = metadata.get_topic(topic)
    return t is not None and 0 <= partition < t.num_partitions


@handles(ApiKey.OFFSET_COMMIT)
async def handle_offset_commit(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """v0 and generation -1 with an empty member id are standalone commits."""
    coord = _coordinator(broker)
    now = coord.now_ms()
    retention_ms = req.get("retention_time_ms", -1)  # v2-4
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
    for topic in req.topics:
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not _partition_exists(broker, topic.name, p.partition_index):
                errors[tp] = E.UNKNOWN_TOPIC_OR_PARTITION
                continue
            commit_ts = p.get("commit_timestamp", -1)  # v1 only
            offsets[tp] = OffsetAndMetadata(
                offset=p.committed_offset,
                leader_epoch=p.get("committed_leader_epoch", -1),
                metadata=p.committed_metadata or "",
                commit_timestamp=now if commit_ts == -1 else commit_ts,
                expire_timestamp=None if retention_ms == -1 else now + retention_ms,
            )
    if offsets:
        errors.update(coord.commit_offsets(
            group_id=req.group_id,
            member_id=req.get("member_id", ""),
            group_instance_id=req.get("group_instance_id"),
            generation_id=req.get("generation_id_or_member_epoch", -1),
            offsets=offsets,
        ))
    return {
        "throttle_time_ms": ctx.throttle_time_ms,
        "topics": [
            {
                "name": topic.name,
                "partitions": [
                    {"partition_index": p.partition_index, "error_code": errors[(topic.name, p.partition_index)]}
                    for p in topic.partitions
                ],
            }
            for topic in req.topics
        ],
    }


# ---------------------------------------------------------------- OffsetFetch


def _offset_topics(offsets: dict[tuple[str, int], OffsetAndMetadata | None], partition_error: ErrorCode) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), om in offsets.items():
        by_topic.setdefault(topic, []).append({
            "partition_index": partition,
            "committed_offset": om.offset if om is not None else -1,
            "committed_leader_epoch": om.leader_epoch if om is not None else -1,
            "metadata": om.metadata if om is not None else "",
            "error_code": partition_error,
        })
    return [{"name": t, "partitions": parts} for t, parts in by_topic.items()]


def _requested(topics: Any) -> list[tuple[str, int]] | None:
    if topics is None:
        return None
    return [(t.name, p) for t in topics for p in t.partition_indexes]


@handles(ApiKey.OFFSET_FETCH)
async def handle_offset_fetch(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """Null ``topics`` (v2+) means every committed partition; v8 batches groups."""
    coord = _coordinator(broker)
    v = ctx.api_version
    require_stable = req.get("require_stable", False)
    if v >= 8:
        groups = []
        for g in req.groups:
            requested = _requested(g.topics)
            err, offsets = coord.fetch_offsets(g.group_id, requested, require_stable)
            groups.append({
                "group_id": g.group_id,
                "topics": _offset_topics(offsets, E.NONE) if err == E.NONE else [],
                "error_code": err,
            })
        return {"throttle_time_ms": ctx.throttle_time_ms, "groups": groups}
    requested = _requested(req.topics)
    err, offsets = coord.fetch_offsets(req.group_id, requested, require_stable)
    if err != E.NONE:
        if v >= 2:
            return {"throttle_time_ms": ctx.throttle_time_ms, "topics": [], "error_code": err}
        # v0-1 have no top-level error: report it on every requested partition.
        return {
            "throttle_time_ms": ctx.throttle_time_ms,
            "topics": _offset_topics({tp: None for tp in requested or []}, err),
        }
    return {"throttle_time_ms": ctx.throttle_time_ms, "topics": _offset_topics(offsets, E.NONE), "error_code": E.NONE}


# ---------------------------------------------------------------- ListGroups / DescribeGroups / DeleteGroups


@handles(ApiKey.LIST_GROUPS)
async def handle_list_groups(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """v4 filters by state name."""
    states = set(req.get("states_filter") or [])
    err, groups = _coordinator(broker).list_groups(states)
    return {
        "throttle_time_ms": ctx.throttle_time_ms,
        "error_code": err,
        "groups": [
            {"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state} for g in groups
        ],
    }


@handles(ApiKey.DESCRIBE_GROUPS)
async def handle_describe_groups(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    """Members with metadata and assignment are shown for Stable groups, as Kafka does."""
    coord = _coordinator(broker)
    include_ops = req.get("include_authorized_operations", False)
    out = []
    for gid in req.groups:
        err, summary = coord.describe_group(gid)
        out.append({
            "error_code": err,
            "group_id": gid,
            "group_state": summary.state,
            "protocol_type": summary.protocol_type,
            "protocol_data": summary.protocol,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "member_metadata": m.metadata,
                    "member_assignment": m.assignment,
                }
                for m in summary.members
            ],
            "authorized_operations": GROUP_AUTHORIZED_OPERATIONS if include_ops else UNREQUESTED_OPERATIONS,
        })
    return {"throttle_time_ms": ctx.throttle_time_ms, "groups": out}


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(broker: "Broker", ctx: RequestContext, req: Any) -> dict:
    results = _coordinator(broker).delete_groups(list(req.groups_names))
    return {
        "throttle_time_ms": ctx.throttle_time_ms,
        "results": [{"group_id": gid, "error_code": results[gid]} for gid in dict.fromkeys(req.groups_names)],
    }
