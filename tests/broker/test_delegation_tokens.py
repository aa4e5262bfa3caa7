"""Delegation tokens (KIP-48, KIP-373; issue 23): Kafka's DelegationTokenControlManager rules, the four APIs
over the wire (minikafka's own client: no Python client here has them), SCRAM logins with a token
(``tokenauth=true``) whose principal is the token's owner, the ACLs Kafka checks, expiry, persistence across
a restart and a two-broker cluster.  Real clients: tests/clients/test_delegation_tokens_clients.py."""

from __future__ import annotations

import base64
import hashlib
import hmac
from pathlib import Path

import pytest
import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.handlers.delegation_tokens import allow_token_requests
from minikafka.broker.request import RequestContext
from minikafka.broker.security.delegation_token import DelegationTokenManager, TokenInformation, filter_token
from minikafka.broker.security.scram import ScramMechanism
from minikafka.client.connection import KafkaConnection
from minikafka.client.security import SaslAuthenticationError, sasl_authenticate
from minikafka.common import ManualClock
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import decode_records, iter_batches
from helpers import batch, fetch, produce, wait_until
from token_helpers import DAY, SECRET, acl_config, config, create_token, describe, expire, ids, login, renew, sasl_port


async def add_acls(conn: KafkaConnection, *acls: tuple[int, str, str, int]) -> None:
    """ALLOW ACLs (resource type, resource name, principal, operation), literal patterns, any host."""
    resp = await conn.request(K.CREATE_ACLS, 3, {"creations": [
        {"resource_type": rt, "resource_name": name, "resource_pattern_type": 3, "principal": principal,
         "host": "*", "operation": op, "permission_type": 3} for rt, name, principal, op in acls]})
    assert all(r.error_code == 0 for r in resp.results), resp


TOPIC, GROUP, DELEGATION_TOKEN, USER = 2, 3, 6, 7
READ, WRITE, CREATE, DESCRIBE, CREATE_TOKENS, DESCRIBE_TOKENS = 3, 4, 5, 8, 13, 14
HOUR = 3600 * 1000


# -- the manager's rules (Kafka's DelegationTokenControlManager), on a clock the test moves ------------------------
def manager(clock: ManualClock, **kw) -> DelegationTokenManager:
    return DelegationTokenManager(SECRET, max_lifetime_ms=7 * DAY, expiry_time_ms=DAY, clock=clock, **kw)


