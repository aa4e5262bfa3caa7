"""Delegation tokens (KIP-48) with real clients (issue 23).

* ``@platformatic/kafka`` (npm) — the one client here with the token APIs (its CreateDelegationToken v3,
  RenewDelegationToken v2, ExpireDelegationToken v2 and DescribeDelegationToken v3 modules) — creates,
  describes, renews and expires tokens over SASL/SCRAM-SHA-512, with Kafka's errors for a principal that
  may not renew, an unknown HMAC and a PLAINTEXT connection.
* kafka-python logs in with a token: its SCRAM client has no ``tokenauth`` extension, so the test registers
  (through kafka-python's public ``register_sasl_mechanism``) its own SCRAM mechanism whose client-first
  message adds ``,tokenauth=true``, as Java's ``ScramLoginModule tokenauth="true"`` does.  The producer and
  the consumer group then act as the token's owner, through ACLs, and the broker saw the owner's principal
  on token-authenticated connections.  kafka-python's admin client sets the ACLs (logged in as a super user).
* librdkafka (confluent-kafka 2.16) has no ``tokenauth`` extension either (its client-first message is
  ``n,,n=%s,r=%s``): its login with a token id and HMAC is refused, as Kafka refuses it (a token id is not a
  SCRAM user).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread
from clients_common import wait_for
from node_clients import RequestLog, require_package, run_node

pytestmark = pytest.mark.clients

SECRET = "clients-test-secret"
USERS = ("alice:SCRAM-SHA-512:alice-secret,bob:SCRAM-SHA-512:bob-secret,carol:SCRAM-SHA-512:carol-secret,"
         "admin:SCRAM-SHA-512:admin-secret")
DELEGATION_TOKEN_OWNER_MISMATCH, DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 63, 62, 64


@pytest.fixture
def served() -> Iterator[tuple[BrokerThread, RequestLog]]:
    """A broker of the test's own (no token another test created), with the log of what it answered."""
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512", "minikafka.scram.users": USERS,
             "delegation.token.secret.key": SECRET, "authorizer.class.name": STANDARD_AUTHORIZER,
             "super.users": "User:admin",
             "group.initial.rebalance.delay.ms": "0"}
    with BrokerThread(properties=props) as broker:
        yield broker, RequestLog().install(broker)


def sasl_bootstrap(broker: BrokerThread) -> str:
    return broker.bootstrap_for("SASL_PLAINTEXT")


def platformatic(broker: BrokerThread, sessions: list[tuple[str | None, list[list[Any]]]]) -> list[list[dict]]:
    """Run each (user, calls) session on its own connection of @platformatic/kafka (SCRAM-SHA-512 as
    ``user`` on the SASL listener; None: PLAINTEXT), in one Node.js process; the answers per session."""
    specs = []
    for user, calls in sessions:
        host, _, port = broker.bootstrap_for("PLAINTEXT" if user is None else "SASL_PLAINTEXT").rpartition(":")
        spec: dict[str, Any] = {"host": host, "port": int(port), "calls": calls}
        if user is not None:
            spec["sasl"] = {"mechanism": "SCRAM-SHA-512", "username": user, "password": f"{user}-secret"}
        specs.append(spec)
    return run_node("delegation_tokens.mjs", "sessions", {"clientId": "plt-tokens", "sessions": specs})


