"""DescribeTopicPartitions, OffsetDelete, ElectLeaders, DescribeQuorum and UnregisterBroker handlers, in memory:
each handler built with its services, requests and responses through their real schemas."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import trio

from group_env import ClassicMember, GroupEnv, KipMember
from minikafka.broker.error_responses import error_response
from minikafka.broker.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from minikafka.broker.handlers.elect_leaders import ElectLeadersHandler
from minikafka.broker.handlers.offset_delete import OffsetDeleteHandler
from minikafka.broker.handlers.quorum import DescribeQuorumHandler, UnregisterBrokerHandler
from minikafka.broker.config import BrokerConfig
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.request import RequestContext
from minikafka.broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from minikafka.broker.security.authorizer import StandardAuthorizer
from minikafka.common import ManualClock
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.types import ZERO_UUID

K = ApiKey
O = AclOperation
ALICE = "User:alice"
_corr = itertools.count(1)


async def call(handler: Any, key: ApiKey, version: int, fields: dict, principal: str = ALICE) -> Any:
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(int(key), version, next(_corr), "test", "conn", peer="10.1.2.3:50000", principal=principal)
    body = await handler.handle(ctx, req)
    return api.response.parse(api.response.build(body, version), version)


def cluster(n: int = 3, live: tuple[int, ...] = (0, 1, 2)) -> ClusterMetadata:
    md = ClusterMetadata(list(range(n)))
    for b in live:
        md.broker_started(b, "127.0.0.1", 9092 + b, endpoints={"PLAINTEXT": ("127.0.0.1", 9092 + b)})
    return md


def allow(authorizer: StandardAuthorizer, rtype: ResourceType, name: str, *ops: AclOperation) -> None:
    results = authorizer.create_acls([AclBinding.of(rtype, name, PatternType.LITERAL, ALICE, "*", op,
                                                    AclPermissionType.ALLOW) for op in ops])
    assert all(code == 0 for code, _ in results)


# -- DescribeTopicPartitions ---------------------------------------------------------------------------
def dtp(md: ClusterMetadata, authorizer: StandardAuthorizer | None = None, **config: Any) -> Any:
    return DescribeTopicPartitionsHandler(md, BrokerConfig(**config), authorizer=authorizer)


def page(r: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in r.topics]


def cursor_of(r: Any) -> tuple[str, int] | None:
    return None if r.next_cursor is None else (r.next_cursor.topic_name, r.next_cursor.partition_index)


async def test_describe_topic_partitions_pages_with_the_cursor() -> None:
    md = cluster()
    for name, n in (("b", 2), ("a", 3), ("c", 1)):
        md.create_topic(name, n, 2)
    h = dtp(md)
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 2})
    assert (page(r), cursor_of(r)) == ([("a", [0, 1])], ("a", 2))
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 2,
                                                         "cursor": {"topic_name": "a", "partition_index": 2}})
    assert (page(r), cursor_of(r)) == ([("a", [2]), ("b", [0])], ("b", 1))
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 2,
                                                         "cursor": {"topic_name": "b", "partition_index": 1}})
    assert (page(r), cursor_of(r)) == ([("b", [1]), ("c", [0])], None)
    # A limit ending exactly at a topic's end: the cursor points at the next topic's partition 0.
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 3})
    assert (page(r), cursor_of(r)) == ([("a", [0, 1, 2])], ("b", 0))
    # The broker's max.request.partition.size.limit caps the request's; a limit below 1 is 1.
    r = await call(dtp(md, max_request_partition_size_limit=4), K.DESCRIBE_TOPIC_PARTITIONS, 0,
                   {"topics": [], "response_partition_limit": 100})
    assert (page(r), cursor_of(r)) == ([("a", [0, 1, 2]), ("b", [0])], ("b", 1))
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [], "response_partition_limit": 0})
    assert (page(r), cursor_of(r)) == ([("a", [0])], ("a", 1))
    # Named topics, sorted, from the cursor's topic on; the default limit (2000) takes everything.
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "c"}, {"name": "a"}, {"name": "b"}],
                                                         "cursor": {"topic_name": "b", "partition_index": 1}})
    assert (page(r), cursor_of(r)) == ([("b", [1]), ("c", [0])], None)


async def test_describe_topic_partitions_describes_like_metadata() -> None:
    md = cluster(live=(0, 1))
    topic = md.create_topic("t", 2, 2, assignments={0: [2, 0], 1: [0, 1]})
    r = await call(dtp(md), K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "t"}]})
    (t,) = r.topics
    assert (t.error_code, t.name, t.topic_id, t.is_internal) == (0, "t", topic.topic_id, False)
    assert t.topic_authorized_operations > 0  # without an authorizer: every topic operation
    p0, p1 = t.partitions
    # Broker 2 is not running: the partition it leads has no leader, and it is an offline replica.
    assert (p0.error_code, p0.leader_id, p0.leader_epoch, list(p0.replica_nodes), list(p0.isr_nodes),
            list(p0.offline_replicas)) == (0, -1, 0, [2, 0], [2, 0], [2])
    assert (p1.leader_id, list(p1.offline_replicas)) == (0, [])
    # No eligible leader replicas (ELR is off): both lists empty.
    assert (list(p1.eligible_leader_replicas), list(p1.last_known_elr)) == ([], [])
    assert r.next_cursor is None


async def test_describe_topic_partitions_missing_and_invalid_topics() -> None:
    md = cluster()
    md.create_topic("t", 1, 1)
    r = await call(dtp(md), K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [
        {"name": "t"}, {"name": "missing"}, {"name": "bad name!"}, {"name": "__consumer_offsets"}]})
    assert [(t.name, t.error_code, t.is_internal, t.topic_id) for t in r.topics if t.name != "t"] == [
        ("__consumer_offsets", E.UNKNOWN_TOPIC_OR_PARTITION, True, ZERO_UUID),
        ("bad name!", E.INVALID_TOPIC_EXCEPTION, False, ZERO_UUID),
        ("missing", E.UNKNOWN_TOPIC_OR_PARTITION, False, ZERO_UUID)]
    # A cursor whose topic is not named, or with a negative partition: the request is invalid (every topic
    # named gets INVALID_REQUEST, without partitions).
    r = await call(dtp(md), K.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [{"name": "t"}], "cursor": {"topic_name": "u", "partition_index": 0}})
    assert [(t.name, t.error_code, list(t.partitions)) for t in r.topics] == [("t", E.INVALID_REQUEST, [])]
    assert r.next_cursor is None
    r = await call(dtp(md), K.DESCRIBE_TOPIC_PARTITIONS, 0, {
        "topics": [], "cursor": {"topic_name": "t", "partition_index": -1}})
    assert list(r.topics) == []


async def test_describe_topic_partitions_needs_describe_on_each_topic() -> None:
    md = cluster()
    md.create_topic("t", 1, 1)
    md.create_topic("secret", 1, 1)
    authorizer = StandardAuthorizer()
    allow(authorizer, ResourceType.TOPIC, "t", O.DESCRIBE)
    h = dtp(md, authorizer)
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "secret"}, {"name": "t"},
                                                                   {"name": "missing"}]})
    # Unauthorized topics come after the described ones, existing or not, without their topic id.
    assert [(t.name, t.error_code, t.topic_id == ZERO_UUID) for t in r.topics] == [
        ("t", 0, False), ("missing", E.TOPIC_AUTHORIZATION_FAILED, True),
        ("secret", E.TOPIC_AUTHORIZATION_FAILED, True)]
    described = r.topics[0]
    assert described.topic_authorized_operations == 1 << O.DESCRIBE
    assert r.topics[1].topic_authorized_operations == -2147483648
    # All topics: the unauthorized ones are left out.
    r = await call(h, K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": []})
    assert page(r) == [("t", [0])]


# -- OffsetDelete --------------------------------------------------------------------------------------
def offset_delete(env: GroupEnv, authorizer: StandardAuthorizer | None = None, owns: bool = True) -> Any:
    return OffsetDeleteHandler(env.coordinator, env.metadata, authorizer=authorizer, 
                               coordinator_error=lambda g: E.NONE if owns else E.NOT_COORDINATOR)


async def delete(handler: Any, partitions: dict[str, list[int]], group: str = "g") -> tuple[int, dict]:
    r = await call(handler, K.OFFSET_DELETE, 0, {"group_id": group, "topics": [
        {"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in partitions.items()]})
    return r.error_code, {(t.name, p.partition_index): p.error_code for t in r.topics for p in t.partitions}


async def test_offset_delete_of_a_simple_group() -> None:
    env = GroupEnv()
    assert await env.commit(8, "", -1, {("t", 0): 5, ("t", 1): 6, ("u", 0): 7}) == {
        ("t", 0): 0, ("t", 1): 0, ("u", 0): 0}
    h = offset_delete(env)
    assert await delete(h, {"t": [0, 9], "missing": [0], "u": [1]}) == (0, {
        ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("missing", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", 0): 0, ("u", 1): 0})
    assert (await env.fetch(8, topics={"t": [0, 1], "u": [0]}))[1] == {("t", 0): -1, ("t", 1): 6, ("u", 0): 7}
    # Group-level errors answer no partitions.
    assert await delete(h, {"t": [1]}, group="nope") == (E.GROUP_ID_NOT_FOUND, {})
    assert await delete(h, {"t": [1]}, group="") == (E.INVALID_GROUP_ID, {})
    assert await delete(offset_delete(env, owns=False), {"t": [1]}) == (E.NOT_COORDINATOR, {})


async def test_offset_delete_survives_a_restart(tmp_path: Any) -> None:
    env = GroupEnv(tmp_path)
    await env.commit(8, "", -1, {("t", 0): 5, ("t", 1): 6})
    assert await delete(offset_delete(env), {"t": [0]}) == (0, {("t", 0): 0})
    env = env.restart()
    assert (await env.fetch(8, topics={"t": [0, 1]}))[1] == {("t", 0): -1, ("t", 1): 6}


async def test_offset_delete_refuses_topics_a_classic_consumer_group_subscribes_to(nursery: trio.Nursery) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    await env.commit(8, "", -1, {("t", 0): 5, ("u", 0): 7})
    member = ClassicMember(env, ["t"])
    assert (await member.join()).error_code == 0
    h = offset_delete(env)
    assert await delete(h, {"t": [0], "u": [0]}) == (0, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0})
    assert (await env.fetch(8, topics={"t": [0], "u": [0]}))[1] == {("t", 0): 5, ("u", 0): -1}
    assert (await member.leave()).error_code == 0
    assert await delete(h, {"t": [0]}) == (0, {("t", 0): 0})


async def test_offset_delete_of_a_non_consumer_classic_group_with_members(nursery: trio.Nursery) -> None:
    env = GroupEnv()
    nursery.start_soon(env.coordinator.run)
    r = await env.call(K.JOIN_GROUP, 3, {"group_id": "g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                                         "member_id": "", "group_instance_id": None, "protocol_type": "connect",
                                         "protocols": [{"name": "v1", "metadata": b"x"}]})
    assert r.error_code == 0
    assert await delete(offset_delete(env), {"t": [0]}) == (E.NON_EMPTY_GROUP, {})


async def test_offset_delete_refuses_topics_a_kip848_group_subscribes_to() -> None:
    env = GroupEnv()
    member = KipMember(env, ["t"])
    await member.heartbeat()
    assert await env.commit(9, member.member_id, member.epoch, {("t", 0): 3}) == {("t", 0): 0}
    await env.commit(9, member.member_id, member.epoch, {("u", 1): 4})
    assert await delete(offset_delete(env), {"t": [0], "u": [1]}) == (
        0, {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 1): 0})


async def test_offset_delete_needs_delete_on_the_group_and_read_on_topics() -> None:
    env = GroupEnv()
    await env.commit(8, "", -1, {("t", 0): 5, ("u", 0): 7})
    authorizer = StandardAuthorizer()
    h = offset_delete(env, authorizer)
    assert await delete(h, {"t": [0]}) == (E.GROUP_AUTHORIZATION_FAILED, {})
    allow(authorizer, ResourceType.GROUP, "g", O.DELETE)
    allow(authorizer, ResourceType.TOPIC, "t", O.READ)
    assert await delete(h, {"t": [0], "u": [0]}) == (0, {("u", 0): E.TOPIC_AUTHORIZATION_FAILED, ("t", 0): 0})
    assert (await env.fetch(8, topics={"t": [0], "u": [0]}))[1] == {("t", 0): -1, ("u", 0): 7}


# -- ElectLeaders --------------------------------------------------------------------------------------
def results(r: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    return {(t.topic, p.partition_id): (p.error_code, p.error_message)
            for t in r.replica_election_results for p in t.partition_result}


async def test_preferred_election_moves_leadership_back() -> None:
    md = cluster()
    md.create_topic("t", 2, 3, assignments={0: [1, 2, 0], 1: [2, 0, 1]})
    md.broker_stopped(1)
    assert (md.partition_leader("t", 0), md.topics["t"].partitions[0].leader_epoch) == (2, 1)
    h = ElectLeadersHandler(md, md)
    r = await call(h, K.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
        {"topic": "t", "partitions": [0, 1, 7]}, {"topic": "nope", "partitions": [0]}]})
    assert r.error_code == 0
    assert results(r) == {("t", 0): (E.PREFERRED_LEADER_NOT_AVAILABLE, None), ("t", 1): (E.ELECTION_NOT_NEEDED, None),
                          ("t", 7): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-7"),
                          ("nope", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")}
    md.broker_started(1, "127.0.0.1", 9093)
    r = await call(h, K.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}]})
    assert results(r) == {("t", 0): (E.PREFERRED_LEADER_NOT_AVAILABLE, None)}  # 1 is not back in the ISR yet
    md.set_isr("t", 0, [1, 2, 0])
    changes: list[tuple[str, str]] = []
    md.listeners.append(lambda kind, name: changes.append((kind, name)))
    # All partitions (null): only those with an election are answered; v0 is preferred.
    r = await call(h, K.ELECT_LEADERS, 0, {"topic_partitions": None})
    assert results(r) == {("t", 0): (0, None)}
    assert (md.partition_leader("t", 0), md.topics["t"].partitions[0].leader_epoch) == (1, 2)
    assert changes == [("leadership", "t")]


async def test_unclean_election_picks_a_live_replica_out_of_the_isr() -> None:
    md = cluster()
    md.create_topic("t", 1, 2, assignments={0: [1, 2]})
    md.broker_stopped(1)
    md.broker_stopped(2)  # offline, ISR [2]
    pm = md.topics["t"].partitions[0]
    assert (pm.leader, pm.isr) == (-1, [2])
    h = ElectLeadersHandler(md, md)
    fields = {"election_type": 1, "topic_partitions": [{"topic": "t", "partitions": [0]}]}
    assert results(await call(h, K.ELECT_LEADERS, 1, fields)) == {("t", 0): (E.ELIGIBLE_LEADERS_NOT_AVAILABLE, None)}
    md.broker_started(1, "127.0.0.1", 9093)
    assert results(await call(h, K.ELECT_LEADERS, 1, {**fields, "election_type": 0})) == {
        ("t", 0): (E.PREFERRED_LEADER_NOT_AVAILABLE, None)}
    assert results(await call(h, K.ELECT_LEADERS, 1, fields)) == {("t", 0): (0, None)}
    assert (pm.leader, pm.isr, pm.leader_epoch) == (1, [1], 3)
    assert results(await call(h, K.ELECT_LEADERS, 1, fields)) == {("t", 0): (E.ELECTION_NOT_NEEDED, None)}


async def test_elect_leaders_errors() -> None:
    md = cluster()
    md.create_topic("t", 1, 1)
    authorizer = StandardAuthorizer()
    h = ElectLeadersHandler(md, md, authorizer)
    fields = {"election_type": 0, "topic_partitions": [{"topic": "t", "partitions": [0]}]}
    r = await call(h, K.ELECT_LEADERS, 2, fields)
    assert (r.error_code, results(r)) == (E.CLUSTER_AUTHORIZATION_FAILED,
                                          {("t", 0): (E.CLUSTER_AUTHORIZATION_FAILED, None)})
    allow(authorizer, ResourceType.CLUSTER, "kafka-cluster", O.ALTER)
    assert results(await call(h, K.ELECT_LEADERS, 2, fields)) == {("t", 0): (E.ELECTION_NOT_NEEDED, None)}
    r = await call(h, K.ELECT_LEADERS, 2, {**fields, "election_type": 2})
    assert (r.error_code, results(r)) == (E.INVALID_REQUEST, {("t", 0): (E.INVALID_REQUEST, None)})


async def test_elections_of_many_partitions_persist_the_metadata_once(tmp_path: Path, monkeypatch: Any) -> None:
    md = ClusterMetadata([0, 1, 2], data_dir=tmp_path)
    for b in (0, 1, 2):
        md.broker_started(b, "127.0.0.1", 9092 + b)
    md.create_topic("a", 60, 3)
    md.create_topic("b", 60, 3)
    md.broker_stopped(0)
    md.broker_started(0, "127.0.0.1", 9092)
    moved = {(t, pm.partition) for t in ("a", "b") for pm in md.topics[t].partitions if pm.replicas[0] == 0}
    assert len(moved) == 40
    for t in ("a", "b"):
        for pm in md.topics[t].partitions:
            pm.isr = list(pm.replicas)  # 0 caught up again (no persist per partition in the setup)
    writes: list[int] = []
    persist = md.persist
    monkeypatch.setattr(md, "persist", lambda *first, **kw: (writes.append(1), persist(*first, **kw))[1])
    changes: list[tuple[str, str]] = []
    md.listeners.append(lambda kind, name: changes.append((kind, name)))
    h = ElectLeadersHandler(md, md)
    r = await call(h, K.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": None})
    assert results(r) == {key: (0, None) for key in moved}
    assert (len(writes), changes) == (1, [("leadership", "a"), ("leadership", "b")])
    # Named partitions: one batch too, the answers in the request's order.
    md.broker_stopped(1)
    md.broker_started(1, "127.0.0.1", 9093)
    for pm in md.topics["a"].partitions:
        pm.isr = list(pm.replicas)
    writes.clear()
    ones = [pm.partition for pm in md.topics["a"].partitions if pm.replicas[0] == 1]
    r = await call(h, K.ELECT_LEADERS, 2, {"election_type": 0, "topic_partitions": [
        {"topic": "a", "partitions": [*ones, 0, 99]}]})
    assert [(p.partition_id, p.error_code) for t in r.replica_election_results for p in t.partition_result] == [
        *[(i, 0) for i in ones], (0, E.ELECTION_NOT_NEEDED), (99, E.UNKNOWN_TOPIC_OR_PARTITION)]
    assert len(writes) == 1
    # The file holds every new leader.
    reloaded = ClusterMetadata([0, 1, 2], data_dir=tmp_path)
    assert all(pm.leader == pm.replicas[0] for pm in reloaded.topics["a"].partitions)
    assert {(t, pm.partition) for t in ("a", "b") for pm in reloaded.topics[t].partitions
            if pm.replicas[0] == 0 and pm.leader == 0} == moved


# -- DescribeQuorum and UnregisterBroker --------------------------------------------------------------
async def test_describe_quorum_as_a_single_controller() -> None:
    md = cluster()
    md.create_topic("t", 1, 1)
    clock = ManualClock()
    h = DescribeQuorumHandler(md, clock)
    fields = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}
    r = await call(h, K.DESCRIBE_QUORUM, 2, fields)
    assert (r.error_code, r.error_message) == (0, None)
    (p,) = r.topics[0].partitions
    assert (r.topics[0].topic_name, p.error_code, p.leader_id, p.leader_epoch) == ("__cluster_metadata", 0, 0, 1)
    assert p.high_watermark == md.metadata_offset > 0
    assert [(v.replica_id, v.log_end_offset, v.replica_directory_id, v.last_caught_up_timestamp)
            for v in p.current_voters] == [(0, md.metadata_offset, ZERO_UUID, clock.time_ms())]
    assert [o.replica_id for o in p.observers] == [1, 2]
    assert [(n.node_id, [(lst.name, lst.host, lst.port) for lst in n.listeners]) for n in r.nodes] == [
        (0, [("PLAINTEXT", "127.0.0.1", 9092)])]
    # The controller stops: the next broker leads at a new epoch, and changes move the offset on.
    before = md.metadata_offset
    md.broker_stopped(0)
    md.create_topic("u", 1, 1)
    r = await call(h, K.DESCRIBE_QUORUM, 0, fields)
    (p,) = r.topics[0].partitions
    assert (p.leader_id, p.leader_epoch, [o.replica_id for o in p.observers]) == (1, 2, [2])
    assert p.high_watermark >= before + 2
    # Any other partition: UNKNOWN_TOPIC_OR_PARTITION on it.
    r = await call(h, K.DESCRIBE_QUORUM, 2, {"topics": [{"topic_name": "t", "partitions": [{"partition_index": 0}]}]})
    assert [(t.topic_name, p.error_code) for t in r.topics for p in t.partitions] == [
        ("t", E.UNKNOWN_TOPIC_OR_PARTITION)]
    # DESCRIBE on the cluster.
    authorizer = StandardAuthorizer()
    r = await call(DescribeQuorumHandler(md, clock, authorizer), K.DESCRIBE_QUORUM, 2, fields)
    assert (r.error_code, list(r.topics)) == (E.CLUSTER_AUTHORIZATION_FAILED, [])


async def test_unregister_broker() -> None:
    md = cluster()
    md.create_topic("t", 1, 2, assignments={0: [2, 1]})
    h = UnregisterBrokerHandler(md)
    r = await call(h, K.UNREGISTER_BROKER, 0, {"broker_id": 7})
    assert r.error_code == E.BROKER_ID_NOT_REGISTERED
    md.broker_stopped(2)
    assert (await call(h, K.UNREGISTER_BROKER, 0, {"broker_id": 2})).error_code == 0
    assert md.broker_ids == [0, 1]
    assert (await call(h, K.UNREGISTER_BROKER, 0, {"broker_id": 2})).error_code == E.BROKER_ID_NOT_REGISTERED
    # New replicas go to registered brokers only.
    assert {b for p in md.create_topic("u", 6, 1).partitions for b in p.replicas} == {0, 1}
    # A running broker is fenced: its leadership moves off it, and it does not rejoin the ISR.
    assert (await call(h, K.UNREGISTER_BROKER, 0, {"broker_id": 1})).error_code == 0
    assert md.topics["t"].partitions[0].leader == -1 and 1 not in md.live
    md.set_isr("t", 0, [1, 2])
    assert md.topics["t"].partitions[0].isr == [1]  # the ISR keeps its last member, takes no unregistered one
    # It registers again when it starts.
    md.broker_started(1, "127.0.0.1", 9093)
    assert md.broker_ids == [0, 1]
    authorizer = StandardAuthorizer()
    r = await call(UnregisterBrokerHandler(md, authorizer), K.UNREGISTER_BROKER, 0, {"broker_id": 1})
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and 1 in md.broker_ids


def test_error_responses_of_the_new_apis() -> None:
    req = {"topic_partitions": [{"topic": "t", "partitions": [0, 1]}]}
    body = error_response(K.ELECT_LEADERS, 1, req, E.NOT_CONTROLLER)
    r = APIS[K.ELECT_LEADERS].response.parse(APIS[K.ELECT_LEADERS].response.build(body, 1), 1)
    assert (r.error_code, results(r)) == (E.NOT_CONTROLLER, {("t", 0): (E.NOT_CONTROLLER, None),
                                                             ("t", 1): (E.NOT_CONTROLLER, None)})
    for key, version in ((K.OFFSET_DELETE, 0), (K.UNREGISTER_BROKER, 0), (K.DESCRIBE_QUORUM, 2)):
        api = APIS[key]
        body = error_response(key, version, {}, E.UNKNOWN_SERVER_ERROR)
        assert api.response.parse(api.response.build(body, version), version).error_code == E.UNKNOWN_SERVER_ERROR
    assert uuid.UUID(int=0) == ZERO_UUID
