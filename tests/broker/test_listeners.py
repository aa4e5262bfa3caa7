"""Listeners (issue 15): several named listeners, advertised addresses per listener, the inter-broker
listener, and a cluster's per-listener ports."""

from __future__ import annotations

import pytest

from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.config import BrokerConfig, ConfigError
from minikafka.broker.request import ResponseObserver
from minikafka.broker.security.listeners import EndPoint
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from helpers import batch, produce, wait_until

K = ApiKey
FAST = {"replica.fetch.wait.max.ms": "50", "replica.fetch.backoff.ms": "50", "group.initial.rebalance.delay.ms": "0"}


def config(props: dict[str, str], **fields: object) -> BrokerConfig:
    cfg = BrokerConfig(**{"port": 0, **fields})  # type: ignore[arg-type]
    for k, v in props.items():
        cfg.set(k, v)
    return cfg


# -- configuration ------------------------------------------------------------------------------------
def test_without_listeners_one_plaintext_listener_on_host_and_port():
    cfg = BrokerConfig(host="127.0.0.2", port=9999)
    assert cfg.listener_endpoints() == [EndPoint("PLAINTEXT", "127.0.0.2", 9999, "PLAINTEXT")]
    assert cfg.inter_broker_endpoint() == EndPoint("PLAINTEXT", "127.0.0.2", 9999, "PLAINTEXT")


def test_listeners_with_custom_names_and_advertised_addresses():
    cfg = config({
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9094,INTERNAL://:9095",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SSL",
        "advertised.listeners": "PLAINTEXT://kafka.example:19092,SASL_SSL://kafka.example:19094,"
                                "INTERNAL://broker-0.internal:9095",
        "inter.broker.listener.name": "internal",
    })
    assert (cfg.host, cfg.port) == ("127.0.0.1", 9092)
    assert cfg.listener_endpoints() == [EndPoint("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),
                                        EndPoint("SASL_SSL", "127.0.0.1", 9094, "SASL_SSL"),
                                        EndPoint("INTERNAL", "", 9095, "SSL")]
    assert [str(e) for e in cfg.advertised_endpoints()] == [
        "PLAINTEXT://kafka.example:19092", "SASL_SSL://kafka.example:19094", "INTERNAL://broker-0.internal:9095"]
    assert cfg.inter_broker_endpoint() == EndPoint("INTERNAL", "broker-0.internal", 9095, "SSL")
    assert cfg.advertised == "kafka.example"


def test_advertised_defaults_to_the_listeners_with_bound_ports():
    cfg = config({"listeners": "PLAINTEXT://0.0.0.0:0,SSL://127.0.0.1:0"})
    assert [str(e) for e in cfg.advertised_endpoints({"PLAINTEXT": 40001, "SSL": 40002})] == [
        "PLAINTEXT://localhost:40001", "SSL://127.0.0.1:40002"]
    # --advertised-host (minikafka's) names the host of every listener without advertised.listeners
    cfg.advertised_host = "broker.example"
    assert {e.host for e in cfg.advertised_endpoints()} == {"broker.example"}


def test_the_first_listener_follows_host_and_port_overrides():
    cfg = config({"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"})
    cfg.port = 19092  # --port
    assert [e.port for e in cfg.listener_endpoints()] == [19092, 9093]


@pytest.mark.parametrize("props, key, message", [
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "listeners",
     "Each listener must have a different name, listeners: PLAINTEXT://:9092,PLAINTEXT://:9093"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "listeners",
     "Each listener must have a different port, listeners: PLAINTEXT://:9092,SSL://:9092"),
    ({"listeners": "PLAINTEXT://:9092,INTERNAL://:9093"}, "listeners",
     "No security protocol defined for listener INTERNAL"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners",
     "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. Use a routable IP address."),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://a:9092,SSL://a:9093"},
     "advertised.listeners", "advertised.listeners listener names must be equal to or a subset of the ones "
     "defined in listeners. Found SSL. The valid options based on currently configured listeners are PLAINTEXT"),
    ({"listeners": "SSL://:9093"}, "security.inter.broker.protocol",
     "inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid options based "
     "on currently configured listeners are SSL"),
    ({"listeners": "SSL://:9093,PLAINTEXT://:9092", "inter.broker.listener.name": "SSL",
      "security.inter.broker.protocol": "SSL"}, "inter.broker.listener.name",
     "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set."),
])
def test_listener_settings_kafka_refuses(props, key, message):
    cfg = config(props)
    with pytest.raises(ConfigError) as err:
        cfg.check_listeners()
        cfg.advertised_endpoints()
    assert err.value.key == key
    assert str(err.value).endswith(f"for configuration {key}: {message}")


def test_a_bad_protocol_map_is_refused_when_set():
    with pytest.raises(ConfigError, match="listener.security.protocol.map"):
        config({"listener.security.protocol.map": "INTERNAL:TLS"})


def test_a_cluster_puts_each_listener_on_port_plus_broker_id():
    base = config({"listeners": "PLAINTEXT://127.0.0.1:19092,INTERNAL://127.0.0.1:19192,EXTRA://127.0.0.1:0",
                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT,EXTRA:PLAINTEXT",
                   "advertised.listeners": "PLAINTEXT://kafka:29092,INTERNAL://127.0.0.1:19192,EXTRA://x:0"})
    cluster = Cluster(3, base)
    assert [[e.port for e in cluster.configs[i].listener_endpoints()] for i in range(3)] == [
        [19092, 19192, 0], [19093, 19193, 0], [19094, 19194, 0]]
    assert [e.port for e in cluster.configs[2].advertised_endpoints({"EXTRA": 5555})] == [29094, 19194, 5555]


