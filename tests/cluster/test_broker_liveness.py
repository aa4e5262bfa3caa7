"""Broker liveness as KRaft has it (issue 25): new topics go to running brokers only; a stop is a controlled
shutdown; a crashed broker keeps its leadership until the controller fences it when its session expires."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable

import pytest

import waiting
from minikafka.testing import ClusterThread

pytestmark = [pytest.mark.clients]

#: Short sessions so that a test waits for fencing in well under a second (on any machine: the waits poll).
FAST = {"broker_session_timeout_ms": 400, "broker_heartbeat_interval_ms": 50, "replica_fetch_wait_max_ms": 50,
        "replica_fetch_backoff_ms": 50}


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds (AssertionError after ``timeout`` seconds)."""
    waiting.wait_for(condition, timeout, interval=0.01)


def test_topics_created_after_a_broker_stops_go_to_running_brokers_and_take_records():
    from confluent_kafka import KafkaException, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    with ClusterThread(3, num_partitions=3) as ct:
        ct.stop_broker(0)
        metadata = ct.cluster.metadata
        # Auto-created by the producer's metadata request, as a new user's first produce creates it.
        producer = Producer({"bootstrap.servers": ct.bootstrap, "message.timeout.ms": 30000, "linger.ms": 5})
        acked: list[tuple[int, bytes]] = []
        errors: list[str] = []

        def on_delivery(err, msg) -> None:
            (errors.append(str(err)) if err is not None else acked.append((msg.partition(), msg.value())))

        values = [b"v%03d" % i for i in range(90)]
        for i, value in enumerate(values):
            producer.produce("after-stop", value=value, partition=i % 3, on_delivery=on_delivery)
        assert producer.flush(60) == 0
        assert not errors, errors[:5]
        assert sorted(v for _, v in acked) == values and {p for p, _ in acked} == {0, 1, 2}
        auto = metadata.get_topic("after-stop")
        assert auto is not None and [p.replicas for p in auto.partitions] == [[1], [2], [1]]

        # CreateTopics likewise; a replication factor above the running brokers is refused, as Kafka refuses it.
        admin = AdminClient({"bootstrap.servers": ct.bootstrap})
        admin.create_topics([NewTopic("rf2-after-stop", 4, 2)])["rf2-after-stop"].result(30)
        rf2 = metadata.get_topic("rf2-after-stop")
        assert rf2 is not None
        assert all(sorted(p.replicas) == [1, 2] and p.leader in (1, 2) for p in rf2.partitions)
        assert {p.leader for p in rf2.partitions} == {1, 2}
        with pytest.raises(KafkaException, match="INVALID_REPLICATION_FACTOR|only 2 broker"):
            admin.create_topics([NewTopic("rf3-after-stop", 1, 3)])["rf3-after-stop"].result(30)

        # Back in service, the broker takes new replicas again.
        ct.start_broker(0)
        admin.create_topics([NewTopic("after-restart", 3, 1)])["after-restart"].result(30)
        back = metadata.get_topic("after-restart")
        assert back is not None and [p.replicas for p in back.partitions] == [[0], [1], [2]]


