"""KIP-455 partition reassignment over the wire (AlterPartitionReassignments 45, ListPartitionReassignments 46):
replicas move through follower fetches, cancellation reverts, errors and ACLs as Kafka answers them, and an
ongoing reassignment survives a restart of the cluster (it is in the ``__cluster_metadata`` log's records)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import trio

from helpers import batch, fetch, produce, values, wait_until
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.handlers.reassignments import (AlterPartitionReassignmentsHandler,
                                                     ListPartitionReassignmentsHandler)
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.request import RequestContext
from minikafka.broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from minikafka.broker.security.authorizer import StandardAuthorizer
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode as E

K = ApiKey
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)
TIMEOUT = 30  # seconds a condition may take to hold (generous: nothing here depends on speed)


async def connect(cluster: Cluster, broker_id: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", cluster.configs[broker_id].port, client_id="reassign-test")


async def alter(conn: KafkaConnection, changes: dict[tuple[str, int], list[int] | None], version: int = 1,
                allow_rf_change: bool = True) -> Any:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), replicas in changes.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "replicas": replicas})
    return await conn.request(K.ALTER_PARTITION_REASSIGNMENTS, version, {
        "timeout_ms": 30000, "allow_replication_factor_change": allow_rf_change,
        "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})


def alter_errors(resp: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}


async def ongoing(conn: KafkaConnection, topics: dict[str, list[int]] | None = None
                  ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """ListPartitionReassignments: (topic, partition) -> (replicas, adding, removing)."""
    resp = await conn.request(K.LIST_PARTITION_REASSIGNMENTS, 0, {
        "timeout_ms": 30000,
        "topics": None if topics is None else [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]})
    assert resp.error_code == 0
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


async def metadata_partition(conn: KafkaConnection, topic: str, partition: int = 0) -> Any:
    md = await conn.request(K.METADATA, 12, {"topics": [{"name": topic, "topic_id": None}],
                                             "allow_auto_topic_creation": False,
                                             "include_topic_authorized_operations": False})
    return next(p for p in md.topics[0].partitions if p.partition_index == partition)


def block_fetches_of(cluster: Cluster, broker_id: int) -> int:
    """A fault rule that answers every Fetch of ``broker_id``'s replica fetchers with an error: that replica
    exists and follows, but cannot catch up (a stuck follower), so a reassignment adding it stays in
    progress until the rule is removed.  Returns the rule's id."""
    return cluster.faults.add(api="Fetch", client_id=f"broker-{broker_id}-fetcher-*",
                              error="NOT_LEADER_OR_FOLLOWER").id


