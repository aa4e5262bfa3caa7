"""The console's transactions page: a confluent_kafka transactional producer's open transaction and its
producer state, then the committed transaction (real broker, headless Chromium)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Producer

from console_helpers import console_url
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.clients


def transactions(broker: BrokerThread) -> Any:
    with urllib.request.urlopen(console_url(broker, "/console/api/transactions"), timeout=10) as resp:
        return json.load(resp)


def test_open_then_committed_transaction(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("txn-topic", partitions=2)
    page.goto(console_url(console_broker, "/#/transactions"))
    page.wait_for_selector("#transactions-none", state="visible")
    assert page.is_visible("#producers-none")

    producer = Producer({"bootstrap.servers": console_broker.bootstrap, "transactional.id": "console-txn",
                         "transaction.timeout.ms": 30000})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-topic", b"a", partition=1)
    producer.produce("txn-topic", b"b", partition=1)
    assert producer.flush(30) == 0

    page.wait_for_function("() => document.querySelector('#transactions-table tbody')?.textContent.includes('Ongoing')")
    row = page.inner_text("#transactions-table tbody tr")
    assert "console-txn" in row and "txn-topic-1" in row and "30000" in row
    page.wait_for_selector("#producers-table tbody tr")
    data = transactions(console_broker)
    (txn,) = data["transactions"]
    assert txn["state"] == "Ongoing" and txn["partitions"] == [["txn-topic", 1]] and txn["start_ms"] > 0
    (prod,) = data["producers"]
    assert (prod["topic"], prod["partition"], prod["producer_id"], prod["producer_epoch"]) == (
        "txn-topic", 1, txn["producer_id"], txn["producer_epoch"])
    assert prod["last_sequence"] == 1 and prod["current_txn_start_offset"] == 0 and prod["last_timestamp"] > 0
    assert str(txn["producer_id"]) in page.inner_text("#producers-table")

    producer.commit_transaction(30)
    page.wait_for_function("() => document.querySelector('#transactions-table tbody')?.textContent.includes('CompleteCommit')")
    data = transactions(console_broker)
    assert data["transactions"][0]["partitions"] == []
    assert data["producers"][0]["current_txn_start_offset"] == -1
