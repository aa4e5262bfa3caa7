"""The share coordinator on the replicated ``__share_group_state`` partitions (issue 25): the topic is created at
the first use of a share-partition with Kafka's partition count, replication factor and min.insync.replicas; a
share-partition's state is written to the leader of its partition and an acknowledgement is answered once that
snapshot is replicated; when the share coordinator's broker crashes the next leader loads the partition, and a
share-partition leader initialized later reads the state from it; a share-partition leader that cannot reach its
share coordinator, or whose partition is below min.insync.replicas, refuses acknowledgements and changes
nothing; the state a lone broker of an earlier version kept is carried over."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.share.partition_state import PersistedShareState, ShareStateKey, ShareStateStore
from minikafka.client.connection import KafkaConnection
from minikafka.common.hashing import partition_for_key
from minikafka.protocol.api import ApiKey
from minikafka.protocol.coordinator_records import decode_share_record
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.json_converter import kafka_uuid
from minikafka.protocol.records import decode_records
from cluster_logs import connect, log_of, stored
from helpers import batch, produce, wait_until

K = ApiKey
STATE_TOPIC = "__share_group_state"
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, broker_session_timeout_ms=400,
            broker_heartbeat_interval_ms=50, replica_socket_timeout_ms=500,
            share_coordinator_state_topic_num_partitions=5)
ACCEPT, RELEASE = 1, 2


def share_fetch(topic_id: uuid.UUID, member: str, epoch: int, acks: list[tuple[int, int, int]] = ()) -> dict:
    return {"group_id": "g", "member_id": member, "share_session_epoch": epoch, "max_wait_ms": 0, "min_bytes": 1,
            "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500, "forgotten_topics_data": [],
            "topics": [{"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": a, "last_offset": b, "acknowledge_types": [t]} for a, b, t in acks]}]}]}


async def fetch(conn: KafkaConnection, topic_id: uuid.UUID, member: str, epoch: int) -> Any:
    r = await conn.request(K.SHARE_FETCH, 1, share_fetch(topic_id, member, epoch))
    return r.responses[0].partitions[0]


async def acknowledge(conn: KafkaConnection, topic_id: uuid.UUID, member: str, epoch: int, first: int, last: int,
                      kind: int = ACCEPT) -> int:
    r = await conn.request(K.SHARE_ACKNOWLEDGE, 1, {
        "group_id": "g", "member_id": member, "share_session_epoch": epoch, "topics": [
            {"topic_id": topic_id, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                {"first_offset": first, "last_offset": last, "acknowledge_types": [kind]}]}]}]})
    return r.responses[0].partitions[0].error_code


def state_partition(cluster: Cluster, topic_id: uuid.UUID, partition: int = 0) -> int:
    return partition_for_key(f"g:{kafka_uuid(topic_id)}:{partition}", 5)


def coordinator_of(cluster: Cluster, topic_id: uuid.UUID) -> int:
    return cluster.metadata.internal_partition_leader(STATE_TOPIC, state_partition(cluster, topic_id))


def snapshots(cluster: Cluster, broker_id: int, topic_id: uuid.UUID) -> list[tuple[int, int]]:
    """(start offset, state epoch) of each snapshot of ``g``'s share-partition ``topic``-0 in broker
    ``broker_id``'s replica of its ``__share_group_state`` partition (-1, -1: a tombstone)."""
    out = []
    for raw in stored(log_of(cluster, broker_id, STATE_TOPIC, state_partition(cluster, topic_id))):
        for rec in decode_records(memoryview(raw), check_crc=False):
            key, value = decode_share_record(rec.key, rec.value)
            if key.group_id == "g" and key.topic_id == topic_id and key.partition == 0:
                out.append((value.start_offset, value.state_epoch) if value is not None else (-1, -1))
    return out