def test_create_caps_lifetimes_and_makes_kafkas_hmac():
    clock = ManualClock(time_ms=1_700_000_000_000)
    m = manager(clock)
    r = m.create_token("User:alice", "User:alice", [("User", "bob")], -1)
    assert r.error == E.NONE and r.owner == r.token_requester == "User:alice"
    now = clock.time_ms()
    assert (r.issue_timestamp, r.expiry_timestamp, r.max_timestamp) == (now, now + DAY, now + 7 * DAY)
    assert r.hmac == hmac.new(SECRET.encode(), r.token_id.encode(), hashlib.sha512).digest()
    assert len(r.token_id) == 22 and not r.token_id.startswith("-")  # Kafka's Uuid.toString()
    short = m.create_token("User:alice", "User:alice", [], 3600_000)  # below the expiry time: both capped
    assert (short.expiry_timestamp, short.max_timestamp) == (now + 3600_000, now + 3600_000)
    long = m.create_token("User:alice", "User:alice", [], 30 * DAY)
    assert long.max_timestamp == now + 7 * DAY
    assert m.create_token("User:alice", "User:alice", [("Group", "g")], -1).error == E.INVALID_PRINCIPAL_TYPE
    # The SCRAM credential of a token is derived from its Base64 HMAC (ScramFormatter.generateCredential).
    cred = m.credential(r.token_id, ScramMechanism.SCRAM_SHA_512)
    assert cred is not None and cred.iterations == 4096 and m.owner(r.token_id) == "alice"
    password = base64.b64encode(r.hmac)
    salted = hashlib.pbkdf2_hmac("sha512", password, cred.salt, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha512").digest()
    assert hashlib.sha512(client_key).digest() == cred.stored_key


def test_renew_and_expire_follow_kafkas_rules():
    clock = ManualClock(time_ms=1_700_000_000_000)
    m = manager(clock)
    r = m.create_token("User:alice", "User:carol", [("User", "bob")], -1)
    assert m.renew_token("User:alice", b"nope", -1) == (E.DELEGATION_TOKEN_NOT_FOUND, 0)
    assert m.renew_token("User:carol", r.hmac, -1) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)  # the requester
    clock.sleep(1000)
    assert m.renew_token("User:bob", r.hmac, 60_000) == (E.NONE, clock.time_ms() + 60_000)
    assert m.renew_token("User:alice", r.hmac, -1) == (E.NONE, clock.time_ms() + DAY)
    brief = m.create_token("User:alice", "User:alice", [], 7200_000)
    clock.set_time_ms(brief.max_timestamp - 10)
    assert m.renew_token("User:alice", brief.hmac, -1) == (E.NONE, brief.max_timestamp)  # never past the max
    clock.sleep(11)
    assert m.renew_token("User:alice", brief.hmac, -1) == (E.DELEGATION_TOKEN_EXPIRED, 0)
    assert m.expire_token("User:bob", r.hmac, 5) == (E.NONE, clock.time_ms() + 5)
    clock.sleep(6)
    assert m.renew_token("User:alice", r.hmac, -1) == (E.DELEGATION_TOKEN_EXPIRED, 0)
    assert m.expire_token("User:alice", r.hmac, 1000) == (E.DELEGATION_TOKEN_EXPIRED, 0)
    assert sorted(m.expire_tokens()) == sorted([r.token_id, brief.token_id]) and m.all_tokens() == []
    again = m.create_token("User:alice", "User:alice", [], -1)
    assert m.expire_token("User:carol", again.hmac, -1) == (E.DELEGATION_TOKEN_OWNER_MISMATCH, 0)
    assert m.expire_token("User:alice", again.hmac, -1) == (E.NONE, clock.time_ms())  # negative: removed at once
    assert m.token(again.token_id) is None and m.credential(again.token_id, ScramMechanism.SCRAM_SHA_256) is None


def test_disabled_without_a_secret():
    m = DelegationTokenManager("")
    assert not m.enabled
    assert m.create_token("User:a", "User:a", [], -1).error == E.DELEGATION_TOKEN_AUTH_DISABLED
    assert m.renew_token("User:a", b"x", -1) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)
    assert m.expire_token("User:a", b"x", -1) == (E.DELEGATION_TOKEN_AUTH_DISABLED, 0)


def test_filter_token_is_kafkas():
    token = TokenInformation("t1", "User:alice", "User:carol", ("User:bob",), 0, 10, 5)
    no, yes = (lambda _: False), (lambda _: True)
    for who in ("User:alice", "User:bob", "User:carol"):
        assert filter_token(who, None, token, no, no)
    assert not filter_token("User:dave", None, token, no, no)
    assert filter_token("User:dave", None, token, yes, no) and filter_token("User:dave", None, token, no, yes)
    assert filter_token("User:alice", ["User:bob"], token, no, no)  # owners match the owner or a renewer
    assert not filter_token("User:alice", ["User:zed"], token, yes, yes)


def test_which_connections_may_ask_for_tokens():
    """Kafka's allowTokenRequests: not PLAINTEXT, not one-way SSL, not a token-authenticated connection."""
    def ctx(protocol: str, principal: str = "User:ANONYMOUS", token: bool = False) -> RequestContext:
        return RequestContext(K.CREATE_DELEGATION_TOKEN, 3, 1, None, "c", principal=principal,
                              security_protocol=protocol, token_authenticated=token)
    assert not allow_token_requests(ctx("PLAINTEXT", "User:alice"))
    assert not allow_token_requests(ctx("SSL"))
    assert allow_token_requests(ctx("SSL", "User:CN=alice"))  # a client certificate
    assert allow_token_requests(ctx("SASL_SSL", "User:alice")) and allow_token_requests(ctx("SASL_PLAINTEXT",
                                                                                              "User:alice"))
    assert not allow_token_requests(ctx("SASL_PLAINTEXT", "User:alice", token=True))


