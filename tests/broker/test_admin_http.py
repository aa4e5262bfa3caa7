"""The HTTP port of ``serve --http-port``: fault rules, Prometheus metrics and cluster control, used
over real HTTP by urllib and, for the cluster, with a real Kafka client (confluent-kafka) producing
throughout."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread, ClusterThread
from tools.tools_helpers import consume, request

from helpers import batch
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E


def call(address: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{address}{path}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, raw if path == "/metrics" else json.loads(raw)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(BrokerConfig(port=0), http_port=0) as b:
        yield b


def produce_raw(bootstrap: str, topic: str, records: bytes) -> int:
    resp = request(bootstrap, K.PRODUCE, 9, {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]})
    return resp.responses[0].partition_responses[0].error_code


def test_fault_rules_over_http(broker: BrokerThread) -> None:
    http = broker.http_address
    assert http is not None
    broker.create_topic("t")
    status, added = call(http, "POST", "/v1/faults", {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER",
                                                      "count": 2})
    assert status == 201 and added["rule"]["remaining"] == 2
    assert produce_raw(broker.bootstrap, "t", batch([b"x"])) == E.NOT_LEADER_OR_FOLLOWER
    status, listed = call(http, "GET", "/v1/faults")
    assert status == 200
    assert [(r["id"], r["matched"], r["remaining"]) for r in listed["rules"]] == [(added["rule"]["id"], 1, 1)]
    # A list of rules is added all or nothing.
    status, err = call(http, "POST", "/v1/faults", [{"api": "Fetch", "latency_ms": 5}, {"api": "Nope", "error": 1}])
    assert status == 400 and err["error"] == "INVALID_RULE" and "Nope" in err["message"]
    assert len(call(http, "GET", "/v1/faults")[1]["rules"]) == 1
    status, both = call(http, "POST", "/v1/faults", [{"api": "Fetch", "latency_ms": 5},
                                                     {"api": "Metadata", "drop": "before", "count": 1}])
    assert status == 201 and len(both["rules"]) == 2
    assert call(http, "DELETE", f"/v1/faults/{both['rules'][0]['id']}") == (200, {"removed": 1})
    assert call(http, "DELETE", "/v1/faults/999")[0] == 404
    assert call(http, "DELETE", "/v1/faults") == (200, {"removed": 2})
    assert broker.faults.rules() == []
    assert produce_raw(broker.bootstrap, "t", batch([b"x"])) == 0
    # A lone broker has no cluster control.
    status, err = call(http, "POST", "/v1/brokers/0/stop")
    assert status == 409 and err["error"] == "NOT_A_CLUSTER"
    assert call(http, "GET", "/v1/brokers")[1]["brokers"] == [
        {"id": 0, "host": "127.0.0.1", "port": broker.port, "running": True}]


def _samples(text: bytes) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


def test_metrics_over_http_move_with_produced_bytes(broker: BrokerThread) -> None:
    http = broker.http_address
    assert http is not None
    broker.create_topic("m")
    req = urllib.request.urlopen(f"http://{http}/metrics", timeout=30)
    assert req.headers["Content-Type"].startswith("text/plain; version=")  # the Prometheus text format
    before = _samples(req.read())
    key = ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "m"),))
    records = batch([b"a" * 1000, b"b" * 1000])
    assert produce_raw(broker.bootstrap, "m", records) == 0
    broker.faults.add(api="Produce", error="NOT_LEADER_OR_FOLLOWER", count=1)
    assert produce_raw(broker.bootstrap, "m", records) == E.NOT_LEADER_OR_FOLLOWER
    after = _samples(call(http, "GET", "/metrics")[1])
    assert after[key] - before.get(key, 0) == len(records)  # the refused batch is not counted in
    messages = ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "m"),))
    assert after[messages] == 2
    injected = ("kafka_server_faultinjector_injectedfaults_total", (("action", "error"), ("request", "Produce")))
    assert after[injected] == 1


def test_cluster_control_over_http_with_a_real_client() -> None:
    with ClusterThread(3, BrokerConfig(port=0, group_initial_rebalance_delay_ms=0), http_port=0) as cluster:
        http = cluster.http_address
        assert http is not None
        cluster.create_topic("orders", 1, 3)
        delivered: list[Any] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
                             "topic.metadata.refresh.interval.ms": 1000})

        def send(value: bytes) -> None:
            producer.produce("orders", value, partition=0,
                             on_delivery=lambda err, msg: delivered.append(err or msg.value()))
            assert producer.flush(60) == 0

        send(b"1")
        status, parts = call(http, "GET", "/v1/partitions/orders")
        [p0] = parts["partitions"]
        assert status == 200 and p0["isr"] == [0, 1, 2] and p0["leader"] == 0
        # Move leadership to broker 2.
        status, moved = call(http, "POST", "/v1/partitions/orders/0/leader", {"broker": 2})
        assert status == 200 and moved == {"topic": "orders", "partition": 0, "leader": 2,
                                           "leader_epoch": p0["leader_epoch"] + 1}
        assert cluster.leader("orders", 0) == 2
        send(b"2")
        # Stop the new leader: leadership moves to a live in-sync replica.
        assert call(http, "POST", "/v1/brokers/2/stop") == (200, {"id": 2, "running": False})
        assert [b["running"] for b in call(http, "GET", "/v1/brokers")[1]["brokers"]] == [True, True, False]
        assert cluster.leader("orders", 0) in (0, 1)
        status, err = call(http, "POST", "/v1/partitions/orders/0/leader", {"broker": 2})
        assert status == 409 and err["error"] == "ELIGIBLE_LEADERS_NOT_AVAILABLE"
        send(b"3")
        status, started = call(http, "POST", "/v1/brokers/2/start")
        assert status == 200 and started["running"] is True
        assert call(http, "POST", "/v1/brokers/7/stop")[0] == 404
        assert call(http, "POST", "/v1/partitions/nope/0/leader", {"broker": 1})[0] == 404
        assert call(http, "POST", "/v1/partitions/orders/0/leader", {})[0] == 400
        send(b"4")
        assert delivered == [b"1", b"2", b"3", b"4"]
        assert [r.value for r in consume(cluster.bootstrap, "orders", [0], 4)] == [b"1", b"2", b"3", b"4"]
        # Metrics of every running broker, labelled by broker.
        text = call(http, "GET", "/metrics")[1]
        brokers = {s.labels.get("broker") for f in text_string_to_metric_families(text.decode())
                   for s in f.samples}
        assert {"0", "1", "2"} <= brokers
