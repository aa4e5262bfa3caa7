"""Leader elections, DescribeTopicPartitions, DescribeQuorum and UnregisterBroker in a three-broker cluster:
a stopped broker's leadership moves away, and once it is back in the ISR a preferred election (kafka-python's
``elect_leaders``) gives it back; an offline partition gets a leader out of its ISR by an unclean election; an
unregistered broker gets no new replicas until it starts again."""

from __future__ import annotations

from pathlib import Path
import warnings
from typing import Callable

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka import errors as Errors

from helpers import batch, fetch, produce, values, wait_until
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode as E
from minikafka.testing import ClusterThread
import waiting

K = ApiKey
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)
QUORUM = {"topics": [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]}


async def connect(cluster: Cluster, broker_id: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", cluster.configs[broker_id].port, client_id="admin-test")


def wait_for(cond: Callable[[], bool], timeout: float = 20, what: str = "condition") -> None:
    """Poll ``cond`` (from the test thread) until it holds; fail after ``timeout`` seconds."""
    waiting.wait_for(cond, timeout, what)


def election_results(r) -> dict[tuple[str, int], int]:
    return {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results for p in t.partition_result}


@pytest.mark.clients
def test_preferred_election_gives_leadership_back_after_a_restart() -> None:
    with ClusterThread(3, **FAST) as ct:
        metadata = ct.cluster.metadata
        ct.call(lambda: ct.cluster.broker(0).create_topic("pe", assignments={0: [1, 2, 0], 1: [2, 0, 1]}))
        producer = KafkaProducer(bootstrap_servers=ct.bootstrap, acks="all")
        for i in range(10):
            producer.send("pe", b"before-%d" % i, partition=0)
        producer.flush()
        ct.stop_broker(1)
        assert ct.leader("pe", 0) == 2
        for i in range(10):
            producer.send("pe", b"during-%d" % i, partition=0)
        producer.flush()
        producer.close()
        ct.start_broker(1)
        admin = KafkaAdminClient(bootstrap_servers=ct.bootstrap, request_timeout_ms=10000)
        try:
            pm = metadata.topics["pe"].partitions[0]
            wait_for(lambda: 1 in pm.isr, what="broker 1 back in the ISR")
            epoch = pm.leader_epoch
            assert ct.leader("pe", 0) == 2
            r = admin.elect_leaders(0, {"pe": [0, 1]})
            assert election_results(r) == {("pe", 0): 0, ("pe", 1): E.ELECTION_NOT_NEEDED}
            assert (ct.leader("pe", 0), pm.leader_epoch) == (1, epoch + 1)
            # Every broker follows: DescribeTopicPartitions names the new leader, nothing was lost.
            (topic,) = admin.describe_topic_partitions(["pe"])["topics"]
            assert [(p["partition_index"], p["leader_id"], p["leader_epoch"]) for p in topic["partitions"]] == [
                (0, 1, epoch + 1), (1, 2, 0)]
            consumer = KafkaConsumer(bootstrap_servers=ct.bootstrap, auto_offset_reset="earliest",
                                     enable_auto_commit=False, metadata_max_age_ms=500)
            try:
                tp = TopicPartition("pe", 0)
                consumer.assign([tp])
                got: list[bytes] = []

                def read_all() -> bool:
                    got.extend(rec.value for recs in consumer.poll(timeout_ms=200).values() for rec in recs)
                    return len(got) >= 20

                wait_for(read_all, what="every record from the new leader")
                assert got == [b"before-%d" % i for i in range(10)] + [b"during-%d" % i for i in range(10)]
            finally:
                consumer.close()
            # The quorum: broker 0 is the controller, the others observe.
            quorum = admin.describe_metadata_quorum()
            (partition,) = quorum["topics"][0]["partitions"]
            assert (partition["leader_id"], [o["replica_id"] for o in partition["observers"]]) == (0, [1, 2])
        finally:
            admin.close()


async def test_unclean_election_brings_an_offline_partition_back(tmp_path: Path) -> None:
    async with serve_cluster(3, data_dir=tmp_path, **FAST) as cluster:
        cluster.broker(0).create_topic("uc", assignments={0: [1, 2]})
        pm = cluster.metadata.topics["uc"].partitions[0]
        c1 = await connect(cluster, 1)
        assert (await produce(c1, "uc", batch([b"a", b"b"]), acks=-1)).error_code == 0
        await c1.aclose()
        await cluster.stop_broker(1)
        await cluster.stop_broker(2)
        assert (pm.leader, pm.isr, pm.leader_epoch) == (-1, [2], 2)
        await cluster.start_broker(1)
        assert pm.leader == -1  # broker 1 is not in the ISR: no clean leader
        c0 = await connect(cluster, 0)
        r = await c0.request(K.DESCRIBE_TOPIC_PARTITIONS, 0, {"topics": [{"name": "uc"}]})
        (p,) = r.topics[0].partitions
        assert (p.leader_id, list(p.isr_nodes), list(p.offline_replicas)) == (-1, [2], [2])
        one = {"topic_partitions": [{"topic": "uc", "partitions": [0]}]}
        r = await c0.request(K.ELECT_LEADERS, 2, {"election_type": 0, **one})
        assert election_results(r) == {("uc", 0): E.PREFERRED_LEADER_NOT_AVAILABLE}
        r = await c0.request(K.ELECT_LEADERS, 2, {"election_type": 1, **one})
        assert (r.error_code, election_results(r)) == (0, {("uc", 0): 0})
        assert (pm.leader, pm.isr, pm.leader_epoch) == (1, [1], 3)
        c1 = await connect(cluster, 1)
        await wait_until(lambda: cluster.broker(1).replica_manager.get("uc", 0).is_leader, what="broker 1 leads")
        assert (await produce(c1, "uc", batch([b"c"]), acks=-1)).error_code == 0
        assert values((await fetch(c1, "uc")).records) == [b"a", b"b", b"c"]
        # Broker 2 comes back as a follower of the new leader and rejoins the ISR.
        await cluster.start_broker(2)
        await wait_until(lambda: pm.isr == [1, 2], what="broker 2 back in the ISR")
        r = await c0.request(K.ELECT_LEADERS, 2, {"election_type": 1, "topic_partitions": None})
        assert election_results(r) == {}  # every partition has a leader: nothing answered
        await c0.aclose()
        await c1.aclose()


async def test_unregister_broker_and_describe_quorum() -> None:
    async with serve_cluster(3, **FAST) as cluster:
        c0 = await connect(cluster, 0)
        r = await c0.request(K.DESCRIBE_QUORUM, 2, QUORUM)
        (p,) = r.topics[0].partitions
        assert (p.leader_id, p.leader_epoch, [o.replica_id for o in p.observers]) == (0, 1, [1, 2])
        assert [(n.node_id, [lst.port for lst in n.listeners]) for n in r.nodes] == [(0, [cluster.configs[0].port])]
        offset = p.high_watermark
        r = await c0.request(K.UNREGISTER_BROKER, 0, {"broker_id": 9})
        assert r.error_code == E.BROKER_ID_NOT_REGISTERED
        await cluster.stop_broker(2)
        r = await c0.request(K.UNREGISTER_BROKER, 0, {"broker_id": 2})
        assert r.error_code == 0
        r = await c0.request(K.CREATE_TOPICS, 7, {"topics": [{"name": "after", "num_partitions": 6,
                                                             "replication_factor": 1}], "timeout_ms": 1000})
        assert r.topics[0].error_code == 0
        assert {b for p in cluster.metadata.topics["after"].partitions for b in p.replicas} == {0, 1}
        r = await c0.request(K.DESCRIBE_QUORUM, 1, QUORUM)
        (p,) = r.topics[0].partitions
        assert [o.replica_id for o in p.observers] == [1] and p.high_watermark > offset
        # The controller stops: the next broker is the quorum's leader, at a new epoch.
        await c0.aclose()
        await cluster.stop_broker(0)
        c1 = await connect(cluster, 1)
        r = await c1.request(K.DESCRIBE_QUORUM, 0, QUORUM)
        (p,) = r.topics[0].partitions
        assert (p.leader_id, p.leader_epoch, list(p.observers)) == (1, 2, [])
        # A restarted broker registers again.
        await cluster.start_broker(2)
        assert 2 in cluster.metadata.broker_ids
        r = await c1.request(K.UNREGISTER_BROKER, 0, {"broker_id": 2})
        assert r.error_code == 0 and 2 not in cluster.metadata.live
        await c1.aclose()
