"""A group coordinator with every group API handler, driven through the real request/response schemas.

Shared by the tests of KIP-848 consumer groups meeting the classic APIs (``test_consumer_group_offsets``,
``test_classic_members``).  Imported as ``group_env`` (``tests/broker`` holds the test files; pytest puts a
test file's directory on the path).  Each call builds the request at its version, parses it back, runs the
handler with just the services it takes (the coordinator, an in-memory metadata store) and builds and parses
the response at the same version.
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any, Callable

import trio

from minikafka.broker.config import BrokerConfig
from minikafka.broker.groups import GroupCoordinator
from minikafka.broker.handlers import groups as G
from minikafka.broker.handlers.consumer_groups import ConsumerGroupDescribeHandler, ConsumerGroupHeartbeatHandler
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.request import RequestContext
from minikafka.client.consumer.protocol import Subscription, decode_assignment, encode_subscription
from minikafka.common import TopicPartition
from minikafka.common.clock import SecondsClock
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode as E

WALL0 = 1_700_000_000.0
_corr = itertools.count(1)
K = ApiKey


class GroupEnv:
    """Node 0 of a one-broker cluster coordinating groups; ``topics`` exist with their partition counts."""

    def __init__(self, data_dir: Path | None = None, *, topics: dict[str, int] | None = None,
                 owns_group: Callable[[str], bool] = lambda g: True,
                 share_groups: Callable[[], Any] | None = None, metadata: ClusterMetadata | None = None,
                 **config: Any) -> None:
        config.setdefault("group_initial_rebalance_delay_ms", 0)
        self.config = BrokerConfig(host="127.0.0.1", port=9092, node_id=0, **config)
        self.data_dir = data_dir
        self.coordinator = GroupCoordinator(self.config, data_dir, clock=trio.current_time,
                                            wall_clock=SecondsClock(trio.current_time, WALL0))
        if metadata is None:
            metadata = ClusterMetadata([0])
            metadata.broker_started(0, "127.0.0.1", 9092)
            for name, n in (topics if topics is not None else {"t": 4, "u": 2}).items():
                metadata.create_topic(name, n, 1)
        self.metadata = metadata
        c, md = self.coordinator, metadata

        def owns(group_id: str) -> E:  # the handlers' coordinator_error
            return E.NONE if owns_group(group_id) else E.NOT_COORDINATOR
        self.handlers: dict[ApiKey, Any] = {
            K.JOIN_GROUP: G.JoinGroupHandler(c, coordinator_error=owns, metadata=md).handle,
            K.SYNC_GROUP: G.SyncGroupHandler(c, coordinator_error=owns).handle,
            K.HEARTBEAT: G.HeartbeatHandler(c, coordinator_error=owns).handle,
            K.LEAVE_GROUP: G.LeaveGroupHandler(c, coordinator_error=owns).handle,
            K.OFFSET_COMMIT: G.OffsetCommitHandler(c, md, coordinator_error=owns).handle,
            K.OFFSET_FETCH: G.OffsetFetchHandler(c, coordinator_error=owns, metadata=md).handle,
            K.LIST_GROUPS: G.ListGroupsHandler(c, coordinator_error=owns, share_groups=share_groups).handle,
            K.DESCRIBE_GROUPS: G.DescribeGroupsHandler(c, coordinator_error=owns).handle,
            K.DELETE_GROUPS: G.DeleteGroupsHandler(c, coordinator_error=owns).handle,
            K.CONSUMER_GROUP_HEARTBEAT: ConsumerGroupHeartbeatHandler(c, md, coordinator_error=owns).handle,
            K.CONSUMER_GROUP_DESCRIBE: ConsumerGroupDescribeHandler(c, md, coordinator_error=owns).handle,
        }

    def restart(self) -> "GroupEnv":
        """A new coordinator over the same data dir and metadata (the old one closed)."""
        self.coordinator.close()
        return GroupEnv(self.data_dir, metadata=self.metadata, **_settings(self.config))

    async def call(self, key: ApiKey, version: int, fields: dict, client_id: str = "client") -> Any:
        api = APIS[key]
        req = api.request.parse(api.request.build(fields, version), version)
        ctx = RequestContext(api_key=int(key), api_version=version, correlation_id=next(_corr),
                             client_id=client_id, connection_id="conn", peer="127.0.0.1:50000")
        resp = await self.handlers[key](ctx, req)
        return api.response.parse(api.response.build(resp, version), version)

    def topic_id(self, name: str) -> uuid.UUID:
        t = self.metadata.get_topic(name)
        assert t is not None
        return t.topic_id

    def group(self, group_id: str = "g") -> Any:
        return self.coordinator.groups[group_id]

    def consumer(self, group_id: str = "g") -> Any:
        cg = self.coordinator.groups[group_id].consumer
        assert cg is not None
        return cg

    # -- offsets -------------------------------------------------------------------------

    async def commit(self, version: int, member_id: str, epoch: int, offsets: dict[tuple[str, int], int],
                     group: str = "g") -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict]] = {}
        for (t, p), o in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": o,
                                             "committed_metadata": "m"})
        if version >= 10:
            tl = [{"topic_id": self.topic_id(t), "partitions": ps} for t, ps in topics.items()]
        else:
            tl = [{"name": t, "partitions": ps} for t, ps in topics.items()]
        r = await self.call(K.OFFSET_COMMIT, version, {"group_id": group, "generation_id_or_member_epoch": epoch,
                                                        "member_id": member_id, "topics": tl})
        names = {self.topic_id(t): t for t in topics}
        return {(t.name if version < 10 else names[t.topic_id], p.partition_index): p.error_code
                for t in r.topics for p in t.partitions}

    async def fetch(self, version: int, group: str = "g", topics: dict[str, list[int]] | None = None,
                    member_id: str | None = None, epoch: int = -1) -> tuple[int, dict[tuple[str, int], int]]:
        """(error, {(topic, partition): committed offset}) of one group."""
        if topics is None:
            tl = None
        elif version >= 10:
            tl = [{"topic_id": self.topic_id(t), "partition_indexes": ps} for t, ps in topics.items()]
        else:
            tl = [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]
        if version >= 8:
            r = await self.call(K.OFFSET_FETCH, version, {"groups": [
                {"group_id": group, "member_id": member_id, "member_epoch": epoch, "topics": tl}]})
            (g,) = r.groups
            by_id = {self.metadata.get_topic(n).topic_id: n for n in self.metadata.topics}  # type: ignore[union-attr]
            return g.error_code, {(t.name if version < 10 else by_id[t.topic_id], p.partition_index):
                                  p.committed_offset for t in g.topics for p in t.partitions}
        r = await self.call(K.OFFSET_FETCH, version, {"group_id": group, "topics": tl})
        return r.error_code, {(t.name, p.partition_index): p.committed_offset for t in r.topics for p in t.partitions}

    # -- members -------------------------------------------------------------------------

    async def consumer_heartbeat(self, member_id: str, epoch: int, group: str = "g", *,
                                 topics: list[str] | None = None, owned: dict[str, set[int]] | None = None,
                                 instance_id: str | None = None, rebalance_timeout_ms: int = -1) -> Any:
        """A ConsumerGroupHeartbeat v1 (``owned`` by topic name)."""
        fields: dict[str, Any] = {"group_id": group, "member_id": member_id, "member_epoch": epoch,
                                  "instance_id": instance_id, "rebalance_timeout_ms": rebalance_timeout_ms,
                                  "subscribed_topic_names": topics}
        if owned is not None:
            fields["topic_partitions"] = [{"topic_id": self.topic_id(t), "partitions": sorted(ps)}
                                          for t, ps in owned.items()]
        return await self.call(K.CONSUMER_GROUP_HEARTBEAT, 1, fields)


def subscription(*topics: str, version: int = 3, owned: list[TopicPartition] | None = None) -> bytes:
    return encode_subscription(Subscription(list(topics), owned_partitions=owned or []), version)


def assigned(assignment: bytes) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in decode_assignment(bytes(assignment)).partitions}


class KipMember:
    """A KIP-848 consumer in a test: joins, heartbeats with what it owns, revokes what it is asked to."""

    def __init__(self, env: GroupEnv, topics: list[str], group: str = "g", instance_id: str | None = None) -> None:
        self.env, self.topics, self.group, self.instance_id = env, topics, group, instance_id
        self.member_id = uuid.uuid4().hex
        self.epoch = 0
        self.owned: dict[str, set[int]] = {}

    async def heartbeat(self) -> Any:
        joining = self.epoch == 0
        r = await self.env.consumer_heartbeat(
            self.member_id, self.epoch, self.group, topics=self.topics if joining else None,
            owned=self.owned if not joining else {}, instance_id=self.instance_id,
            rebalance_timeout_ms=30000 if joining else -1)
        if r.error_code == E.NONE:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                by_id = {self.env.topic_id(n): n for n in self.env.metadata.topics}
                self.owned = {by_id[tp.topic_id]: set(tp.partitions) for tp in r.assignment.topic_partitions}
        return r

    async def leave(self) -> Any:
        self.owned = {}
        return await self.env.consumer_heartbeat(self.member_id, -1, self.group, instance_id=self.instance_id)

    def partitions(self) -> set[tuple[str, int]]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


class ClassicMember:
    """A classic (JoinGroup/SyncGroup) consumer in a test, eager: it gives up everything before rejoining."""

    def __init__(self, env: GroupEnv, topics: list[str], group: str = "g", *, protocols: tuple[str, ...] = ("range",),
                 session_ms: int = 10000, rebalance_ms: int = 10000, client_id: str = "classic") -> None:
        self.env, self.topics, self.group, self.protocols = env, topics, group, protocols
        self.session_ms, self.rebalance_ms, self.client_id = session_ms, rebalance_ms, client_id
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.members: list[Any] = []
        self.owned: set[tuple[str, int]] = set()

    async def join(self, version: int = 5) -> Any:
        self.owned = set()  # eager: revoke everything first
        for _ in range(2):
            r = await self.env.call(K.JOIN_GROUP, version, {
                "group_id": self.group, "session_timeout_ms": self.session_ms,
                "rebalance_timeout_ms": self.rebalance_ms, "member_id": self.member_id, "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": n, "metadata": subscription(*self.topics)} for n in self.protocols]},
                client_id=self.client_id)
            if r.error_code == E.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                continue
            break
        if r.error_code == E.NONE:
            self.member_id, self.generation, self.leader = r.member_id, r.generation_id, r.leader
            self.members = list(r.members)
        return r

    async def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        r = await self.env.call(K.SYNC_GROUP, 5, {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": self.protocols[0],
            "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()]})
        if r.error_code == E.NONE:
            self.owned = assigned(r.assignment) if r.assignment else set()
        return r

    async def heartbeat(self) -> int:
        r = await self.env.call(K.HEARTBEAT, 4, {"group_id": self.group, "generation_id": self.generation,
                                                 "member_id": self.member_id, "group_instance_id": None})
        return r.error_code

    async def leave(self) -> Any:
        self.owned = set()
        return await self.env.call(K.LEAVE_GROUP, 5, {"group_id": self.group, "members": [
            {"member_id": self.member_id, "group_instance_id": None, "reason": "bye"}]})

    def partitions(self) -> set[tuple[str, int]]:
        return set(self.owned)


def _settings(config: BrokerConfig) -> dict[str, Any]:
    keys = ("group_initial_rebalance_delay_ms", "group_consumer_migration_policy", "group_consumer_max_size",
            "group_max_size", "offsets_retention_minutes", "group_consumer_session_timeout_ms")
    return {k: getattr(config, k) for k in keys}
