"""Kafka 4.2's newest Produce and Fetch in a cluster: KIP-951 leader discovery, KIP-903 replica state and
KIP-1166's follower high watermark.

A Produce (v10+) or Fetch (v16+) sent to a broker that does not lead the partition is answered
NOT_LEADER_OR_FOLLOWER (Fetch also FENCED_LEADER_EPOCH) with the partition's ``current_leader`` and the
leader's endpoint in ``node_endpoints``, whether the broker holds a follower replica or none at all;
older versions get the error alone.  Followers speaking Fetch v15+ name themselves in ``replica_state``
with their broker epoch; a follower fetching with a stale broker epoch does not join the ISR.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from helpers import PRODUCE_TIMEOUT_MS, batch, wait_until
from minikafka.capture.recorder import CAPTURE
from minikafka.analysis.decode import COLUMNS, RecordDecoder
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.request import ResponseObserver
from minikafka.capture import read_capture
from minikafka.client.connection import KafkaConnection
from minikafka.client.producer import KafkaProducer
from minikafka.common import PartitionMetadata, TopicMetadata
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.headers import parse_request_frame
from minikafka.protocol.messages.fetch import fetch_replica_epoch, fetch_replica_id

FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)
TIMEOUT = 30  # seconds any one condition may take: it only bounds a failure (the tests wait for conditions)


async def connect(cluster: Cluster, broker_id: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", cluster.configs[broker_id].port, client_id="kip951-test")


async def replicated_topic(cluster: Cluster) -> tuple[TopicMetadata, PartitionMetadata, int, int]:
    """Topic ``t``, one partition on two brokers, once the follower is in the ISR: (topic, its partition,
    leader, follower)."""
    topic = cluster.broker(0).create_topic("t", 1, 2)
    pm = topic.partitions[0]
    leader, follower = pm.leader, pm.replicas[1]
    await wait_until(lambda: follower in pm.isr, TIMEOUT, "the follower in the ISR")
    return topic, pm, leader, follower


async def produce_to(conn: KafkaConnection, version: int, topic: str, topic_id, partition: int = 0):
    resp = await conn.request(K.PRODUCE, version, {"acks": -1, "timeout_ms": PRODUCE_TIMEOUT_MS, "topic_data": [
        {"name": topic, "topic_id": topic_id, "partition_data": [{"index": partition, "records": batch([b"v"])}]}]})
    return resp


async def fetch_from(conn: KafkaConnection, version: int, topic: str, topic_id, leader_epoch: int = -1):
    resp = await conn.request(K.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
            {"topic": topic, "topic_id": topic_id, "partitions": [
                {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": leader_epoch}]}]})
    return resp


@pytest.mark.parametrize("replication_factor", [1, 2])
async def test_produce_and_fetch_to_a_non_leader_name_the_leader(replication_factor: int) -> None:
    """With replication factor 2 the other broker is a follower (its replica refuses); with 1 it hosts no
    replica (Kafka's getPartitionOrError: NOT_LEADER_OR_FOLLOWER for a partition the metadata has)."""
    async with serve_cluster(3, **FAST) as cluster:
        topic = cluster.broker(0).create_topic("t", 1, replication_factor)
        pm = topic.partitions[0]
        leader = pm.leader
        other = pm.replicas[1] if replication_factor == 2 else next(b for b in cluster.broker_ids if b != leader)
        conn = await connect(cluster, other)
        try:
            for version in (10, 12, 13):
                resp = await produce_to(conn, version, "t", topic.topic_id)
                [t] = resp.responses
                if version >= 13:
                    assert t.topic_id == topic.topic_id  # KIP-516: the topic by its id
                else:
                    assert t.name == "t"
                [p] = t.partition_responses
                assert p.error_code == E.NOT_LEADER_OR_FOLLOWER, version
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, pm.leader_epoch)
                assert [(n.node_id, n.port) for n in resp.node_endpoints] == [(leader, cluster.configs[leader].port)]
            resp = await produce_to(conn, 9, "t", topic.topic_id)  # before KIP-951: the error alone
            assert resp.responses[0].partition_responses[0].error_code == E.NOT_LEADER_OR_FOLLOWER
            assert resp.responses[0].partition_responses[0].current_leader["leader_id"] == -1  # absent: default
            assert list(resp.node_endpoints) == []

            for version in (16, 18):
                resp = await fetch_from(conn, version, "t", topic.topic_id)
                [p] = resp.responses[0].partitions
                assert p.error_code == E.NOT_LEADER_OR_FOLLOWER
                assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (leader, pm.leader_epoch)
                [node] = resp.node_endpoints
                assert (node.node_id, node.host, node.port) == (leader, "127.0.0.1", cluster.configs[leader].port)
            resp = await fetch_from(conn, 15, "t", topic.topic_id)
            assert resp.responses[0].partitions[0].error_code == E.NOT_LEADER_OR_FOLLOWER
            assert list(resp.node_endpoints) == []
        finally:
            await conn.aclose()