async def test_reassignment_moves_the_leader_away_and_deletes_the_old_replica(tmp_path: Path) -> None:
    async with serve_cluster(3, data_dir=tmp_path, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, assignments={0: [0, 1]})
        leader = await connect(cluster, 0)
        for i in range(5):
            assert (await produce(leader, "t", batch([b"v%d" % i]))).error_code == 0
        old_dir = cluster.broker(0).replica_manager.get("t", 0).log.directory
        assert old_dir is not None and old_dir.is_dir()
        rule = block_fetches_of(cluster, 2)
        admin = await connect(cluster, 1)
        assert alter_errors(await alter(admin, {("t", 0): [2, 1]})) == {("t", 0): 0}
        # In progress: the union of old and new replicas, the new one a follower that has not caught up.
        assert await ongoing(admin) == {("t", 0): ([2, 1, 0], [2], [0])}
        assert await ongoing(admin, {"t": [0, 1], "nope": [0]}) == {("t", 0): ([2, 1, 0], [2], [0])}
        p = await metadata_partition(admin, "t")
        assert (list(p.replica_nodes), list(p.isr_nodes), p.leader_id) == ([2, 1, 0], [0, 1], 0)
        await wait_until(lambda: cluster.broker(2).replica_manager.get("t", 0) is not None, TIMEOUT,
                         what="the new replica on broker 2")
        assert not cluster.broker(2).replica_manager.get("t", 0).is_leader
        # Producing goes on at the old leader meanwhile.
        assert (await produce(leader, "t", batch([b"v5"]))).error_code == 0
        cluster.faults.remove(rule)
        await wait_until(lambda: not cluster.metadata.topics["t"].partitions[0].is_reassigning, TIMEOUT,
                         what="the reassignment to complete")
        assert await ongoing(admin) == {}
        pm = cluster.metadata.topics["t"].partitions[0]
        # The old leader was removed: the first target replica in the ISR leads, at a new leader epoch.
        assert (pm.replicas, sorted(pm.isr), pm.leader, pm.leader_epoch) == ([2, 1], [1, 2], 2, 1)
        assert cluster.broker(0).replica_manager.get("t", 0) is None
        assert not old_dir.exists()
        assert 2 in cluster.broker(1).fetcher_manager.fetchers  # broker 1 follows the new leader
        # The old leader answers NOT_LEADER_OR_FOLLOWER (Kafka: a known partition this broker no longer hosts).
        assert (await produce(leader, "t", batch([b"x"]))).error_code == E.NOT_LEADER_OR_FOLLOWER
        new_leader = await connect(cluster, 2)
        assert (await produce(new_leader, "t", batch([b"v6"]))).error_code == 0
        got = await fetch(new_leader, "t", version=12)
        assert values(got.records) == [b"v%d" % i for i in range(7)]
        await wait_until(lambda: cluster.broker(1).replica_manager.get("t", 0).log.high_watermark == 7, TIMEOUT,
                         what="the follower to replicate from the new leader")
        for c in (leader, admin, new_leader):
            await c.aclose()


async def test_a_reassignment_the_isr_already_satisfies_completes_at_once() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 2, assignments={0: [0, 1], 1: [0, 1, 2]})
        conn = await connect(cluster, 0)
        # Reordering and shrinking need no new replica: Kafka completes them in the same change.
        assert alter_errors(await alter(conn, {("t", 0): [1, 0], ("t", 1): [0, 2]})) == {("t", 0): 0, ("t", 1): 0}
        assert await ongoing(conn) == {}
        p0, p1 = cluster.metadata.topics["t"].partitions
        assert (p0.replicas, p0.leader, p0.leader_epoch) == ([1, 0], 0, 0)  # the leader stays; no one removed
        assert (p1.replicas, p1.leader, p1.leader_epoch) == ([0, 2], 0, 1)  # broker 1 removed: epoch bump
        await wait_until(lambda: cluster.broker(1).replica_manager.get("t", 1) is None, TIMEOUT,
                         what="broker 1's replica of t-1 to go")
        await conn.aclose()


async def test_a_new_target_during_a_reassignment_replaces_it() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, assignments={0: [0]})
        conn = await connect(cluster, 0)
        assert (await produce(conn, "t", batch([b"a"]))).error_code == 0
        block_fetches_of(cluster, 2)
        assert alter_errors(await alter(conn, {("t", 0): [2]})) == {("t", 0): 0}
        # Resubmitted (as kafka-reassign-partitions --additional does to change a throttle): the same one.
        assert alter_errors(await alter(conn, {("t", 0): [2]})) == {("t", 0): 0}
        assert await ongoing(conn) == {("t", 0): ([2, 0], [2], [0])}
        # Redirected to broker 1: every current replica not in the new target is being removed.
        assert alter_errors(await alter(conn, {("t", 0): [1]})) == {("t", 0): 0}
        await wait_until(lambda: not cluster.metadata.topics["t"].partitions[0].is_reassigning, TIMEOUT,
                         what="the reassignment to broker 1 to complete")
        pm = cluster.metadata.topics["t"].partitions[0]
        assert (pm.replicas, pm.leader) == ([1], 1)
        await wait_until(lambda: all(cluster.broker(b).replica_manager.get("t", 0) is None for b in (0, 2)), TIMEOUT,
                         what="the replicas on brokers 0 and 2 to go")
        await conn.aclose()


