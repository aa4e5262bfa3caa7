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

import base64
import binascii
import logging
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ...common import Node, OffsetAndMetadata, TopicPartition
from ...common.hashing import partition_for_key
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..error_responses import error_response
from ..groups.metadata import GroupOverview
from ..request import RequestContext
from ..services import Authorizer, GroupCoordinatorApi, MetadataCache
from .authorization import AclOperation, ResourceType, authorize, authorized_operations, filter_authorized
from .common import UNREQUESTED_OPERATIONS, client_host, coordinates_every_group, group_write_error, \
    wait_replicated

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

E = ErrorCode
GROUP, TRANSACTION, SHARE = 0, 1, 2  # FindCoordinator key types (Kafka's CoordinatorType)
COORDINATOR_KEY_TYPES = (GROUP, TRANSACTION, SHARE)
SHARE_KEY_VERSION = 6  # the first FindCoordinator version with share coordinators (KIP-932)
# What FindCoordinator needs DESCRIBE on, per key type, and the error without it.
_COORDINATOR_RESOURCE = {0: (ResourceType.GROUP, E.GROUP_AUTHORIZATION_FAILED),
                         1: (ResourceType.TRANSACTIONAL_ID, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)}


def share_coordinator_key(key: str) -> str:
    """The canonical ``groupId:topicId:partition`` of a share-partition key (Kafka's
    ``SharePartitionKey.getInstance(key).asCoordinatorKey()``); ValueError when it is not one."""
    parts = key.split(":")
    if len(parts) != 3 or not parts[0].strip():
        raise ValueError(f"expected <group id>:<topic id>:<partition>, got {key!r}")
    topic_id = parts[1].strip()
    try:  # Kafka's Uuid.fromString: 16 bytes in URL-safe base64, printed back without padding
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)) if len(topic_id) <= 24 else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"{topic_id!r} is not a base64 topic id")
    topic_id = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    partition = int(parts[2])
    if partition < 0:
        raise ValueError(f"negative partition in {key!r}")
    return f"{parts[0].strip()}:{topic_id}:{partition}"


class FindCoordinatorHandler:
    """The coordinator of a group (the leader of its ``__consumer_offsets`` partition), transactional id
    (the leader of its ``__transaction_state`` partition) or, v6+ (KIP-932), share-partition (key
    ``groupId:topicId:partition``: the leader of its ``__share_group_state`` partition, ``abs(key.hashCode) %
    share.coordinator.state.topic.num.partitions``, which only brokers ask for: CLUSTER_ACTION on the
    cluster); v4 answers a batch; v5 only says the client knows TRANSACTION_ABORTABLE (KIP-890)."""

    def __init__(self, metadata: MetadataCache, authorizer: Authorizer | None = None,
                 share_state_partitions: int = 50, ensure_offsets_topic: Callable[[], None] | None = None,
                 ensure_transaction_topic: Callable[[], None] | None = None,
                 ensure_share_state_topic: Callable[[], None] | None = None) -> None:
        """``ensure_offsets_topic`` / ``ensure_transaction_topic`` / ``ensure_share_state_topic``: create
        ``__consumer_offsets`` at the first group lookup, ``__transaction_state`` at the first transactional id
        lookup and ``__share_group_state`` at the first share-partition lookup, as Kafka does."""
        self.metadata = metadata
        self.authorizer = authorizer
        self.share_state_partitions = share_state_partitions  # share.coordinator.state.topic.num.partitions
        self.ensure_topic = {GROUP: ensure_offsets_topic, TRANSACTION: ensure_transaction_topic,
                             SHARE: ensure_share_state_topic}

    async def handle(self, ctx: RequestContext, req: B.FindCoordinatorRequestBody) -> B.FindCoordinatorResponseBody:
        key_type = req["key_type"]
        if key_type == SHARE and ctx.api_version >= SHARE_KEY_VERSION and \
                not authorize(self.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return error_response(ApiKey.FIND_COORDINATOR, ctx.api_version, req,  # type: ignore[return-value]
                                  E.CLUSTER_AUTHORIZATION_FAILED, ctx.throttle_time_ms)

        def coordinator(key: str) -> B.FindCoordinatorResponseCoordinators:
            if key_type not in COORDINATOR_KEY_TYPES or (key_type == SHARE and ctx.api_version < SHARE_KEY_VERSION):
                return {"error_code": E.INVALID_REQUEST, "error_message": f"unknown key type {key_type}",
                        "node_id": -1, "host": "", "port": -1}
            if key_type == SHARE:
                try:
                    partition = partition_for_key(share_coordinator_key(key), self.share_state_partitions)
                except ValueError as exc:
                    return {"error_code": E.INVALID_REQUEST, "error_message": str(exc), "node_id": -1, "host": "",
                            "port": -1}
                if (ensure := self.ensure_topic[SHARE]) is not None:
                    ensure()
                return self._answer(self.metadata.share_coordinator(partition, ctx.listener))
            if self.authorizer is not None:
                resource_type, denied = _COORDINATOR_RESOURCE[key_type]
                if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE, resource_type, key):
                    return {"error_code": denied, "error_message": denied.name, "node_id": -1, "host": "",
                            "port": -1}
            # The leader of the key's internal partition, at its address on the client's listener.
            if (ensure := self.ensure_topic[key_type]) is not None:
                ensure()
            return self._answer(self.metadata.group_coordinator(key, ctx.listener) if key_type == GROUP
                                else self.metadata.transaction_coordinator(key, ctx.listener))

        if ctx.api_version >= 4:
            return {"throttle_time_ms": ctx.throttle_time_ms,
                    "coordinators": [{"key": key, **coordinator(key)} for key in req["coordinator_keys"]]}
        return {"throttle_time_ms": ctx.throttle_time_ms,  # type: ignore[typeddict-unknown-key]
                **coordinator(req["key"])}

    @staticmethod
    def _answer(node: Node) -> B.FindCoordinatorResponseCoordinators:
        if node.node_id < 0 or node.port < 0:  # no broker up, or the coordinator has no such listener
            return {"error_code": E.COORDINATOR_NOT_AVAILABLE, "error_message": E.COORDINATOR_NOT_AVAILABLE.name,
                    "node_id": -1, "host": "", "port": -1}
        return {"error_code": E.NONE, "error_message": "NONE", "node_id": node.node_id, "host": node.host,
                "port": node.port}


