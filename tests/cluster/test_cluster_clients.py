"""Issue 5's real-client failover test: three brokers, RF 3, confluent-kafka producing with acks=all,
kafka-python consuming; the partition leader is stopped mid-stream."""

from __future__ import annotations

import threading
import time
import warnings

import pytest
from confluent_kafka import Producer

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer, TopicPartition

from minikafka.testing import ClusterThread

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
        got: list[tuple[int, bytes]] = []
        consumer_error: list[BaseException] = []

        def consume() -> None:
            try:
                consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                         auto_offset_reset="earliest", request_timeout_ms=5000,
                                         fetch_max_wait_ms=100, reconnect_backoff_max_ms=200,
                                         metadata_max_age_ms=1000)
                try:
                    tp = TopicPartition("failover", 0)
                    consumer.assign([tp])
                    consumer.seek_to_beginning(tp)
                    deadline = time.monotonic() + 60
                    while len(got) < N and time.monotonic() < deadline:
                        for records in consumer.poll(timeout_ms=200).values():
                            got.extend((r.offset, r.value) for r in records)
                finally:
                    consumer.close()
            except BaseException as exc:  # reported below
                consumer_error.append(exc)

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 2, "message.timeout.ms": 30000, "retry.backoff.ms": 50,
                             "topic.metadata.refresh.interval.ms": 1000})
        acked: dict[int, bytes] = {}
        errors: list[str] = []
        lock = threading.Lock()

        def on_delivery(err, msg) -> None:
            with lock:
                if err is not None:
                    errors.append(str(err))
                else:
                    acked[msg.offset()] = msg.value()

        in_flight_at_stop = 0
        for i in range(N):
            if i == N // 2:  # stop the leader with batches in flight
                producer.poll(0.05)
                in_flight_at_stop = len(producer)
                ct.stop_broker(1)
                assert cluster.leader("failover", 0) == 2
            while True:
                try:
                    producer.produce("failover", value=b"m%05d" % i, partition=0, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert not errors, errors[:5]
        # Every acknowledged record at its own offset, in produce order, no gaps or duplicates.
        assert len(acked) == N and sorted(acked) == list(range(N))
        assert [acked[o] for o in range(N)] == [b"m%05d" % i for i in range(N)]
        reader.join(60)
        assert not consumer_error, consumer_error
        assert [o for o, _ in got] == list(range(N))
        assert [v for _, v in got] == [b"m%05d" % i for i in range(N)]
        print(f"{in_flight_at_stop} message(s) in flight when the leader stopped")
