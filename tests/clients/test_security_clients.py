"""Real clients over TLS and SASL (issue 15): confluent-kafka over SSL and mutual TLS, kcat and confluent-kafka
over SASL_SSL with PLAIN and SCRAM-SHA-512, kafka-python and aiokafka over SASL_SSL with SCRAM-SHA-512, a wrong
password refused, a PLAINTEXT client on a SASL port, librdkafka re-authenticating (KIP-368), and a user quota
that throttles one user's producer and not another's.

One broker serves the module, with PLAINTEXT, SSL (client certificates required), SASL_SSL and SASL_PLAINTEXT
listeners; certificates are made at test time (``tls_certs``), SCRAM users are seeded at start-up
(``minikafka.scram.users``) or created with AlterUserScramCredentials.
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from minikafka.broker.request import ResponseObserver, RequestContext
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread
from clients_common import (KCAT, ck_read_all, kcat_version, report_client_versions,  # noqa: F401
                            wait_for)
from tls_certs import Pki, make_pki

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

K = ApiKey
ALICE_DN = "CN=alice,OU=Engineering,O=Example,C=US"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
QUOTA = 60_000  # alice's producer_byte_rate, bytes/s


class Seen:
    """What the broker saw: per request (listener, api key, principal, throttle), per SASL authentication
    (connection id, its count on that connection).  Filled on the broker's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, int, str, int]] = []
        self.authentications: list[tuple[str, int]] = []

    def on_response(self, ctx: RequestContext, frame: bytearray, segments: list | None) -> None:
        with self.lock:
            self.requests.append((ctx.listener, ctx.api_key, ctx.principal, ctx.throttle_time_ms))

    def select(self, fn: Callable[[tuple[str, int, str, int]], bool]) -> list[tuple[str, int, str, int]]:
        with self.lock:
            return [r for r in self.requests if fn(r)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secure(pki: Pki) -> Iterator[tuple[BrokerThread, Seen]]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.pem_file),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "minikafka.scram.users": "alice:SCRAM-SHA-512:alice-secret,bob:SCRAM-SHA-512:bob-secret",
        "client.quotas": f"user=alice:producer_byte_rate={QUOTA}",
        "quota.window.num": "3", "quota.window.size.seconds": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    seen = Seen()
    with BrokerThread(properties=props) as broker:
        b = broker.broker
        assert b is not None

        def install() -> None:
            b.observe(ResponseObserver(seen.on_response))
            previous = b.server.on_authenticated

            def authenticated(connection_id, authenticator) -> None:
                with seen.lock:
                    seen.authentications.append((connection_id, authenticator.authentications))
                if previous is not None:
                    previous(connection_id, authenticator)

            b.server.on_authenticated = authenticated

        broker.call(install)
        yield broker, seen


def topic(broker: BrokerThread, partitions: int = 1) -> str:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def sasl_conf(broker: BrokerThread, pki: Pki, mechanism: str, user: str = "alice",
              password: str | None = None) -> dict:
    return {"bootstrap.servers": broker.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca_file), "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password if password is not None else f"{user}-secret"}


def ck_produce(conf: dict, name: str, values: list[bytes]) -> None:
    p = Producer({**conf, "linger.ms": 5})
    errors: list = []
    for v in values:
        p.produce(name, v, on_delivery=lambda err, m: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors


def ck_consume(conf: dict, name: str, n: int) -> list[bytes]:
    return [m.value() for m in ck_read_all_with(conf, name, n)]


def ck_read_all_with(conf: dict, name: str, n: int) -> list:
    """clients_common.ck_read_all with the security settings of ``conf``."""
    import clients_common
    from confluent_kafka import Consumer as RealConsumer

    def consumer(c: dict) -> RealConsumer:
        return RealConsumer({**c, **{k: v for k, v in conf.items() if k != "bootstrap.servers"}})

    original = clients_common.Consumer
    clients_common.Consumer = consumer  # type: ignore[assignment]
    try:
        return ck_read_all(conf["bootstrap.servers"], name, 1, n)
    finally:
        clients_common.Consumer = original  # type: ignore[assignment]


# -- TLS ----------------------------------------------------------------------------------------------------------
def test_confluent_over_mutual_tls_with_the_certificate_subject_as_principal(secure, pki: Pki):
    broker, seen = secure
    name = topic(broker)
    alice = pki.clients["alice"]
    conf = {"bootstrap.servers": broker.bootstrap_for("SSL"), "security.protocol": "SSL",
            "ssl.ca.location": str(pki.ca_file), "ssl.certificate.location": str(alice.cert_file),
            "ssl.key.location": str(alice.key_file)}
    values = [b"tls-%d" % i for i in range(200)]
    ck_produce(conf, name, values)
    assert ck_consume(conf, name, len(values)) == values
    on_ssl = seen.select(lambda r: r[0] == "SSL" and r[1] in (K.PRODUCE, K.FETCH))
    assert {r[1] for r in on_ssl} == {K.PRODUCE, K.FETCH}
    assert {r[2] for r in on_ssl} == {f"User:{ALICE_DN}"}


def test_confluent_without_a_client_certificate_is_refused_where_one_is_required(secure, pki: Pki):
    broker, _ = secure
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("SSL"), "security.protocol": "SSL",
                         "ssl.ca.location": str(pki.ca_file)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)