def test_tokens_persist_without_hmacs(tmp_path: Path):
    clock = ManualClock(time_ms=1_700_000_000_000)
    path = tmp_path / "__scram_credentials" / "delegation_tokens.json"
    r = manager(clock, path=path).create_token("User:alice", "User:alice", [("User", "bob")], -1)
    assert r.token_id in path.read_text() and base64.b64encode(r.hmac).decode() not in path.read_text()
    again = manager(clock, path=path)
    assert again.hmac(r.token_id) == r.hmac and again.owner(r.token_id) == "alice"
    assert again.token(r.token_id) == manager(clock, path=path).token(r.token_id)
    other_secret = DelegationTokenManager("another", path=path, clock=clock)
    assert other_secret.hmac(r.token_id) != r.hmac  # the HMAC is the secret's: a new secret invalidates it


def test_tokens_are_records_of_the_metadata_log_and_an_earlier_file_is_carried_over(tmp_path: Path):
    from minikafka.broker.metadata import ClusterMetadata
    from minikafka.broker.metadata_log import ClusterMetadataLog

    clock = ManualClock(time_ms=1_700_000_000_000)
    path = tmp_path / "__scram_credentials" / "delegation_tokens.json"
    old = manager(clock, path=path).create_token("User:alice", "User:alice", [("User", "bob")], -1)
    metadata = ClusterMetadata([0], tmp_path)
    m = manager(clock, path=path, records=metadata)
    assert m.hmac(old.token_id) == old.hmac and not path.exists()
    new = m.create_token("User:carol", "User:carol", [], -1)
    clock.sleep(HOUR)
    assert m.renew_token("User:bob", old.hmac, -1)[0] == E.NONE
    assert m.expire_token("User:carol", new.hmac, -1)[0] == E.NONE
    renewed = m.token(old.token_id)
    metadata.close()
    mlog = ClusterMetadataLog(tmp_path)
    records = [r for _, r in mlog.records()]
    mlog.close()
    assert [r.name for r in records] == ["DelegationTokenRecord"] * 3 + ["RemoveDelegationTokenRecord"]
    assert all(base64.b64encode(old.hmac) not in r.data.token_id.encode() for r in records)

    metadata = ClusterMetadata([0], tmp_path)
    again = manager(clock, path=path, records=metadata)
    assert [t.token_id for t in again.all_tokens()] == [old.token_id] and again.token(old.token_id) == renewed
    assert again.hmac(old.token_id) == old.hmac
    metadata.close()


def test_token_credentials_are_derived_on_the_first_login_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    clock = ManualClock(time_ms=1_700_000_000_000)
    path = tmp_path / "__scram_credentials" / "delegation_tokens.json"
    derived: list[str] = []
    real = hashlib.pbkdf2_hmac
    monkeypatch.setattr(hashlib, "pbkdf2_hmac", lambda name, *a, **kw: (derived.append(name), real(name, *a, **kw))[1])
    created = [manager(clock, path=path).create_token("User:alice", "User:alice", [], -1) for _ in range(20)]
    loaded = manager(clock, path=path)
    assert len(loaded.all_tokens()) == 20 and derived == []  # neither creating nor loading costs a PBKDF2
    r = created[3]
    cred = loaded.credential(r.token_id, ScramMechanism.SCRAM_SHA_256)
    assert derived == ["sha256"] and cred is not None and cred.iterations == 4096
    salted = real("sha256", base64.b64encode(r.hmac), cred.salt, 4096)
    assert hashlib.sha256(hmac.new(salted, b"Client Key", "sha256").digest()).digest() == cred.stored_key
    assert loaded.credential(r.token_id, ScramMechanism.SCRAM_SHA_256) is cred and derived == ["sha256"]  # kept
    assert loaded.expire_token("User:alice", r.hmac, -1) == (E.NONE, clock.time_ms())
    assert loaded.credential(r.token_id, ScramMechanism.SCRAM_SHA_256) is None
    assert DelegationTokenManager("", path=path).credential(created[0].token_id, ScramMechanism.SCRAM_SHA_512) is None