class _GroupHandler:
    """``coordinator_error``: NONE when this broker coordinates a group (has its ``__consumer_offsets``
    partition's shard loaded), else the error the request gets, as Kafka answers it: NOT_COORDINATOR, or
    COORDINATOR_LOAD_IN_PROGRESS while the shard loads."""

    def __init__(self, coordinator: GroupCoordinatorApi, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group) -> None:
        self.coordinator = coordinator
        self.authorizer = authorizer
        self.coordinator_error = coordinator_error

    def _denied(self, ctx: RequestContext, req: Any, operation: AclOperation = AclOperation.READ) -> Any:
        """The request's error response when the principal may not do ``operation`` on its group
        (GROUP_AUTHORIZATION_FAILED) or this broker does not coordinate it (NOT_COORDINATOR), else None."""
        if self.authorizer is not None and not authorize(self.authorizer, ctx, operation, ResourceType.GROUP,
                                                         req["group_id"]):
            code = E.GROUP_AUTHORIZATION_FAILED
        elif not_coordinator := self.coordinator_error(req["group_id"]):
            code = not_coordinator
        else:
            return None
        return error_response(ctx.api_key, ctx.api_version, req, code, ctx.throttle_time_ms)


class JoinGroupHandler(_GroupHandler):
    """``metadata`` (the broker's metadata cache) lets a classic member of a KIP-848 consumer group be
    assigned partitions (the coordinator works on topic ids there)."""

    def __init__(self, coordinator: GroupCoordinatorApi, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 metadata: MetadataCache | None = None) -> None:
        super().__init__(coordinator, authorizer, coordinator_error)
        self.metadata = metadata

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
            topics=self.metadata,
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
        if result.error == E.NONE and (code := await group_write_error(self.coordinator, req["group_id"])):
            # (answered once the group's record, its members and their assignments, is replicated: storeGroup)
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": code, "protocol_type": None,
                    "protocol_name": None, "assignment": b""}
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
    """v0 and generation -1 with an empty member id are standalone commits; v9+ carries a consumer
    group member's epoch in ``generation_id_or_member_epoch``; v10 names topics by id."""

    def __init__(self, coordinator: GroupCoordinatorApi, metadata: MetadataCache,
                 authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group) -> None:
        super().__init__(coordinator, authorizer, coordinator_error)
        self.metadata = metadata

    def _partition_exists(self, topic: str, partition: int) -> bool:
        t = self.metadata.get_topic(topic)
        return t is not None and 0 <= partition < t.num_partitions

    async def handle(self, ctx: RequestContext, req: B.OffsetCommitRequestBody) -> B.OffsetCommitResponseBody:
        if (denied := self._denied(ctx, req)) is not None:
            return denied
        v = ctx.api_version
        names = _topic_names(self.metadata, req["topics"], v >= 10)
        now = self.coordinator.now_ms()
        retention_ms = req["retention_time_ms"]  # v2-4
        errors: dict[TopicPartition, ErrorCode] = {}
        offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        readable = None if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, (n for n in names if n is not None))
        unknown_ids: set[int] = set()
        for i, topic in enumerate(req["topics"]):
            name = names[i]
            if name is None:
                unknown_ids.add(i)
                continue
            for p in topic["partitions"]:
                tp = TopicPartition(name, p["partition_index"])
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
                api_version=v,
            ))
            await wait_replicated(self.coordinator, req["group_id"], errors)

        def code(i: int, partition: int) -> ErrorCode:
            name = names[i]
            return E.UNKNOWN_TOPIC_ID if i in unknown_ids or name is None else errors[TopicPartition(name, partition)]

        return {
            "throttle_time_ms": ctx.throttle_time_ms,
            "topics": [
                {"name": topic["name"], "topic_id": topic["topic_id"],
                 "partitions": [{"partition_index": p["partition_index"], "error_code": code(i, p["partition_index"])}
                                for p in topic["partitions"]]}
                for i, topic in enumerate(req["topics"])
            ],
        }


