"""`minikafka client-metrics` (kafka-client-metrics.sh): subscriptions altered, described, listed and deleted,
checked over the wire (DescribeConfigs, ListConfigResources, GetTelemetrySubscriptions) rather than by the
tool itself."""

from __future__ import annotations

import trio
from tools_helpers import request, run_cli

from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.types import ZERO_UUID
from minikafka.testing import BrokerThread

CLIENT_METRICS = 16


def configs(bootstrap: str, name: str) -> dict[str, str]:
    resp = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": CLIENT_METRICS, "resource_name": name, "configuration_keys": None}]})
    assert resp.results[0].error_code == 0
    return {c.name: c.value for c in resp.results[0].configs}


def listed(bootstrap: str) -> list[str]:
    resp = request(bootstrap, ApiKey.LIST_CONFIG_RESOURCES, 0, {})
    return sorted(r.resource_name for r in resp.config_resources)


def subscription_of(b: BrokerThread, client_id: str) -> tuple[list[str], int]:
    """What GetTelemetrySubscriptions answers a client with this id: (requested metrics, push interval)."""
    async def go() -> tuple[list[str], int]:
        async with await KafkaConnection.connect("127.0.0.1", b.port, client_id=client_id) as conn:
            resp = await conn.request(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO_UUID})
            return sorted(resp.requested_metrics), resp.push_interval_ms
    return trio.run(go)


def test_alter_describe_list_delete(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--alter", "--name", "producers",
                "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.", "--interval", "1000",
                "--match", "client_id=app-.*", "--match", "client_software_name=minikafka")
    assert (r.rc, r.out) == (0, "Altered client metrics config for producers.\n")
    assert configs(b, "producers") == {
        "metrics": "org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator.", "interval.ms": "1000",
        "match": "client_id=app-.*,client_software_name=minikafka"}
    assert subscription_of(broker_thread, "app-1") == ([], 300000)  # no ApiVersions v3: no software name
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--alter", "--name", "producers", "--match", "")
    assert r.rc == 0 and "match" not in configs(b, "producers")  # an empty value removes the config
    assert subscription_of(broker_thread, "app-1") == (
        ["org.apache.kafka.consumer.coordinator.", "org.apache.kafka.producer."], 1000)

    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--alter", "--generate-name", "--metrics", "*")
    assert r.rc == 0
    generated = r.out.removeprefix("Altered client metrics config for ").removesuffix(".\n")
    assert len(generated) == 22 and listed(b) == sorted([generated, "producers"])

    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--list")
    assert (r.rc, sorted(r.lines)) == (0, sorted([generated, "producers"]))
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--describe", "--name", "producers")
    assert r.lines == ["Client metrics configs for producers are:", "  interval.ms=1000",
                       "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.coordinator."]
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--describe")
    assert r.rc == 0 and f"Client metrics configs for {generated} are:" in r.lines and "  metrics=*" in r.lines

    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--delete", "--name", "producers")
    assert (r.rc, r.out) == (0, "Deleted client metrics config for producers.\n")
    assert listed(b) == [generated] and configs(b, "producers") == {}


def test_errors(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--alter", "--metrics", "*")
    assert r.rc == 1 and "One of --name or --generate-name must be specified with --alter." in r.err
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--delete")
    assert r.rc == 1 and "--delete" in r.err
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--list", "--name", "x")
    assert r.rc == 1
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--alter", "--name", "s", "--interval", "5")
    assert r.rc == 1 and "INVALID_REQUEST" in r.err and "interval must be between 100 and 3600000" in r.err
    r = run_cli(capsys, "client-metrics", "--bootstrap-server", b, "--alter", "--name", "s", "--match", "colour=red")
    assert r.rc == 1 and "INVALID_CONFIG" in r.err
    assert listed(b) == []
