"""KIP-714 client metrics with real clients: kafka-python 3.0 sets a CLIENT_METRICS subscription
(IncrementalAlterConfigs), describes it and lists it (ListConfigResources); confluent-kafka (librdkafka,
``enable.metrics.push`` on by default) gets the subscription and pushes what it measured, which the broker
shows on ``/metrics`` labelled with the client's ids, and on ``/v1/client-metrics``, up to its last,
terminating push when it closes."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource
from prometheus_client.parser import text_string_to_metric_families

from clients_common import wait_for
from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    with BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0), http_port=0) as b:
        yield b


def scrape(b: BrokerThread) -> dict[str, list[Any]]:
    with urllib.request.urlopen(f"http://{b.http_address}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def pushed(b: BrokerThread) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://{b.http_address}/v1/client-metrics", timeout=10) as resp:
        return json.loads(resp.read())["clients"]


def subscribe(bootstrap: str, name: str, **configs: str) -> None:
    """A client metrics subscription through kafka-python's admin client, as kafka-client-metrics.sh sets it."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        result = admin.alter_configs([ConfigResource("CLIENT_METRICS", name, configs=configs)],
                                     raise_on_unknown=False, incremental=True)
        assert result == {"client_metrics": {name: "OK"}}, result
    finally:
        admin.close()


def test_kafka_python_sets_describes_and_lists_subscriptions(broker: BrokerThread) -> None:
    subscribe(broker.bootstrap, "producers", **{"metrics": "org.apache.kafka.producer.", "interval.ms": "1000",
                                                "match": "client_id=app-.*"})
    subscribe(broker.bootstrap, "everything", metrics="*")
    broker.create_topic("listed")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        described = admin.describe_configs([ConfigResource("CLIENT_METRICS", "producers")], config_filter="all")
        configs = described["client_metrics"]["producers"]
        assert {k: v["value"] for k, v in configs.items()} == {
            "metrics": "org.apache.kafka.producer.", "interval.ms": "1000", "match": "client_id=app-.*"}
        assert admin.list_config_resources(["CLIENT_METRICS"]) == {"client_metrics": ["everything", "producers"]}
        everything = admin.list_config_resources()
        assert everything["client_metrics"] == ["everything", "producers"]
        assert everything["broker"] == ["0"] and "listed" in everything["topic"]
    finally:
        admin.close()


def test_confluent_producer_pushes_its_metrics_to_prometheus(broker: BrokerThread) -> None:
    broker.create_topic("telemetry")
    subscribe(broker.bootstrap, "producers", **{"metrics": "org.apache.kafka.producer.", "interval.ms": "500",
                                                "match": "client_id=telemetry-producer.*"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "telemetry-producer-1",
                         "linger.ms": 5})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "client.id": "not-matched"})
    try:
        consumer.subscribe(["telemetry"])

        def latency_reported() -> list[Any]:
            producer.produce("telemetry", b"value")
            producer.poll(0.05)
            consumer.poll(0)
            samples = scrape(broker).get("org_apache_kafka_producer_node_request_latency_avg", [])
            return [s for s in samples if s.labels.get("client_id") == "telemetry-producer-1"]

        samples = wait_for(latency_reported, what="the producer's pushed request latency on /metrics")
        assert {s.labels["node_id"] for s in samples} == {"0"}  # the metric's own attribute (node.id)
        instance_id = samples[0].labels["client_instance_id"]
        assert len(instance_id) == 22  # Kafka's base64 Uuid
        families = scrape(broker)
        assert any(s.labels.get("client_instance_id") == instance_id
                   for s in families["org_apache_kafka_producer_record_queue_time_avg"])
        # Only what the subscription asks for: the producer pushes no consumer metrics, the consumer
        # (whose client id does not match) pushes nothing.
        assert not [name for name in families if name.startswith("org_apache_kafka_consumer")]
        [client] = pushed(broker)
        assert (client["client_instance_id"], client["client_id"]) == (instance_id, "telemetry-producer-1")
        assert client["client_software_name"] and client["pushes"] >= 1
        assert all(m["name"].startswith("org.apache.kafka.producer.") for m in client["metrics"])
        with urllib.request.urlopen(f"http://{broker.http_address}/v1/client-metrics/{instance_id}") as resp:
            assert json.loads(resp.read())["client_id"] == "telemetry-producer-1"
        with pytest.raises(urllib.error.HTTPError) as unknown:
            urllib.request.urlopen(f"http://{broker.http_address}/v1/client-metrics/AAAAAAAAAAAAAAAAAAAAAA")
        assert unknown.value.code == 404
        # Closing, the producer pushes a last time with terminating set.
        producer.flush(10)
        producer.close()
        wait_for(lambda: pushed(broker)[0]["terminating"], what="the producer's terminating push")
    finally:
        consumer.close()