# -- per-listener addresses in Metadata, FindCoordinator and DescribeCluster ---------------------------------
async def test_metadata_answers_with_the_address_of_the_listener_the_request_came_in_on():
    cfg = config({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                  "advertised.listeners": "PLAINTEXT://localhost:0,INTERNAL://127.0.0.1:0"})
    async with serve_broker(cfg) as broker:
        seen: list[str] = []
        broker.observe(ResponseObserver(lambda ctx, frame, segments: seen.append(ctx.listener)))
        ports = broker.listener_ports
        assert set(ports) == {"PLAINTEXT", "INTERNAL"} and ports["PLAINTEXT"] == broker.port
        for listener, host in (("PLAINTEXT", "localhost"), ("INTERNAL", "127.0.0.1")):
            async with await KafkaConnection.connect("127.0.0.1", ports[listener]) as conn:
                md = await conn.request(K.METADATA, 12, {"topics": None})
                assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(0, host, ports[listener])]
                fc = await conn.request(K.FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g"]})
                assert (fc.coordinators[0].host, fc.coordinators[0].port) == (host, ports[listener])
                fc0 = await conn.request(K.FIND_COORDINATOR, 0, {"key": "g"})
                assert (fc0.host, fc0.port) == (host, ports[listener])
                dc = await conn.request(K.DESCRIBE_CLUSTER, 0, {})
                assert [(b.host, b.port) for b in dc.brokers] == [(host, ports[listener])]
            assert broker.bootstrap_for(listener) == f"{host}:{ports[listener]}"
        assert set(seen) == {"PLAINTEXT", "INTERNAL"}


async def test_a_listener_that_is_not_advertised_lists_no_brokers():
    cfg = config({"listeners": "PLAINTEXT://127.0.0.1:0,HIDDEN://127.0.0.1:0",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,HIDDEN:PLAINTEXT",
                  "advertised.listeners": "PLAINTEXT://127.0.0.1:0"})
    async with serve_broker(cfg) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.listener_ports["HIDDEN"]) as conn:
            md = await conn.request(K.METADATA, 12, {"topics": None})
            assert md.brokers == []  # as Kafka: getAliveBrokerNodes(listener) has none
            fc = await conn.request(K.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
            assert fc.error_code == 15 and fc.node_id == -1  # COORDINATOR_NOT_AVAILABLE


async def test_a_cluster_advertises_every_broker_on_each_listener_and_replicates_on_the_inter_broker_one():
    cfg = config({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                  "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                  "advertised.listeners": "PLAINTEXT://localhost:0,INTERNAL://127.0.0.1:0",
                  "inter.broker.listener.name": "INTERNAL", **FAST})
    async with serve_cluster(2, cfg) as cluster:
        internal = {i: cluster.broker(i).listener_ports["INTERNAL"] for i in (0, 1)}
        external = {i: cluster.broker(i).listener_ports["PLAINTEXT"] for i in (0, 1)}
        assert len(set(internal.values()) | set(external.values())) == 4
        # The brokers know each other at their inter-broker listener.
        assert {i: n.port for i, n in cluster.metadata.live.items()} == internal
        assert cluster.bootstrap_for("PLAINTEXT") == f"localhost:{external[0]},localhost:{external[1]}"
        fetch_listeners: set[str] = set()
        for i in (0, 1):
            cluster.broker(i).observe(ResponseObserver(
                lambda ctx, frame, segments: fetch_listeners.add(ctx.listener) if ctx.api_key == K.FETCH else None))
        cluster.broker(0).create_topic("t", 1, 2)
        async with await KafkaConnection.connect("127.0.0.1", external[1]) as conn:
            md = await conn.request(K.METADATA, 12, {"topics": None})
            assert sorted((b.node_id, b.host, b.port) for b in md.brokers) == [
                (0, "localhost", external[0]), (1, "localhost", external[1])]
        async with await KafkaConnection.connect("127.0.0.1", external[0]) as conn:
            assert (await produce(conn, "t", batch([b"a", b"b"]), acks=-1)).error_code == 0
        follower = cluster.broker(1).replica_manager.get("t", 0).log
        await wait_until(lambda: follower.high_watermark == 2, what="replication")
        assert fetch_listeners == {"INTERNAL"}


# -- the command line -------------------------------------------------------------------------------------------
def test_serve_with_a_server_properties_file_binds_every_listener(tmp_path):
    import re
    import signal
    import socket
    import ssl
    import subprocess
    import sys

    from tls_certs import make_pki

    pki = make_pki(tmp_path / "pki")
    props = tmp_path / "server.properties"
    props.write_text("listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0\n"
                     f"ssl.keystore.type=PEM\nssl.keystore.location={pki.server.pem_file}\n")
    proc = subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--config", str(props)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        assert "ready on 127.0.0.1:" in ready, (ready, proc.stderr.read() if proc.poll() is not None else "")
        line = proc.stdout.readline()
        m = re.fullmatch(r"listeners: PLAINTEXT://127.0.0.1:(\d+) \(PLAINTEXT\), SSL://127.0.0.1:(\d+) \(SSL\)\n", line)
        assert m is not None, line
        with socket.create_connection(("127.0.0.1", int(m.group(2))), timeout=10) as raw:
            with pki.client_context().wrap_socket(raw, server_hostname="localhost") as tls:
                assert tls.version() in ("TLSv1.2", "TLSv1.3")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err


def test_a_restarted_broker_binds_the_ports_its_listeners_got():
    from minikafka.testing import BrokerThread

    broker = BrokerThread(properties={"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"})
    with broker:
        before = (broker.bootstrap_for("PLAINTEXT"), broker.bootstrap_for("INTERNAL"))
        broker.restart()
        assert (broker.bootstrap_for("PLAINTEXT"), broker.bootstrap_for("INTERNAL")) == before
