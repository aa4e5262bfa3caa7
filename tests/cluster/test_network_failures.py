"""Pauses and network partitions on a cluster's brokers (issue 25): a paused or cut-off broker answers nothing,
is fenced when its session expires, and once back catches up before it serves, never acting on a stale
leader epoch; links cut between brokers, the controller and clients, healed on request or after a time."""

from __future__ import annotations

import time

import pytest
import trio

from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.network_links import CLIENTS, CONTROLLER
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from helpers import batch, fetch, produce, values, wait_until
from cluster_logs import connect, log_of, stored

#: Sessions and fetches fast enough that a test waits for fencing and ISR changes in about a second.
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, broker_session_timeout_ms=400,
            broker_heartbeat_interval_ms=50, replica_socket_timeout_ms=500, replica_lag_time_max_ms=600)


async def replicated(cluster: Cluster, topic: str, min_isr: int = 2):
    """Create ``topic`` (one partition on all 3 brokers, led by broker 0); its partition metadata and a
    connection to broker 0."""
    cluster.broker(0).create_topic(topic, 1, 3, {"min.insync.replicas": str(min_isr)})
    return cluster.metadata.topics[topic].partitions[0], await connect(cluster, 0)


async def answer_later(conn: KafkaConnection, api: ApiKey, version: int, body: dict, into: list) -> None:
    into.append(await conn.request(api, version, body))


def produce_body(topic: str, value: bytes, acks: int, timeout_ms: int = 30_000) -> dict:
    return {"acks": acks, "timeout_ms": timeout_ms, "transactional_id": None,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch([value])}]}]}


async def test_a_paused_leader_answers_nothing_is_fenced_and_on_resume_does_not_act_on_its_stale_epoch():
    async with serve_cluster(3, **FAST) as cluster:
        md = cluster.metadata
        pm, c0 = await replicated(cluster, "p")
        for v in (b"a", b"b"):
            assert (await produce(c0, "p", batch([v]), acks=-1)).error_code == 0
        epoch, broker_epoch = pm.leader_epoch, md.broker_epoch(0)

        cluster.pause_broker(0)
        assert cluster.broker_state(0) == "paused"
        answers: list = []
        async with trio.open_nursery() as nursery:
            # Sent to the paused leader: it is neither handled nor answered while the broker is paused.
            nursery.start_soon(answer_later, c0, ApiKey.PRODUCE, 9, produce_body("p", b"stale", acks=1), answers)
            await wait_until(lambda: pm.leader != 0, what="the paused leader fenced")
            assert pm.leader_epoch == epoch + 1 and 0 not in md.live and 0 not in pm.isr
            c1 = await connect(cluster, pm.leader)
            r = await produce(c1, "p", batch([b"c"]), acks=-1)
            assert r.error_code == 0 and r.base_offset == 2
            assert answers == [] and log_of(cluster, 0, "p").log_end_offset == 2  # nothing done while paused

            cluster.resume_broker(0)
            # It learnt of its replacement before it handled the request: no append at the stale epoch.
            await wait_until(lambda: bool(answers), what="the answer after the resume")
        part = answers[0].responses[0].partition_responses[0]
        assert part.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert 0 in md.live and md.broker_epoch(0) > broker_epoch  # registered again
        await wait_until(lambda: 0 in pm.isr, what="the resumed broker back in the ISR")
        assert stored(log_of(cluster, 0, "p")) == stored(log_of(cluster, pm.leader, "p"))
        assert values((await fetch(c1, "p", version=11)).records) == [b"a", b"b", b"c"]
        assert cluster.broker_state(0) == "running"
        await c0.aclose()
        await c1.aclose()


async def test_a_leader_cut_off_from_the_controller_keeps_a_stale_view_acks_nothing_and_truncates_on_heal():
    async with serve_cluster(3, **FAST) as cluster:
        pm, c0 = await replicated(cluster, "c")
        assert (await produce(c0, "c", batch([b"a"]), acks=-1)).error_code == 0
        cut = cluster.partition_network([[0], [CONTROLLER]])
        assert cluster.broker_state(0) == "partitioned"
        await wait_until(lambda: pm.leader != 0, what="the cut-off leader fenced")
        # Broker 0 did not hear of it: it still takes writes for the partition (clients reach it) ...
        assert cluster.broker(0).replica_manager.get("c", 0).is_leader
        r = await produce(c0, "c", batch([b"split"]), acks=1)
        assert r.error_code == 0 and r.base_offset == 1  # acks=1 on a stale leader: Kafka's documented loss
        # ... but acknowledges none with acks=all: its followers left, and it cannot shrink the ISR without the
        # controller (AlterPartition).
        r = await produce(c0, "c", batch([b"never"]), acks=-1, timeout_ms=300)
        assert r.error_code == ErrorCode.REQUEST_TIMED_OUT
        c1 = await connect(cluster, pm.leader)
        assert (await produce(c1, "c", batch([b"b"]), acks=-1)).error_code == 0

        cluster.heal_network(cut.id)
        # Back in touch, it applies its replacement, truncates what the new leader does not have and rejoins.
        await wait_until(lambda: 0 in pm.isr, what="the healed broker back in the ISR")
        assert not cluster.broker(0).replica_manager.get("c", 0).is_leader
        assert stored(log_of(cluster, 0, "c")) == stored(log_of(cluster, pm.leader, "c"))
        assert values((await fetch(c1, "c", version=11)).records) == [b"a", b"b"]
        await c0.aclose()
        await c1.aclose()


