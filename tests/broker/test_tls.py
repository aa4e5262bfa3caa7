"""TLS listeners (issue 15): key and trust stores in Kafka's forms, ssl.client.auth, enabled protocols,
the mTLS principal (subject DN and ssl.principal.mapping.rules), TLS between brokers.

Certificates are made at test time (``tls_certs``).
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trio
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig, ConfigError
from minikafka.broker.request import ResponseObserver
from minikafka.broker.security.ssl import NoMatchingRule, SslPrincipalMapper, subject_dn
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from helpers import api_versions_v0, batch, produce, wait_until
from tls_certs import KEY_PASSWORD, STORE_PASSWORD, Pki, make_pki, name, tls_connect

K = ApiKey
ALICE_DN = "CN=alice,OU=Engineering,O=Example,C=US"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def config(props: dict[str, str]) -> BrokerConfig:
    cfg = BrokerConfig(port=0)
    for k, v in props.items():
        cfg.set(k, v)
    return cfg


def ssl_props(pki: Pki, listeners: str = "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **extra: str) -> dict[str, str]:
    return {"listeners": listeners, "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.pem_file),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file), **extra}


def principals_of(broker: Broker) -> list[str]:
    seen: list[str] = []
    broker.observe(ResponseObserver(lambda ctx, frame, segments: seen.append(ctx.principal)))
    return seen


async def api_versions(conn: KafkaConnection) -> int:
    resp = await conn.request(K.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    return resp.error_code


# -- the subject DN and the principal mapping ------------------------------------------------------------------
def _cert_der(pki: Pki, subject: x509.Name) -> bytes:
    return pki.issue("dn", subject).cert.public_bytes(serialization.Encoding.DER)


def test_subject_dn_is_written_as_java_writes_it(pki: Pki):
    assert subject_dn(pki.clients["alice"].cert.public_bytes(serialization.Encoding.DER)) == ALICE_DN
    # RFC 2253 escapes; attributes outside RFC 2253's keywords as OID=#hex of their DER value
    tricky = x509.Name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
                        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
                        x509.NameAttribute(NameOID.COMMON_NAME, "Doe, John+Jr <x>")])
    assert subject_dn(_cert_der(pki, tricky)) == (
        "CN=Doe\\, John\\+Jr \\<x\\>,1.2.840.113549.1.9.1=#1605614062" + "2e63,C=US")
    multi = x509.Name([x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "svc"),
                                                       x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "ops")])])
    assert subject_dn(_cert_der(pki, multi)) in ("CN=svc+OU=ops", "OU=ops+CN=svc")


KAFKA_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
               "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT")


@pytest.mark.parametrize("dn, expected", [  # Kafka's SslPrincipalMapperTest
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "Duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_principal_mapping_rules(dn: str, expected: str):
    assert SslPrincipalMapper(KAFKA_RULES).name(dn) == expected


@pytest.mark.parametrize("rules", ["default", "DEFAUL", "DEFAULT/L", "DEFAULT/U", "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
                                   "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/", "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
                                   "RULE:^CN=(.*?),OU=ServiceUsers.*$/L", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU"])
def test_invalid_mapping_rules(rules: str):
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def test_mapping_without_a_matching_rule_and_literal_back_references():
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x,OU=y"):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/").name("CN=x,OU=y")
    assert SslPrincipalMapper("RULE:^CN=(.*),OU=(.*)$/$1$3/").name("CN=a,OU=b") == "a$3"  # $3: no such group


# -- key and trust stores --------------------------------------------------------------------------------------
def _stores(pki: Pki, form: str) -> dict[str, str]:
    server = pki.server
    return {
        "pem-file": {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.pem_file)},
        "pem-file-encrypted": {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(server.encrypted_pem_file),
                               "ssl.key.password": KEY_PASSWORD},
        "pem-inline": {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": server.cert_pem,
                       "ssl.keystore.key": server.encrypted_key_pem, "ssl.key.password": KEY_PASSWORD},
        "pkcs12": {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(server.p12_file),
                   "ssl.keystore.password": STORE_PASSWORD, "ssl.key.password": STORE_PASSWORD},
        # a JKS-typed store (Kafka's default type) that is PKCS12, as keytool writes them since Java 9
        "jks-typed-pkcs12": {"ssl.keystore.location": str(server.p12_file), "ssl.keystore.password": STORE_PASSWORD},
    }[form]


@pytest.mark.parametrize("form", ["pem-file", "pem-file-encrypted", "pem-inline", "pkcs12", "jks-typed-pkcs12"])
async def test_key_store_forms(pki: Pki, form: str):
    cfg = config({"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL", **_stores(pki, form)})
    async with serve_broker(cfg) as broker:
        conn = await tls_connect(broker.port, pki.client_context())
        async with conn:
            assert await api_versions(conn) == 0
            md = await conn.request(K.METADATA, 12, {"topics": None})
            assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", broker.port)]


@pytest.mark.parametrize("form", ["pem-file", "pem-inline", "pkcs12"])
async def test_trust_store_forms_verify_client_certificates(pki: Pki, form: str):
    trust = {"pem-file": {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file)},
             "pem-inline": {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca_pem},
             "pkcs12": {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(pki.truststore_p12),
                        "ssl.truststore.password": STORE_PASSWORD}}[form]
    cfg = config({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.client.auth": "required",
                  **_stores(pki, "pem-file"), **trust})
    async with serve_broker(cfg) as broker:
        seen = principals_of(broker)
        async with await tls_connect(broker.listener_ports["SSL"], pki.client_context(pki.clients["alice"])) as conn:
            assert await api_versions(conn) == 0
        assert seen == [f"User:{ALICE_DN}"]


@pytest.mark.parametrize("props, key, match", [
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "SERVER_PEM", "ssl.keystore.password": "x"},
     "ssl.keystore.password", "SSL key store password cannot be specified with PEM format"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "ENCRYPTED_PEM", "ssl.key.password": "wrong"},
     "ssl.keystore.location", "cannot load the key and certificate chain"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "P12", "ssl.keystore.password": "wrong"},
     "ssl.keystore.location", "wrong ssl.keystore.password"),
    ({"ssl.keystore.location": "JKS"}, "ssl.keystore.type", "JKS stores are not supported"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": "CHAIN"}, "ssl.keystore.key", "needs both"),
    ({}, "ssl.keystore.location", "needs a key store"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "SERVER_PEM", "ssl.client.auth": "always"},
     "ssl.client.auth", "String must be one of: required, requested, none"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "SERVER_PEM", "ssl.enabled.protocols": "SSLv3"},
     "ssl.enabled.protocols", "unsupported protocol"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location",
     "cannot read it"),
])
def test_tls_settings_that_stop_the_broker(pki: Pki, tmp_path: Path, props: dict[str, str], key: str, match: str):
    jks = tmp_path / "store.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    files = {"SERVER_PEM": str(pki.server.pem_file), "ENCRYPTED_PEM": str(pki.server.encrypted_pem_file),
             "P12": str(pki.server.p12_file), "JKS": str(jks), "CHAIN": pki.server.cert_pem}
    cfg = config({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                  **{k: files.get(v, v) for k, v in props.items()}})
    with pytest.raises(ConfigError, match=match) as err:
        Broker(cfg)
    assert err.value.key == key
    assert pki.server.key_pem not in str(err.value)


# -- handshakes, protocols, principals -------------------------------------------------------------------------
async def test_enabled_protocols(pki: Pki):
    async with serve_broker(config(ssl_props(pki, **{"ssl.enabled.protocols": "TLSv1.3"}))) as broker:
        old = pki.client_context()
        old.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(trio.BrokenResourceError):
            await tls_connect(broker.listener_ports["SSL"], old)
    async with serve_broker(config(ssl_props(pki, **{"ssl.enabled.protocols": "TLSv1.2"}))) as broker:
        conn = await tls_connect(broker.listener_ports["SSL"], pki.client_context())
        async with conn:
            assert isinstance(conn.stream, trio.SSLStream) and conn.stream.version() == "TLSv1.2"
            assert await api_versions(conn) == 0


async def test_client_auth_required_requested_and_none(pki: Pki):
    alice = pki.clients["alice"]
    props = ssl_props(pki, "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,OPTIONAL://127.0.0.1:0,OPEN://127.0.0.1:0", **{
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,OPTIONAL:SSL,OPEN:SSL",
        "ssl.client.auth": "required", "listener.name.optional.ssl.client.auth": "requested",
        "listener.name.open.ssl.client.auth": "none"})
    async with serve_broker(config(props)) as broker:
        seen = principals_of(broker)
        ports = broker.listener_ports
        # required: a client without a certificate is refused (TLS 1.3 reports it on the first read)
        with pytest.raises((trio.BrokenResourceError, ConnectionError)):
            conn = await tls_connect(ports["SSL"], pki.client_context())
            async with conn:
                await api_versions(conn)
        for listener, identity, principal in (("SSL", alice, f"User:{ALICE_DN}"), ("OPTIONAL", alice, f"User:{ALICE_DN}"),
                                              ("OPTIONAL", None, "User:ANONYMOUS"), ("OPEN", alice, "User:ANONYMOUS")):
            seen.clear()
            async with await tls_connect(ports[listener], pki.client_context(identity)) as conn:
                assert await api_versions(conn) == 0
                await conn.request(K.METADATA, 12, {"topics": []})
            assert seen == [principal] * 2, listener
        await wait_until(lambda: broker.server.failed_authentications == 1, what="the refused handshake counted")


async def test_principal_mapping_rules_apply_to_client_certificates(pki: Pki):
    props = ssl_props(pki, **{"ssl.client.auth": "required",
                              "listener.name.ssl.ssl.principal.mapping.rules":
                                  "RULE:^CN=([^,]*),OU=Engineering,.*$/$1/L,RULE:^CN=([^,]*),.*$/other-$1/"})
    carol = pki.issue("carol", name(C="US", O="Example", OU="Engineering", CN="Carol"))
    async with serve_broker(config(props)) as broker:
        seen = principals_of(broker)
        for identity in (pki.clients["alice"], carol, pki.clients["bob"]):
            async with await tls_connect(broker.listener_ports["SSL"], pki.client_context(identity)) as conn:
                assert await api_versions(conn) == 0
        assert seen == ["User:alice", "User:carol", "User:other-bob"]
    # No rule matches: the connection is closed as an authentication failure.
    props["listener.name.ssl.ssl.principal.mapping.rules"] = "RULE:^CN=([^,]*),OU=Nobody,.*$/$1/"
    async with serve_broker(config(props)) as broker:
        conn = await tls_connect(broker.listener_ports["SSL"], pki.client_context(pki.clients["alice"]))
        with pytest.raises((trio.BrokenResourceError, ConnectionError)):
            async with conn:
                await api_versions(conn)
        await wait_until(lambda: broker.server.failed_authentications == 1, what="the failure counted")


async def test_a_plaintext_client_on_a_tls_port_gets_nothing(pki: Pki):
    async with serve_broker(config(ssl_props(pki))) as broker:
        stream = await trio.open_tcp_stream("127.0.0.1", broker.listener_ports["SSL"])
        async with stream:
            with pytest.raises(AssertionError, match="closed the connection"):
                await api_versions_v0(stream)
        await wait_until(lambda: broker.server.failed_authentications == 1, what="the failed handshake counted")
        # the broker carries on, on both listeners
        async with await KafkaConnection.connect("127.0.0.1", broker.listener_ports["PLAINTEXT"]) as conn:
            assert await api_versions(conn) == 0
        async with await tls_connect(broker.listener_ports["SSL"], pki.client_context()) as conn:
            assert await api_versions(conn) == 0


async def test_large_requests_and_responses_over_tls(pki: Pki):
    async with serve_broker(config(ssl_props(pki))) as broker:
        broker.create_topic("big", 1, 1)
        async with await tls_connect(broker.listener_ports["SSL"], pki.client_context()) as conn:
            values = [bytes([i]) * 300_000 for i in range(3)]
            r = await produce(conn, "big", batch(values), acks=1)
            assert r.error_code == 0
            resp = await conn.request(K.FETCH, 12, {
                "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 50 << 20,
                "topics": [{"topic": "big", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                            "partition_max_bytes": 10 << 20}]}]})
            from helpers import values as record_values
            assert record_values(resp.responses[0].partitions[0].records) == values


async def test_sasl_ssl_listeners_ignore_the_unprefixed_ssl_client_auth(pki: Pki):
    """KIP-684: on SASL_SSL listeners only listener.name.<l>.ssl.client.auth asks for certificates."""
    props = ssl_props(pki, "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0", **{
        "ssl.client.auth": "required",
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'})
    async with serve_broker(config(props)) as broker:
        async with await tls_connect(broker.listener_ports["SASL_SSL"], pki.client_context()) as conn:
            assert await api_versions(conn) == 0  # allowed before SASL authentication


# -- TLS between brokers ---------------------------------------------------------------------------------------
async def test_brokers_replicate_over_a_mutual_tls_inter_broker_listener(pki: Pki):
    props = ssl_props(pki, **{"security.inter.broker.protocol": "SSL", "ssl.client.auth": "required",
                              "replica.fetch.wait.max.ms": "50", "replica.fetch.backoff.ms": "50"})
    async with serve_cluster(2, config(props)) as cluster:
        principals: set[str] = set()
        for i in (0, 1):
            cluster.broker(i).observe(ResponseObserver(
                lambda ctx, frame, segments: principals.add(f"{ctx.listener} {ctx.principal}")
                if ctx.api_key == K.FETCH else None))
        assert {i: n.port for i, n in cluster.metadata.live.items()} == {
            i: cluster.broker(i).listener_ports["SSL"] for i in (0, 1)}
        cluster.broker(0).create_topic("t", 1, 2)
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(0).listener_ports["PLAINTEXT"]) as conn:
            assert (await produce(conn, "t", batch([b"x", b"y", b"z"]), acks=-1)).error_code == 0
        follower = cluster.broker(1).replica_manager.get("t", 0).log
        await wait_until(lambda: follower.high_watermark == 3, what="replication over TLS")
        # the follower fetched over TLS, presenting the broker's certificate
        assert principals == {"SSL User:CN=localhost,O=minikafka,C=US"}


# -- responses coalesced on TLS connections --------------------------------------------------------------------
async def test_pipelined_responses_leave_together_on_tls_and_never_behind_a_waiting_request(pki: Pki, monkeypatch):
    """Responses to requests read in one go leave in one coalesced send, as on plaintext (ResponseQueue); a
    long-polling Fetch does not hold the responses queued before it."""
    import struct

    from minikafka.broker import server
    from minikafka.broker.request import ObserverBase, Response
    from minikafka.protocol.framing import encode_frame

    sends: list[int] = []
    real = server.TlsTransport.send_buffers

    async def counted(self: server.TlsTransport, buffers: list) -> None:
        sends.append(len(buffers))
        await real(self, buffers)

    monkeypatch.setattr(server.TlsTransport, "send_buffers", counted)
    async with serve_broker(config(ssl_props(pki))) as broker:
        sent: list[tuple[int, int]] = []

        class Sent(ObserverBase):
            def on_response_sent(self, response: Response) -> None:
                sent.append((response.request.context.correlation_id, response.sent_ns))

        broker.apis.observers.append(Sent())
        broker.create_topic("parked", 1, 1)
        async with await tls_connect(broker.listener_ports["SSL"], pki.client_context()) as conn:
            calls = [(K.METADATA, 12, {"topics": []})] * 4 + [(K.API_VERSIONS, 3, None)]
            await conn.stream.send_all(b"".join(encode_frame(conn.encode_request(k, v, b, corr))
                                                for corr, (k, v, b) in enumerate(calls, start=100)))
            with trio.fail_after(10):
                got = [struct.unpack_from(">i", await conn.receive_frame())[0] for _ in calls]  # type: ignore[arg-type]
            assert got == list(range(100, 105))
            assert sends == [5 * 2]  # one send: each response's size prefix and its one buffer
            await wait_until(lambda: len(sent) == 5, what="the responses told as sent")
            assert [c for c, _ in sent] == got and len({ns for _, ns in sent}) == 1  # told as one send

            fetch = {"replica_id": -1, "max_wait_ms": 30_000, "min_bytes": 1, "max_bytes": 1 << 20, "topics": [
                {"topic": "parked", "partitions": [{"partition": 0, "fetch_offset": 0,
                                                    "partition_max_bytes": 1 << 20}]}]}
            await conn.stream.send_all(encode_frame(conn.encode_request(K.API_VERSIONS, 3, None, 200))
                                       + encode_frame(conn.encode_request(K.FETCH, 12, fetch, 201)))
            with trio.fail_after(10):  # well before the long poll's 30 s
                frame = await conn.receive_frame()
                assert frame is not None and struct.unpack_from(">i", frame)[0] == 200
            assert broker.delayed_fetch.watched() == 1  # answered while the fetch still waits
            async with await KafkaConnection.connect("127.0.0.1", broker.listener_ports["PLAINTEXT"]) as producer:
                await produce(producer, "parked", batch([b"wake"]))
            with trio.fail_after(10):
                frame = await conn.receive_frame()
                assert frame is not None
                corr, body = conn.decode_response(K.FETCH, 12, frame)
                assert corr == 201 and body.responses[0].partitions[0].high_watermark == 1