async def test_fetch_with_an_old_leader_epoch_learns_the_new_leader() -> None:
    """FENCED_LEADER_EPOCH (a consumer with an epoch from before a leader change) carries the leader too."""
    async with serve_cluster(2, **FAST) as cluster:
        topic, pm, old_leader, follower = await replicated_topic(cluster)
        old_epoch = pm.leader_epoch
        new_epoch = cluster.metadata.move_leader("t", 0, follower)
        await wait_until(lambda: cluster.broker(follower).replica_manager.get("t", 0).is_leader, TIMEOUT,
                         "the new leader to take over")
        conn = await connect(cluster, follower)
        try:
            resp = await fetch_from(conn, 18, "t", topic.topic_id, leader_epoch=old_epoch)
            [p] = resp.responses[0].partitions
            assert p.error_code == E.FENCED_LEADER_EPOCH
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (follower, new_epoch)
            assert [n.node_id for n in resp.node_endpoints] == [follower]
        finally:
            await conn.aclose()
        assert old_leader != follower


@pytest.mark.parametrize("version", [15, 17, 18])
async def test_followers_name_themselves_in_replica_state(version: int) -> None:
    """KIP-903: from Fetch v15 the follower's id and broker epoch are in ``replica_state`` (the top-level
    ``replica_id`` is gone); the leader sees them and the follower joins the ISR."""
    async with serve_cluster(2, replica_fetch_request_version=version, **FAST) as cluster:
        seen: list[tuple[int, int, int]] = []  # (follower id, broker epoch, version)

        def observe(ctx, frame, response) -> None:
            if ctx.api_key == K.FETCH:
                _, body = parse_request_frame(frame)
                seen.append((fetch_replica_id(body), fetch_replica_epoch(body), ctx.api_version))

        topic = cluster.broker(0).create_topic("t", 1, 2)
        leader, follower = topic.partitions[0].leader, topic.partitions[0].replicas[1]
        cluster.broker(leader).observe(ResponseObserver(observe))
        await wait_until(lambda: len(seen) >= 2, TIMEOUT, "follower fetches")
        metadata = cluster.metadata
        assert {s[2] for s in seen} == {version}
        assert {(s[0], s[1]) for s in seen} == {(follower, metadata.broker_epoch(follower))}
        assert metadata.broker_epoch(follower) > 0
        await wait_until(lambda: follower in topic.partitions[0].isr, TIMEOUT, "the follower in the ISR")


async def test_a_follower_with_a_stale_broker_epoch_stays_out_of_the_isr() -> None:
    """Kafka's isReplicaIsrEligible: the broker epoch a follower fetches with must be that of its current
    registration; fetches from an earlier incarnation of the broker (here: the follower's fetcher made to
    send an older epoch) cannot add it to the ISR."""
    async with serve_cluster(2, replica_fetch_request_version=18, **FAST) as cluster:
        metadata = cluster.metadata
        topic, pm, leader, follower = await replicated_topic(cluster)
        fetches: list[int] = []

        def observe(ctx, frame, response) -> None:
            if ctx.api_key == K.FETCH:
                fetches.append(fetch_replica_epoch(parse_request_frame(frame)[1]))

        cluster.broker(leader).observe(ResponseObserver(observe))
        fetcher = cluster.broker(follower).fetcher_manager.fetchers[leader]
        real = fetcher.metadata
        stale = metadata.broker_epoch(follower) - 1
        fetcher.metadata = _EpochAs(real, stale)
        metadata.set_isr("t", 0, [leader])  # the follower fell out of the ISR
        conn = await connect(cluster, leader)
        try:
            assert (await produce_to(conn, 13, "t", topic.topic_id)).responses[0].partition_responses[0] \
                .error_code == 0
            await wait_until(lambda: fetches.count(stale) >= 3, TIMEOUT, "follower fetches with the stale epoch")
            assert pm.isr == [leader]
            fetcher.metadata = real  # its fetches carry its current epoch again
            await wait_until(lambda: follower in pm.isr, TIMEOUT, "the follower back in the ISR")
        finally:
            await conn.aclose()


class _EpochAs:
    """A fetcher's metadata that gives its broker another (older) broker epoch."""

    def __init__(self, inner, epoch: int) -> None:
        self.inner = inner
        self.epoch = epoch

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def broker_epoch(self, broker_id: int) -> int:
        return self.epoch