def _topic_names(metadata: MetadataCache | None, topics: Iterable[Any], by_id: bool) -> list[str | None]:
    """Each request topic's name: as sent, or (``by_id``, v10) looked up by topic id (None: unknown id)."""
    if not by_id:
        return [t["name"] for t in topics]
    out: list[str | None] = []
    for t in topics:
        meta = metadata.get_topic_by_id(t["topic_id"]) if metadata is not None else None
        out.append(meta.name if meta is not None else None)
    return out


def _offset_topics(offsets: dict[TopicPartition, OffsetAndMetadata | None],
                   partition_error: ErrorCode, unstable: set[TopicPartition] | None = None,
                   errors: dict[TopicPartition, ErrorCode] | None = None,
                   topic_ids: dict[str, uuid.UUID] | None = None) -> list[Any]:
    """``unstable``: partitions with transactional offsets pending (KIP-447 ``require_stable``), answered
    UNSTABLE_OFFSET_COMMIT without an offset; ``errors``: partitions answered with an error (and no
    offset) instead, after those in ``offsets``; ``topic_ids`` (v10): each topic's id, topics without
    one are left out."""
    by_topic: dict[str, list[B.OffsetFetchResponseTopicsPartitions]] = {}
    for tp, om in [*offsets.items(), *dict.fromkeys(errors or ()).items()]:
        if topic_ids is not None and tp[0] not in topic_ids:
            continue
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
    if topic_ids is not None:
        return [{"name": t, "topic_id": topic_ids[t], "partitions": parts} for t, parts in by_topic.items()]
    return [{"name": t, "partitions": parts} for t, parts in by_topic.items()]