# -- over the wire ----------------------------------------------------------------------------------------------------
async def test_token_lifecycle_over_the_wire():
    async with serve_broker(config()) as b:
        async with await login(sasl_port(b), "alice") as alice, await login(sasl_port(b), "bob") as bob, \
                await login(sasl_port(b), "carol") as carol:
            created = await create_token(alice, renewers=("User:bob",), max_lifetime_ms=2 * DAY)
            assert created.error_code == 0
            assert (created.principal_type, created.principal_name) == ("User", "alice")
            assert (created.token_requester_principal_type, created.token_requester_principal_name) == ("User",
                                                                                                        "alice")
            assert created.max_timestamp_ms - created.issue_timestamp_ms == 2 * DAY
            assert created.expiry_timestamp_ms - created.issue_timestamp_ms == DAY
            mac = bytes(created.hmac)
            assert mac == hmac.new(SECRET.encode(), created.token_id.encode(), hashlib.sha512).digest()
            v1 = await create_token(bob, version=1)
            assert v1.error_code == 0 and v1.principal_name == "bob"
            # Describe: owners, requesters and renewers see a token; others do not (no authorizer: Kafka's
            # filterToken still applies, authorizing every DESCRIBE).
            everything = await describe(alice)
            assert ids(everything) >= {created.token_id}
            token = next(t for t in everything.tokens if t.token_id == created.token_id)
            assert bytes(token.hmac) == mac and [(r.principal_type, r.principal_name) for r in token.renewers] == [
                ("User", "bob")]
            assert (token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) == (
                created.issue_timestamp_ms, created.expiry_timestamp_ms, created.max_timestamp_ms)
            assert ids(await describe(alice, ["User:bob"])) == {created.token_id, v1.token_id}
            assert ids(await describe(alice, ["User:zed"])) == set()
            assert (await describe(alice, [])).tokens == []
            old = await describe(alice, ["User:alice"], version=1)
            assert ids(old) == {created.token_id}
            # Renew: owner and renewers only.
            assert (await renew(carol, mac)).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH
            renewed = await renew(bob, mac, 60_000)
            assert renewed.error_code == 0 and renewed.expiry_timestamp_ms <= created.max_timestamp_ms
            assert (await renew(alice, b"not-a-token-hmac")).error_code == E.DELEGATION_TOKEN_NOT_FOUND
            # Expire: a negative period removes it now.
            assert (await expire(carol, mac)).error_code == E.DELEGATION_TOKEN_OWNER_MISMATCH
            gone = await expire(alice, mac, -1)
            assert gone.error_code == 0 and gone.expiry_timestamp_ms > 0
            assert created.token_id not in ids(await describe(alice))
            assert (await renew(alice, mac)).error_code == E.DELEGATION_TOKEN_NOT_FOUND


async def test_token_requests_are_refused_on_plaintext_and_on_token_connections():
    async with serve_broker(config()) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as plain:
            refused = await create_token(plain)
            assert refused.error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (refused.principal_name, refused.issue_timestamp_ms, refused.token_id) == ("ANONYMOUS", -1, "")
            assert (await renew(plain, b"x")).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (await renew(plain, b"x")).expiry_timestamp_ms == -1
            assert (await expire(plain, b"x")).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (await describe(plain)).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        async with await login(sasl_port(b), "alice") as alice:
            created = await create_token(alice)
        password = base64.b64encode(bytes(created.hmac)).decode()
        async with await login(sasl_port(b), created.token_id, password, token=True) as by_token:
            # A connection authenticated with a token may not create, renew, expire or describe tokens.
            assert (await create_token(by_token)).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (await renew(by_token, bytes(created.hmac))).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (await expire(by_token, bytes(created.hmac))).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
            assert (await describe(by_token)).error_code == E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED


async def test_disabled_without_a_secret_key_over_the_wire():
    async with serve_broker(config(**{"delegation.token.secret.key": ""})) as b:
        async with await login(sasl_port(b), "alice") as alice:
            refused = await create_token(alice)
            assert refused.error_code == E.DELEGATION_TOKEN_AUTH_DISABLED and refused.principal_name == "alice"
            assert (await describe(alice)).error_code == E.DELEGATION_TOKEN_AUTH_DISABLED
            assert (await renew(alice, b"x")).error_code == E.DELEGATION_TOKEN_AUTH_DISABLED