async def test_clients_cut_from_a_broker_get_no_answer_until_healed_while_it_still_replicates():
    async with serve_cluster(3, **FAST) as cluster:
        pm, c0 = await replicated(cluster, "r", min_isr=3)
        c1 = await connect(cluster, 1)
        cut = cluster.partition_network([[CLIENTS], [1]])
        answers: list = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(answer_later, c1, ApiKey.METADATA, 12, {"topics": None}, answers)
            # Broker 1's links to the other brokers hold: it stays in the ISR and acks=all (all 3) goes through.
            for i in range(3):
                assert (await produce(c0, "r", batch([b"v%d" % i]), acks=-1)).error_code == 0
            assert pm.isr == [0, 1, 2] and log_of(cluster, 1, "r").log_end_offset == 3
            assert answers == []
            cluster.heal_network(cut.id)
            await wait_until(lambda: bool(answers), what="the answer after the heal")
        assert sorted(b.node_id for b in answers[0].brokers) == [0, 1, 2]
        await c0.aclose()
        await c1.aclose()


async def test_a_follower_cut_from_its_leader_leaves_the_isr_and_rejoins_when_healed():
    async with serve_cluster(3, **FAST) as cluster:
        pm, c0 = await replicated(cluster, "f")
        assert (await produce(c0, "f", batch([b"a"]), acks=-1)).error_code == 0
        cut = cluster.partition_network([[2], [0]])
        await wait_until(lambda: pm.isr == [0, 1], what="the cut-off follower out of the ISR")
        assert pm.leader == 0 and 2 in cluster.metadata.live  # it still heartbeats: not fenced
        assert (await produce(c0, "f", batch([b"b"]), acks=-1)).error_code == 0
        assert log_of(cluster, 2, "f").log_end_offset == 1
        cluster.heal_network(cut.id)
        await wait_until(lambda: pm.isr == [0, 1, 2], what="the follower back in the ISR")
        assert stored(log_of(cluster, 2, "f")) == stored(log_of(cluster, 0, "f"))
        await c0.aclose()


async def test_a_partition_with_a_time_heals_by_itself_when_it_is_up():
    async with serve_cluster(2, **FAST) as cluster:
        start = trio.current_time()
        timed = cluster.partition_network([[0], [1]], heal_after_s=0.2)
        untimed = cluster.partition_network([[CLIENTS], [1]])
        assert timed.heal_at == pytest.approx(start + 0.2, abs=0.05)
        await wait_until(lambda: timed.id not in cluster.links.partitions, what="the timed partition healed")
        assert trio.current_time() >= timed.heal_at
        assert list(cluster.links.partitions) == [untimed.id] and cluster.links.active
        cluster.heal_network()
        assert not cluster.links.partitions and not cluster.links.active


async def test_bad_network_requests_are_refused():
    async with serve_cluster(2, **FAST) as cluster:
        with pytest.raises(ValueError, match="two sides"):
            cluster.partition_network([[0]])
        with pytest.raises(ValueError, match="no node 7"):
            cluster.partition_network([[0], [7]])
        with pytest.raises(ValueError, match="on two sides"):
            cluster.partition_network([[0, 1], [1]])
        with pytest.raises(KeyError):
            cluster.heal_network(99)
        await cluster.stop_broker(1)
        with pytest.raises(KeyError):
            cluster.pause_broker(1)
        assert cluster.broker_state(1) == "stopped" and not cluster.links.active


@pytest.mark.clients
def test_confluent_clients_follow_the_leader_through_a_pause_and_an_isolation():
    from confluent_kafka import Consumer, Producer, TopicPartition

    from minikafka.testing import ClusterThread

    with ClusterThread(3, **FAST) as ct:
        ct.create_topic("follow", 1, 3, {"min.insync.replicas": "2"})
        producer = Producer({"bootstrap.servers": ct.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "request.timeout.ms": 1500, "socket.timeout.ms": 1500,
                             "message.timeout.ms": 120_000, "retry.backoff.ms": 50,
                             "topic.metadata.refresh.interval.ms": 500})
        acked: list[bytes] = []
        errors: list[str] = []

        def on_delivery(err, msg) -> None:
            (errors.append(str(err)) if err is not None else acked.append(msg.value()))

        def send(prefix: str) -> None:
            for i in range(50):
                producer.produce("follow", value=f"{prefix}-{i:02d}".encode(), partition=0, on_delivery=on_delivery)
            assert producer.flush(120) == 0 and not errors, errors[:3]

        send("before")
        first = ct.leader("follow", 0)
        ct.pause_broker(first)
        send("paused")  # the request to the paused leader times out; the producer finds the new leader
        second = ct.leader("follow", 0)
        assert second != first
        ct.resume_broker(first)
        send("resumed")
        cut = ct.isolate_broker(second)
        send("isolated")
        third = ct.leader("follow", 0)
        assert third != second
        ct.heal_network(cut)
        send("healed")
        producer.flush(10)
        expected = [f"{p}-{i:02d}".encode() for p in ("before", "paused", "resumed", "isolated", "healed")
                    for i in range(50)]
        assert acked == expected  # acknowledged in order, each once

        consumer = Consumer({"bootstrap.servers": ct.bootstrap, "group.id": "follow-reader",
                             "enable.auto.commit": False, "isolation.level": "read_committed"})
        consumer.assign([TopicPartition("follow", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(expected) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.close()
        assert got == expected  # every acknowledged record consumed once, in order