# -- SASL_SSL -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_confluent_over_sasl_ssl(secure, pki: Pki, mechanism: str):
    broker, seen = secure
    name = topic(broker)
    conf = sasl_conf(broker, pki, mechanism, "bob")
    values = [b"%s-%d" % (mechanism.encode(), i) for i in range(300)]
    ck_produce(conf, name, values)
    assert ck_consume(conf, name, len(values)) == values
    produced = seen.select(lambda r: r[0] == "SASL_SSL" and r[1] == K.PRODUCE and r[2] == "User:bob")
    assert produced


# librdkafka before 2.6.1 (Debian's kcat has 2.0.2) repeats the client nonce in the SCRAM client-final
# message (librdkafka#4895); minikafka accepts it as Kafka 3.8.1-3.9 did, verifying the proof as sent.
@pytest.mark.skipif(KCAT is None, reason="kcat binary not found on PATH")
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kcat_over_sasl_ssl(secure, pki: Pki, mechanism: str):
    broker, seen = secure
    name = topic(broker)
    assert KCAT is not None
    security = ["-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanisms={mechanism}",
                "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret",
                "-X", f"ssl.ca.location={pki.ca_file}"]
    bootstrap = ["-b", broker.bootstrap_for("SASL_SSL")]
    lines = [f"kcat {mechanism} {i}" for i in range(50)]
    r = subprocess.run([KCAT, "-P", *bootstrap, *security, "-t", name], input="\n".join(lines).encode(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    r = subprocess.run([KCAT, "-C", *bootstrap, *security, "-t", name, "-o", "beginning", "-e", "-q"],
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert r.stdout.decode().splitlines() == lines
    assert seen.select(lambda r: r[0] == "SASL_SSL" and r[1] == K.FETCH and r[2] == "User:alice")


def test_kafka_python_over_sasl_ssl_with_scram_sha_512(secure, pki: Pki):
    from kafka import KafkaConsumer, KafkaProducer

    broker, seen = secure
    name = topic(broker)
    common = dict(bootstrap_servers=broker.bootstrap_for("SASL_SSL"), security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret",
                  ssl_cafile=str(pki.ca_file))
    producer = KafkaProducer(**common)
    values = [b"kp-%d" % i for i in range(100)]
    for v in values:
        producer.send(name, v)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(name, auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             group_id=f"kp-{uuid.uuid4().hex[:6]}", **common)
    got = []
    for m in consumer:
        got.append(m.value)
        if len(got) == len(values):
            break
    consumer.close()
    assert got == values
    assert seen.select(lambda r: r[0] == "SASL_SSL" and r[1] == K.PRODUCE and r[2] == "User:bob")


def test_aiokafka_over_sasl_ssl_with_scram_sha_512_for_a_user_made_with_alter_user_scram_credentials(secure,
                                                                                                      pki: Pki):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    broker, seen = secure
    name = topic(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")})
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"dave-secret")])
    for f in futures.values():
        f.result(timeout=10)

    async def run() -> list[bytes]:
        common = dict(bootstrap_servers=broker.bootstrap_for("SASL_SSL"), security_protocol="SASL_SSL",
                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="dave", sasl_plain_password="dave-secret",
                      ssl_context=create_ssl_context(cafile=str(pki.ca_file)))
        producer = AIOKafkaProducer(**common)
        await producer.start()
        try:
            for i in range(100):
                await producer.send(name, b"aio-%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(name, auto_offset_reset="earliest", group_id=f"aio-{uuid.uuid4().hex[:6]}",
                                    **common)
        await consumer.start()
        got: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for m in consumer:
                    got.append(m.value)
                    if len(got) == 100:
                        break
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"aio-%d" % i for i in range(100)]
    assert seen.select(lambda r: r[0] == "SASL_SSL" and r[1] == K.FETCH and r[2] == "User:dave")