async def test_token_login_acts_as_the_owner_through_acls():
    async with serve_broker(acl_config()) as b:
        port = sasl_port(b)
        async with await login(port, "admin") as admin:
            assert (await admin.request(K.CREATE_TOPICS, 7, {"topics": [
                {"name": "orders", "num_partitions": 1, "replication_factor": 1}], "timeout_ms": 5000})
                    ).topics[0].error_code == 0
            await add_acls(admin, (TOPIC, "orders", "User:alice", WRITE), (TOPIC, "orders", "User:alice", READ))
        async with await login(port, "alice") as alice:
            created = await create_token(alice)
        assert created.error_code == 0
        password = base64.b64encode(bytes(created.hmac)).decode()
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            conn = await KafkaConnection.connect("127.0.0.1", port)
            session = await sasl_authenticate(conn.request, mechanism, created.token_id, password, token_auth=True)
            # The token's expiry bounds the session (Kafka's credential lifetime for token logins).
            assert 0 < session.session_lifetime_ms <= DAY
            async with conn:
                written = await produce(conn, "orders", batch([b"by-token"]))
                assert written.error_code == 0
                got = await fetch(conn, "orders")
                assert got.error_code == 0
                values = [r.value for _, recs in iter_batches_records(got.records) for r in recs]
                assert b"by-token" in values
        # Another user's token has another user's rights: bob may not write to the topic.
        async with await login(port, "bob") as bob:
            bobs = await create_token(bob)
        async with await login(port, bobs.token_id, base64.b64encode(bytes(bobs.hmac)).decode(), token=True) as c:
            assert (await produce(c, "orders", batch([b"x"]))).error_code == E.TOPIC_AUTHORIZATION_FAILED
        # Wrong HMAC, unknown token, or a token id without the extension: refused as Kafka refuses them.
        for user, pw, token in ((created.token_id, "wrong", True), ("no-such-token", password, True),
                                (created.token_id, password, False)):
            with pytest.raises(SaslAuthenticationError):
                await (await login(port, user, pw, token=token)).aclose()
        assert b.successful_authentications >= 5


def iter_batches_records(records):
    for header, view in iter_batches(records, allow_truncated_tail=True):
        yield header, decode_records(view)


async def test_creating_and_describing_others_tokens_needs_kafkas_acls():
    async with serve_broker(acl_config()) as b:
        port = sasl_port(b)
        async with await login(port, "admin") as admin, await login(port, "alice") as alice, \
                await login(port, "carol") as carol:
            # v3: a token for another owner needs CREATE_TOKENS on that USER.
            refused = await create_token(alice, owner="User:bob")
            assert refused.error_code == E.DELEGATION_TOKEN_AUTHORIZATION_FAILED
            assert (refused.principal_name, refused.token_requester_principal_name) == ("bob", "alice")
            await add_acls(admin, (USER, "User:bob", "User:alice", CREATE_TOKENS))
            for_bob = await create_token(alice, owner="User:bob")
            assert for_bob.error_code == 0
            assert (for_bob.principal_name, for_bob.token_requester_principal_name) == ("bob", "alice")
            assert (await create_token(alice, renewers=("Group:x",))).error_code == E.INVALID_PRINCIPAL_TYPE
            bobs_own = await (login_and(port, "bob", create_token))
            # alice requested for_bob: she sees it; bob's own token is not hers to see.
            assert ids(await describe(alice)) == {for_bob.token_id}
            assert ids(await describe(carol)) == set()
            await add_acls(admin, (USER, "User:bob", "User:carol", DESCRIBE_TOKENS))
            assert ids(await describe(carol)) == {for_bob.token_id, bobs_own.token_id}
            # Owners select tokens they own, requested or renew: alice requested for_bob.
            assert ids(await describe(carol, ["User:alice"])) == {for_bob.token_id}
            async with await login(port, "bob") as bob:
                assert ids(await describe(bob)) == {for_bob.token_id, bobs_own.token_id}
            # DESCRIBE on one DELEGATION_TOKEN (by id) shows that token only.
            async with await login(port, "alice") as alice2:
                mine = await create_token(alice2)
            await add_acls(admin, (DELEGATION_TOKEN, mine.token_id, "User:carol", DESCRIBE))
            assert mine.token_id in ids(await describe(carol))
            assert ids(await describe(admin)) >= {for_bob.token_id, bobs_own.token_id, mine.token_id}  # super user