async def test_cancelling_reverts_to_the_original_replicas() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, assignments={0: [0]})
        conn = await connect(cluster, 0)
        for i in range(3):
            assert (await produce(conn, "t", batch([b"v%d" % i]))).error_code == 0
        rule = block_fetches_of(cluster, 2)
        assert alter_errors(await alter(conn, {("t", 0): [2]})) == {("t", 0): 0}
        assert await ongoing(conn) == {("t", 0): ([2, 0], [2], [0])}
        await wait_until(lambda: cluster.broker(2).replica_manager.get("t", 0) is not None, TIMEOUT,
                         what="the new replica on broker 2")
        # Cancelling: a null replica list.
        assert alter_errors(await alter(conn, {("t", 0): None})) == {("t", 0): 0}
        assert await ongoing(conn) == {}
        pm = cluster.metadata.topics["t"].partitions[0]
        assert (pm.replicas, pm.isr, pm.leader, pm.leader_epoch) == ([0], [0], 0, 1)
        assert cluster.broker(2).replica_manager.get("t", 0) is None  # the adding replica is gone
        # Nothing left to cancel.
        assert alter_errors(await alter(conn, {("t", 0): None})) == {("t", 0): E.NO_REASSIGNMENT_IN_PROGRESS}
        cluster.faults.remove(rule)
        assert (await produce(conn, "t", batch([b"v3"]))).error_code == 0
        got = await fetch(conn, "t", version=12)
        assert values(got.records) == [b"v0", b"v1", b"v2", b"v3"] and got.high_watermark == 4
        await conn.aclose()


async def test_cancelling_a_move_whose_new_replica_leads_keeps_the_data() -> None:
    """Cancel after the added replica joined the ISR but before the old one was dropped (it cannot be, while
    broker 1, also a target, is down): the original replicas stay and lead."""
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, assignments={0: [0]})
        conn = await connect(cluster, 0)
        assert (await produce(conn, "t", batch([b"a"]))).error_code == 0
        await cluster.stop_broker(1)
        assert alter_errors(await alter(conn, {("t", 0): [2, 1]})) == {("t", 0): 0}
        await wait_until(lambda: 2 in cluster.metadata.topics["t"].partitions[0].isr, TIMEOUT,
                         what="broker 2 to join the ISR")
        assert await ongoing(conn) == {("t", 0): ([2, 1, 0], [1, 2], [0])}  # broker 1 still to catch up
        assert alter_errors(await alter(conn, {("t", 0): None})) == {("t", 0): 0}
        pm = cluster.metadata.topics["t"].partitions[0]
        assert (pm.replicas, pm.isr, pm.leader) == ([0], [0], 0)
        await wait_until(lambda: cluster.broker(2).replica_manager.get("t", 0) is None, TIMEOUT,
                         what="broker 2's replica to go")
        got = await fetch(conn, "t", version=12)
        assert values(got.records) == [b"a"]
        await conn.aclose()