def _requested(topics: list[B.OffsetFetchRequestTopics] | list[B.OffsetFetchRequestGroupsTopics] | None
               ) -> list[TopicPartition] | None:
    if topics is None:
        return None
    return [TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"]]


class OffsetFetchHandler(_GroupHandler):
    """v8 batches groups; v9 adds a consumer group member's id and epoch (validated against the group);
    v10 names topics by id (``metadata`` resolves them)."""

    def __init__(self, coordinator: GroupCoordinatorApi, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 metadata: MetadataCache | None = None) -> None:
        super().__init__(coordinator, authorizer, coordinator_error)
        self.metadata = metadata

    def _fetch(self, ctx: RequestContext, group_id: str, requested: list[TopicPartition] | None,
               require_stable: bool, member_id: str | None = None, member_epoch: int = -1,
               ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None], dict[TopicPartition, ErrorCode]]:
        """One group's offsets: (error, offsets, partitions answered TOPIC_AUTHORIZATION_FAILED instead).
        An all-partitions fetch leaves out the topics the principal may not describe."""

        def fetch(partitions: list[TopicPartition] | None
                  ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
            return self.coordinator.fetch_offsets(group_id, partitions, require_stable, member_id=member_id,
                                                  member_epoch=member_epoch)

        if self.authorizer is None:
            return *fetch(requested), {}
        if requested is None:
            err, offsets = fetch(None)
            visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                        (tp.topic for tp in offsets), log_if_denied=False)
            return err, {tp: om for tp, om in offsets.items() if tp.topic in visible}, {}
        allowed = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                    (tp.topic for tp in requested))
        denied = {tp: E.TOPIC_AUTHORIZATION_FAILED for tp in requested if tp.topic not in allowed}
        fetch_tps = [tp for tp in requested if tp.topic in allowed]
        if not fetch_tps and denied:
            return E.NONE, {}, denied
        return *fetch(fetch_tps), denied

    def _group_denied(self, ctx: RequestContext, group_id: str) -> ErrorCode | None:
        if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                         ResourceType.GROUP, group_id):
            return E.GROUP_AUTHORIZATION_FAILED
        return self.coordinator_error(group_id) or None

    def _group(self, ctx: RequestContext, g: B.OffsetFetchRequestGroups, require_stable: bool
               ) -> B.OffsetFetchResponseGroups:
        """One group of a v8+ request."""
        group_id = g["group_id"]
        if (code := self._group_denied(ctx, group_id)) is not None:
            return {"group_id": group_id, "error_code": code, "topics": []}
        by_id = ctx.api_version >= 10
        requested: list[TopicPartition] | None = None
        if g["topics"] is not None:
            requested = []
            names = _topic_names(self.metadata, g["topics"], by_id)
            for name, t in zip(names, g["topics"]):
                if name is None:  # an unknown topic id: answered by id below
                    continue
                requested.extend(TopicPartition(name, p) for p in t["partition_indexes"])
        err, offsets, denied = self._fetch(ctx, group_id, requested, require_stable, g["member_id"],
                                           g["member_epoch"])
        if err != E.NONE:
            return {"group_id": group_id, "error_code": err, "topics": []}
        unstable = self.coordinator.pending_txn_partitions(group_id) if require_stable else None
        topic_ids = None
        if by_id:
            topic_ids = {}
            for tp in [*offsets, *denied]:
                meta = self.metadata.get_topic(tp.topic) if self.metadata is not None else None
                if meta is not None:
                    topic_ids[tp.topic] = meta.topic_id
        topics = _offset_topics(offsets, E.NONE, unstable, denied, topic_ids)
        if by_id and g["topics"] is not None:
            for name, t in zip(_topic_names(self.metadata, g["topics"], True), g["topics"]):
                if name is None:
                    topics.append({"name": "", "topic_id": t["topic_id"], "partitions": [
                        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1,
                         "metadata": "", "error_code": E.UNKNOWN_TOPIC_ID} for p in t["partition_indexes"]]})
        return {"group_id": group_id, "error_code": E.NONE, "topics": topics}

    async def handle(self, ctx: RequestContext, req: B.OffsetFetchRequestBody) -> B.OffsetFetchResponseBody:
        """Null ``topics`` (v2+) means every committed partition; v8 batches groups."""
        v = ctx.api_version
        require_stable = req["require_stable"]
        if v >= 8:
            return {"throttle_time_ms": ctx.throttle_time_ms,
                    "groups": [self._group(ctx, g, require_stable) for g in req["groups"]]}
        if (code := self._group_denied(ctx, req["group_id"])) is not None:
            return error_response(ApiKey.OFFSET_FETCH, v, req,  # type: ignore[return-value]
                                  code, ctx.throttle_time_ms)
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


SHARE_PROTOCOL_TYPE = "share"  # a share group's protocol type and group type in ListGroups