async def test_a_v18_follower_learns_the_high_watermark_without_waiting() -> None:
    """KIP-1166: a follower reporting (Fetch v18) a high watermark older than the leader's, while it has the
    records below it, is answered at once.  replica.fetch.wait.max.ms is ten minutes here, twenty times the
    bounds below: without KIP-1166 the follower's high watermark would lag until such a long poll ended, so
    the test tells the two apart by far more than any stall of the machine (the bounds only limit a failure)."""
    long_poll_ms = 600_000
    # replica.lag.time.max.ms above the long poll, as Kafka requires: the ISR cannot shrink meanwhile.
    settings = {**FAST, "replica_fetch_wait_max_ms": long_poll_ms, "replica_lag_time_max_ms": 2 * long_poll_ms}
    async with serve_cluster(2, replica_fetch_request_version=18, **settings) as cluster:
        topic, pm, leader, follower = await replicated_topic(cluster)
        conn = await connect(cluster, leader)
        try:
            for i in range(3):
                with trio.fail_after(TIMEOUT):  # acks=all: none waits out a long poll either
                    r = await produce_to(conn, 13, "t", topic.topic_id)
                assert r.responses[0].partition_responses[0].error_code == 0
            follower_log = cluster.broker(follower).replica_manager.get("t", 0).log
            await wait_until(lambda: follower_log.high_watermark == 3, TIMEOUT, "the follower's high watermark")
        finally:
            await conn.aclose()


async def test_the_producer_follows_a_moved_leader_without_a_metadata_request() -> None:
    """minikafka's producer (Produce v13) takes the new leader from a NOT_LEADER_OR_FOLLOWER answer (KIP-951,
    as Java's ``Metadata.updatePartitionLeadership``) and retries there without asking for metadata."""
    async with serve_cluster(2, **FAST) as cluster:
        _, pm, old, new = await replicated_topic(cluster)
        requests: list[tuple[int, int, int]] = []  # (broker, api key, version) from the producer

        def observer(broker_id: int):
            def observe(ctx, frame, response) -> None:
                if ctx.client_id == "kip951-producer":
                    requests.append((broker_id, ctx.api_key, ctx.api_version))
            return observe

        for b in cluster.broker_ids:
            cluster.broker(b).observe(ResponseObserver(observer(b)))
        async with KafkaProducer(cluster.bootstrap, client_id="kip951-producer", retry_backoff_ms=10,
                                 metadata_max_age_ms=600000) as p:
            await (await p.send("t", b"a", partition=0)).get()
            assert (old, K.PRODUCE, 13) in requests
            seen = len(requests)
            epoch = cluster.metadata.move_leader("t", 0, new)
            await wait_until(lambda: cluster.broker(old).replica_manager.get("t", 0).leader_id == new, TIMEOUT,
                             "the old leader to step down")
            await (await p.send("t", b"b", partition=0)).get()
            after = requests[seen:]
            assert (old, K.PRODUCE, 13) in after and (new, K.PRODUCE, 13) in after
            assert not [r for r in after if r[1] == K.METADATA]  # the leader came with the error
            assert p.metrics()["record-retry-total"] >= 1
        assert epoch == pm.leader_epoch
        new_log = cluster.broker(new).replica_manager.get("t", 0).log
        assert new_log.log_end_offset == 2


async def test_capture_decoding_reads_the_newest_versions(tmp_path: Path) -> None:
    """The analysis decoder on a capture: a v18 follower fetch is a replica fetch (its id is in
    ``replica_state``), a Produce v13's partitions are named from the topic id (learnt from Metadata)."""
    async with serve_cluster(2, replica_fetch_request_version=18, capture_dir=tmp_path / "cap",
                             captures=CAPTURE, **FAST) as cluster:
        topic, pm, leader, follower = await replicated_topic(cluster)
        conn = await connect(cluster, leader)
        try:
            await conn.request(K.METADATA, 13, {"topics": [{"name": "t"}]})
            r = await produce_to(conn, 13, "t", topic.topic_id)
            assert r.responses[0].partition_responses[0].error_code == 0
        finally:
            await conn.aclose()
    decoder = RecordDecoder("cap")
    records = sorted(read_capture([tmp_path / "cap"]), key=lambda rec: rec.receive_ns)
    names = [name for name, _ in COLUMNS["partitions"]]
    rows = [dict(zip(names, row)) for row in decoder.iter_rows(records, "partitions")]
    follower_fetches = [row for row in rows if row["api_key"] == K.FETCH and row["broker_id"] == leader]
    assert follower_fetches and {row["replica_id"] for row in follower_fetches} == {follower}
    assert {row["api_version"] for row in follower_fetches} == {18}
    [produced] = [row for row in rows if row["api_key"] == K.PRODUCE and row["client_id"] == "kip951-test"]
    assert (produced["api_version"], produced["topic"], produced["topic_id"]) == (13, "t", str(topic.topic_id))
    assert (produced["base_offset"], produced["record_count"]) == (0, 1)