async def test_errors() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 2, assignments={0: [0], 1: [1]})
        conn = await connect(cluster, 1)
        resp = await alter(conn, {("nope", 0): [0], ("t", 5): [0], ("t", 0): [], ("t", 1): [1, 1]})
        assert resp.error_code == 0
        assert alter_errors(resp) == {("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION, ("t", 5): E.UNKNOWN_TOPIC_OR_PARTITION,
                                      ("t", 0): E.INVALID_REPLICA_ASSIGNMENT, ("t", 1): E.INVALID_REPLICA_ASSIGNMENT}
        msgs = {p.partition_index: p.error_message for t in resp.responses if t.name == "t" for p in t.partitions}
        assert "empty replica list" in msgs[0] and "more than once" in msgs[1]
        resp = await alter(conn, {("t", 0): [7]})
        assert alter_errors(resp) == {("t", 0): E.INVALID_REPLICA_ASSIGNMENT}
        assert "no such broker is registered" in resp.responses[0].partitions[0].error_message
        assert alter_errors(await alter(conn, {("t", 0): None})) == {("t", 0): E.NO_REASSIGNMENT_IN_PROGRESS}
        # v1, KIP-860: a change of replication factor refused when not allowed; the flag is echoed.
        resp = await alter(conn, {("t", 0): [0, 2]}, allow_rf_change=False)
        assert alter_errors(resp) == {("t", 0): E.INVALID_REPLICATION_FACTOR}
        assert resp.allow_replication_factor_change is False
        assert resp.responses[0].partitions[0].error_message == "The replication factor is changed from 1 to 2"
        assert await ongoing(conn) == {}
        # A move that keeps the replication factor is allowed; v0 always allows a change.
        rule = block_fetches_of(cluster, 2)
        assert alter_errors(await alter(conn, {("t", 0): [2]}, allow_rf_change=False)) == {("t", 0): 0}
        # During a reassignment the replication factor is its target's: [2] -> [2, 1] changes it.
        resp = await alter(conn, {("t", 0): [2, 1]}, allow_rf_change=False)
        assert alter_errors(resp) == {("t", 0): E.INVALID_REPLICATION_FACTOR}
        assert alter_errors(await alter(conn, {("t", 1): [1, 2]}, version=0)) == {("t", 1): 0}
        assert await ongoing(conn) == {("t", 0): ([2, 0], [2], [0]), ("t", 1): ([1, 2], [2], [])}
        cluster.faults.remove(rule)
        await wait_until(lambda: not any(p.is_reassigning for p in cluster.metadata.topics["t"].partitions),
                         TIMEOUT, what="both reassignments to complete")
        assert [p.replicas for p in cluster.metadata.topics["t"].partitions] == [[2], [1, 2]]
        await conn.aclose()


async def test_a_single_broker_answers_both_apis(conn: KafkaConnection) -> None:
    await conn.request(K.CREATE_TOPICS, 5, {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1,
                                                        "assignments": [], "configs": []}],
                                            "timeout_ms": 5000, "validate_only": False})
    assert alter_errors(await alter(conn, {("t", 0): [0]})) == {("t", 0): 0}  # already there: nothing to do
    assert alter_errors(await alter(conn, {("t", 0): [1]})) == {("t", 0): E.INVALID_REPLICA_ASSIGNMENT}
    assert await ongoing(conn) == {}


async def test_an_ongoing_reassignment_survives_a_restart(tmp_path: Path) -> None:
    cluster = Cluster(3, data_dir=tmp_path, **FAST)
    async with trio.open_nursery() as nursery:
        await nursery.start(cluster.run)
        cluster.broker(0).create_topic("t", 1, assignments={0: [0]})
        conn = await connect(cluster, 0)
        for i in range(4):
            assert (await produce(conn, "t", batch([b"v%d" % i]))).error_code == 0
        await conn.aclose()
        old_dir = cluster.broker(0).replica_manager.get("t", 0).log.directory
        await cluster.stop_broker(2)  # the target is down: the reassignment cannot complete yet
        assert cluster.metadata.alter_partition_reassignments([("t", 0, [2])]) == [(E.NONE, None)]
        nursery.cancel_scope.cancel()
    # The whole cluster restarts from its data dir: the reassignment is still going on, and completes.
    assert ClusterMetadata([0, 1, 2], tmp_path).topics["t"].partitions[0].adding_replicas == [2]
    async with serve_cluster(3, data_dir=tmp_path, **FAST) as cluster:
        conn = await connect(cluster, 1)
        await wait_until(lambda: not cluster.metadata.topics["t"].partitions[0].is_reassigning, TIMEOUT,
                         what="the reassignment to complete after the restart")
        assert cluster.metadata.topics["t"].partitions[0].replicas == [2]
        assert cluster.leader("t", 0) == 2
        assert await ongoing(conn) == {}
        new_leader = await connect(cluster, 2)
        got = await fetch(new_leader, "t", version=12)
        assert values(got.records) == [b"v%d" % i for i in range(4)]
        assert old_dir is not None and not old_dir.exists()  # broker 0's log of t-0 is deleted
        for c in (conn, new_leader):
            await c.aclose()