async def setup(cluster: Cluster, records: int = 6) -> tuple[uuid.UUID, int, int]:
    """Topic ``sq`` (one partition, RF 3) with ``records`` records, read by share group ``g`` from the earliest
    offset; its data leader is neither the share coordinator of its share-partition nor the group's coordinator.
    (topic id, data leader, share coordinator)."""
    topic = cluster.broker(0).create_topic("sq", 1, 3)
    cluster.broker(0).group_configs.set_overrides("g", {"share.auto.offset.reset": "earliest"})
    cluster.shared.share.state.ensure_topic()
    cluster.broker(0).ensure_offsets_topic()
    coordinator = coordinator_of(cluster, topic.topic_id)
    avoid = {coordinator, cluster.metadata.group_coordinator("g").node_id}
    leader = topic.partitions[0].leader
    if leader in avoid:
        leader = next(b for b in range(3) if b not in avoid)
        await wait_until(lambda: len(cluster.metadata.topics["sq"].partitions[0].isr) == 3, what="sq in sync")
        cluster.metadata.move_leader("sq", 0, leader)
    part = cluster.broker(leader).replica_manager.get("sq", 0)
    await wait_until(lambda: part.is_leader, what="the data leader")
    conn = await connect(cluster, leader)
    for i in range(records):
        assert (await produce(conn, "sq", batch([b"r%d" % i]))).error_code == 0
    await conn.aclose()
    return topic.topic_id, leader, coordinator


async def test_share_state_is_written_to_its_partition_and_an_acknowledgement_is_answered_once_replicated():
    async with serve_cluster(3, **FAST) as cluster:
        assert cluster.metadata.get_topic(STATE_TOPIC) is None
        topic_id, leader, coordinator = await setup(cluster)
        topic = cluster.metadata.get_topic(STATE_TOPIC)
        assert topic.num_partitions == 5 and topic.replication_factor == 3
        assert topic.configs["cleanup.policy"] == "compact" and topic.configs["min.insync.replicas"] == "2"
        conn = await connect(cluster, leader)
        # FindCoordinator (key type 2, as a broker's persister asks) names the partition's leader.
        fc = await conn.request(K.FIND_COORDINATOR, 6, {"key_type": 2, "coordinator_keys": [
            f"g:{kafka_uuid(topic_id)}:0"]})
        assert fc.coordinators[0].error_code == 0 and fc.coordinators[0].node_id == coordinator

        p = await fetch(conn, topic_id, "m1", 0)
        assert [(a.first_offset, a.last_offset) for a in p.acquired_records] == [(0, 5)]
        assert await acknowledge(conn, topic_id, "m1", 1, 0, 2) == 0
        # Answered once replicated: the snapshot at start offset 3 is on every replica already.
        for b in range(3):
            assert snapshots(cluster, b, topic_id)[-1] == (3, 0), b
        # AlterShareGroupOffsets from another broker (the group is empty once m1's session closes): the data
        # leader's share-partition starts over from the state written, under a new state epoch.
        assert (await conn.request(K.SHARE_ACKNOWLEDGE, 1, {"group_id": "g", "member_id": "m1",
                                                            "share_session_epoch": -1, "topics": []})).error_code == 0
        other = await connect(cluster, cluster.metadata.group_coordinator("g").node_id)
        alter = await other.request(K.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "g", "topics": [
            {"topic_name": "sq", "partitions": [{"partition_index": 0, "start_offset": 1}]}]})
        assert alter.error_code == 0 and alter.responses[0].partitions[0].error_code == 0
        assert snapshots(cluster, leader, topic_id)[-1] == (1, 1)
        p = await fetch(conn, topic_id, "m2", 0)
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(1, 5, 1)]
        await conn.aclose()
        await other.aclose()


async def test_a_crashed_share_coordinators_state_is_loaded_by_the_next_and_read_by_a_new_share_partition_leader():
    async with serve_cluster(3, **FAST) as cluster:
        topic_id, leader, coordinator = await setup(cluster)
        third = next(b for b in range(3) if b not in (leader, coordinator))
        conn = await connect(cluster, leader)
        p = await fetch(conn, topic_id, "m1", 0)
        assert [(a.first_offset, a.last_offset) for a in p.acquired_records] == [(0, 5)]
        assert await acknowledge(conn, topic_id, "m1", 1, 0, 2) == 0  # 3-5 stay acquired by m1

        await cluster.crash_broker(coordinator)  # no controlled shutdown: the partition moves once it is fenced
        await wait_until(lambda: coordinator_of(cluster, topic_id) not in (-1, coordinator), what="a new coordinator")
        # The data leader moves too: the new leader initializes the share-partition from what the new coordinator
        # loaded, so what was accepted never comes back and what m1 held is delivered again.
        await wait_until(lambda: third in cluster.metadata.topics["sq"].partitions[0].isr, what="sq in sync")
        cluster.metadata.move_leader("sq", 0, third)
        part = cluster.broker(third).replica_manager.get("sq", 0)
        await wait_until(lambda: part.is_leader and part.log.high_watermark == 6, what="the new data leader")
        new = await connect(cluster, third)
        p = await fetch(new, topic_id, "m2", 0)
        assert p.error_code == 0
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [(3, 5, 2)]
        assert await acknowledge(new, topic_id, "m2", 1, 3, 5) == 0
        second = coordinator_of(cluster, topic_id)
        assert snapshots(cluster, second, topic_id)[-1] == (6, 0)
        await conn.aclose()
        await new.aclose()


