"""Issue 23: a partition reassignment (KIP-455) moves a partition's replicas, its leader among them, while a
real producer (confluent-kafka, acks=all, idempotent) and a real consumer (kafka-python) run; kafka-python's
KafkaAdminClient starts, lists and cancels reassignments.  Nothing acknowledged is lost."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition
    from kafka import errors as KE
    from kafka.admin import KafkaAdminClient

from minikafka.testing import ClusterThread
from cluster_clients_common import AckedProducer, PartitionReader
import waiting

pytestmark = [pytest.mark.clients]

FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)
TIMEOUT = 60.0  # seconds any one condition may take (generous: the tests wait for conditions, not for time)


def wait_for(cond, what: str, timeout: float = TIMEOUT) -> None:
    waiting.wait_for(cond, timeout, what)


def test_replicas_and_leader_move_while_a_producer_and_a_consumer_run(tmp_path: Path) -> None:
    with ClusterThread(3, data_dir=tmp_path, **FAST) as ct:
        cluster = ct.cluster
        # Replicas 0 (the leader) and 1; the reassignment moves them to 2 and 1: the leader goes away.
        ct.call(lambda: cluster.broker(0).create_topic("moving", assignments={0: [0, 1]}))
        old_dir = ct.call(lambda: cluster.broker(0).replica_manager.get("moving", 0).log.directory)
        bootstrap = ct.bootstrap
        tp = TopicPartition("moving", 0)

        expected: list[int] = []  # set to the total once the producer is done
        reader = PartitionReader(bootstrap, "moving", done=lambda got: bool(expected) and len(got) >= expected[0],
                                 timeout=4 * TIMEOUT, retry_backoff_ms=50).start()
        producer = AckedProducer(bootstrap, message_timeout_ms=60000)
        sent = 0

        def send(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                producer.send("moving", b"m%06d" % sent)
                sent += 1

        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        confluent_admin = ConfluentAdmin({"bootstrap.servers": bootstrap})
        try:
            send(500)
            # Broker 2, the new replica, cannot catch up while this fault rule holds (a stuck follower): the
            # reassignment is seen in progress for as long as the test needs.
            stuck = ct.faults.add(api="Fetch", client_id="broker-2-fetcher-*", error="NOT_LEADER_OR_FOLLOWER")
            assert admin.alter_partition_reassignments({tp: [2, 1]}) == {tp: None}
            assert admin.list_partition_reassignments() == {
                tp: {"replicas": [2, 1, 0], "adding_replicas": [2], "removing_replicas": [0]}}
            # Metadata shows every replica while they move (the target ones, then those being removed).
            md = confluent_admin.list_topics(topic="moving", timeout=10).topics["moving"].partitions[0]
            assert (md.leader, md.replicas) == (0, [2, 1, 0])
            send(500)
            assert ct.leader("moving", 0) == 0
            ct.faults.remove(stuck.id)
            # Keep producing while the new replica catches up and the reassignment completes.
            deadline = time.monotonic() + TIMEOUT
            while admin.list_partition_reassignments():
                assert time.monotonic() < deadline, "the reassignment did not complete"
                send(20)
                producer.producer.poll(0.01)
            send(500)
            produced = [b"m%06d" % i for i in range(sent)]
            producer.assert_acked_in_order(produced, timeout=TIMEOUT)
            expected.append(sent)
            assert reader.join(4 * TIMEOUT) == list(enumerate(produced))

            pm = ct.call(lambda: cluster.metadata.topics["moving"].partitions[0])
            assert (pm.replicas, sorted(pm.isr), pm.leader, pm.leader_epoch) == ([2, 1], [1, 2], 2, 1)
            md = confluent_admin.list_topics(topic="moving", timeout=10).topics["moving"].partitions[0]
            assert (md.leader, md.replicas) == (2, [2, 1])
            # The removed replica stopped and its local data is gone.
            assert ct.call(lambda: cluster.broker(0).replica_manager.get("moving", 0)) is None
            assert not old_dir.exists()
            assert admin.list_partition_reassignments() == {}
        finally:
            reader.stop()
            admin.close()
            producer.producer.flush(5)


def test_kafka_python_admin_alter_list_and_cancel() -> None:
    with ClusterThread(3, **FAST) as ct:
        cluster = ct.cluster
        ct.call(lambda: cluster.broker(0).create_topic("r", 2, assignments={0: [0], 1: [1]}))
        admin = KafkaAdminClient(bootstrap_servers=ct.bootstrap, request_timeout_ms=10000)
        try:
            p0, p1, unknown = TopicPartition("r", 0), TopicPartition("r", 1), TopicPartition("nope", 0)
            stuck = ct.faults.add(api="Fetch", client_id="broker-2-fetcher-*", error="NOT_LEADER_OR_FOLLOWER")
            result = admin.alter_partition_reassignments({p0: [2], p1: None, unknown: [0]})
            assert result == {p0: None, p1: KE.NoReassignmentInProgressError,
                              unknown: KE.UnknownTopicOrPartitionError}
            assert admin.alter_partition_reassignments({p1: [1, 7]}) == {p1: KE.InvalidReplicationAssignmentError}
            ongoing = {p0: {"replicas": [2, 0], "adding_replicas": [2], "removing_replicas": [0]}}
            assert admin.list_partition_reassignments() == ongoing
            assert admin.list_partition_reassignments({"r": [0, 1]}) == ongoing
            assert admin.list_partition_reassignments([p1]) == {}
            # Cancelled: back to broker 0 alone.
            assert admin.alter_partition_reassignments({p0: None}) == {p0: None}
            assert admin.list_partition_reassignments() == {}
            assert ct.call(lambda: cluster.metadata.topics["r"].partitions[0].replicas) == [0]
            ct.faults.remove(stuck.id)
            # And a reassignment that runs to completion: partition 1 from broker 1 to brokers 2 and 0.
            assert admin.alter_partition_reassignments({p1: [2, 0]}) == {p1: None}
            wait_for(lambda: admin.list_partition_reassignments() == {}, "the reassignment to complete")
            assert ct.call(lambda: cluster.metadata.topics["r"].partitions[1].replicas) == [2, 0]
            assert ct.leader("r", 1) == 2
            wait_for(lambda: ct.call(lambda: cluster.broker(1).replica_manager.get("r", 1)) is None,
                     "broker 1's replica to go")
        finally:
            admin.close()
