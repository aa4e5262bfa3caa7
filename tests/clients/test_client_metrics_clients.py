"""KIP-714 client metrics with real clients: kafka-python 3.0 sets a CLIENT_METRICS subscription
(IncrementalAlterConfigs), describes it and lists it (ListConfigResources); confluent-kafka (librdkafka,
``enable.metrics.push`` on by default) gets the subscription and pushes what it measured, which the broker
shows on ``/metrics`` labelled with the client's ids, and on ``/v1/client-metrics``, up to its last,
terminating push when it closes."""

from __future__ import annotations

import json
import threading
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
from minikafka.broker.request import ObserverBase, Response
from minikafka.protocol.api import ApiKey
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


class TelemetryRequests(ObserverBase):
    """Per client id, the metrics each GetTelemetrySubscriptions answer asked for, and the PushTelemetry
    requests answered (filled on the broker's thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.subscriptions: dict[str, list[list[str]]] = {}
        self.pushes: dict[str, int] = {}

    def on_response(self, response: Response) -> None:
        ctx = response.request.context
        client = ctx.client_id or ""
        with self.lock:
            if ctx.api_key == ApiKey.GET_TELEMETRY_SUBSCRIPTIONS and response.body is not None:
                body = response.body  # the handler's answer (a dict, or a parsed body)
                metrics = body["requested_metrics"] if isinstance(body, dict) else body.requested_metrics
                self.subscriptions.setdefault(client, []).append(list(metrics))
            elif ctx.api_key == ApiKey.PUSH_TELEMETRY:
                self.pushes[client] = self.pushes.get(client, 0) + 1

    def install(self, b: BrokerThread) -> "TelemetryRequests":
        broker = b.broker
        assert broker is not None
        b.call(lambda: broker.observe(self))
        return self

    def subscriptions_of(self, client: str) -> list[list[str]]:
        with self.lock:
            return list(self.subscriptions.get(client, []))

    def pushes_by_client(self) -> dict[str, int]:
        with self.lock:
            return dict(self.pushes)


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
    telemetry = TelemetryRequests().install(broker)
    # Two of the producer's metrics (prefixes), and every consumer metric: a consumer matched by mistake
    # would push those, so the checks below that none came can fail.
    wanted = ("org.apache.kafka.producer.node.request.latency.", "org.apache.kafka.producer.record.queue.time.")
    subscribe(broker.bootstrap, "producers", **{"metrics": ",".join(wanted + ("org.apache.kafka.consumer.",)),
                                                "interval.ms": "500", "match": "client_id=telemetry-producer.*"})
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

        samples = wait_for(latency_reported, timeout=60, what="the producer's pushed request latency on /metrics")
        assert {s.labels["node_id"] for s in samples} == {"0"}  # the metric's own attribute (node.id)
        instance_id = samples[0].labels["client_instance_id"]
        assert len(instance_id) == 22  # Kafka's base64 Uuid
        # The consumer (whose client id does not match) asked for its subscription and was given none; the
        # producer was given the subscription's metrics.
        def serve_clients() -> None:
            producer.poll(0.05)
            consumer.poll(0.05)

        wait_for(lambda: serve_clients() or telemetry.subscriptions_of("not-matched"), timeout=60,
                 what="the consumer's GetTelemetrySubscriptions")
        assert all(metrics == [] for metrics in telemetry.subscriptions_of("not-matched"))
        assert sorted(telemetry.subscriptions_of("telemetry-producer-1")[-1]) == sorted(
            wanted + ("org.apache.kafka.consumer.",))
        # Well over one push interval after the consumer got its answer (three more pushes of the producer,
        # each 0.8 to 1.2 intervals apart): the producer is the one client that pushed.
        first = telemetry.pushes_by_client().get("telemetry-producer-1", 0)
        wait_for(lambda: serve_clients() or telemetry.pushes_by_client().get("telemetry-producer-1", 0) >= first + 3,
                 timeout=60, what="three more pushes of the producer")
        assert set(telemetry.pushes_by_client()) == {"telemetry-producer-1"}
        [client] = pushed(broker)
        assert (client["client_instance_id"], client["client_id"]) == (instance_id, "telemetry-producer-1")
        assert client["client_software_name"] and client["pushes"] >= 3
        # Only what the subscription asks for: both wanted metrics, none of the producer's others
        # (connection creation, produce throttle time), and no consumer metrics from anyone.
        names = {m["name"] for m in client["metrics"]}
        assert all(name.startswith(wanted) for name in names) and all(any(n.startswith(w) for n in names)
                                                                        for w in wanted)
        families = scrape(broker)
        assert any(s.labels.get("client_instance_id") == instance_id
                   for s in families["org_apache_kafka_producer_record_queue_time_avg"])
        assert not [name for name in families if name.startswith("org_apache_kafka_consumer")]
        assert not [name for name in families if name.startswith("org_apache_kafka_producer_connection")]
        with urllib.request.urlopen(f"http://{broker.http_address}/v1/client-metrics/{instance_id}") as resp:
            assert json.loads(resp.read())["client_id"] == "telemetry-producer-1"
        with pytest.raises(urllib.error.HTTPError) as unknown:
            urllib.request.urlopen(f"http://{broker.http_address}/v1/client-metrics/AAAAAAAAAAAAAAAAAAAAAA")
        assert unknown.value.code == 404
        # Closing, the producer pushes a last time with terminating set.
        producer.flush(10)
        producer.close()
        wait_for(lambda: pushed(broker)[0]["terminating"], timeout=30, what="the producer's terminating push")
    finally:
        consumer.close()