async def test_a_share_partition_leader_that_cannot_write_its_state_refuses_acknowledgements():
    """Cut off from its share coordinator, or with the coordinator's partition below min.insync.replicas, the
    share-partition leader answers COORDINATOR_NOT_AVAILABLE and changes nothing; once healed it takes them."""
    async with serve_cluster(3, **FAST, replica_lag_time_max_ms=500) as cluster:
        topic_id, leader, coordinator = await setup(cluster)
        conn = await connect(cluster, leader)
        p = await fetch(conn, topic_id, "m1", 0)
        assert [(a.first_offset, a.last_offset) for a in p.acquired_records] == [(0, 5)]

        cut = cluster.partition_network([[leader], [coordinator]])
        assert await acknowledge(conn, topic_id, "m1", 1, 0, 1) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert cluster.broker(leader).share_partitions.get("g", "sq", 0).start_offset == 0
        cluster.heal_network(cut.id)
        assert await acknowledge(conn, topic_id, "m1", 2, 0, 1) == 0
        assert snapshots(cluster, coordinator, topic_id)[-1] == (2, 0)

        # The followers of the coordinator's partition stop fetching from it: its ISR shrinks below min.isr 2.
        rule = cluster.faults.add(api="Fetch", broker=coordinator, error="UNKNOWN_SERVER_ERROR")
        pm = cluster.metadata.get_topic(STATE_TOPIC).partitions[state_partition(cluster, topic_id)]
        await wait_until(lambda: pm.isr == [coordinator], what="the ISR shrunk to the coordinator")
        assert await acknowledge(conn, topic_id, "m1", 3, 2, 3) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert cluster.broker(leader).share_partitions.get("g", "sq", 0).start_offset == 2
        cluster.faults.remove(rule.id)
        await wait_until(lambda: len(pm.isr) >= 2, what="a follower back in sync")
        assert await acknowledge(conn, topic_id, "m1", 4, 2, 3) == 0
        await conn.aclose()


async def test_a_lone_brokers_share_state_survives_a_restart_and_an_earlier_local_store_is_carried_over(
        tmp_path: Path):
    settings = dict(data_dir=tmp_path, share_coordinator_state_topic_num_partitions=3)
    async with serve_broker(**settings) as broker:
        topic = broker.create_topic("t", 2)
    # What an earlier version kept in <data_dir>/__share_group_state-0 ...
    legacy = ShareStateStore(tmp_path, topics=_Topics(topic))
    legacy.put(ShareStateKey("old", "t", 1), PersistedShareState(4, 2, ((4, 5, 2, 1),)))
    legacy.close()
    assert (tmp_path / f"{STATE_TOPIC}-0").is_dir()
    async with serve_broker(**settings) as broker:
        # ... is in the replicated topic from the first use of a share-partition on, and the local store is gone.
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            r = await conn.request(K.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": "old", "topics": [
                {"topic_name": "t", "partitions": [0, 1]}]}]})
            assert {p.partition_index: p.start_offset for p in r.groups[0].topics[0].partitions} == {0: -1, 1: 4}
        assert not (tmp_path / f"{STATE_TOPIC}-0").exists()
        assert broker.shared.share.state.get(ShareStateKey("old", "t", 1)) == PersistedShareState(
            4, 2, ((4, 5, 2, 1),))
    async with serve_broker(**settings) as broker:
        assert broker.shared.share.state.get(ShareStateKey("old", "t", 1)) == PersistedShareState(
            4, 2, ((4, 5, 2, 1),))
        assert any((tmp_path / "logs").glob(f"{STATE_TOPIC}-*"))


class _Topics:
    """The topic ids a store of an earlier version resolved through the broker's metadata."""

    def __init__(self, topic: Any) -> None:
        self.topic = topic

    def get_topic(self, name: str) -> Any:
        return self.topic if name == self.topic.name else None

    def get_topic_by_id(self, topic_id: uuid.UUID) -> Any:
        return self.topic if topic_id == self.topic.topic_id else None
