"""Issue 5's real-client failover test: three brokers, RF 3, confluent-kafka producing with acks=all,
kafka-python consuming; the partition leader is stopped mid-stream."""

from __future__ import annotations

import pytest

from minikafka.testing import ClusterThread
from cluster_clients_common import AckedProducer, PartitionReader

pytestmark = [pytest.mark.clients]

N = 3000


def test_leader_failover_with_confluent_producer_and_kafka_python_consumer():
    with ClusterThread(3, replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=100,
                       group_initial_rebalance_delay_ms=0) as ct:
        cluster = ct.cluster
        # Leader 1 (not the group coordinator / controller, broker 0).
        ct.call(lambda: cluster.broker(0).create_topic("failover", configs={"min.insync.replicas": "2"},
                                                       assignments={0: [1, 2, 0]}))
        bootstrap = ct.bootstrap
        # The consumer reads concurrently, across the failover.
        with PartitionReader(bootstrap, "failover", done=lambda got: len(got) >= N, timeout=60).start() as reader:
            producer = AckedProducer(bootstrap, message_timeout_ms=30000)
            in_flight_at_stop = 0
            for i in range(N):
                if i == N // 2:  # stop the leader with batches in flight
                    producer.producer.poll(0.05)
                    in_flight_at_stop = len(producer.producer)
                    ct.stop_broker(1)
                    assert cluster.leader("failover", 0) == 2
                producer.send("failover", b"m%05d" % i)
            produced = [b"m%05d" % i for i in range(N)]
            producer.assert_acked_in_order(produced, timeout=30)
            assert reader.join(60) == list(enumerate(produced))
        print(f"{in_flight_at_stop} message(s) in flight when the leader stopped")
