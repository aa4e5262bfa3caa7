"""A pytest fixture that gives each test its own real-protocol Kafka broker.

Copy into your project's conftest.py; run with ``pytest examples/test_with_minikafka.py``.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

from minikafka.testing import BrokerThread


@pytest.fixture
def kafka():
    with BrokerThread(group_initial_rebalance_delay_ms=0) as broker:
        yield broker.bootstrap


def test_round_trip(kafka):
    p = Producer({"bootstrap.servers": kafka})
    p.produce("orders", key=b"o-1", value=b"42 widgets")
    p.flush(5)
    c = Consumer({"bootstrap.servers": kafka, "group.id": "shop", "auto.offset.reset": "earliest"})
    c.subscribe(["orders"])
    msg = None
    for _ in range(20):
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            break
    c.close()
    assert msg is not None and msg.value() == b"42 widgets"