# -- refusals -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused(secure, pki: Pki, mechanism: str):
    broker, _ = secure
    errors: list[KafkaError] = []
    p = Producer({**sasl_conf(broker, pki, mechanism, "alice", "not-her-password"), "error_cb": errors.append,
                  "message.timeout.ms": 3000})
    delivered: list = []
    p.produce("never", b"x", on_delivery=lambda err, m: delivered.append(err))
    wait_for(lambda: p.poll(0.1) is not None and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
             what="an authentication error")
    p.flush(5)
    assert delivered and delivered[0] is not None  # the message was not delivered
    assert any("Authentication failed" in e.str() for e in errors), [e.str() for e in errors]


def test_a_plaintext_client_on_a_sasl_port_gets_nothing_but_api_versions(secure, pki: Pki):
    broker, seen = secure
    before = broker.call(lambda: broker.broker.server.failed_authentications)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT")})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    # librdkafka sent ApiVersions (answered, as Kafka does), then Metadata: the connection was closed
    assert {r[1] for r in seen.select(lambda r: r[0] == "SASL_PLAINTEXT")} <= {K.API_VERSIONS}
    assert broker.call(lambda: broker.broker.server.failed_authentications) > before


def test_a_tls_client_on_a_plaintext_sasl_port_and_a_plaintext_client_on_a_tls_port_get_nothing(secure, pki: Pki):
    broker, _ = secure
    for bootstrap, protocol in ((broker.bootstrap_for("SASL_PLAINTEXT"), "SSL"),
                                (broker.bootstrap_for("SASL_SSL"), "PLAINTEXT")):
        admin = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": protocol,
                             "ssl.ca.location": str(pki.ca_file)})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=2)


# -- KIP-368 re-authentication ----------------------------------------------------------------------------------
def test_librdkafka_reauthenticates_on_the_same_connection(pki: Pki):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.pem_file),
             "sasl.enabled.mechanisms": "SCRAM-SHA-512",
             "minikafka.scram.users": "alice:SCRAM-SHA-512:alice-secret",
             "connections.max.reauth.ms": "3000"}
    with BrokerThread(properties=props) as broker:
        b = broker.broker
        assert b is not None
        auths: list[tuple[str, int]] = []
        previous = b.server.on_authenticated

        def authenticated(connection_id, authenticator) -> None:
            auths.append((connection_id, authenticator.authentications))
            assert previous is not None
            previous(connection_id, authenticator)

        broker.call(setattr, b.server, "on_authenticated", authenticated)
        name = topic(broker)
        p = Producer({"bootstrap.servers": broker.bootstrap_for("SASL_SSL"), "security.protocol": "SASL_SSL",
                      "ssl.ca.location": str(pki.ca_file), "sasl.mechanism": "SCRAM-SHA-512",
                      "sasl.username": "alice", "sasl.password": "alice-secret", "linger.ms": 0})
        sent = [0]

        def step() -> bool:
            p.produce(name, b"m%d" % sent[0])
            sent[0] += 1
            p.poll(0.1)
            return any(n >= 2 for _, n in list(auths))

        wait_for(step, timeout=30, interval=0.2, what="a re-authentication")
        assert p.flush(10) == 0
        reauthenticated = {c for c, n in auths if n >= 2}
        assert reauthenticated and all((c, 1) in auths for c in reauthenticated)  # the same connection, twice
        assert broker.call(lambda: b.successful_reauthentications) >= 1
        assert broker.call(lambda: b.server.expired_connections_killed) == 0  # re-authenticated in time


# -- quotas by principal ----------------------------------------------------------------------------------------
def test_a_user_quota_throttles_that_users_producer_and_not_anothers(secure, pki: Pki):
    broker, seen = secure
    name = topic(broker)
    client_throttles: dict[str, list[int]] = {"alice": [], "bob": []}
    payload = b"q" * 1000

    def produce_as(user: str, total: int) -> float:
        p = Producer({**sasl_conf(broker, pki, "PLAIN", user), "batch.size": 16384, "linger.ms": 5,
                      "client.id": "same-app",  # the same client id: only the user tells them apart
                      "throttle_cb": lambda ev: client_throttles[user].append(ev.throttle_time)})
        t0 = time.monotonic()
        for _ in range(total // len(payload)):
            while True:
                try:
                    p.produce(name, payload)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        assert p.flush(60) == 0
        return time.monotonic() - t0

    produce_as("bob", 400_000)
    produce_as("alice", 400_000)
    throttled = {user: [t for _, api, principal, t in seen.select(lambda r: r[1] == K.PRODUCE)
                        if principal == f"User:{user}" and t > 0] for user in ("alice", "bob")}
    assert throttled["alice"], "alice's producer was never throttled"
    assert not throttled["bob"], f"bob was throttled: {throttled['bob']}"
    wait_for(lambda: client_throttles["alice"], timeout=5, what="librdkafka to report the throttle")
    assert not client_throttles["bob"]
