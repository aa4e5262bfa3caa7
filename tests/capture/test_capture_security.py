"""Principals in capture and replay (issue 15): a SASL_SSL session captured with its principals and listener,
``capture show`` listing them, and the capture replayed to a fresh secured broker, each replayed connection
authenticating as the principal the capture recorded for it (SCRAM over SASL_SSL, or mutual TLS), KIP-368
re-authentication during a long replay, captured SASL requests skipped, refused credentials reported.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
import trio

from minikafka.capture import CaptureRecord, read_capture
from minikafka.capture.replay import (
    ReplayOptions,
    ReplaySecurity,
    SaslCredentials,
    connection_principal,
    group_connections,
    load_credentials,
    replay_records,
    run_replay,
)
from minikafka.cli import main as cli_main
from minikafka.client.connection import KafkaConnection
from minikafka.client.security import client_ssl_context, open_stream, sasl_authenticate
from minikafka.protocol.api import ApiKey as K
from minikafka.testing import BrokerThread
from security_capture import (CLIENT_ID, CONSUMER_ID, MECHANISM, N, TOPIC, USERS, credentials_file, sasl_ssl_capture,
                              secure_properties)
from tls_certs import Pki, make_pki

pytestmark = [pytest.mark.clients]

ALICE_DN = "CN=alice,OU=Engineering,O=Example,C=US"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Path:
    cap = tmp_path_factory.mktemp("secure-capture") / "cap"
    sasl_ssl_capture(cap, pki)
    return cap


def _target(pki: Pki, cap: Path | None = None, **extra: str) -> BrokerThread:
    """A fresh broker with SASL_SSL and mutual-TLS SSL listeners, the captured topic created."""
    props = secure_properties(pki, "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0",
                              **{"listener.name.ssl.ssl.client.auth": "required", **extra})
    return BrokerThread(properties=props, **({"capture_dir": cap} if cap is not None else {}))


def _assert_all_equal(report_dict: dict) -> None:
    assert report_dict["failed"] == 0 and report_dict["connections_failed"] == 0, report_dict["connection_errors"]
    for name, st in report_dict["per_api"].items():
        assert st["sent"] > 0 and st["differing"] == 0, (name, st["examples"])


# -- capture ------------------------------------------------------------------------------------------------------
def test_capture_records_each_requests_principal_and_listener(capture: Path) -> None:
    recs = list(read_capture([capture]))
    assert recs and all(r.listener == "SASL_SSL" for r in recs)
    produce = Counter(r.principal for r in recs if r.api_key == K.PRODUCE)
    assert set(produce) == {"User:alice", "User:bob"}
    assert all(r.client_id == CLIENT_ID for r in recs if r.api_key == K.PRODUCE)
    assert {r.principal for r in recs if r.api_key in (K.FETCH, K.JOIN_GROUP, K.OFFSET_COMMIT)} == {"User:bob"}
    # The SASL exchange itself is the authenticator's, never KafkaApis': not captured (its tokens are secrets).
    assert not any(r.api_key in (K.SASL_HANDSHAKE, K.SASL_AUTHENTICATE) for r in recs)
    # librdkafka asks ApiVersions before authenticating: that one ran as User:ANONYMOUS.
    conns = group_connections(recs)
    for conn in conns.values():
        assert connection_principal(conn) in ("User:alice", "User:bob")
        assert {r.principal for r in conn[1:]} == {connection_principal(conn)}
        assert conn[0].api_key != K.API_VERSIONS or conn[0].principal == "User:ANONYMOUS"
    assert any(conn[0].api_key == K.API_VERSIONS for conn in conns.values())


def test_capture_show_lists_connections_per_listener_and_principal(capture: Path, capsys) -> None:
    assert cli_main(["capture", "show", str(capture)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("listener "):].splitlines()
    assert table[0].split() == ["listener", "principal", "connections", "requests"]
    rows = {(f[0], f[1]): (int(f[2]), int(f[3])) for f in (line.split() for line in table[1:]) if len(f) == 4}
    assert set(rows) == {("SASL_SSL", "User:alice"), ("SASL_SSL", "User:bob")}
    recs = list(read_capture([capture]))
    conns = group_connections(recs)
    for principal in ("User:alice", "User:bob"):
        mine = [c for c in conns.values() if connection_principal(c) == principal]
        assert rows[("SASL_SSL", principal)] == (len(mine), sum(len(c) for c in mine))


# -- replay -------------------------------------------------------------------------------------------------------
def test_replay_to_a_fresh_sasl_ssl_broker_authenticates_as_the_captured_principals(
        capture: Path, pki: Pki, tmp_path: Path) -> None:
    creds = credentials_file(tmp_path / "credentials.json")
    out = tmp_path / "report.json"
    with _target(pki, tmp_path / "target-cap") as target:
        target.create_topic(TOPIC, 1)
        rc = cli_main(["replay", str(capture), "--to", target.bootstrap_for("SASL_SSL"), "--speed", "max",
                       "--security-protocol", "SASL_SSL", "--sasl-mechanism", MECHANISM,
                       "--sasl-credentials", str(creds), "--ssl-cafile", str(pki.ca_file), "--report", str(out),
                       "--no-progress"])
        assert rc == 0
    report = json.loads(out.read_text())
    _assert_all_equal(report)
    conns = group_connections(read_capture([capture]))
    by_principal = Counter(connection_principal(c) for c in conns.values())
    assert report["security"] == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": MECHANISM,
        "authenticated": {"User:alice as alice": by_principal["User:alice"],
                          "User:bob as bob": by_principal["User:bob"]},
        "authentication_failures": 0, "reauthentications": 0, "sasl_requests_skipped": 0}
    assert report["per_api"]["Produce"]["sent"] == sum(
        1 for c in conns.values() for r in c if r.api_key == K.PRODUCE)
    # The target saw each replayed request under the principal the capture recorded for it.
    replayed = list(read_capture([tmp_path / "target-cap"]))
    assert Counter(r.principal for r in replayed if r.api_key == K.PRODUCE) == Counter(
        r.principal for c in conns.values() for r in c if r.api_key == K.PRODUCE)
    assert {r.principal for r in replayed if r.api_key == K.FETCH} == {"User:bob"}
    assert {r.listener for r in replayed} == {"SASL_SSL"}


def test_replay_over_mutual_tls(capture: Path, pki: Pki, tmp_path: Path) -> None:
    alice = pki.clients["alice"]
    security = ReplaySecurity("SSL", ssl_cafile=str(pki.ca_file), ssl_certfile=str(alice.cert_file),
                              ssl_keyfile=str(alice.key_file))
    with _target(pki, tmp_path / "target-cap") as target:
        target.create_topic(TOPIC, 1)
        host, port = target.bootstrap_for("SSL").rsplit(":", 1)
        report = run_replay([capture], ReplayOptions(host, int(port), speed=None, security=security))
    _assert_all_equal(report.to_dict())
    assert report.security_protocol == "SSL" and not report.authenticated
    assert {r.principal for r in read_capture([tmp_path / "target-cap"])} == {f"User:{ALICE_DN}"}


def test_refused_or_missing_credentials_are_reported(capture: Path, pki: Pki) -> None:
    conns = group_connections(read_capture([capture]))
    alice_conns = [k for k, c in conns.items() if connection_principal(c) == "User:alice"]
    bob_conns = [k for k, c in conns.items() if connection_principal(c) == "User:bob"]
    with _target(pki) as target:
        target.create_topic(TOPIC, 1)
        host, port = target.bootstrap_for("SASL_SSL").rsplit(":", 1)

        def replay(credentials: dict[str, SaslCredentials]) -> dict:
            security = ReplaySecurity("SASL_SSL", MECHANISM, credentials=credentials, ssl_cafile=str(pki.ca_file))
            only_alice = {k: conns[k] for k in alice_conns}
            return trio.run(replay_records, only_alice, ReplayOptions(host, int(port), speed=None, timeout_s=10,
                                                                     security=security)).to_dict()

        wrong = replay({"alice": SaslCredentials("alice", "not-her-password")})
        missing = replay({"bob": SaslCredentials("bob", USERS["bob"])})
    assert wrong["connections_failed"] == len(alice_conns) and wrong["sent"] == 0
    assert wrong["security"]["authentication_failures"] == len(alice_conns)
    assert all("SASL authentication as alice failed: SASL authentication failed: SASL_AUTHENTICATION_FAILED"
               in e["error"] for e in wrong["connection_errors"])
    assert missing["connections_failed"] == len(alice_conns) and missing["security"]["authentication_failures"] == 0
    assert all("no SASL credentials for the captured principal User:alice" in e["error"]
               for e in missing["connection_errors"])
    assert bob_conns  # (bob's connections were left out of these replays)


def test_security_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a SASL mechanism"):
        ReplaySecurity("SASL_SSL", username="a", password="b")
    with pytest.raises(ValueError, match="needs credentials"):
        ReplaySecurity("SASL_PLAINTEXT", "PLAIN")
    with pytest.raises(ValueError, match="need security protocol SASL_PLAINTEXT or SASL_SSL"):
        ReplaySecurity("SSL", "PLAIN", username="a", password="b")
    with pytest.raises(ValueError, match="need security protocol SSL or SASL_SSL"):
        ReplaySecurity("SASL_PLAINTEXT", "PLAIN", username="a", password="b", ssl_cafile="ca.pem")
    sec = ReplaySecurity("SASL_SSL", "PLAIN", username="svc", password="pw",
                         credentials=load_credentials(credentials_file(tmp_path / "c.json")))
    assert sec.credentials_for("User:alice") == SaslCredentials("alice", USERS["alice"])
    assert sec.credentials_for("User:bob") == SaslCredentials("bob", USERS["bob"])
    assert sec.credentials_for("User:carol") == SaslCredentials("svc", "pw")
    assert "pw" not in repr(sec) and USERS["alice"] not in repr(sec)
    (tmp_path / "bad.json").write_text('{"User:alice": 42}')
    with pytest.raises(ValueError, match="must be a password"):
        load_credentials(tmp_path / "bad.json")
    with pytest.raises(SystemExit, match="needs a SASL mechanism"):
        cli_main(["replay", str(tmp_path), "--to", "127.0.0.1:1", "--security-protocol", "SASL_SSL",
                  "--sasl-username", "a", "--sasl-password", "b"])


# -- a long session: minikafka's own client, KIP-368 re-authentication, captured SASL requests skipped -------------
PACED_TOPIC = "paced"
PACED_REQUESTS = 12
PACED_GAP_S = 0.25


async def _paced_session(port: int, pki: Pki) -> None:
    """minikafka's KafkaConnection over SASL_SSL with SCRAM-SHA-256 as alice: a Metadata request every
    PACED_GAP_S seconds for about three seconds."""
    stream = await open_stream("127.0.0.1", port, client_ssl_context(str(pki.ca_file)))
    async with KafkaConnection(stream, client_id="paced") as conn:
        await conn.negotiate()
        session = await sasl_authenticate(conn.request, "SCRAM-SHA-256", "alice", USERS["alice"])
        assert session.session_lifetime_ms == 0
        for i in range(PACED_REQUESTS):
            if i:
                await trio.sleep(PACED_GAP_S)  # fixed wait: the capture's pace (its 1x replay outlives a session)
            resp = await conn.request(K.METADATA, 12, {"topics": [{"name": PACED_TOPIC}],
                                                       "allow_auto_topic_creation": False})
            assert resp.topics[0].error_code == 0


def _sasl_record(like: CaptureRecord, api_key: int, body: dict, dt_ns: int) -> CaptureRecord:
    """A captured SaslHandshake/SaslAuthenticate request as a pcap or a post-authentication request would hold."""
    frame = KafkaConnection(None, client_id=like.client_id).encode_request(  # type: ignore[arg-type]
        api_key, 1 if api_key == K.SASL_HANDSHAKE else 2, body, 9000 + api_key)
    return dataclasses.replace(like, api_key=api_key, api_version=1 if api_key == K.SASL_HANDSHAKE else 2,
                               correlation_id=9000 + api_key, request=frame, response=None,
                               receive_ns=like.receive_ns + dt_ns, send_ns=like.receive_ns + dt_ns)


def test_long_replay_re_authenticates_and_skips_captured_sasl_requests(pki: Pki, tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    with BrokerThread(properties=secure_properties(pki), capture_dir=cap) as bt:
        bt.create_topic(PACED_TOPIC, 1)
        trio.run(_paced_session, int(bt.bootstrap_for("SASL_SSL").rsplit(":", 1)[1]), pki)
    recs = list(read_capture([cap]))
    assert [r.api_key for r in recs] == [K.API_VERSIONS] + [K.METADATA] * PACED_REQUESTS
    assert [r.principal for r in recs] == ["User:ANONYMOUS"] + ["User:alice"] * PACED_REQUESTS
    conns = group_connections(recs)
    (key, conn), = conns.items()
    # As if the capture held the client's SASL requests (a pcap of SASL_PLAINTEXT traffic would).
    conn = sorted([*conn, _sasl_record(conn[0], K.SASL_HANDSHAKE, {"mechanism": "PLAIN"}, 1000),
                   _sasl_record(conn[0], K.SASL_AUTHENTICATE, {"auth_bytes": b"\0alice\0alice-secret"}, 2000)],
                  key=lambda r: r.receive_ns)
    security = ReplaySecurity("SASL_SSL", "SCRAM-SHA-512", ssl_cafile=str(pki.ca_file),
                              credentials={"User:alice": SaslCredentials("alice", USERS["alice"])})
    # Sessions of 1.2 s: the ~3 s replay at 1x must renew its session (KIP-368), or the target closes it.
    with _target(pki, **{"connections.max.reauth.ms": "1200"}) as target:
        target.create_topic(PACED_TOPIC, 1)
        host, port = target.bootstrap_for("SASL_SSL").rsplit(":", 1)
        report = trio.run(replay_records, {key: conn}, ReplayOptions(host, int(port), speed=1.0, timeout_s=10,
                                                                      security=security))
    d = report.to_dict()
    _assert_all_equal(d)
    assert report.sasl_requests_skipped == 2 and report.requests == len(recs)
    assert report.by_name("SaslHandshake").sent == 0 and report.by_name("Metadata").equal == PACED_REQUESTS
    assert report.authenticated == Counter({("User:alice", "alice"): 1})
    assert report.reauthentications >= 1 and report.authentication_failures == 0
    summary = report.summary()
    assert "SaslHandshake/SaslAuthenticate requests skipped: 2" in summary and "re-authentication" in summary
