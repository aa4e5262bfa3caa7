"""Console logins on a broker with SASL (SCRAM and PLAIN) and an authorizer: the console asks for a Kafka
user and password, checks them as the broker's SASL servers do, and shows and does only what that
principal's ACLs allow (403 otherwise); without a session every API call is 401."""

from __future__ import annotations

import http.cookiejar
import json
import re
import select
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console_helpers import console_url
from minikafka.broker.console.auth import COOKIE
from minikafka.broker.security.acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType,
                                           PatternType, ResourcePattern, ResourceType)
from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER
from minikafka.testing import BrokerThread

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="carol-plain";'


@pytest.fixture(scope="module")
def secured() -> Iterator[BrokerThread]:
    props = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "minikafka.scram.users": "alice:SCRAM-SHA-256:alice-secret,admin:SCRAM-SHA-512:admin-secret",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin;User:ANONYMOUS",
    }
    with BrokerThread(properties=props, http_port=0) as broker:
        broker.create_topic("visible")
        broker.create_topic("hidden")
        acls = [AclBinding(ResourcePattern(ResourceType.TOPIC, "visible", PatternType.LITERAL),
                           AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW))
                for op in (AclOperation.DESCRIBE, AclOperation.READ)]
        assert broker.broker is not None and broker.broker.authorizer is not None
        authorizer = broker.broker.authorizer
        broker.call(lambda: authorizer.create_acls(acls))
        yield broker


