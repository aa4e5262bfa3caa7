"""The HTTP port's guards: logins and ACLs on ``/v1`` as on the console, cross-site and DNS-rebinding refusals,
bounded bodies, the page's framing and script policy, login rate limiting; the broker carries on."""

from __future__ import annotations

import base64
import json
from http.client import HTTPConnection
from http.cookiejar import CookieJar
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from console_helpers import call, console_url, http
from minikafka.broker.console import static
from minikafka.broker.console.auth import MAX_FAILURES
from minikafka.broker.console.context import MAX_BODY
from minikafka.broker.security.acl import (CLUSTER_NAME, AccessControlEntry, AclBinding, AclOperation,
                                           AclPermissionType, PatternType, ResourcePattern, ResourceType)
from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.clients

RULE = {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 1}


def allow(principal: str, resource_type: ResourceType, name: str, *ops: AclOperation) -> list[AclBinding]:
    return [AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                       AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW)) for op in ops]


@pytest.fixture(scope="module")
def secured() -> Iterator[BrokerThread]:
    """SCRAM logins and ACLs: ops may DESCRIBE and ALTER the cluster, viewer only DESCRIBE it (and READ
    group g1), nobody nothing; Kafka clients on the PLAINTEXT listener are ANONYMOUS, a super user."""
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "minikafka.scram.users": ",".join(f"{u}:SCRAM-SHA-256:{u}-secret" for u in ("ops", "viewer", "nobody")),
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
    }
    with BrokerThread(properties=props, http_port=0) as broker:
        broker.create_topic("t", partitions=1)
        acls = (allow("User:ops", ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE, AclOperation.ALTER)
                + allow("User:viewer", ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE)
                + allow("User:viewer", ResourceType.GROUP, "g1", AclOperation.READ, AclOperation.DESCRIBE))
        assert broker.broker is not None and broker.broker.authorizer is not None
        authorizer = broker.broker.authorizer
        broker.call(lambda: authorizer.create_acls(acls))
        yield broker


def basic(user: str, password: str | None = None) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password or user + '-secret'}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def produce_works(broker: BrokerThread, topic: str) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce(topic, b"still serving")
    assert producer.flush(30) == 0


def test_v1_needs_a_login_and_the_cluster_acls_when_security_is_configured(secured: BrokerThread) -> None:
    status, body = http(secured, "GET", "/v1/faults")
    assert (status, body["error"]) == (401, "NOT_AUTHENTICATED")
    req = urllib.request.Request(console_url(secured, "/v1/brokers"))
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"].startswith("Basic")
    refused.value.close()
    assert http(secured, "POST", "/v1/faults", RULE)[0] == 401
    assert http(secured, "POST", "/v1/brokers/0/stop")[0] == 401
    assert http(secured, "GET", "/v1/faults", headers=basic("ops", "wrong"))[0] == 401
    assert http(secured, "GET", "/metrics")[0] == 200  # open for Prometheus

    # Basic auth with a user that has the ACLs: DESCRIBE to read, ALTER to change.
    assert http(secured, "GET", "/v1/faults", headers=basic("ops")) == (200, {"rules": []})
    status, added = http(secured, "POST", "/v1/faults", RULE, headers=basic("ops"))
    assert status == 201 and added["rule"]["api"] == "Produce"
    assert http(secured, "GET", "/v1/brokers", headers=basic("ops"))[0] == 200
    assert http(secured, "GET", "/v1/client-metrics", headers=basic("ops"))[0] == 200
    status, body = http(secured, "POST", "/v1/brokers/0/stop", headers=basic("ops"))
    assert (status, body["error"]) == (409, "NOT_A_CLUSTER")  # allowed, but a lone broker
    # DESCRIBE only: reads, but no changes.
    assert http(secured, "GET", "/v1/faults", headers=basic("viewer"))[0] == 200
    for method, path, rule in (("POST", "/v1/faults", RULE), ("DELETE", "/v1/faults", None),
                               ("POST", "/v1/brokers/0/stop", None),
                               ("POST", "/v1/partitions/t/0/leader", {"broker": 0})):
        status, body = http(secured, method, path, rule, headers=basic("viewer"))
        assert (status, body["error"]) == (403, "AUTHORIZATION_FAILED"), (method, path)
    # No ACL at all: nothing.
    for method, path in (("GET", "/v1/faults"), ("GET", "/v1/brokers"), ("GET", "/v1/partitions/t"),
                         ("GET", "/v1/client-metrics"), ("DELETE", "/v1/faults")):
        assert http(secured, method, path, headers=basic("nobody"))[0] == 403, (method, path)
    assert len(http(secured, "GET", "/v1/faults", headers=basic("ops"))[1]["rules"]) == 1  # nothing else added

    # The console's session cookie works on /v1 too, and Basic auth on the console API.
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    assert call(secured, "login", "POST", {"username": "ops", "password": "ops-secret"}, opener=opener)[0] == 200
    assert http(secured, "DELETE", "/v1/faults", opener=opener) == (200, {"removed": 1})
    assert call(secured, "faults", headers=basic("ops"))[0] == 200
    assert call(secured, "faults", headers=basic("nobody"))[0] == 403
    produce_works(secured, "t")


