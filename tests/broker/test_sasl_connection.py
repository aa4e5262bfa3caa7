"""SASL at the connection (issue 15): Kafka's SaslServerAuthenticator states driven with raw requests —
SaslHandshake v0/v1, SaslAuthenticate v0-2, what is allowed before authentication, failures answered
and closed, KIP-368 session lifetimes, re-authentication and expired sessions."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
import scramp
import trio

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.request import ResponseObserver
from minikafka.client.connection import KafkaConnection
from minikafka.common import ManualClock
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.framing import encode_frame
from helpers import api_versions_v0, batch, produce, wait_until
from tls_certs import Pki, make_pki, tls_connect

K = ApiKey
E = ErrorCode
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')
SASL_PROPS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "minikafka.scram.users": "alice:SCRAM-SHA-256:alice-secret,alice:SCRAM-SHA-512:alice-secret,"
                             "bob:SCRAM-SHA-512:bob-secret",
}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def config(**extra: str) -> BrokerConfig:
    cfg = BrokerConfig(port=0)
    for k, v in {**SASL_PROPS, **extra}.items():
        cfg.set(k, v)
    return cfg


async def connect(broker: Broker, listener: str = "SASL_PLAINTEXT") -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", broker.listener_ports[listener], client_id="sasl-test")


async def api_versions(conn: KafkaConnection):
    return await conn.request(K.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})


async def handshake(conn: KafkaConnection, mechanism: str, version: int = 1):
    return await conn.request(K.SASL_HANDSHAKE, version, {"mechanism": mechanism})


async def authenticate(conn: KafkaConnection, token: bytes, version: int = 2):
    return await conn.request(K.SASL_AUTHENTICATE, version, {"auth_bytes": token})


def plain(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()


async def login_plain(conn: KafkaConnection, user: str = "alice", password: str = "alice-secret", version: int = 2):
    hs = await handshake(conn, "PLAIN")
    assert hs.error_code == 0
    return await authenticate(conn, plain(user, password), version)


async def login_scram(conn: KafkaConnection, mechanism: str, user: str, password: str):
    assert (await handshake(conn, mechanism)).error_code == 0
    client = scramp.ScramClient([mechanism], user, password)
    first = await authenticate(conn, client.get_client_first().encode())
    assert first.error_code == 0, first.error_message
    client.set_server_first(bytes(first.auth_bytes).decode())
    final = await authenticate(conn, client.get_client_final().encode())
    if final.error_code == 0:
        client.set_server_final(bytes(final.auth_bytes).decode())  # the server proved it knows the credential
    return final


def unsecured_jwt(sub: str, exp_s: int) -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'exp': exp_s})}."


def principals_of(broker: Broker) -> list[tuple[str, int, str]]:
    seen: list[tuple[str, int, str]] = []
    broker.observe(ResponseObserver(lambda ctx, frame, segments: seen.append((ctx.listener, ctx.api_key,
                                                                               ctx.principal))))
    return seen


async def closed(conn: KafkaConnection) -> bool:
    """True once the broker has closed the connection (nothing more arrives)."""
    with trio.fail_after(5):
        return await conn.receive_frame() is None


# -- authentication ---------------------------------------------------------------------------------------------
async def test_plain_with_handshake_v1_then_requests_carry_the_principal():
    async with serve_broker(config()) as broker:
        seen = principals_of(broker)
        async with await connect(broker) as conn:
            av = await api_versions(conn)  # the one request allowed before the handshake
            assert {K.SASL_HANDSHAKE, K.SASL_AUTHENTICATE} <= {a.api_key for a in av.api_keys}
            hs = await handshake(conn, "PLAIN")
            assert (hs.error_code, hs.mechanisms) == (0, MECHANISMS)
            resp = await authenticate(conn, plain("alice", "alice-secret"))
            assert (resp.error_code, resp.error_message, bytes(resp.auth_bytes), resp.session_lifetime_ms) == (
                0, None, b"", 0)
            md = await conn.request(K.METADATA, 12, {"topics": None})
            assert md.brokers[0].port == broker.listener_ports["SASL_PLAINTEXT"]
        assert seen == [("SASL_PLAINTEXT", K.API_VERSIONS, "User:ANONYMOUS"),
                        ("SASL_PLAINTEXT", K.METADATA, "User:alice")]
        assert broker.successful_authentications == 1


async def test_handshake_v0_exchanges_raw_tokens():
    async with serve_broker(config()) as broker:
        seen = principals_of(broker)
        async with await connect(broker) as conn:
            assert (await handshake(conn, "PLAIN", version=0)).error_code == 0
            await conn.send_raw(plain("bob", "bob-secret"))  # a size-prefixed token, no request header
            assert await conn.receive_frame() == b""  # PLAIN's empty challenge, as a raw frame
            await conn.request(K.METADATA, 12, {"topics": []})
        assert seen[-1] == ("SASL_PLAINTEXT", K.METADATA, "User:bob")
    async with serve_broker(config()) as broker:  # a wrong raw token: closed, no answer
        async with await connect(broker) as conn:
            assert (await handshake(conn, "PLAIN", version=0)).error_code == 0
            await conn.send_raw(plain("bob", "wrong"))
            assert await closed(conn)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram(mechanism: str):
    async with serve_broker(config()) as broker:
        seen = principals_of(broker)
        async with await connect(broker) as conn:
            resp = await login_scram(conn, mechanism, "alice", "alice-secret")
            assert resp.error_code == 0
            await conn.request(K.METADATA, 12, {"topics": []})
        assert seen == [("SASL_PLAINTEXT", K.METADATA, "User:alice")]


async def test_oauthbearer_session_lifetime_is_the_smaller_of_token_and_config():
    clock = ManualClock()
    exp = clock.time_ms() // 1000 + 30
    async with serve_broker(config(**{"connections.max.reauth.ms": "60000"}), clock=clock) as broker:
        seen = principals_of(broker)
        async with await connect(broker) as conn:
            assert (await handshake(conn, "OAUTHBEARER")).error_code == 0
            token = unsecured_jwt("carol", exp)
            resp = await authenticate(conn, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
            assert (resp.error_code, resp.session_lifetime_ms) == (0, 30_000)
            await conn.request(K.METADATA, 12, {"topics": []})
        assert seen[-1][2] == "User:carol"


# -- failures ---------------------------------------------------------------------------------------------------
async def test_a_wrong_password_is_answered_sasl_authentication_failed_then_closed(caplog):
    caplog.set_level(logging.INFO, "minikafka.broker.server")
    async with serve_broker(config()) as broker:
        async with await connect(broker) as conn:
            resp = await login_plain(conn, "alice", "wrong")
            assert (resp.error_code, resp.error_message) == (E.SASL_AUTHENTICATION_FAILED,
                                                             "Authentication failed: Invalid username or password")
            assert await closed(conn)
        async with await connect(broker) as conn:
            resp = await login_scram(conn, "SCRAM-SHA-512", "alice", "wrong")
            assert (resp.error_code, resp.error_message) == (
                E.SASL_AUTHENTICATION_FAILED,
                "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-512")
            assert await closed(conn)
        assert broker.server.failed_authentications == 2
    failures = [r.getMessage() for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert len(failures) == 2 and "alice-secret" not in " ".join(failures)


async def test_an_unsupported_mechanism_gets_the_enabled_list_then_closed():
    async with serve_broker(config()) as broker:
        async with await connect(broker) as conn:
            hs = await handshake(conn, "GSSAPI")
            assert (hs.error_code, hs.mechanisms) == (E.UNSUPPORTED_SASL_MECHANISM, MECHANISMS)
            assert await closed(conn)


async def test_other_requests_before_authentication_close_the_connection_without_a_response(caplog):
    caplog.set_level(logging.INFO, "minikafka.broker.server")
    async with serve_broker(config()) as broker:
        async with await connect(broker) as conn:
            await conn.send(K.METADATA, 12, {"topics": None})
            assert await closed(conn)
        async with await connect(broker) as conn:  # after ApiVersions, as a PLAINTEXT client would go on
            await api_versions(conn)
            await conn.send(K.METADATA, 12, {"topics": None})
            assert await closed(conn)
        async with await connect(broker) as conn:  # ApiVersions only once
            await api_versions(conn)
            await conn.send(K.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert await closed(conn)
        async with await connect(broker) as conn:  # not a Kafka request at all
            await conn.send_raw(b"\x00")
            assert await closed(conn)
        assert broker.server.failed_authentications == 4
    messages = [r.getMessage() for r in caplog.records if "Failed authentication" in r.getMessage()]
    assert len(messages) == 4
    assert "Unexpected Kafka request of type METADATA during SASL handshake." in messages[0]
    assert "kafka client configured with the wrong security protocol" in messages[0]


async def test_a_request_other_than_sasl_authenticate_during_authentication_gets_illegal_sasl_state():
    async with serve_broker(config()) as broker:
        async with await connect(broker) as conn:
            assert (await handshake(conn, "PLAIN")).error_code == 0
            md = await conn.request(K.METADATA, 1, {"topics": [{"name": "x"}]})
            assert md.topics[0].error_code == E.ILLEGAL_SASL_STATE
            assert await closed(conn)


async def test_unauthenticated_frames_are_bounded_by_sasl_server_max_receive_size():
    async with serve_broker(config(**{"sasl.server.max.receive.size": "1000"})) as broker:
        stream = await trio.open_tcp_stream("127.0.0.1", broker.listener_ports["SASL_PLAINTEXT"])
        async with stream:
            assert await api_versions_v0(stream, trailing=500)  # within the bound
        stream = await trio.open_tcp_stream("127.0.0.1", broker.listener_ports["SASL_PLAINTEXT"])
        async with stream:
            with pytest.raises(AssertionError, match="closed the connection"):
                await api_versions_v0(stream, trailing=5000)
        async with await connect(broker) as conn:  # after authentication the usual limit applies
            await login_plain(conn)
            await conn.send_raw(encode_frame(bytes(5000))[4:])  # a 5000-byte frame: not a valid header
            assert await closed(conn)


async def test_sasl_requests_on_a_listener_without_sasl_get_illegal_sasl_state():
    async with serve_broker(config()) as broker:
        async with await connect(broker, "PLAINTEXT") as conn:
            assert (await handshake(conn, "PLAIN")).error_code == E.ILLEGAL_SASL_STATE
            resp = await authenticate(conn, plain("alice", "alice-secret"))
            assert (resp.error_code, resp.error_message) == (
                E.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
            await conn.request(K.METADATA, 12, {"topics": []})  # the connection stays


# -- KIP-368: session lifetime, re-authentication, expiry --------------------------------------------------------
async def test_session_lifetime_reauthentication_and_expiry():
    clock = ManualClock()
    cfg = config(**{"connections.max.reauth.ms": "10000",
                    "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": "20000"})
    async with serve_broker(cfg, clock=clock) as broker:
        seen = principals_of(broker)
        async with await connect(broker) as conn:
            assert (await login_plain(conn, version=1)).session_lifetime_ms == 10_000
            clock.sleep(5_000)
            # re-authenticate on the same connection
            resp = await login_plain(conn)
            assert (resp.error_code, resp.session_lifetime_ms) == (0, 10_000)
            assert (broker.successful_authentications, broker.successful_reauthentications) == (1, 1)
            # not again within a second: KafkaApis answers the handshake
            assert (await handshake(conn, "PLAIN")).error_code == E.ILLEGAL_SASL_STATE
            clock.sleep(9_000)  # 9 s after the re-authentication: still valid
            await conn.request(K.METADATA, 12, {"topics": []})
            clock.sleep(2_000)  # expired: the next request closes the connection
            await conn.send(K.METADATA, 12, {"topics": []})
            assert await closed(conn)
            assert broker.server.expired_connections_killed == 1
        assert [p for _, api, p in seen if api == K.METADATA] == ["User:alice"]
        async with await connect(broker) as conn:  # the mechanism's own connections.max.reauth.ms
            assert (await login_scram(conn, "SCRAM-SHA-512", "bob", "bob-secret")).session_lifetime_ms == 20_000
        async with await connect(broker) as conn:  # v0 has no session lifetime field, but the session expires
            assert (await login_plain(conn, version=0)).error_code == 0
            clock.sleep(10_001)
            await conn.send(K.METADATA, 12, {"topics": []})
            assert await closed(conn)


async def test_reauthentication_may_not_change_principal_or_mechanism():
    clock = ManualClock()
    async with serve_broker(config(**{"connections.max.reauth.ms": "10000"}), clock=clock) as broker:
        async with await connect(broker) as conn:
            await login_plain(conn)
            clock.sleep(2000)
            resp = await login_plain(conn, "bob", "bob-secret")
            assert (resp.error_code, resp.error_message) == (
                E.SASL_AUTHENTICATION_FAILED,
                "Cannot change principals during re-authentication from User.alice: User.bob")
            assert await closed(conn)
        async with await connect(broker) as conn:
            await login_plain(conn)
            clock.sleep(2000)
            assert (await handshake(conn, "SCRAM-SHA-512")).error_code == 0
            await conn.send(K.SASL_AUTHENTICATE, 2, {"auth_bytes": b"n,,n=alice,r=abc"})
            assert await closed(conn)  # REAUTH_BAD_MECHANISM: closed without an answer


async def test_without_a_session_lifetime_a_handshake_after_authentication_is_refused():
    async with serve_broker(config()) as broker:
        async with await connect(broker) as conn:
            resp = await login_plain(conn)
            assert resp.session_lifetime_ms == 0
            assert (await handshake(conn, "PLAIN")).error_code == E.ILLEGAL_SASL_STATE
            await conn.request(K.METADATA, 12, {"topics": []})


# -- SASL over TLS -----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


async def test_sasl_ssl_principal_is_the_sasl_user_even_with_a_client_certificate(pki: Pki):
    cfg = config(**{"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                    "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
                    "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.server.pem_file),
                    "ssl.truststore.location": str(Path(pki.ca_file)), "ssl.truststore.type": "PEM",
                    "listener.name.sasl_ssl.ssl.client.auth": "required"})
    async with serve_broker(cfg) as broker:
        seen = principals_of(broker)
        port = broker.listener_ports["SASL_SSL"]
        async with await tls_connect(port, pki.client_context(pki.clients["alice"])) as conn:
            assert (await login_plain(conn, "bob", "bob-secret")).error_code == 0
            await conn.request(K.METADATA, 12, {"topics": []})
        assert seen == [("SASL_SSL", K.METADATA, "User:bob")]


# -- SASL between brokers ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_brokers_replicate_over_a_sasl_inter_broker_listener(mechanism: str):
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    users = ' user_admin="admin-secret"' if mechanism == "PLAIN" else ""
    cfg = config(**{
        "inter.broker.listener.name": "SASL_PLAINTEXT", "sasl.mechanism.inter.broker.protocol": mechanism,
        f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config":
            f'{module} required username="admin" password="admin-secret"{users};',
        "minikafka.scram.users": "admin:SCRAM-SHA-512:admin-secret",
        "replica.fetch.wait.max.ms": "50", "replica.fetch.backoff.ms": "50"})
    async with serve_cluster(2, cfg) as cluster:
        seen: set[tuple[str, str]] = set()
        for i in (0, 1):
            cluster.broker(i).observe(ResponseObserver(
                lambda ctx, frame, segments: seen.add((ctx.listener, ctx.principal))
                if ctx.api_key == K.FETCH else None))
        cluster.broker(0).create_topic("t", 1, 2)
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(0).listener_ports["PLAINTEXT"]) as conn:
            assert (await produce(conn, "t", batch([b"x", b"y"]), acks=-1)).error_code == 0
        follower = cluster.broker(1).replica_manager.get("t", 0).log
        await wait_until(lambda: follower.high_watermark == 2, what="replication over SASL")
        assert seen == {("SASL_PLAINTEXT", "User:admin")}


def test_a_sasl_inter_broker_listener_needs_a_mechanism_and_credentials():
    from minikafka.broker.config import ConfigError

    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        Broker(config(**{"inter.broker.listener.name": "SASL_PLAINTEXT"}))
    with pytest.raises(ConfigError, match="username and password"):
        Broker(config(**{"inter.broker.listener.name": "SASL_PLAINTEXT",
                         "sasl.mechanism.inter.broker.protocol": "PLAIN"}))
