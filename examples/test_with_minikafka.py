"""Testing against minikafka with its pytest plugin: no conftest, no fixture code to copy.

Installing minikafka registers the plugin (the ``pytest11`` entry point), which gives tests
``minikafka_broker``, ``minikafka_cluster`` and ``minikafka_topic``.  Run with::

    pytest examples/test_with_minikafka.py                       # one broker for the session
    pytest examples/test_with_minikafka.py --minikafka-capture captures/   # and record the traffic

The broker's fault rules (``minikafka_broker.faults``) make it misbehave on purpose, so a test can
check what a client does when Kafka errs, slows down or drops a connection.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition


def read_topic(bootstrap: str, topic: str, timeout: float = 30) -> list[bytes]:
    """Every value in ``topic``, read from the beginning up to the end of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.partition.eof": True})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        values: list[bytes] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic} not read to its end in {timeout} s"
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error() is None:
                values.append(msg.value())
            elif msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
            else:
                raise AssertionError(msg.error())
        return values
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, values: list[bytes], **settings) -> list:
    """Produce ``values`` and flush; returns the delivered messages (errors raise)."""
    delivered, errors = [], []
    producer = Producer({"bootstrap.servers": bootstrap, **settings})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: (errors if err else delivered).append(err or msg))
    assert producer.flush(60) == 0, "messages left undelivered"
    assert not errors, errors
    return delivered


def test_round_trip(minikafka_broker, minikafka_topic):
    produce(minikafka_broker.bootstrap, minikafka_topic, [b"42 widgets"])
    assert read_topic(minikafka_broker.bootstrap, minikafka_topic) == [b"42 widgets"]


def test_idempotent_producer_survives_not_leader_errors(minikafka_broker, minikafka_topic):
    rule = minikafka_broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=3)
    produce(minikafka_broker.bootstrap, minikafka_topic, [b"exactly once"], **{"enable.idempotence": True})
    assert rule.matched == 3 and rule.remaining == 0  # the producer was refused three times, then retried
    assert read_topic(minikafka_broker.bootstrap, minikafka_topic) == [b"exactly once"]


def test_dropped_connection_is_retried_without_duplicates(minikafka_broker, minikafka_topic):
    # The broker appends the batch, then closes the connection instead of answering: the producer
    # reconnects and sends the batch again, and idempotence keeps it from being written twice.
    rule = minikafka_broker.faults.add(api="Produce", topic=minikafka_topic, drop="after", count=1)
    produce(minikafka_broker.bootstrap, minikafka_topic, [b"once"], **{"enable.idempotence": True})
    assert rule.matched == 1
    assert read_topic(minikafka_broker.bootstrap, minikafka_topic) == [b"once"]


def test_injected_latency_shows_in_client_latency(minikafka_broker, minikafka_topic):
    minikafka_broker.faults.add(api="Produce", topic=minikafka_topic, latency_ms=300)
    [msg] = produce(minikafka_broker.bootstrap, minikafka_topic, [b"slow"], **{"linger.ms": 0})
    assert msg.latency() >= 0.3  # librdkafka's own produce-to-delivery latency, in seconds


@pytest.mark.minikafka_topic(partitions=1, replication_factor=3)
def test_leader_failure_loses_nothing(minikafka_cluster, minikafka_topic):
    bootstrap = minikafka_cluster.bootstrap
    produce(bootstrap, minikafka_topic, [b"before"], acks="all")
    minikafka_cluster.stop_broker(minikafka_cluster.leader(minikafka_topic, 0))
    produce(minikafka_cluster.bootstrap, minikafka_topic, [b"after"], acks="all")
    assert read_topic(minikafka_cluster.bootstrap, minikafka_topic) == [b"before", b"after"]


def test_unrecoverable_error_reaches_the_application(minikafka_broker, minikafka_topic):
    minikafka_broker.faults.add(api="Produce", topic=minikafka_topic, error="TOPIC_AUTHORIZATION_FAILED", count=1)
    errors = []
    producer = Producer({"bootstrap.servers": minikafka_broker.bootstrap})
    producer.produce(minikafka_topic, b"refused", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