class ListGroupsHandler(_GroupHandler):
    """v4 filters by state name, v5 by group type and names each group's type.  Only the groups this
    broker coordinates are listed (Kafka lists the groups of its ``__consumer_offsets`` partitions);
    ``share_groups``, when given, lists the share groups (id, state) kept by the share coordinator."""

    def __init__(self, coordinator: GroupCoordinatorApi, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 share_groups: Callable[[], Iterable[tuple[str, str]]] | None = None) -> None:
        super().__init__(coordinator, authorizer, coordinator_error)
        self.share_groups = share_groups

    async def handle(self, ctx: RequestContext, req: B.ListGroupsRequestBody) -> B.ListGroupsResponseBody:
        states = set(req["states_filter"] or [])
        types = set(req["types_filter"] or [])
        err, groups = self.coordinator.list_groups(states, types)
        if err == E.NONE and self.share_groups is not None:
            wanted_states = {s.strip().lower() for s in states}
            wanted_types = {t.lower() for t in types}
            if not wanted_types or SHARE_PROTOCOL_TYPE in wanted_types:
                groups.extend(GroupOverview(gid, SHARE_PROTOCOL_TYPE, state, SHARE_PROTOCOL_TYPE)
                              for gid, state in self.share_groups()
                              if not wanted_states or state.lower() in wanted_states)
        groups = [g for g in groups if not self.coordinator_error(g.group_id)]
        if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                         log_if_denied=False):
            # Without DESCRIBE on the cluster, only the groups the principal may describe.
            visible = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.GROUP,
                                        (g.group_id for g in groups), log_if_denied=False)
            groups = [g for g in groups if g.group_id in visible]
        return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": err,
                "groups": [{"group_id": g.group_id, "protocol_type": g.protocol_type, "group_state": g.state,
                            "group_type": g.group_type} for g in groups]}


class DescribeGroupsHandler(_GroupHandler):
    """Members with metadata and assignment are shown for Stable groups, as Kafka does.  A group that
    does not exist or is not a classic group (a KIP-848 consumer group: ConsumerGroupDescribe describes
    it) is Dead; v6 says so with GROUP_ID_NOT_FOUND and an error message, as Kafka 4 does."""

    async def handle(self, ctx: RequestContext, req: B.DescribeGroupsRequestBody) -> B.DescribeGroupsResponseBody:
        v = ctx.api_version
        include_ops = req["include_authorized_operations"]
        out: list[B.DescribeGroupsResponseGroups] = []
        for gid in req["groups"]:
            code = None
            if self.authorizer is not None and not authorize(self.authorizer, ctx, AclOperation.DESCRIBE,
                                                             ResourceType.GROUP, gid):
                code = E.GROUP_AUTHORIZATION_FAILED
            elif not_coordinator := self.coordinator_error(gid):
                code = not_coordinator
            if code is not None:
                out.append({"error_code": code, "error_message": None, "group_id": gid, "group_state": "",
                            "protocol_type": "", "protocol_data": "", "members": []})
                continue
            err, summary = self.coordinator.describe_group(gid)
            message = summary.error_message
            if err == E.GROUP_ID_NOT_FOUND and v < 6:
                err, message = E.NONE, None  # older versions: just a Dead group
            out.append({
                "error_code": err,
                "error_message": message,
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
    """Deletes Empty groups of every type: classic and consumer groups in the group coordinator, share
    groups (not known there) through ``delete_share_group`` when given."""

    def __init__(self, coordinator: GroupCoordinatorApi, authorizer: Authorizer | None = None,
                 coordinator_error: Callable[[str], ErrorCode] = coordinates_every_group,
                 delete_share_group: Callable[[str], ErrorCode] | None = None) -> None:
        super().__init__(coordinator, authorizer, coordinator_error)
        self.delete_share_group = delete_share_group

    async def handle(self, ctx: RequestContext, req: B.DeleteGroupsRequestBody) -> B.DeleteGroupsResponseBody:
        names = list(req["groups_names"])
        allowed = set(names) if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.DELETE, ResourceType.GROUP, names)
        results = dict.fromkeys(names, E.GROUP_AUTHORIZATION_FAILED)
        results.update((n, code) for n in allowed if (code := self.coordinator_error(n)))
        results.update(self.coordinator.delete_groups([n for n in names
                                                       if n in allowed and not self.coordinator_error(n)]))
        if self.delete_share_group is not None:
            for n, code in list(results.items()):
                if code == E.GROUP_ID_NOT_FOUND:
                    results[n] = self.delete_share_group(n)
        return {"throttle_time_ms": ctx.throttle_time_ms,
                "results": [{"group_id": gid, "error_code": results[gid]} for gid in dict.fromkeys(names)]}