async def test_a_replica_moved_off_a_stopped_broker_is_deleted_when_it_starts(tmp_path: Path) -> None:
    async with serve_cluster(3, data_dir=tmp_path, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, assignments={0: [0, 1]})
        conn = await connect(cluster, 0)
        assert (await produce(conn, "t", batch([b"a"]))).error_code == 0
        await conn.aclose()
        await wait_until(lambda: cluster.broker(1).replica_manager.get("t", 0).log.high_watermark == 1, TIMEOUT,
                         what="broker 1 to replicate")
        stale = cluster.broker(0).replica_manager.get("t", 0).log.directory
        await cluster.stop_broker(0)  # broker 1 leads now
        assert cluster.metadata.alter_partition_reassignments([("t", 0, [1, 2])]) == [(E.NONE, None)]
        await wait_until(lambda: not cluster.metadata.topics["t"].partitions[0].is_reassigning, TIMEOUT,
                         what="the reassignment to complete")
        assert stale.is_dir()  # broker 0 was down: its log is still on disk
        await cluster.start_broker(0)
        assert not stale.exists() and cluster.broker(0).replica_manager.get("t", 0) is None
        assert cluster.leader("t", 0) == 1  # the leader stayed (a target replica in the ISR)
        conn = await connect(cluster, 1)
        assert values((await fetch(conn, "t", version=12)).records) == [b"a"]
        await wait_until(lambda: cluster.broker(2).replica_manager.get("t", 0).log.high_watermark == 1, TIMEOUT,
                         what="broker 2 to replicate")
        await conn.aclose()


_corr = itertools.count(1)


async def _call(handler: Any, key: ApiKey, version: int, fields: dict, principal: str) -> Any:
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(int(key), version, next(_corr), "test", "conn", peer="10.0.0.1:5000", principal=principal,
                         request_size=100)
    return api.response.parse(api.response.build(await handler.handle(ctx, req), version), version)


async def test_acls_alter_on_the_cluster_and_describe_on_the_cluster() -> None:
    metadata = ClusterMetadata([0, 1])
    metadata.broker_started(0, "127.0.0.1", 9092)
    metadata.broker_started(1, "127.0.0.1", 9093)
    metadata.create_topic("t", 1, 1, assignments={0: [0]})
    authorizer = StandardAuthorizer()
    alter_h = AlterPartitionReassignmentsHandler(metadata, authorizer)
    list_h = ListPartitionReassignmentsHandler(metadata, authorizer)
    alter_req = {"timeout_ms": 1000, "allow_replication_factor_change": True,
                 "topics": [{"name": "t", "partitions": [{"partition_index": 0, "replicas": [0, 1]}]}]}
    list_req = {"timeout_ms": 1000, "topics": [{"name": "t", "partition_indexes": [0]}]}
    r = await _call(alter_h, K.ALTER_PARTITION_REASSIGNMENTS, 1, alter_req, "User:alice")
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert [p.error_code for p in r.responses[0].partitions] == [E.CLUSTER_AUTHORIZATION_FAILED]
    r = await _call(list_h, K.LIST_PARTITION_REASSIGNMENTS, 0, list_req, "User:alice")
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
    assert [p.partition_index for p in r.topics[0].partitions] == [0]
    assert not metadata.topics["t"].partitions[0].is_reassigning
    authorizer.create_acls([AclBinding.of(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice",
                                          "*", op, AclPermissionType.ALLOW)
                            for op in (AclOperation.ALTER, AclOperation.DESCRIBE)])
    r = await _call(alter_h, K.ALTER_PARTITION_REASSIGNMENTS, 1, alter_req, "User:alice")
    assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0
    r = await _call(list_h, K.LIST_PARTITION_REASSIGNMENTS, 0, list_req, "User:alice")
    assert r.error_code == 0
    p = r.topics[0].partitions[0]
    assert (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)) == ([0, 1], [1], [])
