"""A small admin client over :class:`~minikafka.client.network.NetworkClient` (Kafka's ``Admin``).

Each call sends the request where Kafka's admin client sends it: topic changes to the controller,
broker configs to that broker, group requests to the group's coordinator, ListOffsets to each
partition's leader, ListGroups to every broker.  Requests go at the highest version both sides
support, so it works against any Kafka broker.  Errors raise :class:`ToolError`.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any, Iterable

import trio

from ..common import TopicPartition, partitions_by_topic
from ..client.network import BrokerConnection, KafkaClientError, Metadata, NetworkClient, is_retriable
from ..client.security_config import ClientSecurity
from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode
from .common import ToolError, check

log = logging.getLogger(__name__)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
EARLIEST, LATEST = -2, -1
RETRY_BACKOFF_S = 0.2


class AdminClient:
    """``async with AdminClient("host:port") as admin``: admin requests to a cluster."""

    def __init__(self, bootstrap: str, client_id: str = "minikafka-admin", request_timeout_ms: int = 30000,
                 retry_timeout_s: float = 30.0, security: ClientSecurity | None = None) -> None:
        self.client = NetworkClient(bootstrap, client_id=client_id, request_timeout_ms=request_timeout_ms,
                                    security=security)
        self.retry_timeout_s = retry_timeout_s
        self._coordinators: dict[str, int] = {}  # group -> coordinator's node id

    async def __aenter__(self) -> "AdminClient":
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.client.__aexit__(*exc)

    # -- routing -----------------------------------------------------------------------------------
    async def metadata(self, topics: Iterable[str] | None = None) -> Metadata:
        """Metadata for ``topics`` (all topics when None), without creating any."""
        names = None if topics is None else list(topics)
        conn = await self.client.any_connection()
        body = {"topics": None if names is None else [{"name": t} for t in names],
                "allow_auto_topic_creation": False}
        resp = await conn.request(ApiKey.METADATA, body)
        self.client.metadata.update_from(resp, names)
        return self.client.metadata

    async def broker(self, node_id: int | None = None) -> BrokerConnection:
        """The connection to ``node_id``; any broker for None."""
        if node_id is None:
            return await self.client.any_connection()
        if node_id not in self.client.metadata.brokers:
            await self.metadata([])
        if node_id not in self.client.metadata.brokers:
            raise ToolError(f"broker {node_id} is not in the cluster (brokers: "
                            f"{sorted(self.client.metadata.brokers)})")
        return await self.client.connection(node_id)

    async def controller(self) -> BrokerConnection:
        """The controller as Metadata names it (any broker when none is named, as under KRaft)."""
        meta = await self.metadata([])
        cid = meta.controller_id
        return await self.broker(cid if cid in meta.brokers else None)

    async def coordinator(self, group: str) -> BrokerConnection:
        """The group's coordinator (FindCoordinator once, retried while the coordinator is loading)."""
        if group in self._coordinators:
            return await self.broker(self._coordinators[group])
        deadline = trio.current_time() + self.retry_timeout_s
        while True:
            conn = await self.client.any_connection()
            version = conn.pick_version(ApiKey.FIND_COORDINATOR)
            resp = await conn.request(ApiKey.FIND_COORDINATOR,
                                      {"key": group, "key_type": 0, "coordinator_keys": [group]}, version=version)
            c = resp.coordinators[0] if version >= 4 else resp
            if not c.error_code:
                self._coordinators[group] = c.node_id
                return await self.broker(c.node_id)
            if not is_retriable(c.error_code) or trio.current_time() > deadline:
                check(c.error_code, f"FindCoordinator for group {group}", c.error_message)
            await trio.sleep(RETRY_BACKOFF_S)

    # -- topics ------------------------------------------------------------------------------------
    async def create_topics(self, topics: list[dict], validate_only: bool = False) -> dict[str, tuple[int, str]]:
        """CreateTopics: ``{name: (error code, message)}``."""
        conn = await self.controller()
        resp = await conn.request(ApiKey.CREATE_TOPICS, {"topics": topics, "timeout_ms": 30000,
                                                         "validate_only": validate_only})
        return {t.name: (t.error_code, t.error_message or "") for t in resp.topics}

    async def delete_topics(self, names: list[str]) -> dict[str, tuple[int, str]]:
        """DeleteTopics by name: ``{name: (error code, message)}``."""
        conn = await self.controller()
        resp = await conn.request(ApiKey.DELETE_TOPICS, {
            "topic_names": names, "topics": [{"name": n} for n in names], "timeout_ms": 30000})
        return {r.name: (r.error_code, r.error_message or "") for r in resp.responses}

    async def create_partitions(self, counts: dict[str, int]) -> dict[str, tuple[int, str]]:
        """CreatePartitions to the given totals: ``{name: (error code, message)}``."""
        conn = await self.controller()
        resp = await conn.request(ApiKey.CREATE_PARTITIONS, {
            "topics": [{"name": n, "count": c, "assignments": None} for n, c in counts.items()],
            "timeout_ms": 30000, "validate_only": False})
        return {r.name: (r.error_code, r.error_message or "") for r in resp.results}

    async def describe_topic_partitions(self, names: list[str], partition_limit: int = 2000
                                        ) -> dict[str, tuple[int, Any, list[Any]]] | None:
        """DescribeTopicPartitions (KIP-966), as Kafka's admin ``describeTopics`` pages through it: every
        partition of each named topic, ``partition_limit`` per response, following ``next_cursor``.
        ``{name: (error code, topic entry, its partitions)}``; None when the broker does not offer the API
        (the caller falls back to Metadata)."""
        conn = await self.broker()
        try:
            conn.pick_version(ApiKey.DESCRIBE_TOPIC_PARTITIONS)
        except KafkaClientError:
            return None
        out: dict[str, tuple[int, Any, list[Any]]] = {}
        cursor = None
        while True:
            resp = await conn.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, {
                "topics": [{"name": n} for n in names], "response_partition_limit": partition_limit,
                "cursor": cursor})
            for t in resp.topics:
                previous = out.get(t.name)
                out[t.name] = (t.error_code, t, (previous[2] if previous else []) + list(t.partitions))
            if resp.next_cursor is None:
                return out
            cursor = {"topic_name": resp.next_cursor.topic_name, "partition_index": resp.next_cursor.partition_index}
            names = [n for n in names if n >= cursor["topic_name"]]

    async def elect_leaders(self, election_type: int, partitions: Iterable[TopicPartition] | None
                            ) -> dict[TopicPartition, tuple[int, str]]:
        """ElectLeaders at the controller (0 preferred, 1 unclean; None: every partition):
        ``{partition: (error code, message)}``.  A top-level error raises ToolError."""
        topics = None if partitions is None else partitions_by_topic(sorted(partitions))
        conn = await self.controller()
        resp = await conn.request(ApiKey.ELECT_LEADERS, {
            "election_type": election_type, "timeout_ms": 30000,
            "topic_partitions": None if topics is None
            else [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
        check(getattr(resp, "error_code", 0), "ElectLeaders")
        return {TopicPartition(t.topic, p.partition_id): (p.error_code, p.error_message or "")
                for t in resp.replica_election_results for p in t.partition_result}

    async def describe_quorum(self) -> Any:
        """DescribeQuorum of the metadata log (``__cluster_metadata``-0): the response (ToolError on errors)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.DESCRIBE_QUORUM, {"topics": [
            {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]})
        check(resp.error_code, "DescribeQuorum", getattr(resp, "error_message", None))
        partition = resp.topics[0].partitions[0]
        check(partition.error_code, "DescribeQuorum", getattr(partition, "error_message", None))
        return resp

    async def unregister_broker(self, broker_id: int) -> None:
        """UnregisterBroker (ToolError on errors)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.UNREGISTER_BROKER, {"broker_id": broker_id})
        check(resp.error_code, f"UnregisterBroker of broker {broker_id}", resp.error_message)

    # -- partition reassignments (KIP-455) -----------------------------------------------------------
    async def alter_partition_reassignments(self, changes: dict[TopicPartition, list[int] | None],
                                            allow_replication_factor_change: bool = True
                                            ) -> dict[TopicPartition, tuple[int, str]]:
        """AlterPartitionReassignments at the controller: target replicas per partition (None cancels);
        ``{partition: (error code, message)}``.  A top-level error raises ToolError."""
        topics: dict[str, list[dict]] = defaultdict(list)
        for tp, replicas in sorted(changes.items()):
            topics[tp.topic].append({"partition_index": tp.partition, "replicas": replicas})
        conn = await self.controller()
        resp = await conn.request(ApiKey.ALTER_PARTITION_REASSIGNMENTS, {
            "timeout_ms": 30000, "allow_replication_factor_change": allow_replication_factor_change,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        check(resp.error_code, "AlterPartitionReassignments", resp.error_message)
        return {TopicPartition(t.name, p.partition_index): (p.error_code, p.error_message or "")
                for t in resp.responses for p in t.partitions}

    async def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None = None
                                           ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        """ListPartitionReassignments at the controller (of ``partitions``, or all): ``{partition:
        (replicas, adding replicas, removing replicas)}`` of each ongoing reassignment."""
        topics = None if partitions is None else partitions_by_topic(sorted(partitions))
        conn = await self.controller()
        resp = await conn.request(ApiKey.LIST_PARTITION_REASSIGNMENTS, {
            "timeout_ms": 30000,
            "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
        check(resp.error_code, "ListPartitionReassignments", resp.error_message)
        return {TopicPartition(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                                            list(p.removing_replicas))
                for t in resp.topics for p in t.partitions}

    # -- configs -----------------------------------------------------------------------------------
    @staticmethod
    def _config_node(resource_type: int, name: str) -> int | None:
        """Where a config request for a resource goes: a broker resource to that broker, else anywhere."""
        return int(name) if resource_type == RESOURCE_BROKER and name.isdigit() else None

    async def describe_configs(self, resource_type: int, name: str) -> list[Any]:
        """DescribeConfigs of one resource: its config entries (name, value, config_source, synonyms...)."""
        conn = await self.broker(self._config_node(resource_type, name))
        resp = await conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": True, "include_documentation": False})
        result = resp.results[0]
        check(result.error_code, f"DescribeConfigs of {name!r}", result.error_message)
        return list(result.configs)

    async def alter_configs(self, resource_type: int, name: str, ops: list[tuple[str, int, str | None]],
                            validate_only: bool = False) -> None:
        """IncrementalAlterConfigs of one resource: ``(config name, OP_*, value)`` each."""
        conn = await self.broker(self._config_node(resource_type, name))
        resp = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name,
                           "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}],
            "validate_only": validate_only})
        r = resp.responses[0]
        check(r.error_code, f"IncrementalAlterConfigs of {name!r}", r.error_message)

    async def list_config_resources(self, resource_types: Iterable[int] = ()) -> list[tuple[int, str]]:
        """ListConfigResources: (resource type, name) of each config resource of the types asked for (none:
        all).  A broker at v0 (ListClientMetricsResources) lists only client metrics resources (16)."""
        types = list(resource_types)
        conn = await self.broker()
        version = conn.pick_version(ApiKey.LIST_CONFIG_RESOURCES)
        if version == 0 and types != [16]:
            raise ToolError("the broker lists only client metrics resources (ListConfigResources v0)")
        resp = await conn.request(ApiKey.LIST_CONFIG_RESOURCES, {"resource_types": types}, version=version)
        check(resp.error_code, "ListConfigResources")
        return [(r.resource_type if version >= 1 else 16, r.resource_name) for r in resp.config_resources]

    # -- log directories (KIP-113) -------------------------------------------------------------------
    async def describe_log_dirs(self, broker_id: int, topics: dict[str, list[int]] | None = None) -> list[Any]:
        """DescribeLogDirs on one broker: its log directories (``results``: ``log_dir``, ``error_code``,
        ``topics``...) holding the partitions asked for (None: all); a top-level error raises."""
        conn = await self.broker(broker_id)
        resp = await conn.request(ApiKey.DESCRIBE_LOG_DIRS, {
            "topics": None if topics is None else [{"topic": t, "partitions": ps} for t, ps in topics.items()]})
        check(getattr(resp, "error_code", 0), f"DescribeLogDirs on broker {broker_id}")
        return list(resp.results)

    async def alter_replica_log_dirs(self, broker_id: int, dirs: dict[TopicPartition, str]
                                     ) -> dict[TopicPartition, int]:
        """AlterReplicaLogDirs on one broker: move each of its replicas to the log dir named (absolute path);
        the error code of each partition."""
        by_dir: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        for tp, path in dirs.items():
            by_dir[path][tp.topic].append(tp.partition)
        conn = await self.broker(broker_id)
        resp = await conn.request(ApiKey.ALTER_REPLICA_LOG_DIRS, {"dirs": [
            {"path": path, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
            for path, topics in by_dir.items()]})
        return {TopicPartition(t.topic_name, p.partition_index): p.error_code for t in resp.results
                for p in t.partitions}

    # -- groups ------------------------------------------------------------------------------------
    async def list_groups(self) -> list[tuple[str, str, str]]:
        """(group id, protocol type, state) of every group on every broker ("" state before v4)."""
        meta = await self.metadata([])
        out: dict[str, tuple[str, str, str]] = {}
        for node in sorted(meta.brokers):
            conn = await self.broker(node)
            resp = await conn.request(ApiKey.LIST_GROUPS, {"states_filter": []})
            check(resp.error_code, f"ListGroups on broker {node}")
            for g in resp.groups:
                out[g.group_id] = (g.group_id, g.protocol_type, g.group_state)
        return [out[k] for k in sorted(out)]

    async def describe_group(self, group: str) -> Any:
        """DescribeGroups of one group: state, protocol type, members (ids, hosts, assignments)."""
        conn = await self.coordinator(group)
        resp = await conn.request(ApiKey.DESCRIBE_GROUPS, {"groups": [group], "include_authorized_operations": False})
        g = resp.groups[0]
        if g.error_code == ErrorCode.GROUP_ID_NOT_FOUND:  # DescribeGroups v6+; older versions say Dead
            g.error_code, g.group_state, g.members = 0, "Dead", []
        check(g.error_code, f"DescribeGroups of {group}")
        return g

    async def delete_groups(self, groups: list[str]) -> dict[str, int]:
        """DeleteGroups, each at its coordinator: ``{group: error code}``."""
        out: dict[str, int] = {}
        for group in groups:
            conn = await self.coordinator(group)
            resp = await conn.request(ApiKey.DELETE_GROUPS, {"groups_names": [group]})
            out.update({r.group_id: r.error_code for r in resp.results})
        return out

    async def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """OffsetFetch of every partition the group committed."""
        conn = await self.coordinator(group)
        version = conn.pick_version(ApiKey.OFFSET_FETCH, 8)
        body = {"group_id": group, "topics": None, "groups": [{"group_id": group, "topics": None}],
                "require_stable": False}
        resp = await conn.request(ApiKey.OFFSET_FETCH, body, version=version)
        scope = resp.groups[0] if version >= 8 else resp
        check(scope.error_code, f"OffsetFetch for group {group}")
        return {TopicPartition(t.name, p.partition_index): p.committed_offset
                for t in scope.topics for p in t.partitions if p.error_code == 0 and p.committed_offset >= 0}

    async def delete_offsets(self, group: str, partitions: Iterable[TopicPartition]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        """OffsetDelete at the group's coordinator: the group-level error code (GROUP_ID_NOT_FOUND,
        NON_EMPTY_GROUP, ...; then no partitions) and ``{partition: error code}``."""
        topics: dict[str, list[dict]] = defaultdict(list)
        for tp in sorted(partitions):
            topics[tp.topic].append({"partition_index": tp.partition})
        conn = await self.coordinator(group)
        resp = await conn.request(ApiKey.OFFSET_DELETE, {
            "group_id": group, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        return resp.error_code, {TopicPartition(t.name, p.partition_index): p.error_code
                                 for t in resp.topics for p in t.partitions}

    async def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """OffsetCommit as an admin does (no generation, no member): the group must be empty."""
        topics: dict[str, list[dict]] = defaultdict(list)
        for tp, offset in sorted(offsets.items()):
            topics[tp.topic].append({"partition_index": tp.partition, "committed_offset": offset,
                                     "committed_metadata": ""})
        conn = await self.coordinator(group)
        resp = await conn.request(ApiKey.OFFSET_COMMIT, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]},
            version=conn.pick_version(ApiKey.OFFSET_COMMIT, 8))
        for t in resp.topics:
            for p in t.partitions:
                check(p.error_code, f"OffsetCommit of {t.name}-{p.partition_index} for group {group}")

    # -- ACLs --------------------------------------------------------------------------------------
    # Any broker answers them (Kafka's admin sends them to the least loaded node).  Bindings and filters
    # are dicts of CreateAcls creations / DescribeAcls filters (wire codes; names and filters None for any).
    async def create_acls(self, creations: list[dict]) -> list[tuple[int, str]]:
        """CreateAcls: ``(error code, message)`` per creation, in order."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.CREATE_ACLS, {"creations": creations})
        return [(r.error_code, r.error_message or "") for r in resp.results]

    async def describe_acls(self, acl_filter: dict) -> list[Any]:
        """DescribeAcls of one filter: the matching resources (type, name, pattern type, acls)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.DESCRIBE_ACLS, acl_filter)
        check(resp.error_code, "DescribeAcls", resp.error_message)
        return list(resp.resources)

    async def delete_acls(self, filters: list[dict]) -> list[list[Any]]:
        """DeleteAcls: the ACLs each filter deleted (ToolError for a filter the broker refused)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.DELETE_ACLS, {"filters": filters})
        for r in resp.filter_results:
            check(r.error_code, "DeleteAcls", r.error_message)
        return [list(r.matching_acls) for r in resp.filter_results]

    # -- delegation tokens (KIP-48) ----------------------------------------------------------------
    # Any broker answers them (Kafka's admin sends them to the least loaded node); errors raise ToolError.
    async def create_delegation_token(self, renewers: list[tuple[str, str]], max_lifetime_ms: int,
                                      owner: tuple[str, str] | None = None) -> Any:
        """CreateDelegationToken (``owner`` (type, name) for another principal, KIP-373): the response."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.CREATE_DELEGATION_TOKEN, {
            "owner_principal_type": owner[0] if owner else None, "owner_principal_name": owner[1] if owner else None,
            "renewers": [{"principal_type": t, "principal_name": n} for t, n in renewers],
            "max_lifetime_ms": max_lifetime_ms})
        check(resp.error_code, "CreateDelegationToken")
        return resp

    async def renew_delegation_token(self, hmac: bytes, renew_period_ms: int) -> int:
        """RenewDelegationToken: the new expiry timestamp (ms)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.RENEW_DELEGATION_TOKEN, {"hmac": hmac, "renew_period_ms": renew_period_ms})
        check(resp.error_code, "RenewDelegationToken")
        return int(resp.expiry_timestamp_ms)

    async def expire_delegation_token(self, hmac: bytes, expiry_time_period_ms: int) -> int:
        """ExpireDelegationToken: the new expiry timestamp (ms)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.EXPIRE_DELEGATION_TOKEN,
                                  {"hmac": hmac, "expiry_time_period_ms": expiry_time_period_ms})
        check(resp.error_code, "ExpireDelegationToken")
        return int(resp.expiry_timestamp_ms)

    async def describe_delegation_tokens(self, owners: list[tuple[str, str]] | None = None) -> list[Any]:
        """DescribeDelegationToken: the tokens of ``owners`` (None: every token the principal may see)."""
        conn = await self.broker()
        resp = await conn.request(ApiKey.DESCRIBE_DELEGATION_TOKEN, {
            "owners": None if owners is None else [{"principal_type": t, "principal_name": n} for t, n in owners]})
        check(resp.error_code, "DescribeDelegationToken")
        return list(resp.tokens)

    # -- offsets -----------------------------------------------------------------------------------
    async def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets at each partition's leader: EARLIEST, LATEST or the first offset at a timestamp (ms;
        -1 when there is none)."""
        remaining = set(partitions)
        out: dict[TopicPartition, int] = {}
        deadline = trio.current_time() + self.retry_timeout_s
        while remaining:
            meta = await self.metadata(sorted({tp.topic for tp in remaining}))
            by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in remaining:
                info = meta.topics.get(tp.topic)
                if info is None or info.partition(tp.partition) is None:
                    raise ToolError(f"unknown partition {tp.topic}-{tp.partition}")
                leader = meta.leader_for(*tp)
                if leader is not None:
                    by_leader[leader].append(tp)
            for leader, tps in by_leader.items():
                for tp, (code, offset) in (await self._list_offsets_at(leader, tps, timestamp)).items():
                    if code == 0:
                        out[tp] = offset
                        remaining.discard(tp)
                    elif not is_retriable(code) or trio.current_time() > deadline:
                        check(code, f"ListOffsets of {tp.topic}-{tp.partition}")
            if remaining:
                if trio.current_time() > deadline:
                    raise ToolError(f"no leader for {sorted(remaining)}")
                await trio.sleep(RETRY_BACKOFF_S)
        return out

    async def _list_offsets_at(self, leader: int, tps: list[TopicPartition],
                               timestamp: int) -> dict[TopicPartition, tuple[int, int]]:
        conn = await self.broker(leader)
        version = conn.pick_version(ApiKey.LIST_OFFSETS)
        topics: dict[str, list[dict]] = defaultdict(list)
        for tp in tps:
            topics[tp.topic].append({"partition_index": tp.partition, "timestamp": timestamp})
        resp = await conn.request(ApiKey.LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}, version=version)
        out: dict[TopicPartition, tuple[int, int]] = {}
        for t in resp.topics:
            for p in t.partitions:
                offset = (p.old_style_offsets[0] if p.old_style_offsets else -1) if version == 0 else p.offset
                out[TopicPartition(t.name, p.partition_index)] = (p.error_code, offset)
        if len(out) < len(tps):
            log.info("ListOffsets at broker %d answered %d of %d partitions", leader, len(out), len(tps))
        return out


__all__ = ["AdminClient", "RESOURCE_TOPIC", "RESOURCE_BROKER", "OP_SET", "OP_DELETE", "OP_APPEND", "OP_SUBTRACT",
           "EARLIEST", "LATEST"]