class Session:
    """A console client with its own cookie jar."""

    def __init__(self, broker: BrokerThread) -> None:
        self.broker = broker
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.headers: dict[str, str] = {}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(console_url(self.broker, "/console/api/" + path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with self.opener.open(req, timeout=30) as resp:
                self.headers = dict(resp.headers)
                return resp.status, json.load(resp)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    def login(self, user: str, password: str) -> tuple[int, Any]:
        return self.call("POST", "login", {"username": user, "password": password})


def test_api_needs_a_login_checked_as_the_broker_checks_passwords(secured: BrokerThread) -> None:
    s = Session(secured)
    assert s.call("GET", "whoami") == (200, {"auth_required": True, "principal": None})
    assert s.call("GET", "topics")[0] == 401
    assert s.call("GET", "messages/visible")[0] == 401
    assert s.login("alice", "wrong")[0] == 401
    assert s.login("alice", "carol-plain")[0] == 401
    assert s.login("nobody", "alice-secret")[0] == 401
    assert s.login("carol", "alice-secret")[0] == 401
    assert s.call("POST", "login", {"username": "alice"})[0] == 400
    assert s.call("GET", "topics")[0] == 401

    assert s.login("alice", "alice-secret") == (200, {"auth_required": True, "principal": "User:alice"})  # SCRAM
    cookie = s.headers["set-cookie"]
    assert cookie.startswith(COOKIE + "=") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert s.call("GET", "whoami")[1]["principal"] == "User:alice"
    plain = Session(secured)
    assert plain.login("carol", "carol-plain")[1]["principal"] == "User:carol"  # PLAIN, from the JAAS config
    assert plain.call("GET", "topics") == (200, {"topics": [], "can_create": False})

    assert s.call("POST", "logout")[0] == 200
    assert s.call("GET", "topics")[0] == 401


def test_a_user_sees_and_does_only_what_its_acls_allow(secured: BrokerThread) -> None:
    alice = Session(secured)
    alice.login("alice", "alice-secret")
    status, listed = alice.call("GET", "topics")
    assert status == 200 and [t["name"] for t in listed["topics"]] == ["visible"]
    assert listed["can_create"] is False and listed["topics"][0]["can_delete"] is False
    assert alice.call("GET", "topics/visible")[0] == 200
    assert alice.call("GET", "topics/hidden")[0] == 403
    assert alice.call("POST", "topics", {"name": "mine"})[0] == 403
    assert alice.call("DELETE", "topics/visible")[0] == 403
    assert alice.call("POST", "topics/visible/configs", {"set": {"retention.ms": "1000"}})[0] == 403
    assert alice.call("GET", "messages/visible")[0] == 200  # READ
    assert alice.call("GET", "messages/hidden")[0] == 403
    assert alice.call("POST", "messages/visible", {"value": "x"})[0] == 403  # no WRITE
    status, overview = alice.call("GET", "cluster")
    assert status == 200 and [p["topic"] for p in overview["partitions"]] == ["visible"]
    assert overview["actions"] == []
    assert alice.call("POST", "cluster/brokers/0/stop")[0] == 403  # no ALTER on the cluster
    # Describing configs goes through DescribeConfigs as alice: no DESCRIBE_CONFIGS, the broker says so.
    assert "authorization" in alice.call("GET", "topics/visible")[1]["configs_error"].lower()

    admin = Session(secured)
    admin.login("admin", "admin-secret")  # a super user
    status, listed = admin.call("GET", "topics")
    assert [t["name"] for t in listed["topics"]] == ["hidden", "visible"] and listed["can_create"]
    assert admin.call("POST", "topics", {"name": "admins"})[0] == 200
    assert admin.call("POST", "messages/admins", {"value": "by admin"})[0] == 200
    assert admin.call("DELETE", "topics/admins")[0] == 200
    assert admin.call("POST", "cluster/brokers/0/stop")[0] == 409  # allowed, but a lone broker


def test_the_browser_asks_for_a_login(secured: BrokerThread, page: Any) -> None:
    page.goto(console_url(secured, "/#/topics"))
    login = page.locator("#mk-login")
    login.locator("input[name=username]").fill("alice")
    login.locator("input[name=password]").fill("not-her-password")
    login.locator("button[type=submit]").click()
    page.wait_for_selector("#mk-toast.mk-error:has-text('Invalid username or password')")
    page.wait_for_selector("#mk-login")
    assert page.locator("#page-topics").count() == 0
    login = page.locator("#mk-login")
    login.locator("input[name=username]").fill("alice")
    login.locator("input[name=password]").fill("alice-secret")
    login.locator("button[type=submit]").click()
    page.wait_for_selector("#topics a.mk-topic")
    assert page.locator("#mk-user").inner_text().startswith("User:alice")
    assert page.locator("#topics a.mk-topic").all_inner_texts() == ["visible"]
    assert page.locator("#topic-create").count() == 0  # no CREATE: no form
    status = page.evaluate("""() => fetch('/console/api/topics', {method: 'POST', credentials: 'same-origin',
        headers: {'Content-Type': 'application/json'}, body: JSON.stringify({name: 'sneaky'})}).then(r => r.status)""")
    assert status == 403
    assert page.evaluate("document.cookie") == ""  # HttpOnly: the page's scripts cannot read the session
    page.click("#mk-user button")
    page.wait_for_selector("#mk-login")


def serve(*argv: str) -> subprocess.Popen[str]:
    """``minikafka serve --port 0 --http-port 0 ARGV`` in its own process, as a user runs it."""
    return subprocess.Popen([sys.executable, "-m", "minikafka", "serve", "--port", "0", "--http-port", "0",
                             "--log-level", "WARNING", *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=Path(__file__).parents[2], text=True)


def http_address(proc: subprocess.Popen[str]) -> str:
    """Where the HTTP port listens, from the ready line."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, "minikafka serve printed no ready line within 60 s"
    line = proc.stdout.readline()
    m = re.search(r", HTTP on (\S+);", line)
    assert m is not None, line
    return m.group(1)


def test_the_http_port_binds_the_broker_host_unless_told() -> None:
    # The told HTTP port is one this test holds on 127.0.0.1 (bound, not listening): nothing else can listen
    # there, so a refused connection to it there shows the console did not bind 127.0.0.1.
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    free = str(held.getsockname()[1])
    procs = [serve("--host", "127.0.0.2"),
             serve("--host", "127.0.0.1", "--http-host", "127.0.0.3", "--http-port", free)]
    try:
        default, told = (http_address(p) for p in procs)
        assert default.startswith("127.0.0.2:")  # the broker's host, not every interface
        host, port = told.rsplit(":", 1)
        assert (host, port) == ("127.0.0.3", free)
        with urllib.request.urlopen(f"http://{told}/console/api/whoami", timeout=30) as resp:
            assert json.load(resp)["auth_required"] is False
        with pytest.raises(urllib.error.URLError):  # only where it was told
            urllib.request.urlopen(f"http://127.0.0.1:{port}/console/api/whoami", timeout=30)
    finally:
        held.close()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


def _request(token: str | None = None) -> Any:
    from starlette.requests import Request

    headers = [(b"cookie", f"{COOKIE}={token}".encode())] if token else []
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "client": ("127.0.0.1", 5)})


def test_without_sasl_listeners_an_authorizer_logs_in_with_scram_credentials_and_sessions_expire() -> None:
    from minikafka.broker.config import BrokerConfig
    from minikafka.broker.console.auth import MAX_SESSIONS, SESSION_IDLE_S, ConsoleAuth
    from minikafka.broker.security.authorizer import StandardAuthorizer
    from minikafka.broker.security.scram import ScramCredentialStore, ScramMechanism
    from minikafka.common import ManualClock

    store = ScramCredentialStore()
    store.set_password("dave", ScramMechanism.SCRAM_SHA_512, "dave-secret")
    clock = ManualClock(monotonic_ns=1000 * 10**9)
    auth = ConsoleAuth(BrokerConfig(authorizer_class_name=STANDARD_AUTHORIZER), StandardAuthorizer(), store,
                       clock=clock)
    assert auth.required and auth.logins == []  # no SASL listener: SCRAM against the credential store
    assert auth.check_password("dave", "dave-secret") == "User:dave"
    assert auth.check_password("dave", "dave-secreT") is None
    assert auth.check_password("eve", "dave-secret") is None
    token = auth._new_session("User:dave")
    assert auth.principal(_request(token)) == "User:dave" and not auth.logged_in(_request("forged"))
    clock.sleep((SESSION_IDLE_S - 1) * 1000)  # used: the idle time starts again
    assert auth.logged_in(_request(token))
    clock.sleep((SESSION_IDLE_S + 1) * 1000)
    assert not auth.logged_in(_request(token)) and auth.session_count == 0
    tokens = [auth._new_session(f"User:u{i}") for i in range(MAX_SESSIONS + 10)]
    assert auth.session_count == MAX_SESSIONS  # bounded: the least recently used go first
    assert not auth.logged_in(_request(tokens[0])) and auth.logged_in(_request(tokens[-1]))
    # Neither SASL listeners nor an authorizer: no login.
    assert not ConsoleAuth(BrokerConfig()).required
