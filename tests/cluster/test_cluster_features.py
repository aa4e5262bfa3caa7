"""Kafka 4.2's cluster-wide views on a ``--brokers 3`` cluster, over the wire: DescribeCluster v2's fenced
brokers (KIP-1073), FindCoordinator v6's share coordinators (KIP-932), feature levels one UpdateFeatures
changes for every broker, and a transaction-version-2 producer whose partitions live on other brokers
(the leaders add them; the markers, WriteTxnMarkers v2, carry the bumped epoch)."""

from __future__ import annotations

import base64
import uuid

import trio

from helpers import batch, produce, wait_until
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.client.connection import KafkaConnection
from minikafka.common.hashing import partition_for_key
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode

K = ApiKey
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)


async def connect(cluster: Cluster, broker_id: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", cluster.configs[broker_id].port, client_id="features-test")


async def test_describe_cluster_v2_lists_a_stopped_broker_as_fenced_when_asked() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        c = await connect(cluster, 0)
        await cluster.stop_broker(2)

        async def brokers(version: int, include_fenced: bool) -> list[tuple[int, int, bool]]:
            body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
            if version >= 2:
                body["include_fenced_brokers"] = include_fenced
            resp = await c.request(K.DESCRIBE_CLUSTER, version, body)
            assert resp.error_code == 0
            return [(b.broker_id, b.port, getattr(b, "is_fenced", False)) for b in resp.brokers]

        live = [(0, cluster.configs[0].port, False), (1, cluster.configs[1].port, False)]
        assert await brokers(1, False) == live
        assert await brokers(2, False) == live
        assert await brokers(2, True) == live + [(2, cluster.configs[2].port, True)]
        await cluster.start_broker(2)
        assert await brokers(2, True) == live + [(2, cluster.configs[2].port, False)]
        # An unregistered broker is no longer a fenced one.
        await cluster.stop_broker(2)
        assert (await c.request(K.UNREGISTER_BROKER, 0, {"broker_id": 2})).error_code == 0
        assert await brokers(2, True) == live
        await c.aclose()


async def test_find_coordinator_v6_names_share_coordinators() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        c = await connect(cluster, 1)
        topic_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        keys = [f"sg:{topic_id}:{p}" for p in range(4)]
        resp = await c.request(K.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": keys + ["bad-key"]})
        got = {co.key: (co.error_code, co.node_id, co.port) for co in resp.coordinators}
        metadata = cluster.metadata
        for key in keys:
            partition = partition_for_key(key, 50)  # share.coordinator.state.topic.num.partitions
            leader = metadata.offsets_partition_leader(partition)
            assert got[key] == (0, leader, cluster.configs[leader].port)
        assert got["bad-key"][0] == ErrorCode.INVALID_REQUEST
        # Before v6 there is no share key type; groups and transactions are unchanged at v6.
        old = await c.request(K.FIND_COORDINATOR, 5, {"key_type": 2, "coordinator_keys": keys[:1]})
        assert old.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
        group = await c.request(K.FIND_COORDINATOR, 6, {"key_type": 0, "coordinator_keys": ["g"]})
        assert group.coordinators[0].node_id == metadata.group_coordinator("g").node_id
        # The coordinator of a partition whose leader stopped moves to a live broker.
        target = keys[0]
        leader = got[target][1]
        await cluster.stop_broker(leader)
        if leader == 1:
            await c.aclose()
            c = await connect(cluster, 0)
        moved = await c.request(K.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [target]})
        assert moved.coordinators[0].error_code == 0 and moved.coordinators[0].node_id != leader
        await c.aclose()


async def test_feature_levels_are_the_clusters() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        c0, c2 = await connect(cluster, 0), await connect(cluster, 2)

        async def transaction_version(c: KafkaConnection) -> tuple[int, int]:
            resp = await c.request(K.API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
            return ({f.name: f.max_version_level for f in resp.finalized_features}["transaction.version"],
                    resp.finalized_features_epoch)

        level, epoch = await transaction_version(c2)
        assert level == 2
        done = await c0.request(K.UPDATE_FEATURES, 2, {"timeout_ms": 1000, "validate_only": False, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 1, "upgrade_type": 2}]})
        assert done.error_code == 0
        assert await transaction_version(c2) == (1, epoch + 1)
        await c0.aclose()
        await c2.aclose()


async def test_a_transaction_version_2_producer_across_brokers() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 3, 3)
        coordinator = cluster.txn_coordinator
        conns = {b: await connect(cluster, b) for b in (0, 1, 2)}
        cluster.broker(0).ensure_transaction_topic()  # (as a FindCoordinator would)
        txn_conn = conns[cluster.metadata.transaction_coordinator("tx").node_id]
        init = await txn_conn.request(K.INIT_PRODUCER_ID, 5, {"transactional_id": "tx", "transaction_timeout_ms": 60000,
                                                              "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
        for p in range(3):  # each partition to its leader, which has the coordinator add it
            leader = cluster.leader("t", p)
            sent = await produce(conns[leader], "t", batch([b"v%d" % p], producer_id=pid, producer_epoch=epoch,
                                                           base_sequence=0, is_transactional=True),
                                 partition=p, version=12, transactional_id="tx")
            assert sent.error_code == 0, sent
        assert len(coordinator.describe("tx").partitions) == 3
        end = await txn_conn.request(K.END_TXN, 5, {"transactional_id": "tx", "producer_id": pid,  # the coordinator
                                                    "producer_epoch": epoch, "committed": True})
        assert (end.error_code, end.producer_epoch) == (0, epoch + 1)
        with trio.fail_after(10):
            await coordinator.wait_completions(1)
        for p in range(3):  # every replica saw the COMMIT marker under the bumped epoch
            await wait_until(lambda: all(
                cluster.broker(b).replica_manager.get("t", p).producers.producers.get(pid) is not None
                and cluster.broker(b).replica_manager.get("t", p).producers.producers[pid].epoch == epoch + 1
                for b in (0, 1, 2)), what=f"marker of t-{p} on every replica")
        for c in conns.values():
            await c.aclose()