def test_platformatic_creates_describes_renews_and_expires_tokens(served):
    require_package("@platformatic/kafka")
    broker, _ = served
    hmac = {"ref": [0, 0, "hmac"]}  # the HMAC of alice's token (session 0, call 0)
    alice, bob, carol, admin, bob2, alice2, anonymous = platformatic(broker, [
        ("alice", [["create", None, None, [["User", "bob"]], -1], ["describe", None], ["describe", [["User", "zed"]]]]),
        ("bob", [["renew", hmac, 60_000]]),
        # carol may not renew (Kafka's DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is not found.
        ("carol", [["renew", hmac, -1], ["expire", base64.b64encode(b"nope").decode(), -1]]),
        # KIP-373: a token for bob, requested by the super user (CREATE_TOKENS on User:bob is implied).
        ("admin", [["create", "User", "bob", [], 3_600_000]]),
        ("bob", [["describe", [["User", "bob"]]]]),
        ("alice", [["expire", hmac, -1], ["describe", None]]),
        (None, [["describe", None]]),
    ])
    created, described, zed = alice
    token = created["ok"]
    assert (token["principalType"], token["principalName"]) == ("User", "alice")
    assert (token["tokenRequesterPrincipalType"], token["tokenRequesterPrincipalName"]) == ("User", "alice")
    assert int(token["maxTimestampMs"]) - int(token["issueTimestampMs"]) == 7 * 24 * 3600 * 1000
    assert int(token["expiryTimestampMs"]) - int(token["issueTimestampMs"]) == 24 * 3600 * 1000
    mine = [t for t in described["ok"]["tokens"] if t["tokenId"] == token["tokenId"]]
    assert len(mine) == 1 and mine[0]["hmac"] == token["hmac"]
    assert [(r["principalType"], r["principalName"]) for r in mine[0]["renewers"]] == [("User", "bob")]
    assert zed["ok"]["tokens"] == []
    assert int(bob[0]["ok"]["expiryTimestampMs"]) < int(token["expiryTimestampMs"])
    mismatch, unknown = carol
    assert mismatch["errorCode"] == DELEGATION_TOKEN_OWNER_MISMATCH and unknown["errorCode"] == DELEGATION_TOKEN_NOT_FOUND
    for_bob = admin[0]["ok"]
    assert (for_bob["principalName"], for_bob["tokenRequesterPrincipalName"]) == ("bob", "admin")
    assert {t["tokenId"] for t in bob2[0]["ok"]["tokens"]} == {token["tokenId"], for_bob["tokenId"]}
    expired, after = alice2
    assert "ok" in expired and token["tokenId"] not in {t["tokenId"] for t in after["ok"]["tokens"]}
    assert anonymous[0]["errorCode"] == DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


def create_token_over_the_wire(broker: BrokerThread, user: str) -> tuple[str, str]:
    """A token of ``user`` (token id, Base64 HMAC), created with minikafka's own client."""
    import trio

    from minikafka.client.connection import KafkaConnection
    from minikafka.client.security import sasl_authenticate

    host, _, port = sasl_bootstrap(broker).rpartition(":")

    async def create() -> tuple[str, str]:
        async with await KafkaConnection.connect(host, int(port)) as conn:
            await sasl_authenticate(conn.request, "SCRAM-SHA-512", user, f"{user}-secret")
            resp = await conn.request(ApiKey.CREATE_DELEGATION_TOKEN, 3, {
                "owner_principal_type": None, "owner_principal_name": None, "renewers": [], "max_lifetime_ms": -1})
            assert resp.error_code == 0
            return resp.token_id, base64.b64encode(bytes(resp.hmac)).decode()
    return trio.run(create)


@contextmanager
def kafka_python_token_scram() -> Iterator[None]:
    """kafka-python's SCRAM mechanisms replaced, meanwhile, by ones sending ``tokenauth=true``."""
    from kafka.net import sasl
    from kafka.net.sasl.scram import SaslMechanismScram, ScramClient

    class TokenScramClient(ScramClient):
        def first_message(self) -> bytes:
            client_first_bare = b"n=" + self.user + b",r=" + self.nonce + b",tokenauth=true"
            self.auth_message += client_first_bare
            return b"n,," + client_first_bare

    class SaslMechanismScramToken(SaslMechanismScram):
        def __init__(self, **config: Any) -> None:
            super().__init__(**config)
            self._scram_client = TokenScramClient(config["sasl_plain_username"], config["sasl_plain_password"],
                                                  config["sasl_mechanism"])

    saved = dict(sasl.SASL_MECHANISMS)
    for name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        sasl.register_sasl_mechanism(name, SaslMechanismScramToken, overwrite=True)
    try:
        yield
    finally:
        sasl.SASL_MECHANISMS.clear()
        sasl.SASL_MECHANISMS.update(saved)