def test_reset_offsets_checks_the_topic_acl_before_telling_whether_it_exists(secured: BrokerThread) -> None:
    consumer = Consumer({"bootstrap.servers": secured.bootstrap, "group.id": "g1", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("t", 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    # viewer may READ the group but no topic: an unknown topic and a known one both answer 403.
    for topic in ("no-such-topic", "t"):
        status, body = call(secured, "groups/g1/reset-offsets", "POST", {"to": "earliest", "topic": topic},
                            headers=basic("viewer"))
        assert (status, body["error"]) == (403, "AUTHORIZATION_FAILED"), topic


def test_failed_logins_are_rate_limited_per_address(secured: BrokerThread) -> None:
    """Wrong passwords from one address (127.0.0.2 here, so other tests are not held up) end in 429, even
    for the right password, while other addresses still log in."""
    assert secured.http_address is not None
    host, port = secured.http_address.rsplit(":", 1)

    def from_other_address(headers: dict[str, str]) -> int:
        conn = HTTPConnection(host, int(port), timeout=30, source_address=("127.0.0.2", 0))
        try:
            conn.request("GET", "/v1/faults", headers=headers)
            return conn.getresponse().status
        finally:
            conn.close()

    assert [from_other_address(basic("ops", "wrong")) for _ in range(MAX_FAILURES)] == [401] * MAX_FAILURES
    assert from_other_address(basic("ops")) == 429
    assert http(secured, "GET", "/v1/faults", headers=basic("ops"))[0] == 200  # from 127.0.0.1


def test_cross_site_and_non_json_changes_are_refused(console_broker: BrokerThread) -> None:
    """Without any login configured, a page elsewhere still cannot drive the port: a foreign Origin gets 403,
    a change with a body that is not application/json (a "simple" cross-site request) 415, and a Host
    naming another site (DNS rebinding) 403."""
    assert console_broker.http_address is not None
    port = console_broker.http_address.rsplit(":", 1)[1]
    evil = {"Origin": "http://evil.example"}
    raw = json.dumps(RULE).encode()
    for path in ("/v1/faults", "/console/api/faults"):
        status, body = http(console_broker, "POST", path, raw, headers={"Content-Type": "text/plain"})
        assert (status, body["error"]) == (415, "UNSUPPORTED_MEDIA_TYPE"), path
        status, body = http(console_broker, "POST", path, RULE, headers=evil)
        assert (status, body["error"]) == (403, "CROSS_ORIGIN"), path
    for path in ("/v1/brokers/0/stop", "/v1/faults", "/console/api/topics/t"):
        method = "DELETE" if "stop" not in path else "POST"
        assert http(console_broker, method, path, headers=evil)[0] == 403, path
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    status, body = http(console_broker, "POST", "/v1/faults", RULE, headers=rebound)
    assert (status, body["error"]) == (403, "UNKNOWN_HOST")
    assert http(console_broker, "GET", "/console/api/topics", headers=rebound)[0] == 403
    assert http(console_broker, "GET", "/v1/faults")[1] == {"rules": []}  # nothing got through

    # The port's own pages, by IP or by localhost, may.
    own = {"Origin": f"http://{console_broker.http_address}"}
    assert http(console_broker, "POST", "/v1/faults", RULE, headers=own)[0] == 201
    local = {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
    assert http(console_broker, "DELETE", "/v1/faults", headers=local) == (200, {"removed": 1})


def connection(broker: BrokerThread) -> HTTPConnection:
    assert broker.http_address is not None
    host, port = broker.http_address.rsplit(":", 1)
    return HTTPConnection(host, int(port), timeout=30)


def test_oversized_bodies_get_413_and_the_broker_carries_on(console_broker: BrokerThread) -> None:
    console_broker.create_topic("big", partitions=1)
    # A body declared too large is refused before any of it is read.
    for path in ("/console/api/login", "/console/api/messages/big", "/v1/faults"):
        conn = connection(console_broker)
        try:
            conn.putrequest("POST", path)
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(2 << 30))
            conn.endheaders()
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())["error"]) == (413, "REQUEST_TOO_LARGE"), path
        finally:
            conn.close()
    # Chunked, so no Content-Length announces it: refused once it has sent more than the limit.
    conn = connection(console_broker)
    try:
        chunks = [b'{"value": "'] + [b"y" * (1 << 20)] * (MAX_BODY >> 20) + [b"y" * 1024, b'"}']
        conn.request("POST", "/console/api/messages/big", body=iter(chunks), encode_chunked=True,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert (resp.status, json.loads(resp.read())["error"]) == (413, "REQUEST_TOO_LARGE")
    finally:
        conn.close()
    assert call(console_broker, "messages/big", "POST", {"value": "small"})[0] == 200
    status, body = call(console_broker, "topics/big/configs", "POST",
                        {"set": {"retention.ms": "1000"}, "validate_only": "false"})
    assert (status, body["error"]) == (400, "INVALID_REQUEST")  # a string is not a boolean
    produce_works(console_broker, "big")


def test_page_headers_and_a_bounded_static_cache(console_broker: BrokerThread) -> None:
    with urllib.request.urlopen(console_url(console_broker, "/"), timeout=30) as resp:
        assert resp.headers["X-Frame-Options"] == "DENY"
        csp = resp.headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert b"<script>" not in resp.read()  # no inline script: the policy allows none
    for i in range(200):
        assert http(console_broker, "GET", f"/console/static/no-such-{i}.js")[0] == 404
    assert static._read.cache_info().currsize <= len(static._FILES)


def test_the_page_runs_under_its_content_security_policy(console_broker: BrokerThread, page: Any) -> None:
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.goto(console_url(console_broker, "/#/live"))
    page.wait_for_selector("#mk-nav a")
    page.wait_for_function("() => [...document.querySelectorAll('.mk-chart canvas')].some(c => c.width > 0)")
    assert violations == []


def test_faults_cli_logs_in_with_a_kafka_user(secured: BrokerThread, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from minikafka.cli import main

    address = secured.http_address
    assert address is not None
    assert main(["faults", "list", "--http", address]) != 0
    assert "NOT_AUTHENTICATED" in capsys.readouterr().err
    monkeypatch.setenv("MINIKAFKA_HTTP_PASSWORD", "ops-secret")
    assert main(["faults", "add", "--http", address, "--http-user", "ops", "--api", "Produce",
                 "--error", "NOT_LEADER_OR_FOLLOWER", "--count", "1"]) == 0
    assert main(["faults", "list", "--http", address, "--http-user", "ops", "--json"]) == 0
    rules = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert [r["api"] for r in rules] == ["Produce"]
    assert main(["faults", "clear", "--http", address, "--http-user", "viewer",
                 "--http-password", "viewer-secret"]) != 0  # viewer may only DESCRIBE the cluster
    assert "AUTHORIZATION_FAILED" in capsys.readouterr().err
    assert main(["faults", "clear", "--http", address, "--http-user", "ops"]) == 0
