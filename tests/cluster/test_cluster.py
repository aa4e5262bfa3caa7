"""A multi-broker cluster in one process: replication, ISR, acks=all, failover (issue 5)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.broker.request import ResponseObserver
from helpers import batch, fetch, produce, values, wait_until
from cluster_logs import connect, log_of, stored

K = ApiKey
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)


def pause_fetching(cluster: Cluster, broker_id: int, topic: str, partition: int = 0) -> None:
    """Stop one follower fetching a partition (as if it were stuck)."""
    b = cluster.broker(broker_id)
    b.fetcher_manager.remove_partition(b.replica_manager.get(topic, partition))


def resume_fetching(cluster: Cluster, broker_id: int) -> None:
    cluster.broker(broker_id).replica_manager.apply_leadership()


async def test_assignment_metadata_and_replication_converges():
    async with serve_cluster(3, **FAST) as cluster:
        topic = cluster.broker(0).create_topic("t", 6, 3)
        # Kafka's rack-unaware assignment (start index and shift 0): leaders spread round-robin.
        assert [p.replicas for p in topic.partitions] == [
            [0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1], [1, 0, 2], [2, 1, 0]]
        conn = await connect(cluster, 1)
        md = await conn.request(K.METADATA, 12, {"topics": None})
        assert sorted(b.node_id for b in md.brokers) == [0, 1, 2]
        assert md.controller_id == 0
        dc = await conn.request(K.DESCRIBE_CLUSTER, 0, {})
        assert sorted(b.broker_id for b in dc.brokers) == [0, 1, 2]
        fc = await conn.request(K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert fc.node_id == 0 and fc.port == cluster.configs[0].port
        await conn.aclose()

        leader = await connect(cluster, 2)  # leads partition 2
        for i in range(5):
            r = await produce(leader, "t", batch([b"v%d" % i]), partition=2, acks=-1)
            assert r.error_code == 0 and r.base_offset == i
        # acks=all answered only once the HW passed the batch: the followers have it.
        assert log_of(cluster, 2, "t", 2).high_watermark == 5
        for b in (0, 1):
            await wait_until(lambda b=b: log_of(cluster, b, "t", 2).high_watermark == 5, what="follower HW")
            assert stored(log_of(cluster, b, "t", 2)) == stored(log_of(cluster, 2, "t", 2))
        got = await fetch(leader, "t", partition=2, version=11)
        assert values(got.records) == [b"v%d" % i for i in range(5)] and got.high_watermark == 5
        m = cluster.broker(0).metrics()
        assert m["kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"] == 0
        await leader.aclose()


async def test_requests_to_a_follower_get_not_leader_or_follower():
    async with serve_cluster(2, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 2)  # leader 0, follower 1
        conn = await connect(cluster, 1)
        r = await produce(conn, "t", batch([b"x"]), acks=1)
        assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        f = await fetch(conn, "t", version=11)
        assert f.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        lo = await conn.request(K.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert lo.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        dr = await conn.request(K.DELETE_RECORDS, 2, {"timeout_ms": 1000, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "offset": 0}]}]})
        assert dr.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        await conn.aclose()


async def test_consumers_read_only_below_the_high_watermark():
    async with serve_cluster(2, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 2)
        conn = await connect(cluster, 0)
        assert (await produce(conn, "t", batch([b"a"]), acks=-1)).error_code == 0
        pause_fetching(cluster, 1, "t")
        r = await produce(conn, "t", batch([b"b"]), acks=1)  # acks=1: answered at once
        assert r.error_code == 0 and r.base_offset == 1
        lg = log_of(cluster, 0, "t")
        assert lg.log_end_offset == 2 and lg.high_watermark == 1
        got = await fetch(conn, "t", version=11)
        assert values(got.records) == [b"a"] and got.high_watermark == 1
        resume_fetching(cluster, 1)
        await wait_until(lambda: lg.high_watermark == 2, what="HW after resume")
        got = await fetch(conn, "t", version=11)
        assert values(got.records) == [b"a", b"b"]
        await conn.aclose()


async def test_isr_shrinks_and_expands():
    async with serve_cluster(3, replica_lag_time_max_ms=300, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        pm = cluster.metadata.topics["t"].partitions[0]
        conn = await connect(cluster, 0)
        await produce(conn, "t", batch([b"a"]), acks=-1)
        pause_fetching(cluster, 2, "t")
        await produce(conn, "t", batch([b"b"]), acks=1)
        await wait_until(lambda: pm.isr == [0, 1], what="ISR shrink")
        lg = log_of(cluster, 0, "t")
        assert lg.high_watermark == 2  # min LEO over the new ISR
        m = cluster.broker(0).metrics()
        assert m["kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"] == 1
        assert m["kafka.server:type=ReplicaManager,name=IsrShrinksTotal"] == 1
        assert m["kafka.server:type=ReplicaManager,name=LeaderCount"] == 1
        resume_fetching(cluster, 2)
        await wait_until(lambda: pm.isr == [0, 1, 2], what="ISR expand")
        m = cluster.broker(0).metrics()
        assert m["kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"] == 0
        assert m["kafka.server:type=ReplicaManager,name=IsrExpandsTotal"] == 1
        md = await conn.request(K.METADATA, 12, {"topics": [{"name": "t", "topic_id": None}]})
        assert md.topics[0].partitions[0].isr_nodes == [0, 1, 2]
        await conn.aclose()


async def test_acks_all_waits_times_out_and_honours_min_insync_replicas():
    async with serve_cluster(3, replica_lag_time_max_ms=400, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3, configs={"min.insync.replicas": "3"})
        pm = cluster.metadata.topics["t"].partitions[0]
        conn = await connect(cluster, 0)
        assert (await produce(conn, "t", batch([b"a"]), acks=-1)).error_code == 0
        pause_fetching(cluster, 2, "t")
        # Broker 2 is still in the ISR but not fetching: acks=all cannot complete (the helper's timeout_ms
        # is longer than replica.lag.time.max.ms: the ISR would shrink first, and the HW then pass the batch
        # with only 2 in-sync replicas; hence a request of its own with a shorter timeout).
        start = trio.current_time()
        resp = await conn.request(K.PRODUCE, 9, {"acks": -1, "timeout_ms": 150, "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch([b"b"])}]}]})
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.REQUEST_TIMED_OUT
        assert trio.current_time() - start >= 0.14
        await wait_until(lambda: pm.isr == [0, 1], what="ISR shrink")
        r = await produce(conn, "t", batch([b"c"]), acks=-1)
        assert r.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        assert (await produce(conn, "t", batch([b"d"]), acks=1)).error_code == 0
        resume_fetching(cluster, 2)
        await wait_until(lambda: pm.isr == [0, 1, 2], what="ISR expand")
        r = await produce(conn, "t", batch([b"e"]), acks=-1)
        assert r.error_code == 0
        assert log_of(cluster, 0, "t").high_watermark == log_of(cluster, 0, "t").log_end_offset
        await conn.aclose()


async def test_failover_bumps_epoch_and_restarted_leader_truncates(tmp_path: Path):
    async with serve_cluster(3, data_dir=tmp_path, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        pm = cluster.metadata.topics["t"].partitions[0]
        c0 = await connect(cluster, 0)
        for i in range(5):
            assert (await produce(c0, "t", batch([b"c%d" % i]), acks=-1)).error_code == 0
        await wait_until(lambda: all(log_of(cluster, b, "t").high_watermark == 5 for b in (1, 2)))
        # Divergence: the leader appends 3 batches nobody replicates (acks=1), then fails.
        pause_fetching(cluster, 1, "t")
        pause_fetching(cluster, 2, "t")
        for i in range(3):
            assert (await produce(c0, "t", batch([b"lost%d" % i]), acks=1)).error_code == 0
        assert log_of(cluster, 0, "t").log_end_offset == 8
        await c0.aclose()
        await cluster.stop_broker(0)
        assert pm.leader == 1 and pm.leader_epoch == 1 and pm.isr == [1, 2]
        c1 = await connect(cluster, 1)
        for i in range(2):
            r = await produce(c1, "t", batch([b"new%d" % i]), acks=-1)
            assert r.error_code == 0 and r.base_offset == 5 + i
        # Broker 0 comes back with its divergent log: it truncates to offset 5 (end of epoch 0 on the
        # new leader) via OffsetForLeaderEpoch, then fetches the new epoch's batches.
        await cluster.start_broker(0)
        assert cluster.leader("t", 0) == 1
        await wait_until(lambda: pm.isr == [0, 1, 2], what="restarted broker back in the ISR")
        leader_log, old = log_of(cluster, 1, "t"), log_of(cluster, 0, "t")
        await wait_until(lambda: old.high_watermark == 7, what="HW on the restarted broker")
        assert stored(old) == stored(leader_log)
        assert old.epoch_cache.epochs == [0, 1] and old.epoch_cache.start_offsets == [0, 5]
        got = await fetch(c1, "t", version=11)
        assert values(got.records) == [b"c0", b"c1", b"c2", b"c3", b"c4", b"new0", b"new1"]
        r = await produce(c1, "t", batch([b"after"]), acks=-1)
        assert r.error_code == 0 and r.base_offset == 7
        await c1.aclose()


@pytest.mark.parametrize("version", [8, 6])
async def test_seed_follower_fetch_sizes_two_brokers_1000_partitions(version: int):
    """Seed 004 / SPEC section 5: each follower fetches the 500 partitions the other broker leads;
    the first request body is a 12043-byte full fetch (Fetch v8, as a 2.0 broker sends), then
    33-byte incremental fetches naming no partition; pinned to v6 (no sessions) every body is 12031."""
    settings = {**FAST, "replica_fetch_wait_max_ms": 20, "replica_fetch_request_version": version}
    async with serve_cluster(2, **settings) as cluster:
        seen: dict[int, list[tuple[int, int, int]]] = {0: [], 1: []}  # leader -> (replica_id, version, body)

        def observer(leader: int):
            def observe(ctx, frame, response) -> None:
                if ctx.api_key == K.FETCH:
                    seen[leader].append((int.from_bytes(frame[ctx.request_size - ctx.body_size:][:4], "big"),
                                         ctx.api_version, ctx.body_size))
            return observe

        for b in (0, 1):
            cluster.broker(b).observe(ResponseObserver(observer(b)))
        topic = cluster.broker(0).create_topic("test", 1000, 2)
        assert sum(p.leader == 0 for p in topic.partitions) == 500
        await wait_until(lambda: all(len(v) >= 4 for v in seen.values()), what="follower fetches")
        for leader, follower in ((0, 1), (1, 0)):
            rounds = seen[leader]
            assert {r[0] for r in rounds} == {follower} and {r[1] for r in rounds} == {version}
            if version == 6:
                assert {r[2] for r in rounds} == {12031}
                continue
            assert rounds[0][2] == 12043
            assert {r[2] for r in rounds[1:]} == {33}
        for b in (0, 1) if version >= 7 else ():  # one 500-partition session per leader
            m = cluster.broker(b).metrics()
            assert m["kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions"] == 1
            assert m["kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached"] == 500


async def test_follower_lag_and_max_lag_while_catching_up():
    async with serve_cluster(2, replica_lag_time_max_ms=200, replica_fetch_max_bytes=1, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 2)
        pm = cluster.metadata.topics["t"].partitions[0]
        conn = await connect(cluster, 0)
        pause_fetching(cluster, 1, "t")
        await wait_until(lambda: pm.isr == [0], what="ISR shrink")
        for i in range(30):
            assert (await produce(conn, "t", batch([b"x%d" % i]), acks=1)).error_code == 0
        assert log_of(cluster, 0, "t").high_watermark == 30  # the ISR is the leader alone
        resume_fetching(cluster, 1)
        name = "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"
        lags = []

        def caught_up() -> bool:  # sampling the lag as it goes
            lags.append(cluster.broker(1).metrics()[name])
            return lags[-1] == 0 and log_of(cluster, 1, "t").log_end_offset >= 30

        await wait_until(caught_up, 5, "the follower to catch up", interval=0.001)
        # replica.fetch.max.bytes=1: one batch per fetch, so the follower lags, then catches up.
        assert max(lags) >= 20 and lags[-1] == 0
        per_partition = ("kafka.server:type=FetcherLagMetrics,name=ConsumerLag,"
                         "clientId=ReplicaFetcherThread-0-0,topic=t,partition=0")
        assert cluster.broker(1).metrics()[per_partition] == 0
        await wait_until(lambda: pm.isr == [0, 1], what="ISR expand")
        await conn.aclose()


async def test_topic_changes_reach_every_broker():
    async with serve_cluster(3, **FAST) as cluster:
        conn = await connect(cluster, 2)
        resp = await conn.request(K.CREATE_TOPICS, 7, {"topics": [
            {"name": "c", "num_partitions": 2, "replication_factor": 2}], "timeout_ms": 1000})
        assert resp.topics[0].error_code == 0
        for b in range(3):  # every broker hosts exactly the partitions it is a replica of
            assert set(cluster.broker(b).replica_manager.partitions) == {
                ("c", pm.partition) for pm in cluster.metadata.topics["c"].partitions if b in pm.replicas}
        resp = await conn.request(K.CREATE_PARTITIONS, 3, {"topics": [
            {"name": "c", "count": 3, "assignments": None}], "timeout_ms": 1000, "validate_only": False})
        assert resp.results[0].error_code == 0
        for pm in cluster.metadata.topics["c"].partitions:
            for b in pm.replicas:
                assert cluster.broker(b).replica_manager.get("c", pm.partition) is not None
        resp = await conn.request(K.DELETE_TOPICS, 6, {"topics": [{"name": "c"}], "timeout_ms": 1000})
        assert resp.responses[0].error_code == 0
        for b in range(3):
            assert not cluster.broker(b).replica_manager.partitions
            assert not cluster.broker(b).fetcher_manager.fetchers
        await conn.aclose()


async def test_committed_offsets_survive_the_coordinator_stopping():
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        c0 = await connect(cluster, 0)
        fc = await c0.request(K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert fc.node_id == 0
        r = await c0.request(K.OFFSET_COMMIT, 2, {"group_id": "g", "generation_id_or_member_epoch": -1,
                                                  "member_id": "", "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 42}]}]})
        assert r.topics[0].partitions[0].error_code == 0
        await c0.aclose()
        await cluster.stop_broker(0)
        # The group's __consumer_offsets partition is led by one of its other in-sync replicas now, which loaded
        # the group from its replica of the partition.
        new = cluster.metadata.group_coordinator("g").node_id
        assert new in (1, 2)
        c1 = await connect(cluster, new)
        fc = await c1.request(K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert fc.node_id == new and fc.port == cluster.configs[new].port
        of = await c1.request(K.OFFSET_FETCH, 5, {"group_id": "g", "topics": [
            {"name": "t", "partition_indexes": [0]}]})
        assert of.topics[0].partitions[0].committed_offset == 42
        md = await c1.request(K.METADATA, 12, {"topics": [{"name": "t"}]})
        assert sorted(b.node_id for b in md.brokers) == [1, 2] and md.controller_id == 1
        assert md.topics[0].partitions[0].offline_replicas == [0]
        await c1.aclose()


async def test_whole_cluster_restart_keeps_logs_and_metadata(tmp_path: Path):
    async with serve_cluster(2, data_dir=tmp_path, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 2, 2)
        for p in (0, 1):
            conn = await connect(cluster, cluster.leader("t", p))
            for i in range(3):
                assert (await produce(conn, "t", batch([b"p%d-%d" % (p, i)]), partition=p, acks=-1)).error_code == 0
            await conn.aclose()
    assert (tmp_path / "__cluster_metadata-0").is_dir() and (tmp_path / "broker-1" / "logs").is_dir()
    assert not (tmp_path / "cluster-metadata.json").exists()  # the topics are records in the metadata log
    async with serve_cluster(2, data_dir=tmp_path, **FAST) as cluster:
        for p in (0, 1):
            conn = await connect(cluster, cluster.leader("t", p))
            assert (await produce(conn, "t", batch([b"p%d-3" % p]), partition=p, acks=-1)).base_offset == 3
            got = await fetch(conn, "t", partition=p, version=11)
            assert values(got.records) == [b"p%d-%d" % (p, i) for i in range(4)]
            await conn.aclose()
            follower = 1 - cluster.leader("t", p)
            await wait_until(lambda p=p, f=follower: log_of(cluster, f, "t", p).high_watermark == 4)


async def test_acks_all_completes_when_a_stuck_follower_is_stopped():
    async with serve_cluster(3, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 1, 3)
        pm = cluster.metadata.topics["t"].partitions[0]
        conn = await connect(cluster, 0)
        pause_fetching(cluster, 2, "t")
        result = []

        async def produce_all() -> None:
            result.append(await produce(conn, "t", batch([b"a"]), acks=-1))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_all)
            await wait_until(lambda: cluster.broker(0).delayed_produce.watched() == 1, what="the produce to wait")
            assert not result  # broker 2 is in the ISR and not fetching: the produce waits
            await cluster.stop_broker(2)  # the controller drops it from the ISR
        assert pm.isr == [0, 1] and result[0].error_code == 0 and result[0].base_offset == 0
        await conn.aclose()


@pytest.mark.parametrize("version", [6, 9, 12, 13, 15, 18])
async def test_replication_at_other_fetch_versions(version: int):
    async with serve_cluster(2, replica_fetch_request_version=version, **FAST) as cluster:
        cluster.broker(0).create_topic("t", 2, 2)
        for p in (0, 1):
            conn = await connect(cluster, cluster.leader("t", p))
            for i in range(3):
                r = await produce(conn, "t", batch([b"%d-%d" % (p, i)]), partition=p, acks=-1)
                assert r.error_code == 0 and r.base_offset == i
            await conn.aclose()
            follower = 1 - cluster.leader("t", p)
            await wait_until(lambda p=p, f=follower: log_of(cluster, f, "t", p).high_watermark == 3)
            assert stored(log_of(cluster, follower, "t", p)) == stored(log_of(cluster, 1 - follower, "t", p))


def test_replicated_logs_keep_their_checkpointed_high_watermark(tmp_path: Path):
    from minikafka.broker.log import LogConfig, LogManager

    mgr = LogManager(tmp_path)
    for name in ("single", "replicated"):
        lg = mgr.get_or_create(name, 0, LogConfig())
        lg.auto_advance_hw = False
        lg.append_as_leader([bytearray(batch([b"a"])), bytearray(batch([b"b"]))], 0, 0)
        lg.high_watermark = 1
    mgr.close_all()
    mgr = LogManager(tmp_path)
    mgr.load_existing({}, {("replicated", 0)})
    assert mgr.get("replicated", 0).high_watermark == 1  # its leader will advance it
    assert mgr.get("single", 0).high_watermark == 2  # a lone replica: HW = LEO, as before
    mgr.close_all()
