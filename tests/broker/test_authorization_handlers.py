"""Authorization in the handlers, without a network: each handler is built with its services and a
:class:`StandardAuthorizer`, and called with a ``RequestContext`` carrying the principal (``User:alice``,
``User:bob``, the broker's own) and peer a socket server would have filled in.  Requests and responses go
through their real schemas at the version named."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio

from helpers import HandlerEnv, batch, values
from minikafka.broker.groups import GroupCoordinator
from minikafka.broker.handlers import configs as CF
from minikafka.broker.handlers import groups as GR
from minikafka.broker.handlers import list_offsets as LO
from minikafka.broker.handlers import metadata as MD
from minikafka.broker.handlers import quotas as QU
from minikafka.broker.handlers import topics as TO
from minikafka.broker.handlers import transactions as TX
from minikafka.broker.handlers.authorization import authorize, peer_host
from minikafka.broker.handlers.fetch import FetchHandler
from minikafka.broker.handlers.produce import ProduceHandler
from minikafka.broker.producer_state import ProducerIdManager
from minikafka.broker.request import RequestContext
from minikafka.broker.security.acl import (CLUSTER_NAME, AclBinding, AclOperation, AclPermissionType, PatternType,
                                           ResourceType)
from minikafka.broker.security.authorizer import BROKER_PRINCIPAL, StandardAuthorizer
from minikafka.broker.txn import TransactionCoordinator
from minikafka.common import TopicPartition
from minikafka.common.clock import ManualClock
from minikafka.common.types import OffsetAndMetadata
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import Record, build_batch
from minikafka.common.clock import SYSTEM_CLOCK

K = ApiKey
O = AclOperation
T, G, C, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"
_corr = itertools.count(1)


class ZeroTimer:
    def task_ns(self) -> int:
        return 0


class Env(HandlerEnv):
    """One broker's services in memory, an authorizer with no ACLs (deny by default), topics "t" and
    "secret" (one partition each)."""

    def __init__(self, **config: Any) -> None:
        super().__init__(group_initial_rebalance_delay_ms=0, **config)
        self.authorizer = StandardAuthorizer()
        self.metadata.create_topic("t", 1, 1)
        self.metadata.create_topic("secret", 1, 1)

    def allow(self, rtype: ResourceType, name: str, principal: str, *ops: AclOperation, pattern: PatternType = LIT,
              permission: AclPermissionType = ALLOW) -> None:
        results = self.authorizer.create_acls([AclBinding.of(rtype, name, pattern, principal, "*", op, permission)
                                               for op in ops])
        assert all(code == 0 for code, _ in results)

    def deny(self, rtype: ResourceType, name: str, principal: str, *ops: AclOperation) -> None:
        self.allow(rtype, name, principal, *ops, permission=DENY)

    def produce(self) -> ProduceHandler:
        return ProduceHandler(self.log, self.topics, self.delayed_produce, self.quotas.produce, self.config,
                              self.clock, authorizer=self.authorizer)

    def fetch(self) -> FetchHandler:
        return FetchHandler(self.log, self.metadata, self.sessions, self.delayed_fetch, self.quotas.fetch,
                            self.quotas.request, self.leader_quota, ZeroTimer(), self.config, self.clock,
                            authorizer=self.authorizer)

    def groups(self) -> GroupCoordinator:
        return GroupCoordinator(self.config, None, clock=trio.current_time,
                                wall_clock=ManualClock(1_700_000_000_000))


async def call(handler: Any, key: ApiKey, version: int, fields: dict, principal: str = ALICE,
               peer: str = "10.1.2.3:50000") -> Any:
    """Build and parse the request, run the handler as ``principal`` from ``peer``, build and parse its
    response at the same version."""
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(int(key), version, next(_corr), "test", "conn", peer=peer, principal=principal,
                         request_size=100)
    body = await handler.handle(ctx, req)
    return None if body is None else api.response.parse(api.response.build(body, version), version)


def produce_fields(*topics: str, records: bytes | None = None, transactional_id: str | None = None) -> dict:
    return {"acks": 1, "timeout_ms": 1000, "transactional_id": transactional_id,
            "topic_data": [{"name": t, "partition_data": [{"index": 0, "records": records or batch([b"v"])}]}
                           for t in topics]}


def produce_errors(r: Any) -> dict[str, int]:
    return {t.name: t.partition_responses[0].error_code for t in r.responses}


def fetch_fields(*topics: str, replica_id: int = -1, max_wait_ms: int = 0, min_bytes: int = 1) -> dict:
    return {"replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "session_epoch": -1, "topics": [{"topic": t, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]} for t in topics]}


def fetch_errors(r: Any) -> dict[str, int]:
    return {t.topic: t.partitions[0].error_code for t in r.responses}


# -- helpers -----------------------------------------------------------------------------------------
def test_peer_host_and_no_authorizer() -> None:
    assert [peer_host(p) for p in ("10.0.0.1:9092", "::1:50000", "[::1]:50000", "", "?")] == [
        "10.0.0.1", "::1", "::1", "", ""]
    ctx = RequestContext(0, 0, 1, None, "c", principal="User:nobody")
    assert authorize(None, ctx, O.ALTER)  # no authorizer: everything allowed


# -- Produce -------------------------------------------------------------------------------------------
async def test_produce_needs_write_on_each_topic() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.WRITE)
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("t", "secret"))
    assert produce_errors(r) == {"t": 0, "secret": E.TOPIC_AUTHORIZATION_FAILED}
    assert env.log.get("t", 0).log.log_end_offset == 1 and env.log.get("secret", 0).log.log_end_offset == 0
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("t"), principal=BOB)
    assert produce_errors(r) == {"t": E.TOPIC_AUTHORIZATION_FAILED}
    # A missing topic is not disclosed nor created without CREATE: denied if WRITE is denied ...
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("missing"))
    assert produce_errors(r) == {"missing": E.TOPIC_AUTHORIZATION_FAILED}


async def test_produce_auto_creates_only_with_create() -> None:
    env = Env()
    env.allow(T, "new-", ALICE, O.WRITE, pattern=PRE)
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("new-a"))
    assert produce_errors(r) == {"new-a": E.UNKNOWN_TOPIC_OR_PARTITION}
    assert env.metadata.get_topic("new-a") is None
    env.allow(T, "new-b", ALICE, O.CREATE)
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("new-a", "new-b"))
    assert produce_errors(r) == {"new-a": E.UNKNOWN_TOPIC_OR_PARTITION, "new-b": 0}
    env.allow(C, CLUSTER_NAME, ALICE, O.CREATE)
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("new-a"))
    assert produce_errors(r) == {"new-a": 0}


async def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.WRITE)
    txn_batch = build_batch([Record(offset_delta=0, value=b"x")], producer_id=7, producer_epoch=0,
                            base_sequence=0, is_transactional=True, base_timestamp=SYSTEM_CLOCK.time_ms())
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("t", records=txn_batch, transactional_id="app-1"))
    assert produce_errors(r) == {"t": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    # A transactional batch without a transactional id in the request is refused the same way.
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("t", records=txn_batch))
    assert produce_errors(r) == {"t": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    assert env.log.get("t", 0).log.log_end_offset == 0
    # A plain batch carrying a transactional id is only checked against the topic (Kafka 3.x).
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("t", transactional_id="app-1"))
    assert produce_errors(r) == {"t": 0}


async def test_acks_zero_denied_gets_no_response() -> None:
    env = Env()
    fields = produce_fields("t")
    fields["acks"] = 0
    assert await call(env.produce(), K.PRODUCE, 9, fields) is None
    assert env.log.get("t", 0).log.log_end_offset == 0


# -- Fetch ---------------------------------------------------------------------------------------------
async def test_consumer_fetch_needs_read() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.WRITE)
    env.allow(T, "secret", BOB, O.WRITE)
    await call(env.produce(), K.PRODUCE, 9, produce_fields("t", records=batch([b"a", b"b"])))
    await call(env.produce(), K.PRODUCE, 9, produce_fields("secret", records=batch([b"s"])), principal=BOB)
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", "secret"))
    assert fetch_errors(r) == {"t": E.TOPIC_AUTHORIZATION_FAILED, "secret": E.TOPIC_AUTHORIZATION_FAILED}
    env.allow(T, "t", ALICE, O.READ)
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", "secret"))
    assert fetch_errors(r) == {"t": 0, "secret": E.TOPIC_AUTHORIZATION_FAILED}
    readable = next(t for t in r.responses if t.topic == "t").partitions[0]
    assert values(bytes(readable.records)) == [b"a", b"b"]
    denied = next(t for t in r.responses if t.topic == "secret").partitions[0]
    assert (denied.high_watermark, bytes(denied.records or b"")) == (-1, b"")


async def test_denied_partition_does_not_cut_the_long_poll_short(autojump_clock: trio.testing.MockClock) -> None:
    """Kafka answers unauthorized partitions beside the delayed fetch: the fetch still waits for data."""
    env = Env()
    env.allow(T, "t", ALICE, O.READ, O.WRITE)
    start = trio.current_time()
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", "secret", max_wait_ms=500))
    assert trio.current_time() - start >= 0.5
    assert fetch_errors(r) == {"t": 0, "secret": E.TOPIC_AUTHORIZATION_FAILED}
    # Nothing to wait for when every partition is denied.
    start = trio.current_time()
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("secret", max_wait_ms=500))
    assert trio.current_time() == start and fetch_errors(r) == {"secret": E.TOPIC_AUTHORIZATION_FAILED}


async def test_follower_fetch_needs_cluster_action() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.ALL)  # topic rights do not make a follower
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", replica_id=1))
    assert fetch_errors(r) == {"t": E.TOPIC_AUTHORIZATION_FAILED}
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", replica_id=1), principal=BROKER_PRINCIPAL)
    assert fetch_errors(r) == {"t": 0}
    env.allow(C, CLUSTER_NAME, ALICE, O.CLUSTER_ACTION)
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", replica_id=1))
    assert fetch_errors(r) == {"t": 0}


# -- offsets -------------------------------------------------------------------------------------------
async def test_list_offsets_offset_for_leader_epoch_and_delete_records() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.DESCRIBE)
    lo = await call(LO.ListOffsetsHandler(env.log, env.authorizer), K.LIST_OFFSETS, 7, {
        "replica_id": -1, "topics": [{"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]}
                                     for n in ("t", "secret")]})
    assert [p.partitions[0].error_code for p in lo.topics] == [0, E.TOPIC_AUTHORIZATION_FAILED]
    fields = {"replica_id": -1, "topics": [{"topic": n, "partitions": [{"partition": 0, "leader_epoch": 0}]}
                                           for n in ("t", "secret")]}
    ofe = await call(LO.OffsetForLeaderEpochHandler(env.log, env.authorizer), K.OFFSET_FOR_LEADER_EPOCH, 4, fields)
    assert [p.partitions[0].error_code for p in ofe.topics] == [0, E.TOPIC_AUTHORIZATION_FAILED]
    ofe = await call(LO.OffsetForLeaderEpochHandler(env.log, env.authorizer), K.OFFSET_FOR_LEADER_EPOCH, 4, fields,
                     principal=BROKER_PRINCIPAL)  # followers: CLUSTER_ACTION
    assert [p.partitions[0].error_code for p in ofe.topics] == [0, 0]
    fields = {"topics": [{"name": n, "partitions": [{"partition_index": 0, "offset": 0}]} for n in ("t", "secret")],
              "timeout_ms": 1000}
    dr = await call(LO.DeleteRecordsHandler(env.log, env.authorizer), K.DELETE_RECORDS, 2, fields)
    assert [p.partitions[0].error_code for p in dr.topics] == [E.TOPIC_AUTHORIZATION_FAILED] * 2
    env.allow(T, "t", ALICE, O.DELETE)
    dr = await call(LO.DeleteRecordsHandler(env.log, env.authorizer), K.DELETE_RECORDS, 2, fields)
    assert [p.partitions[0].error_code for p in dr.topics] == [0, E.TOPIC_AUTHORIZATION_FAILED]


# -- Metadata ------------------------------------------------------------------------------------------
async def test_metadata_hides_what_cannot_be_described() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.READ)
    handler = MD.MetadataHandler(env.metadata, env.topics, env.config, env.authorizer)
    everything = await call(handler, K.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": True})
    assert [(t.name, t.error_code) for t in everything.topics] == [("t", 0)]
    assert everything.topics[0].topic_authorized_operations == (1 << O.READ) | (1 << O.DESCRIBE)
    named = await call(handler, K.METADATA, 12, {"topics": [{"name": "t"}, {"name": "secret"}, {"name": "nope"}],
                                                 "allow_auto_topic_creation": False})
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("t", 0), ("secret", E.TOPIC_AUTHORIZATION_FAILED), ("nope", E.TOPIC_AUTHORIZATION_FAILED)]
    secret_id = env.metadata.get_topic("secret").topic_id
    by_id = await call(handler, K.METADATA, 12, {"topics": [{"topic_id": secret_id, "name": None}],
                                                 "allow_auto_topic_creation": False})
    assert (by_id.topics[0].name, by_id.topics[0].error_code) == (None, E.TOPIC_AUTHORIZATION_FAILED)
    v0 = await call(handler, K.METADATA, 0, {"topics": []})
    assert [t.name for t in v0.topics] == ["t"]


async def test_metadata_auto_creation_needs_create() -> None:
    env = Env()
    env.allow(T, "auto-", ALICE, O.DESCRIBE, pattern=PRE)
    handler = MD.MetadataHandler(env.metadata, env.topics, env.config, env.authorizer)
    r = await call(handler, K.METADATA, 9, {"topics": [{"name": "auto-1"}], "allow_auto_topic_creation": True})
    assert r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED and env.metadata.get_topic("auto-1") is None
    env.allow(T, "auto-", ALICE, O.CREATE, pattern=PRE)
    r = await call(handler, K.METADATA, 9, {"topics": [{"name": "auto-1"}], "allow_auto_topic_creation": True})
    assert r.topics[0].error_code == 0 and env.metadata.get_topic("auto-1") is not None
    # Without auto-creation a missing described topic is simply unknown.
    r = await call(handler, K.METADATA, 9, {"topics": [{"name": "auto-2"}], "allow_auto_topic_creation": False})
    assert r.topics[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_cluster_authorized_operations() -> None:
    env = Env()
    md = MD.MetadataHandler(env.metadata, env.topics, env.config, env.authorizer)
    dc = MD.DescribeClusterHandler(env.metadata, env.config, env.authorizer)
    r = await call(md, K.METADATA, 10, {"topics": [], "include_cluster_authorized_operations": True,
                                        "allow_auto_topic_creation": False})
    assert r.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    env.allow(C, CLUSTER_NAME, ALICE, O.DESCRIBE, O.CREATE)
    r = await call(dc, K.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": True})
    assert r.error_code == 0 and r.cluster_authorized_operations == (1 << O.DESCRIBE) | (1 << O.CREATE)
    r = await call(dc, K.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert r.cluster_authorized_operations == -2147483648
    # Without an authorizer: every operation the cluster supports, as Kafka reports.
    r = await call(MD.DescribeClusterHandler(env.metadata, env.config), K.DESCRIBE_CLUSTER, 0,
                   {"include_cluster_authorized_operations": True})
    assert r.cluster_authorized_operations == sum(1 << op for op in (
        O.CREATE, O.CLUSTER_ACTION, O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE, O.ALTER, O.DESCRIBE))


# -- topics and configs ----------------------------------------------------------------------------------
async def test_create_topics_needs_create_on_cluster_or_topic() -> None:
    env = Env()
    handler = TO.CreateTopicsHandler(env.metadata, env.config, env.authorizer)
    fields = {"topics": [{"name": n, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                          "configs": [{"name": "retention.ms", "value": "1000"}]} for n in ("team-a", "other")],
              "timeout_ms": 1000}
    r = await call(handler, K.CREATE_TOPICS, 5, fields)
    assert [t.error_code for t in r.topics] == [E.TOPIC_AUTHORIZATION_FAILED] * 2
    env.allow(T, "team-", ALICE, O.CREATE, pattern=PRE)
    r = await call(handler, K.CREATE_TOPICS, 5, fields)
    assert [(t.name, t.error_code) for t in r.topics] == [("team-a", 0), ("other", E.TOPIC_AUTHORIZATION_FAILED)]
    # Created, but its configs are not shown without DESCRIBE_CONFIGS on it.
    assert r.topics[0].topic_config_error_code == E.TOPIC_AUTHORIZATION_FAILED and r.topics[0].configs == []
    env.allow(C, CLUSTER_NAME, BOB, O.CREATE)
    env.allow(T, "*", BOB, O.DESCRIBE_CONFIGS)
    fields["topics"] = fields["topics"][1:]
    r = await call(handler, K.CREATE_TOPICS, 5, fields, principal=BOB)
    assert r.topics[0].error_code == 0 and [c.name for c in r.topics[0].configs] == ["retention.ms"]


async def test_delete_topics_and_create_partitions() -> None:
    env = Env()
    delete = TO.DeleteTopicsHandler(env.metadata, env.metadata, env.config, env.authorizer)
    r = await call(delete, K.DELETE_TOPICS, 4, {"topic_names": ["t", "nope"], "timeout_ms": 1000})
    assert [x.error_code for x in r.responses] == [E.TOPIC_AUTHORIZATION_FAILED] * 2
    secret_id = env.metadata.get_topic("secret").topic_id
    r = await call(delete, K.DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": secret_id}],
                                                "timeout_ms": 1000})
    assert (r.responses[0].name, r.responses[0].error_code) == (None, E.TOPIC_AUTHORIZATION_FAILED)
    parts = TO.CreatePartitionsHandler(env.metadata, env.metadata, env.authorizer)
    fields = {"topics": [{"name": "t", "count": 2, "assignments": None}], "timeout_ms": 1000, "validate_only": False}
    r = await call(parts, K.CREATE_PARTITIONS, 2, fields)
    assert r.results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    env.allow(T, "t", ALICE, O.ALTER, O.DELETE)
    r = await call(parts, K.CREATE_PARTITIONS, 2, fields)
    assert r.results[0].error_code == 0 and env.metadata.get_topic("t").num_partitions == 2
    r = await call(delete, K.DELETE_TOPICS, 4, {"topic_names": ["t"], "timeout_ms": 1000})
    assert r.responses[0].error_code == 0 and env.metadata.get_topic("t") is None


class Brokers:
    """Broker config resources of one broker (id 0), enough for the handlers."""

    def knows(self, name: str) -> bool:
        return name in ("", "0")

    def describe(self, name: str) -> dict[str, tuple[str, int]]:
        return {"leader.replication.throttled.rate": ("-1", 5)}

    def alter(self, name: str, changes: list, incremental: bool, validate_only: bool) -> None:
        pass


async def test_configs_need_describe_configs_and_alter_configs() -> None:
    env = Env()
    env.allow(T, "t", ALICE, O.ALTER_CONFIGS)
    describe = CF.DescribeConfigsHandler(env.metadata, Brokers(), env.config, env.authorizer)
    r = await call(describe, K.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
        {"resource_type": 2, "resource_name": "secret", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "0", "configuration_keys": None}]})
    assert [x.error_code for x in r.results] == [0, E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]
    assert r.results[0].configs and not r.results[1].configs
    alter = CF.AlterConfigsHandler(env.metadata, env.metadata, Brokers(), incremental=True, authorizer=env.authorizer)
    r = await call(alter, K.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": 2, "resource_name": n, "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "5000"}]} for n in ("t", "secret")]
        + [{"resource_type": 4, "resource_name": "", "configs": []}], "validate_only": False})
    assert [x.error_code for x in r.responses] == [0, E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]
    assert env.metadata.get_topic("t").configs["retention.ms"] == "5000"
    assert "retention.ms" not in env.metadata.get_topic("secret").configs


async def test_client_quota_apis_need_cluster_configs_rights() -> None:
    env = Env()
    describe = QU.DescribeClientQuotasHandler(env.quota_configs, env.authorizer)
    alter = QU.AlterClientQuotasHandler(env.quota_configs, env.authorizer)
    entry = {"entity": [{"entity_type": "user", "entity_name": "alice"}],
             "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}]}
    r = await call(alter, K.ALTER_CLIENT_QUOTAS, 1, {"entries": [entry], "validate_only": False})
    assert r.entries[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    r = await call(describe, K.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    env.allow(C, CLUSTER_NAME, ALICE, O.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    r = await call(alter, K.ALTER_CLIENT_QUOTAS, 1, {"entries": [entry], "validate_only": False})
    assert r.entries[0].error_code == 0
    r = await call(describe, K.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [], "strict": False})
    assert r.error_code == 0 and len(r.entries) == 1


# -- groups --------------------------------------------------------------------------------------------
async def test_group_membership_needs_read_on_the_group() -> None:
    env = Env()
    coordinator = env.groups()
    join = await call(GR.JoinGroupHandler(coordinator, env.authorizer), K.JOIN_GROUP, 9, {
        "group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "m-1",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert (join.error_code, join.member_id, join.generation_id) == (E.GROUP_AUTHORIZATION_FAILED, "", -1)
    for handler, key, version, fields in [
        (GR.SyncGroupHandler, K.SYNC_GROUP, 5, {"group_id": "g", "generation_id": 1, "member_id": "m",
                                                "assignments": []}),
        (GR.HeartbeatHandler, K.HEARTBEAT, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}),
        (GR.LeaveGroupHandler, K.LEAVE_GROUP, 5, {"group_id": "g", "members": [{"member_id": "m"}]}),
    ]:
        r = await call(handler(coordinator, env.authorizer), key, version, fields)
        assert r.error_code == E.GROUP_AUTHORIZATION_FAILED, key
    env.allow(G, "g", ALICE, O.READ)
    r = await call(GR.HeartbeatHandler(coordinator, env.authorizer), K.HEARTBEAT, 4,
                   {"group_id": "g", "generation_id": 1, "member_id": "m"})
    assert r.error_code != E.GROUP_AUTHORIZATION_FAILED  # the coordinator answers now


async def test_offset_commit_needs_read_on_group_and_topic() -> None:
    env = Env()
    coordinator = env.groups()
    handler = GR.OffsetCommitHandler(coordinator, env.metadata, env.authorizer)
    fields = {"group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": n, "partitions": [{"partition_index": 0, "committed_offset": 5}]} for n in ("t", "secret", "nope")]}

    def errors(r: Any) -> list[int]:
        return [t.partitions[0].error_code for t in r.topics]

    assert errors(await call(handler, K.OFFSET_COMMIT, 8, fields)) == [E.GROUP_AUTHORIZATION_FAILED] * 3
    env.allow(G, "g", ALICE, O.READ)
    env.allow(T, "t", ALICE, O.READ)
    env.allow(T, "nope", ALICE, O.READ)
    assert errors(await call(handler, K.OFFSET_COMMIT, 8, fields)) == [
        0, E.TOPIC_AUTHORIZATION_FAILED, E.UNKNOWN_TOPIC_OR_PARTITION]
    _, committed = coordinator.fetch_offsets("g", None)
    assert {tp: om.offset for tp, om in committed.items() if om is not None} == {TopicPartition("t", 0): 5}


async def test_offset_fetch_needs_describe_on_group_and_topic() -> None:
    env = Env()
    coordinator = env.groups()
    coordinator.commit_offsets("g", "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(3),
                                                   TopicPartition("secret", 0): OffsetAndMetadata(4)})
    handler = GR.OffsetFetchHandler(coordinator, env.authorizer)
    named = {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0]},
                                         {"name": "secret", "partition_indexes": [0]}]}
    r = await call(handler, K.OFFSET_FETCH, 7, named)
    assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
    r = await call(handler, K.OFFSET_FETCH, 1, named)  # v0-1: on every partition
    assert {p.error_code for t in r.topics for p in t.partitions} == {E.GROUP_AUTHORIZATION_FAILED}
    env.allow(G, "g", ALICE, O.DESCRIBE)
    env.allow(T, "t", ALICE, O.DESCRIBE)
    r = await call(handler, K.OFFSET_FETCH, 7, named)
    got = {t.name: (t.partitions[0].committed_offset, t.partitions[0].error_code) for t in r.topics}
    assert got == {"t": (3, 0), "secret": (-1, E.TOPIC_AUTHORIZATION_FAILED)}
    r = await call(handler, K.OFFSET_FETCH, 7, {"group_id": "g", "topics": None})  # all: the secret one hidden
    assert [(t.name, t.partitions[0].committed_offset) for t in r.topics] == [("t", 3)]
    r = await call(handler, K.OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None},
                                                           {"group_id": "other", "topics": None}]})
    assert [(g.group_id, g.error_code, [t.name for t in g.topics]) for g in r.groups] == [
        ("g", 0, ["t"]), ("other", E.GROUP_AUTHORIZATION_FAILED, [])]


async def test_group_admin_apis() -> None:
    env = Env()
    coordinator = env.groups()
    for gid in ("g1", "g2"):
        coordinator.commit_offsets(gid, "", None, -1, {TopicPartition("t", 0): OffsetAndMetadata(1)})
    listing = GR.ListGroupsHandler(coordinator, env.authorizer)
    r = await call(listing, K.LIST_GROUPS, 4, {"states_filter": []})
    assert r.error_code == 0 and r.groups == []
    env.allow(G, "g1", ALICE, O.DESCRIBE)
    r = await call(listing, K.LIST_GROUPS, 4, {"states_filter": []})
    assert [g.group_id for g in r.groups] == ["g1"]
    env.allow(C, CLUSTER_NAME, BOB, O.DESCRIBE)  # DESCRIBE on the cluster lists every group
    r = await call(listing, K.LIST_GROUPS, 4, {"states_filter": []}, principal=BOB)
    assert sorted(g.group_id for g in r.groups) == ["g1", "g2"]
    describe = GR.DescribeGroupsHandler(coordinator, env.authorizer)
    r = await call(describe, K.DESCRIBE_GROUPS, 5, {"groups": ["g1", "g2"], "include_authorized_operations": True})
    assert [(g.group_id, g.error_code) for g in r.groups] == [("g1", 0), ("g2", E.GROUP_AUTHORIZATION_FAILED)]
    assert r.groups[0].authorized_operations == 1 << O.DESCRIBE
    delete = GR.DeleteGroupsHandler(coordinator, env.authorizer)
    env.allow(G, "g2", ALICE, O.DELETE)
    r = await call(delete, K.DELETE_GROUPS, 2, {"groups_names": ["g1", "g2"]})
    assert [(x.group_id, x.error_code) for x in r.results] == [("g1", E.GROUP_AUTHORIZATION_FAILED), ("g2", 0)]


async def test_find_coordinator_needs_describe() -> None:
    env = Env()
    handler = GR.FindCoordinatorHandler(env.metadata, env.authorizer)
    r = await call(handler, K.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "h"]})
    assert [c.error_code for c in r.coordinators] == [E.GROUP_AUTHORIZATION_FAILED] * 2
    env.allow(G, "g", ALICE, O.READ)  # READ implies DESCRIBE
    r = await call(handler, K.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g", "h"]})
    assert [(c.key, c.error_code, c.node_id) for c in r.coordinators] == [
        ("g", 0, 0), ("h", E.GROUP_AUTHORIZATION_FAILED, -1)]
    r = await call(handler, K.FIND_COORDINATOR, 3, {"key": "tx-1", "key_type": 1})
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    env.allow(TXN, "tx-", ALICE, O.WRITE, pattern=PRE)
    r = await call(handler, K.FIND_COORDINATOR, 3, {"key": "tx-1", "key_type": 1})
    assert (r.error_code, r.node_id) == (0, 0)


# -- transactions ----------------------------------------------------------------------------------------
def txn_env() -> tuple[Env, TransactionCoordinator]:
    env = Env()
    return env, TransactionCoordinator(env.config, None, ProducerIdManager(), env.metadata, env.clock)


async def test_init_producer_id() -> None:
    env, txn = txn_env()
    handler = TX.InitProducerIdHandler(ProducerIdManager(), txn, authorizer=env.authorizer)
    transactional = {"transactional_id": "app-1", "transaction_timeout_ms": 60000}
    idempotent = {"transactional_id": None, "transaction_timeout_ms": 60000}
    r = await call(handler, K.INIT_PRODUCER_ID, 4, transactional)
    assert (r.error_code, r.producer_id) == (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)
    r = await call(handler, K.INIT_PRODUCER_ID, 4, idempotent)
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    env.allow(TXN, "app-1", ALICE, O.WRITE)
    r = await call(handler, K.INIT_PRODUCER_ID, 4, transactional)
    assert r.error_code == 0 and r.producer_id >= 0
    # Idempotence (KIP-679): WRITE on any topic is enough ...
    env.allow(T, "t", ALICE, O.WRITE)
    assert (await call(handler, K.INIT_PRODUCER_ID, 4, idempotent)).error_code == 0
    # ... or IDEMPOTENT_WRITE on the cluster.
    env.allow(C, CLUSTER_NAME, BOB, O.IDEMPOTENT_WRITE)
    assert (await call(handler, K.INIT_PRODUCER_ID, 4, idempotent, principal=BOB)).error_code == 0


async def test_add_partitions_and_offsets_and_end_txn() -> None:
    env, txn = txn_env()
    env.allow(TXN, "app-1", ALICE, O.WRITE)
    got = txn.init_producer_id("app-1", 60000)
    add = TX.AddPartitionsToTxnHandler(txn, env.metadata, authorizer=env.authorizer)
    fields = {"v3_and_below_transactional_id": "app-1", "v3_and_below_producer_id": got.producer_id,
              "v3_and_below_producer_epoch": got.producer_epoch,
              "v3_and_below_topics": [{"name": "t", "partitions": [0]}, {"name": "secret", "partitions": [0]}]}

    def errors(r: Any) -> dict[str, int]:
        return {t.name: t.results_by_partition[0].partition_error_code for t in r.results_by_topic_v3_and_below}

    r = await call(add, K.ADD_PARTITIONS_TO_TXN, 3, fields, principal=BOB)
    assert errors(r) == dict.fromkeys(("t", "secret"), E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    env.allow(T, "t", ALICE, O.WRITE)
    r = await call(add, K.ADD_PARTITIONS_TO_TXN, 3, fields)
    assert errors(r) == {"t": E.OPERATION_NOT_ATTEMPTED, "secret": E.TOPIC_AUTHORIZATION_FAILED}
    fields["v3_and_below_topics"] = fields["v3_and_below_topics"][:1]
    assert errors(await call(add, K.ADD_PARTITIONS_TO_TXN, 3, fields)) == {"t": 0}
    # The broker-to-broker form (v4+, KIP-890 verification) needs CLUSTER_ACTION.
    v4 = {"transactions": [{"transactional_id": "app-1", "producer_id": got.producer_id,
                            "producer_epoch": got.producer_epoch, "verify_only": True,
                            "topics": [{"name": "t", "partitions": [0]}]}]}
    r = await call(add, K.ADD_PARTITIONS_TO_TXN, 4, v4)
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    r = await call(add, K.ADD_PARTITIONS_TO_TXN, 4, v4, principal=BROKER_PRINCIPAL)
    assert r.error_code == 0 and r.results_by_transaction[0].topic_results[0].results_by_partition[0] \
        .partition_error_code == 0

    offsets = TX.AddOffsetsToTxnHandler(txn, authorizer=env.authorizer)
    ofields = {"transactional_id": "app-1", "producer_id": got.producer_id, "producer_epoch": got.producer_epoch,
               "group_id": "g"}
    assert (await call(offsets, K.ADD_OFFSETS_TO_TXN, 3, ofields, principal=BOB)).error_code == \
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert (await call(offsets, K.ADD_OFFSETS_TO_TXN, 3, ofields)).error_code == E.GROUP_AUTHORIZATION_FAILED
    env.allow(G, "g", ALICE, O.READ)
    assert (await call(offsets, K.ADD_OFFSETS_TO_TXN, 3, ofields)).error_code == 0

    end = TX.EndTxnHandler(txn, authorizer=env.authorizer)
    r = await call(end, K.END_TXN, 3, {"transactional_id": "app-1", "producer_id": got.producer_id,
                                       "producer_epoch": got.producer_epoch, "committed": False}, principal=BOB)
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_txn_offset_commit() -> None:
    env, txn = txn_env()
    coordinator = env.groups()
    handler = TX.TxnOffsetCommitHandler(coordinator, txn, env.metadata, env.authorizer)
    fields = {"transactional_id": "app-1", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
              "topics": [{"name": n, "partitions": [{"partition_index": 0, "committed_offset": 1}]}
                         for n in ("t", "secret")]}

    def errors(r: Any) -> list[int]:
        return [t.partitions[0].error_code for t in r.topics]

    assert errors(await call(handler, K.TXN_OFFSET_COMMIT, 3, fields)) == [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2
    env.allow(TXN, "app-1", ALICE, O.WRITE)
    assert errors(await call(handler, K.TXN_OFFSET_COMMIT, 3, fields)) == [E.GROUP_AUTHORIZATION_FAILED] * 2
    env.allow(G, "g", ALICE, O.READ)
    env.allow(T, "t", ALICE, O.READ)
    got = errors(await call(handler, K.TXN_OFFSET_COMMIT, 3, fields))
    assert got[1] == E.TOPIC_AUTHORIZATION_FAILED and got[0] != E.TOPIC_AUTHORIZATION_FAILED


async def test_write_txn_markers_needs_cluster_action() -> None:
    env = Env()
    handler = TX.WriteTxnMarkersHandler(env.log, env.delayed_produce, env.authorizer)
    fields = {"markers": [{"producer_id": 1, "producer_epoch": 0, "transaction_result": True,
                           "topics": [{"name": "nope", "partition_indexes": [0]}], "coordinator_epoch": 0}]}
    r = await call(handler, K.WRITE_TXN_MARKERS, 1, fields)
    assert r.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    r = await call(handler, K.WRITE_TXN_MARKERS, 1, fields, principal=BROKER_PRINCIPAL)
    assert r.markers[0].topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_describe_and_list_transactions_and_producers() -> None:
    env, txn = txn_env()
    for tid in ("app-1", "app-2"):
        got = txn.init_producer_id(tid, 60000)
        txn.add_partitions(tid, got.producer_id, got.producer_epoch, [TopicPartition("t", 0),
                                                                      TopicPartition("secret", 0)])
    env.allow(TXN, "app-1", ALICE, O.DESCRIBE)
    env.allow(T, "t", ALICE, O.DESCRIBE)
    describe = TX.DescribeTransactionsHandler(txn, authorizer=env.authorizer)
    r = await call(describe, K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["app-1", "app-2"]})
    assert [(s.transactional_id, s.error_code) for s in r.transaction_states] == [
        ("app-1", 0), ("app-2", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]
    assert [t.topic for t in r.transaction_states[0].topics] == ["t"]  # "secret" is not shown
    listing = TX.ListTransactionsHandler(txn, authorizer=env.authorizer)
    r = await call(listing, K.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []})
    assert [s.transactional_id for s in r.transaction_states] == ["app-1"]
    producers = TX.DescribeProducersHandler(env.log, env.authorizer)
    fields = {"topics": [{"name": n, "partition_indexes": [0]} for n in ("t", "secret")]}
    r = await call(producers, K.DESCRIBE_PRODUCERS, 0, fields)
    assert [t.partitions[0].error_code for t in r.topics] == [E.TOPIC_AUTHORIZATION_FAILED] * 2
    env.allow(T, "t", ALICE, O.READ)
    r = await call(producers, K.DESCRIBE_PRODUCERS, 0, fields)
    assert [t.partitions[0].error_code for t in r.topics] == [0, E.TOPIC_AUTHORIZATION_FAILED]


# -- the hot path without an authorizer -------------------------------------------------------------------
async def test_no_authorizer_checks_nothing() -> None:
    env = Env()
    env.authorizer = None  # type: ignore[assignment]
    r = await call(env.produce(), K.PRODUCE, 9, produce_fields("t", "brand-new"), principal="User:anyone")
    assert produce_errors(r) == {"t": 0, "brand-new": 0}
    r = await call(env.fetch(), K.FETCH, 12, fetch_fields("t", replica_id=1), principal="User:anyone")
    assert fetch_errors(r) == {"t": 0}


@pytest.mark.parametrize("principal,expected", [(ALICE, True), (BOB, False), ("User:ANONYMOUS", False)])
def test_the_principal_and_host_come_from_the_request_context(principal: str, expected: bool) -> None:
    env = Env()
    env.authorizer.create_acls([AclBinding.of(T, "t", LIT, ALICE, "10.1.2.3", O.READ, ALLOW)])
    ctx = RequestContext(1, 12, 1, None, "c", peer="10.1.2.3:4444", principal=principal)
    assert authorize(env.authorizer, ctx, O.READ, T, "t") is expected
    other_host = RequestContext(1, 12, 1, None, "c", peer="10.9.9.9:4444", principal=principal)
    assert not authorize(env.authorizer, other_host, O.READ, T, "t")


# -- SCRAM credential administration ------------------------------------------------------------------
async def test_scram_credential_apis_need_describe_and_alter_on_the_cluster() -> None:
    from minikafka.broker.handlers.scram import AlterUserScramCredentialsHandler, DescribeUserScramCredentialsHandler
    from minikafka.broker.security.scram import ScramCredentialStore

    env = Env()
    store = ScramCredentialStore()
    describe = DescribeUserScramCredentialsHandler(store, authorizer=env.authorizer)
    alter = AlterUserScramCredentialsHandler(store, authorizer=env.authorizer)
    upsert = {"deletions": [], "upsertions": [{"name": "carol", "mechanism": 2, "iterations": 4096,
                                              "salt": b"s" * 16, "salted_password": b"p" * 64}]}
    r = await call(alter, K.ALTER_USER_SCRAM_CREDENTIALS, 0, upsert)
    assert [(x.user, x.error_code) for x in r.results] == [("carol", E.CLUSTER_AUTHORIZATION_FAILED)]
    assert "carol" not in store.users()
    r = await call(describe, K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    env.allow(ResourceType.CLUSTER, "kafka-cluster", ALICE, O.ALTER)  # ALTER implies DESCRIBE
    r = await call(alter, K.ALTER_USER_SCRAM_CREDENTIALS, 0, upsert)
    assert [(x.user, x.error_code) for x in r.results] == [("carol", 0)]
    r = await call(describe, K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": None})
    assert r.error_code == 0 and [x.user for x in r.results] == ["carol"]