def _acked_round_trip(bootstrap: str, topic: str, values: list[bytes], before: int = 0) -> list[bytes]:
    """Produce ``values`` (acks=all, idempotent) to partition 0 of ``topic``, then read partition 0 from offset 0
    (``before`` records were there already)."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 30000, "retry.backoff.ms": 50})
    errors: list[str] = []
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, msg: err is not None and errors.append(str(err)))
    assert producer.flush(60) == 0 and not errors, errors[:5]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < before + len(values) and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got


def test_a_crashed_leader_keeps_its_partitions_until_its_session_expires_then_they_move():
    # A session long enough that a loaded machine cannot expire it between the crash and the first check.
    settings = {**FAST, "broker_session_timeout_ms": 1500}
    with ClusterThread(3, **settings) as ct:
        cluster, metadata = ct.cluster, ct.cluster.metadata
        ct.call(lambda: cluster.broker(0).create_topic("crash", configs={"min.insync.replicas": "2"},
                                                       assignments={0: [1, 2, 0]}))
        assert _acked_round_trip(ct.bootstrap, "crash", [b"a", b"b"]) == [b"a", b"b"]
        epoch = metadata.get_topic("crash").partitions[0].leader_epoch
        crashed_at = time.monotonic()

        async def crash() -> tuple[bool, bool, int]:
            await cluster.crash_broker(1)  # observed on the loop as soon as the crash is done
            return 1 in cluster.brokers, 1 in metadata.live, cluster.leader("crash", 0)

        # The process is gone, but the controller still has it as registered, leader and in sync: no controlled
        # shutdown happened.
        assert ct.run(crash) == (False, True, 1)
        wait_for(lambda: ct.leader("crash", 0) != 1)
        # Fenced on expiry only: a session timeout after its last heartbeat (one interval before the crash at most).
        expiry = settings["broker_session_timeout_ms"] - settings["broker_heartbeat_interval_ms"]
        assert time.monotonic() - crashed_at >= expiry / 1000
        pm = metadata.get_topic("crash").partitions[0]
        assert pm.leader == 2 and pm.leader_epoch == epoch + 1 and 1 not in pm.isr and 1 not in metadata.live
        assert _acked_round_trip(ct.bootstrap, "crash", [b"c"], before=2) == [b"a", b"b", b"c"]
        # Back, it follows the new leader and rejoins the ISR.
        ct.start_broker(1)
        wait_for(lambda: 1 in metadata.get_topic("crash").partitions[0].isr)
        assert ct.leader("crash", 0) == 2


def test_a_running_broker_fenced_after_a_stall_is_unfenced_by_its_next_heartbeat():
    # A process stall longer than the session fences brokers that still run (the brokers of one process share its
    # loop); played here by backdating broker 2's last heartbeat.  Its heartbeats come back: the controller
    # unfences it, and the partition it alone was in sync for, offline meanwhile, gets it back as its leader.
    with ClusterThread(3, **FAST) as ct:
        cluster, metadata = ct.cluster, ct.cluster.metadata
        ct.call(lambda: cluster.broker(0).create_topic("solo", assignments={0: [2]}))
        assert _acked_round_trip(ct.bootstrap, "solo", [b"a"]) == [b"a"]
        epoch, broker_epoch = metadata.get_topic("solo").partitions[0].leader_epoch, metadata.broker_epoch(2)

        def stall() -> list[int]:
            cluster.shared.heartbeats.touch(2, cluster.clock.time_ms() - 10 * FAST["broker_session_timeout_ms"])
            fenced = cluster.fence_stale_brokers()
            return [fenced, metadata.get_topic("solo").partitions[0].leader, 2 in metadata.live]

        assert ct.call(stall) == [[2], -1, False]  # fenced, its partition offline
        wait_for(lambda: ct.leader("solo", 0) == 2)
        pm = metadata.get_topic("solo").partitions[0]
        assert 2 in metadata.live and metadata.broker_epoch(2) > broker_epoch and pm.leader_epoch == epoch + 2
        assert _acked_round_trip(ct.bootstrap, "solo", [b"b"], before=1) == [b"a", b"b"]


def test_a_stop_is_a_controlled_shutdown_and_a_quick_restart_after_a_crash_fences_the_old_registration():
    # A session long enough never to expire here: only the stop and the re-registration move leadership.
    with ClusterThread(3, **{**FAST, "broker_session_timeout_ms": 600_000}) as ct:
        cluster, metadata = ct.cluster, ct.cluster.metadata
        ct.call(lambda: cluster.broker(0).create_topic("ctl", assignments={0: [1, 2, 0], 1: [2, 0, 1]}))
        ct.stop_broker(2)  # leadership moved before it stopped: no wait for a session
        assert ct.leader("ctl", 1) == 0 and 2 not in metadata.live
        ct.start_broker(2)
        ct.crash_broker(1)
        assert ct.leader("ctl", 0) == 1 and 1 in metadata.live
        ct.start_broker(1)  # registers again: its old incarnation is fenced first, its leadership moved
        pm = metadata.get_topic("ctl").partitions[0]
        assert pm.leader in (0, 2) and 1 in metadata.live
        assert _acked_round_trip(ct.bootstrap, "ctl", [b"x"]) == [b"x"]


def test_crash_over_http_and_on_the_command_line():
    with ClusterThread(3, http_port=0, **FAST) as ct:
        ct.call(lambda: ct.cluster.broker(0).create_topic("h", assignments={0: [1, 0, 2]}))
        request = urllib.request.Request(f"http://{ct.http_address}/v1/brokers/1/crash", method="POST")
        with urllib.request.urlopen(request, timeout=30) as resp:
            assert json.load(resp) == {"id": 1, "running": False, "crashed": True}
        wait_for(lambda: ct.leader("h", 0) == 0)

    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--brokers", "3", "--in-process",
                             "--port", "0",
                             "--log-level", "WARNING", "-o", "broker.session.timeout.ms=300",
                             "-o", "broker.heartbeat.interval.ms=50"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        def read_until(needle: str) -> str:
            for _ in range(200):
                line = proc.stdout.readline()
                if needle in line:
                    return line
            raise AssertionError(f"{needle!r} not printed")

        read_until("ready on")
        proc.stdin.write("crash 2\n")
        proc.stdin.flush()
        read_until("crashed broker 2")
        proc.stdin.write("status\n")
        proc.stdin.flush()
        assert "running brokers: [0, 1]" in read_until("running brokers")
    finally:
        proc.terminate()
        proc.wait(30)


def test_unclean_leader_election_only_where_enabled():
    with ClusterThread(3, **FAST) as ct:
        metadata = ct.cluster.metadata
        for name, unclean in (("clean", "false"), ("unclean", "true")):
            ct.call(lambda n=name, u=unclean: ct.cluster.broker(0).create_topic(
                n, configs={"unclean.leader.election.enable": u}, assignments={0: [1, 2]}))
        ct.stop_broker(2)  # out of both ISRs: [1]
        ct.stop_broker(1)  # the last in-sync replica: both partitions offline
        assert [metadata.get_topic(n).partitions[0].leader for n in ("clean", "unclean")] == [-1, -1]
        ct.start_broker(2)  # a replica out of the ISR is back: only the unclean topic takes it as leader
        clean, unclean = (metadata.get_topic(n).partitions[0] for n in ("clean", "unclean"))
        assert (clean.leader, clean.isr) == (-1, [1])
        assert (unclean.leader, unclean.isr) == (2, [2])


def test_preferred_leaders_come_back_on_their_own():
    with ClusterThread(3, **FAST, leader_imbalance_check_interval_seconds=0.05) as ct:
        metadata = ct.cluster.metadata
        ct.call(lambda: ct.cluster.broker(0).create_topic("pref", assignments={0: [1, 2, 0]}))
        ct.stop_broker(1)
        assert ct.leader("pref", 0) == 2
        epoch = metadata.get_topic("pref").partitions[0].leader_epoch
        ct.start_broker(1)  # catches up, rejoins the ISR, and the controller gives it its leadership back
        wait_for(lambda: ct.leader("pref", 0) == 1)
        pm = metadata.get_topic("pref").partitions[0]
        assert 1 in pm.isr and pm.leader_epoch == epoch + 1


def test_balance_leaders_elects_only_live_in_sync_preferred_replicas():
    from minikafka.broker.metadata import ClusterMetadata

    metadata = ClusterMetadata([0, 1, 2])
    for b in (0, 1, 2):
        metadata.broker_started(b, "127.0.0.1", 9092 + b)
    metadata.create_topic("t", 3, 3)
    parts = metadata.get_topic("t").partitions
    parts[0].leader, parts[1].leader = 1, 2  # preferred 0 and 1 not leading
    parts[1].isr = [2, 0]  # preferred 1 out of sync: left alone
    assert metadata.balance_leaders() == [("t", 0)]
    assert [p.leader for p in parts] == [0, 2, 2] and parts[0].leader_epoch == 1
    assert metadata.balance_leaders() == []
