"""The group coordinator on the replicated ``__consumer_offsets`` partitions (issue 25): the internal topic is
created at the first FindCoordinator with Kafka's partition count and replication factor; each partition's
shard is loaded on its leader (COORDINATOR_LOAD_IN_PROGRESS until done) and unloaded when leadership moves
(NOT_COORDINATOR there); a commit is answered once replicated."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.groups import GroupCoordinator
from minikafka.broker.groups.offset_log import OffsetLog
from minikafka.client.connection import KafkaConnection
from minikafka.common import OffsetAndMetadata, TopicPartition
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from cluster_logs import connect
from helpers import batch, produce, wait_until

K = ApiKey
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, broker_session_timeout_ms=400,
            broker_heartbeat_interval_ms=50, replica_socket_timeout_ms=500, offsets_topic_num_partitions=5)
OFFSETS = "__consumer_offsets"


async def find_group_coordinator(conn: KafkaConnection, group: str) -> Any:
    return await conn.request(K.FIND_COORDINATOR, 3, {"key": group, "key_type": 0})


async def commit(conn: KafkaConnection, group: str, offset: int, topic: str = "t") -> int:
    r = await conn.request(K.OFFSET_COMMIT, 2, {"group_id": group, "generation_id_or_member_epoch": -1,
                                                "member_id": "", "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset}]}]})
    return r.topics[0].partitions[0].error_code


async def fetch_committed(conn: KafkaConnection, group: str, topic: str = "t") -> tuple[int, int]:
    """(the group's error code, partition 0's committed offset)."""
    r = await conn.request(K.OFFSET_FETCH, 5, {"group_id": group, "topics": [{"name": topic,
                                                                               "partition_indexes": [0]}]})
    return r.error_code, r.topics[0].partitions[0].committed_offset if r.topics else -1


def offsets_partition(cluster: Cluster, group: str) -> int:
    return cluster.group_coordinator.partition_for(group)


async def test_the_offsets_topic_is_created_at_the_first_find_coordinator_as_kafka_creates_it():
    async with serve_cluster(3, **FAST) as cluster:
        assert cluster.metadata.get_topic(OFFSETS) is None
        c0 = await connect(cluster, 0)
        fc = await find_group_coordinator(c0, "g")
        topic = cluster.metadata.get_topic(OFFSETS)
        assert topic is not None and topic.num_partitions == 5 and topic.replication_factor == 3
        assert topic.configs["cleanup.policy"] == "compact"
        leader = topic.partitions[offsets_partition(cluster, "g")].leader
        assert fc.node_id == leader
        md = await c0.request(K.METADATA, 12, {"topics": [{"name": OFFSETS}]})
        assert md.topics[0].is_internal and len(md.topics[0].partitions) == 5
        # Every partition's shard is loaded on its leader, every broker hosts its replicas.
        shards = cluster.group_coordinator.shards
        assert shards is not None
        await wait_until(lambda: all(shards.error_for(p.partition, p.leader) is None for p in topic.partitions),
                         what="every shard loaded")
        for b in range(3):
            assert sum(1 for (t, _p) in cluster.broker(b).replica_manager.partitions if t == OFFSETS) == 5
        # Clients do not write to it, as in Kafka.
        leader0 = await connect(cluster, topic.partitions[0].leader)
        refused = await produce(leader0, OFFSETS, batch([b"x"]), acks=1)
        assert refused.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        await leader0.aclose()
        await c0.aclose()

    # Its replication factor is capped at the brokers there are.
    async with serve_cluster(2, **FAST) as cluster:
        c0 = await connect(cluster, 0)
        await find_group_coordinator(c0, "g")
        assert cluster.metadata.get_topic(OFFSETS).replication_factor == 2
        await c0.aclose()


async def test_a_commit_is_answered_once_its_records_are_replicated():
    async with serve_cluster(3, **FAST, replica_lag_time_max_ms=60_000, offsets_commit_timeout_ms=300) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        c0 = await connect(cluster, 0)
        leader = (await find_group_coordinator(c0, "g")).node_id
        followers = [b for b in range(3) if b != leader]
        conn = await connect(cluster, leader)
        assert await commit(conn, "g", 1) == ErrorCode.NONE
        part = cluster.broker(leader).replica_manager.get(OFFSETS, offsets_partition(cluster, "g"))
        assert part.log.high_watermark == part.log.log_end_offset  # answered: replicated to the ISR

        # Followers cut off (and still in the ISR): the commit is taken but not answered until replicated ...
        cut = cluster.partition_network([[leader], followers])
        assert await commit(conn, "g", 2) == ErrorCode.REQUEST_TIMED_OUT  # offsets.commit.timeout.ms
        # The next commit waits as long as the test takes to heal the network, however slow the machine.
        cluster.group_coordinator.config.offsets_commit_timeout_ms = 120_000
        answers: list[int] = []

        async def commit_later() -> None:
            answers.append(await commit(conn, "g", 3))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(commit_later)
            await wait_until(lambda: part.log.log_end_offset > part.log.high_watermark, what="the commit appended")
            assert answers == []
            # Reads see what is replicated only (Kafka reads the committed snapshot): not 2 nor 3, which a
            # failover now would lose.
            reader = await connect(cluster, leader)
            assert await fetch_committed(reader, "g") == (ErrorCode.NONE, 1)
            await reader.aclose()
            cluster.heal_network(cut.id)  # ... and answered once the followers have it
            await wait_until(lambda: bool(answers), what="the commit answered")
        assert answers == [ErrorCode.NONE]
        assert await fetch_committed(conn, "g") == (ErrorCode.NONE, 3)
        await conn.aclose()
        await c0.aclose()


async def test_the_shard_moves_with_leadership_and_loads_on_the_new_leader(monkeypatch: pytest.MonkeyPatch):
    import minikafka.broker.coordinator_runtime as coordinator_runtime

    monkeypatch.setattr(coordinator_runtime, "SYNC_LOAD_MAX_BYTES", -1)  # every load by a task: a window to look into
    gate = trio.Event()
    loading = GroupCoordinator._load_later

    async def held(self: GroupCoordinator, shard: Any) -> None:
        await gate.wait()
        await loading(self, shard)

    monkeypatch.setattr(GroupCoordinator, "_load_later", held)
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        c0 = await connect(cluster, 0)
        first = (await find_group_coordinator(c0, "g")).node_id
        gate.set()
        p = offsets_partition(cluster, "g")
        await wait_until(lambda: cluster.group_coordinator.coordinator_error("g", first) == ErrorCode.NONE,
                         what="the first load")
        old = await connect(cluster, first)
        assert await commit(old, "g", 42) == ErrorCode.NONE
        gate = trio.Event()
        pm = cluster.metadata.get_topic(OFFSETS).partitions[p]
        second = next(b for b in pm.isr if b != first)
        cluster.metadata.move_leader(OFFSETS, p, second)
        new = await connect(cluster, second)
        # The old leader resigned: NOT_COORDINATOR there; the new one is still loading the partition.
        assert (await fetch_committed(old, "g"))[0] == ErrorCode.NOT_COORDINATOR
        assert (await fetch_committed(new, "g"))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await commit(new, "g", 43) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        gate.set()
        await wait_until(lambda: cluster.group_coordinator.coordinator_error("g", second) == ErrorCode.NONE,
                         what="the load on the new leader")
        assert await fetch_committed(new, "g") == (ErrorCode.NONE, 42)  # read back from its replica
        assert (await find_group_coordinator(c0, "g")).node_id == second
        for conn in (c0, old, new):
            await conn.aclose()


async def test_a_crashed_coordinators_groups_are_rebuilt_from_the_new_leaders_replica():
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        c0 = await connect(cluster, 0)
        first = (await find_group_coordinator(c0, "g")).node_id
        conn = await connect(cluster, first)
        assert await commit(conn, "g", 7) == ErrorCode.NONE
        await conn.aclose()
        await cluster.crash_broker(first)
        assert "g" not in cluster.group_coordinator.groups  # its shard went with the process
        await wait_until(lambda: cluster.metadata.group_coordinator("g").node_id not in (-1, first),
                         what="the crashed coordinator fenced and its partition led elsewhere")
        second = cluster.metadata.group_coordinator("g").node_id
        other = await connect(cluster, second)
        assert await fetch_committed(other, "g") == (ErrorCode.NONE, 7)
        await other.aclose()
        await c0.aclose()


async def join_and_sync(conn: KafkaConnection, group: str) -> tuple[str, int]:
    """One classic member joins ``group`` (with the MEMBER_ID_REQUIRED round) and, as its leader, syncs the
    assignment ``b"all"``: (member id, generation)."""
    join = {"group_id": group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000, "member_id": "",
            "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range",
                                                                                 "metadata": b"sub"}]}
    r = await conn.request(K.JOIN_GROUP, 5, join)
    assert r.error_code == ErrorCode.MEMBER_ID_REQUIRED
    r = await conn.request(K.JOIN_GROUP, 5, {**join, "member_id": r.member_id})
    assert r.error_code == 0 and r.leader == r.member_id
    s = await conn.request(K.SYNC_GROUP, 5, {"group_id": group, "generation_id": r.generation_id,
                                             "member_id": r.member_id, "group_instance_id": None,
                                             "protocol_type": "consumer", "protocol_name": "range",
                                             "assignments": [{"member_id": r.member_id, "assignment": b"all"}]})
    assert s.error_code == 0 and s.assignment == b"all"
    return r.member_id, r.generation_id


async def heartbeat(conn: KafkaConnection, group: str, member: str, generation: int) -> int:
    r = await conn.request(K.HEARTBEAT, 4, {"group_id": group, "generation_id": generation, "member_id": member,
                                            "group_instance_id": None})
    return r.error_code


async def test_a_classic_group_keeps_its_members_when_its_coordinator_crashes():
    """The SyncGroup that completes a rebalance is answered once the group's record, members and assignments
    included, is replicated; the next coordinator loads the group Stable with them, so its member carries on
    without rejoining."""
    async with serve_cluster(3, **FAST, group_initial_rebalance_delay_ms=0) as cluster:
        c0 = await connect(cluster, 0)
        first = (await find_group_coordinator(c0, "g")).node_id
        conn = await connect(cluster, first)
        member, generation = await join_and_sync(conn, "g")
        await conn.aclose()
        await cluster.crash_broker(first)
        await wait_until(lambda: cluster.metadata.group_coordinator("g").node_id not in (-1, first),
                         what="the crashed coordinator fenced and its partition led elsewhere")
        second = cluster.metadata.group_coordinator("g").node_id
        group = cluster.group_coordinator.get_group("g")
        assert group is not None and group.state.value == "Stable" and group.generation_id == generation
        assert group.leader_id == member and group.get(member).assignment == b"all"
        other = await connect(cluster, second)
        assert await heartbeat(other, "g", member, generation) == ErrorCode.NONE
        await other.aclose()
        await c0.aclose()


class Kip848Member:
    """A KIP-848 member over the wire: heartbeats with the partitions it was last given (so revocations complete)."""

    def __init__(self, conn: KafkaConnection, group: str, topics: list[str]) -> None:
        self.conn, self.group, self.topics = conn, group, topics
        self.member_id, self.epoch = str(uuid.uuid4()), 0  # (v1: the member names itself, KIP-1082)
        self.owned: list[dict[str, Any]] = []

    async def heartbeat(self) -> Any:
        joining = self.epoch == 0
        r = await self.conn.request(K.CONSUMER_GROUP_HEARTBEAT, 1, {
            "group_id": self.group, "member_id": self.member_id, "member_epoch": self.epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": 30_000 if joining else -1,
            "subscribed_topic_names": self.topics if joining else None, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": self.owned})
        if r.error_code == 0:
            self.member_id, self.epoch = r.member_id, r.member_epoch
            if r.assignment is not None:
                self.owned = [{"topic_id": t.topic_id, "partitions": list(t.partitions)}
                              for t in r.assignment.topic_partitions]
        return r


async def test_a_consumer_group_keeps_its_members_and_assignments_when_its_coordinator_crashes():
    """A ConsumerGroupHeartbeat is answered once the group's records (its epoch, members, target and current
    assignments) are replicated; the next coordinator rebuilds the group from them, so its members carry on at
    their epochs with their partitions: no new group epoch, no rebalance."""
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 4, 3)
        c0 = await connect(cluster, 0)
        first = (await find_group_coordinator(c0, "g")).node_id
        conn = await connect(cluster, first)
        members = [Kip848Member(conn, "g", ["t"]) for _ in range(2)]

        async def reconcile() -> bool:
            for m in members:
                assert (await m.heartbeat()).error_code == 0
            return cluster.group_coordinator.get_group("g").consumer.state.value == "Stable"

        for _ in range(10):
            if await reconcile():
                break
        before = cluster.group_coordinator.get_group("g").consumer
        assert before.state.value == "Stable"
        assigned = {mid: m.assigned_partitions for mid, m in before.members.items()}
        epoch = before.group_epoch
        await conn.aclose()
        await cluster.crash_broker(first)
        await wait_until(lambda: cluster.metadata.group_coordinator("g").node_id not in (-1, first),
                         what="the crashed coordinator fenced and its partition led elsewhere")
        after = cluster.group_coordinator.get_group("g").consumer
        assert after is not before and after.group_epoch == epoch and after.state.value == "Stable"
        assert {mid: m.assigned_partitions for mid, m in after.members.items()} == assigned
        other = await connect(cluster, cluster.metadata.group_coordinator("g").node_id)
        for m in members:
            m.conn = other
            r = await m.heartbeat()
            assert (r.error_code, r.member_epoch) == (0, epoch)
        assert cluster.group_coordinator.get_group("g").consumer.group_epoch == epoch
        await other.aclose()
        await c0.aclose()


async def share_heartbeat(conn: KafkaConnection, group: str, member: str, epoch: int,
                          topics: list[str] | None = None) -> Any:
    return await conn.request(K.SHARE_GROUP_HEARTBEAT, 1, {"group_id": group, "member_id": member,
                                                           "member_epoch": epoch, "rack_id": None,
                                                           "subscribed_topic_names": topics})


async def test_a_share_group_keeps_its_members_when_its_coordinator_crashes_or_its_broker_restarts(tmp_path: Path):
    """A share group's records (its epoch, members, target and current assignments) are written to its
    ``__consumer_offsets`` partition and a ShareGroupHeartbeat is answered once they are replicated: the next
    coordinator, or the broker restarted, rebuilds the group with its members, who carry on at their epoch."""
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 4, 3)
        c0 = await connect(cluster, 0)
        first = (await find_group_coordinator(c0, "sg")).node_id
        conn = await connect(cluster, first)
        members = {}
        for _ in range(2):
            r = await share_heartbeat(conn, "sg", str(uuid.uuid4()), 0, ["t"])
            assert r.error_code == 0
            members[r.member_id] = r.member_epoch
        for mid in members:  # the first member catches up with the second's join
            r = await share_heartbeat(conn, "sg", mid, members[mid])
            members[mid] = r.member_epoch
        before = cluster.shared.share_groups.groups["sg"]
        assigned = {mid: m.assigned_partitions for mid, m in before.members.items()}
        assert sorted(p for a in assigned.values() for ps in a.values() for p in ps) == [0, 1, 2, 3]
        await conn.aclose()
        await cluster.crash_broker(first)
        await wait_until(lambda: cluster.metadata.group_coordinator("sg").node_id not in (-1, first),
                         what="the crashed coordinator fenced and its partition led elsewhere")
        after = cluster.shared.share_groups.groups["sg"]
        assert after is not before and after.group_epoch == before.group_epoch
        assert {mid: m.assigned_partitions for mid, m in after.members.items()} == assigned
        other = await connect(cluster, cluster.metadata.group_coordinator("sg").node_id)
        for mid, epoch in members.items():
            r = await share_heartbeat(other, "sg", mid, epoch)
            assert (r.error_code, r.member_epoch) == (0, epoch)
        assert cluster.shared.share_groups.groups["sg"].group_epoch == before.group_epoch
        await other.aclose()
        await c0.aclose()

    async with serve_broker(data_dir=tmp_path, offsets_topic_num_partitions=3) as broker:
        broker.create_topic("t", 2)
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            joined = await share_heartbeat(conn, "sg", str(uuid.uuid4()), 0, ["t"])
            assert joined.error_code == 0
    async with serve_broker(data_dir=tmp_path, offsets_topic_num_partitions=3) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            r = await conn.request(K.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["share"]})
            assert [(g.group_id, g.group_state) for g in r.groups] == [("sg", "Stable")]
            r = await share_heartbeat(conn, "sg", joined.member_id, joined.member_epoch)
            assert (r.error_code, r.member_epoch) == (0, joined.member_epoch)


async def test_a_lone_brokers_groups_survive_a_restart_and_an_earlier_local_log_is_carried_over(tmp_path: Path):
    # What an earlier version kept in <data_dir>/__consumer_offsets-0 ...
    legacy = OffsetLog(tmp_path)
    legacy.load()
    legacy.write_group_metadata("old", "classic", "consumer", 3)
    legacy.commit_offsets("old", {TopicPartition("t", 0): OffsetAndMetadata(11, commit_timestamp=1000)})
    legacy.close()
    settings = dict(data_dir=tmp_path, offsets_topic_num_partitions=3)
    async with serve_broker(**settings) as broker:
        broker.create_topic("t", 1, 1)
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            await find_group_coordinator(conn, "new")
            # ... is in the replicated topic now, and the local log is gone.
            assert await fetch_committed(conn, "old") == (ErrorCode.NONE, 11)
            assert not (tmp_path / "__consumer_offsets-0").exists()
            assert await commit(conn, "new", 5) == ErrorCode.NONE
    async with serve_broker(**settings) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert await fetch_committed(conn, "old") == (ErrorCode.NONE, 11)
            assert await fetch_committed(conn, "new") == (ErrorCode.NONE, 5)
            assert broker.group_coordinator.groups["old"].generation_id == 3