def test_kafka_python_logs_in_with_a_token_and_acts_as_its_owner(served):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import (ACL, ACLOperation, ACLPermissionType, KafkaAdminClient, NewTopic, ResourcePattern,
                             ResourceType)
    from kafka.errors import TopicAuthorizationFailedError

    broker, requests = served
    topic, group = f"tok-{uuid.uuid4().hex[:8]}", f"tok-group-{uuid.uuid4().hex[:8]}"
    # The super user (a SCRAM user, not a token) makes the topic and gives alice rights on it and the group.
    admin = KafkaAdminClient(bootstrap_servers=sasl_bootstrap(broker), security_protocol="SASL_PLAINTEXT",
                             sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="admin",
                             sasl_plain_password="admin-secret")
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        acls = [ACL("User:alice", "*", op, ACLPermissionType.ALLOW, ResourcePattern(ResourceType.TOPIC, topic))
                for op in (ACLOperation.WRITE, ACLOperation.READ, ACLOperation.DESCRIBE)]
        acls.append(ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                        ResourcePattern(ResourceType.GROUP, group)))
        result = admin.create_acls(acls)
        assert not result["failed"], result
    finally:
        admin.close()
    token_id, hmac_b64 = create_token_over_the_wire(broker, "alice")
    bob_id, bob_hmac = create_token_over_the_wire(broker, "bob")
    by_token = dict(bootstrap_servers=sasl_bootstrap(broker), security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=token_id, sasl_plain_password=hmac_b64)
    with kafka_python_token_scram():
        producer = KafkaProducer(**by_token)
        try:
            for i in range(5):
                producer.send(topic, key=b"k%d" % i, value=b"by-token-%d" % i).get(timeout=15)
        finally:
            producer.close()
        consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", **by_token)
        try:
            values: list[bytes] = []
            # Two token logins and the group join come first: a generous bound, left as soon as all 5 are read.
            wait_for(lambda: values.extend(r.value for rs in consumer.poll(200).values() for r in rs)
                     or len(values) >= 5, timeout=60, what="the token's consumer reading the 5 records")
            consumer.commit()
        finally:
            consumer.close()
        # A token of bob, who has no ACL on the topic, may not write to it.
        producer = KafkaProducer(**{**by_token, "sasl_plain_username": bob_id, "sasl_plain_password": bob_hmac},
                                 max_block_ms=10_000)
        try:
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(topic, value=b"denied").get(timeout=15)
        finally:
            producer.close(timeout=5)
    assert values == [b"by-token-%d" % i for i in range(5)]
    seen = {(r.principal, r.api_key) for r in requests.answered() if r.token_authenticated}
    assert {(p, k) for p, k in seen if k in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.OFFSET_COMMIT)} >= {
        ("User:alice", ApiKey.PRODUCE), ("User:alice", ApiKey.FETCH), ("User:alice", ApiKey.OFFSET_COMMIT)}
    assert {p for p, _ in seen} <= {"User:alice", "User:bob"}  # token logins act as the tokens' owners


def test_librdkafka_has_no_tokenauth_so_its_token_login_is_refused(served):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    broker, _ = served
    token_id, hmac_b64 = create_token_over_the_wire(broker, "alice")
    errors: list[KafkaError] = []
    admin = AdminClient({"bootstrap.servers": sasl_bootstrap(broker), "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": token_id, "sasl.password": hmac_b64,
                         "error_cb": errors.append})
    wait_for(lambda: admin.poll(0.1) >= 0 and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
             timeout=15, what="librdkafka's login refused")
    assert any("SASL authentication error" in e.str() for e in errors)
