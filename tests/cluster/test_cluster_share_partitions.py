"""KIP-932 share-partitions in a cluster: the share-partition state is kept by the share coordinator on the
replicated ``__share_group_state`` topic, so a partition's new leader continues where the old one stopped,
and a broker that does not lead a partition answers NOT_LEADER_OR_FOLLOWER naming the leader."""

from __future__ import annotations

import uuid

from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from helpers import batch, produce, values, wait_until

FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)


async def connect(cluster: Cluster, broker_id: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", cluster.configs[broker_id].port, client_id="share-test")


def share_fetch(topic_id: uuid.UUID, member: str, epoch: int, acks: list[tuple[int, int, int]] = ()) -> dict:
    return {"group_id": "g", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks]}]}]}


async def test_a_new_leader_continues_the_share_partition() -> None:
    async with serve_cluster(2, **FAST) as cluster:
        topic = cluster.broker(0).create_topic("sq", 1, 2)
        leader = topic.partitions[0].leader
        other = 1 - leader
        cluster.broker(0).group_configs.set_overrides("g", {"share.auto.offset.reset": "earliest"})
        conn = await connect(cluster, leader)
        follower_conn = await connect(cluster, other)
        try:
            for i in range(2):
                p = await produce(conn, "sq", batch([b"r%d-%d" % (i, j) for j in range(3)]))
                assert p.error_code == 0
            r = await follower_conn.request(ApiKey.SHARE_FETCH, 1, share_fetch(topic.topic_id, "m1", 0))
            p = r.responses[0].partitions[0]
            assert p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and p.current_leader.leader_id == leader
            assert [n.port for n in r.node_endpoints] == [cluster.configs[leader].port]

            r = await conn.request(ApiKey.SHARE_FETCH, 1, share_fetch(topic.topic_id, "m1", 0))
            p = r.responses[0].partitions[0]
            assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(0, 5, 1)]
            # Accept 0-2 on the old leader; 3-5 stay acquired.
            r = await conn.request(ApiKey.SHARE_ACKNOWLEDGE, 1, {
                "group_id": "g", "member_id": "m1", "share_session_epoch": 1, "topics": [
                    {"topic_id": topic.topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}]}]}]})
            assert r.responses[0].partitions[0].error_code == 0

            await wait_until(lambda: other in cluster.metadata.topics["sq"].partitions[0].isr, what="follower in ISR")
            cluster.metadata.move_leader("sq", 0, other)
            new_part = cluster.broker(other).replica_manager.get("sq", 0)
            await wait_until(lambda: new_part.is_leader and new_part.log.high_watermark == 6,
                             what="the new leader's high watermark")
            # The old leader's locks do not move with it: 3-5 come back from the new leader, delivered again.
            r = await follower_conn.request(ApiKey.SHARE_FETCH, 1, share_fetch(topic.topic_id, "m2", 0))
            p = r.responses[0].partitions[0]
            assert p.error_code == 0
            assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(3, 5, 2)]
            assert values(bytes(p.records)) == [b"r1-0", b"r1-1", b"r1-2"]
            sp = cluster.broker(other).share_partitions.get("g", "sq", 0)
            assert sp is not None and sp.start_offset == 3
            # The old leader refuses what it no longer leads.
            r = await conn.request(ApiKey.SHARE_FETCH, 1, share_fetch(topic.topic_id, "m1", 2, [(3, 5, 1)]))
            p = r.responses[0].partitions[0]
            assert p.acknowledge_error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert p.current_leader.leader_id == other
        finally:
            await conn.aclose()
            await follower_conn.aclose()