async def login_and(port: int, user: str, call):
    async with await login(port, user) as conn:
        return await call(conn)


async def test_expired_tokens_are_removed_and_no_longer_log_in():
    """Expiry on the broker's clock, moved by the test: the token logs in until its expiry time has passed,
    then the periodic sweep removes it."""
    clock = ManualClock()
    props = {"delegation.token.expiry.time.ms": str(HOUR), "delegation.token.expiry.check.interval.ms": "50"}
    async with serve_broker(config(**props), clock=clock) as b:
        async with await login(sasl_port(b), "alice") as alice:
            created = await create_token(alice)
            assert created.issue_timestamp_ms == clock.time_ms()
            assert created.expiry_timestamp_ms - created.issue_timestamp_ms == HOUR
            password = base64.b64encode(bytes(created.hmac)).decode()
            session = await login(sasl_port(b), created.token_id, password, token=True)
            await session.aclose()
            clock.sleep(HOUR)  # at the expiry time, not past it: the sweep keeps the token
            b.delegation_tokens.expire_tokens()
            assert b.delegation_tokens.token(created.token_id) is not None
            clock.sleep(1)
            await wait_until(lambda: b.delegation_tokens.token(created.token_id) is None, 30, "the token swept")
            assert ids(await describe(alice)) == set()
            assert (await renew(alice, bytes(created.hmac))).error_code == E.DELEGATION_TOKEN_NOT_FOUND
        with pytest.raises(SaslAuthenticationError):
            await (await login(sasl_port(b), created.token_id, password, token=True)).aclose()


async def test_a_token_login_session_ends_with_the_token():
    clock = ManualClock()
    async with serve_broker(config(**{"delegation.token.expiry.time.ms": str(HOUR)}), clock=clock) as b:
        async with await login(sasl_port(b), "alice") as alice:
            created = await create_token(alice)
        password = base64.b64encode(bytes(created.hmac)).decode()
        async with await login(sasl_port(b), created.token_id, password, token=True) as conn:
            await conn.negotiate()
            clock.sleep(HOUR)  # the session lasts until the token's expiry ...
            await conn.negotiate()
            # ... and past it the broker closes the session on the next request.
            clock.sleep(1)
            with pytest.raises((ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError)):
                await conn.negotiate()


async def test_tokens_survive_a_restart(tmp_path: Path):
    async with serve_broker(config(tmp_path)) as b:
        async with await login(sasl_port(b), "alice") as alice:
            created = await create_token(alice, renewers=("User:bob",))
    assert (tmp_path / "__cluster_metadata-0").is_dir()  # DelegationTokenRecords
    assert not (tmp_path / "__scram_credentials" / "delegation_tokens.json").exists()
    async with serve_broker(config(tmp_path)) as b:
        password = base64.b64encode(bytes(created.hmac)).decode()
        async with await login(sasl_port(b), created.token_id, password, token=True) as conn:
            await conn.negotiate()
        async with await login(sasl_port(b), "bob") as bob:
            assert ids(await describe(bob)) == {created.token_id}
            assert (await renew(bob, bytes(created.hmac))).error_code == 0


async def test_a_cluster_shares_its_tokens(tmp_path: Path):
    async with serve_cluster(2, config(tmp_path)) as cluster:
        b0, b1 = cluster.broker(0), cluster.broker(1)
        async with await login(sasl_port(b0), "alice") as alice:
            created = await create_token(alice)
        password = base64.b64encode(bytes(created.hmac)).decode()
        async with await login(sasl_port(b1), created.token_id, password, token=True) as conn:
            assert len(await conn.negotiate()) > 0
        async with await login(sasl_port(b1), "alice") as alice1:
            assert ids(await describe(alice1)) == {created.token_id}
            assert (await expire(alice1, bytes(created.hmac))).error_code == 0
        with pytest.raises(SaslAuthenticationError):
            await (await login(sasl_port(b0), created.token_id, password, token=True)).aclose()
    assert (tmp_path / "__cluster_metadata-0").is_dir()  # DelegationTokenRecords
    assert not (tmp_path / "__scram_credentials" / "delegation_tokens.json").exists()
