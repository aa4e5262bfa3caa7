"""SCRAM credentials at run time (KIP-554): the store's rules (Kafka's ScramControlManager and ScramImage),
DescribeUserScramCredentials / AlterUserScramCredentials over the wire against a broker and a cluster,
persistence across a restart, seeding from configuration, and kafka-python's admin client."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import scramp

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig, ConfigError, StartupError
from minikafka.broker.error_responses import error_response
from minikafka.broker.security.sasl import create_mechanism
from minikafka.broker.security.scram import (Deletion, ScramCredentialStore, ScramMechanism, Upsertion,
                                             generate_credential)
from minikafka.client.connection import KafkaConnection
from minikafka.common import SYSTEM_CLOCK
from minikafka.protocol.api import APIS, ApiKey as K
from minikafka.protocol.errors import ErrorCode as E

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def upsertion(name: str, password: str, mechanism: int = SHA512, iterations: int = 4096,
              salt: bytes | None = None) -> dict:
    """What an admin client sends: the salted password (PBKDF2), never the password."""
    salt = os.urandom(24) if salt is None else salt
    hash_name = {1: "sha256", 2: "sha512"}.get(mechanism, "sha256")
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": salt, "salted_password": salted}


def up(name: str, password: str, mechanism: int = SHA512, iterations: int = 4096) -> Upsertion:
    u = upsertion(name, password, mechanism, iterations)
    return Upsertion(u["name"], u["mechanism"], u["iterations"], u["salt"], u["salted_password"])


def authenticates(store: ScramCredentialStore, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> bool:
    """A full SCRAM exchange (scramp's client) against the broker's mechanism using ``store``."""
    server = create_mechanism(mechanism, "SASL_PLAINTEXT", BrokerConfig(), store, SYSTEM_CLOCK)
    client = scramp.ScramClient([mechanism], user, password)
    try:
        client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
        client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    except Exception:
        return False
    return server.complete and server.authorization_id == user


def results(alter) -> dict[str, tuple[int, str | None]]:
    return {r.user: (r.error_code, r.error_message) for r in alter}


# -- the store's rules --------------------------------------------------------------------------------------------
def test_alter_applies_upsertions_and_deletions_and_the_password_then_works():
    store = ScramCredentialStore()
    out = store.alter_credentials([], [up("alice", "alice-secret"), up("bob", "bob-secret", SHA256, 8192)])
    assert results(out) == {"alice": (0, None), "bob": (0, None)}
    assert authenticates(store, "alice", "alice-secret")
    assert not authenticates(store, "alice", "bob-secret")
    assert authenticates(store, "bob", "bob-secret", "SCRAM-SHA-256")
    assert not authenticates(store, "bob", "bob-secret", "SCRAM-SHA-512")
    assert results(store.alter_credentials([Deletion("bob", SHA256)], [])) == {"bob": (0, None)}
    assert store.users() == ["alice"] and not authenticates(store, "bob", "bob-secret", "SCRAM-SHA-256")


def test_alter_errors_are_kafkas():
    store = ScramCredentialStore()
    store.alter_credentials([], [up("alice", "pw")])
    out = store.alter_credentials(
        [Deletion("alice", SHA256), Deletion("", SHA512), Deletion("carol", 7)],
        [up("low", "pw", iterations=4095), up("high", "pw", iterations=16385), up("", "pw"),
         up("weird", "pw", mechanism=0), up("ok", "pw", iterations=16384)])
    assert results(out) == {
        "alice": (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        "": (E.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "carol": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "low": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "high": (E.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "weird": (E.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "ok": (0, None),
    }
    assert sorted(store.users()) == ["alice", "ok"]


def test_a_user_named_twice_is_refused_as_a_whole():
    store = ScramCredentialStore()
    store.alter_credentials([], [up("alice", "pw"), up("alice", "pw", SHA256)])
    assert store.users() == []
    store.alter_credentials([], [up("dave", "pw")])
    out = store.alter_credentials([Deletion("dave", SHA512)], [up("dave", "new"), up("erin", "pw"), up("dave", "x")])
    assert results(out) == {"dave": (E.DUPLICATE_RESOURCE,
                                     "A user credential cannot be altered twice in the same request"),
                            "erin": (0, None)}
    assert authenticates(store, "dave", "pw")  # untouched


def test_describe_all_named_unknown_and_duplicate_users():
    store = ScramCredentialStore()
    store.alter_credentials([], [up("alice", "pw", SHA256), up("bob", "pw", iterations=8192)])
    store.alter_credentials([], [up("alice", "pw", SHA512, 5000)])
    everyone = {r.user: r for r in store.describe_credentials(None)}
    assert everyone == {r.user: r for r in store.describe_credentials([])}
    assert [(i.mechanism, i.iterations) for i in everyone["alice"].credential_infos] == [(SHA256, 4096),
                                                                                          (SHA512, 5000)]
    assert [(i.mechanism, i.iterations) for i in everyone["bob"].credential_infos] == [(SHA512, 8192)]
    named = {r.user: (r.error_code, r.error_message) for r in store.describe_credentials(["bob", "zed", "alice",
                                                                                          "alice"])}
    assert named == {
        "bob": (0, None),
        "zed": (E.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: zed"),
        "alice": (E.DUPLICATE_RESOURCE,
                  "Cannot describe SCRAM credentials for the same user twice in a single request: alice"),
    }


def test_seeding_from_configuration():
    store = ScramCredentialStore()
    assert store.seed(" alice:SCRAM-SHA-512:a:b:c , bob:scram-sha-256:pw,") == ["alice", "bob"]
    assert authenticates(store, "alice", "a:b:c") and authenticates(store, "bob", "pw", "SCRAM-SHA-256")
    before = store.credential("alice", SHA512)
    store.seed("alice:SCRAM-SHA-512:a:b:c")
    assert store.credential("alice", SHA512) is before  # the password already matches: kept
    store.seed("alice:SCRAM-SHA-512:changed")
    assert authenticates(store, "alice", "changed") and not authenticates(store, "alice", "a:b:c")
    for bad in ("alice", "alice:SCRAM-SHA-512", "alice:MD5:pw", ":SCRAM-SHA-512:pw", "alice:SCRAM-SHA-512:"):
        with pytest.raises(ConfigError, match="minikafka.scram.users"):
            ScramCredentialStore().seed(bad)


def test_persisted_salted_and_atomically(tmp_path: Path):
    store = ScramCredentialStore.for_data_dir(tmp_path)
    u = upsertion("alice", "alice-secret")
    store.alter_credentials([], [Upsertion(**u)])
    path = tmp_path / "__scram_credentials" / "credentials.json"
    text = path.read_text()
    assert "alice-secret" not in text
    assert hashlib.sha256(u["salted_password"]).hexdigest() not in text
    assert u["salted_password"].hex() not in text and json.loads(text)["credentials"]["alice"]["SCRAM-SHA-512"]
    assert not list(path.parent.glob("*.tmp"))
    again = ScramCredentialStore.for_data_dir(tmp_path)
    assert authenticates(again, "alice", "alice-secret")
    path.write_text("{not json")
    with pytest.raises(StartupError, match="unreadable"):
        ScramCredentialStore.for_data_dir(tmp_path)


def test_credentials_are_records_of_the_metadata_log_and_an_earlier_file_is_carried_over(tmp_path: Path):
    from minikafka.broker.metadata import ClusterMetadata
    from minikafka.broker.metadata_log import ClusterMetadataLog

    ScramCredentialStore.for_data_dir(tmp_path).alter_credentials([], [Upsertion(**upsertion("alice", "a-secret"))])
    path = tmp_path / "__scram_credentials" / "credentials.json"
    assert path.exists()  # an earlier version's file

    metadata = ClusterMetadata([0], tmp_path)
    store = ScramCredentialStore.for_data_dir(tmp_path, metadata)
    assert authenticates(store, "alice", "a-secret") and not path.exists()
    store.alter_credentials([], [Upsertion(**upsertion("bob", "b-secret"))])
    store.alter_credentials([Deletion("alice", ScramMechanism.SCRAM_SHA_512)], [])
    metadata.close()
    mlog = ClusterMetadataLog(tmp_path)
    records = [rec for _, rec in mlog.records()]
    mlog.close()
    assert [r.name for r in records] == ["UserScramCredentialRecord"] * 2 + ["RemoveUserScramCredentialRecord"]
    assert all(b"secret" not in bytes(r.data.stored_key) for r in records[:2])  # keys, never the password

    metadata = ClusterMetadata([0], tmp_path)
    again = ScramCredentialStore.for_data_dir(tmp_path, metadata)
    assert authenticates(again, "bob", "b-secret") and again.users() == ["bob"]
    metadata.close()


def test_store_upsert_and_delete_directly():
    store = ScramCredentialStore()
    store.upsert("x", SHA256, generate_credential(SHA256, "pw"))
    assert store.delete("x", SHA256) and not store.delete("x", SHA256) and store.users() == []


# -- over the wire --------------------------------------------------------------------------------------------------
async def describe(c: KafkaConnection, *users: str):
    body = {"users": [{"name": u} for u in users] if users else None}
    return await c.request(K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body)


async def alter(c: KafkaConnection, upsertions=(), deletions=()):
    resp = await c.request(K.ALTER_USER_SCRAM_CREDENTIALS, 0, {"upsertions": list(upsertions),
                                                               "deletions": list(deletions)})
    return {r.user: (r.error_code, r.error_message) for r in resp.results}


async def test_admin_apis_over_the_wire():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            versions = await c.negotiate()
            assert versions[K.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
            assert versions[K.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)
            empty = await describe(c)
            assert (empty.error_code, empty.results) == (0, [])
            assert await alter(c, [upsertion("alice", "alice-secret"), upsertion("alice", "x", SHA256),
                                   upsertion("bob", "bob-secret", SHA256, 8192),
                                   upsertion("low", "pw", iterations=100)]) == {
                "alice": (E.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
                "bob": (0, None),
                "low": (E.UNACCEPTABLE_CREDENTIAL, "Too few iterations")}
            assert await alter(c, [upsertion("alice", "alice-secret")]) == {"alice": (0, None)}
            resp = await describe(c)
            got = {r.user: [(i.mechanism, i.iterations) for i in r.credential_infos] for r in resp.results}
            assert got == {"alice": [(SHA512, 4096)], "bob": [(SHA256, 8192)]}
            resp = await describe(c, "alice", "nobody")
            assert [(r.user, r.error_code) for r in resp.results] == [("alice", 0),
                                                                       ("nobody", E.RESOURCE_NOT_FOUND)]
            # The broker's SASL/SCRAM uses what the admin API stored.
            assert authenticates(b.scram_credentials, "alice", "alice-secret")
            assert authenticates(b.scram_credentials, "bob", "bob-secret", "SCRAM-SHA-256")
            assert not authenticates(b.scram_credentials, "alice", "bob-secret")
            assert await alter(c, deletions=[{"name": "bob", "mechanism": SHA256},
                                             {"name": "alice", "mechanism": SHA256}]) == {
                "bob": (0, None),
                "alice": (E.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")}
            assert [r.user for r in (await describe(c)).results] == ["alice"]
            assert not authenticates(b.scram_credentials, "bob", "bob-secret", "SCRAM-SHA-256")


async def test_credentials_survive_a_restart_with_a_data_dir(tmp_path: Path):
    cfg = BrokerConfig(port=0, data_dir=tmp_path)
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            assert await alter(c, [upsertion("alice", "alice-secret", iterations=10000)]) == {"alice": (0, None)}
    assert (tmp_path / "__cluster_metadata-0").is_dir()  # as UserScramCredentialRecord records
    assert not (tmp_path / "__scram_credentials" / "credentials.json").exists()
    async with serve_broker(BrokerConfig(port=0, data_dir=tmp_path)) as b:
        assert authenticates(b.scram_credentials, "alice", "alice-secret")
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            resp = await describe(c, "alice")
            assert [(i.mechanism, i.iterations) for i in resp.results[0].credential_infos] == [(SHA512, 10000)]
            assert await alter(c, deletions=[{"name": "alice", "mechanism": SHA512}]) == {"alice": (0, None)}
    async with serve_broker(BrokerConfig(port=0, data_dir=tmp_path)) as b:
        assert b.scram_credentials.users() == []


async def test_seeded_broker_needs_no_admin_round_trip():
    cfg = BrokerConfig(port=0, extra={"minikafka.scram.users": "alice:SCRAM-SHA-512:alice-secret"})
    async with serve_broker(cfg) as b:
        assert authenticates(b.scram_credentials, "alice", "alice-secret")
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            assert [r.user for r in (await describe(c)).results] == ["alice"]
    with pytest.raises(ConfigError, match="minikafka.scram.users"):
        Broker(BrokerConfig(port=0, extra={"minikafka.scram.users": "alice:SCRAM-SHA-1:pw"}))


async def test_one_store_for_a_cluster_persisted_in_its_data_dir(tmp_path: Path):
    async with serve_cluster(2, BrokerConfig(port=0, data_dir=tmp_path)) as cluster:
        assert cluster.broker(0).scram_credentials is cluster.broker(1).scram_credentials
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(0).port) as c0:
            assert await alter(c0, [upsertion("alice", "pw")]) == {"alice": (0, None)}
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(1).port) as c1:
            assert [r.user for r in (await describe(c1)).results] == ["alice"]
    assert (tmp_path / "__cluster_metadata-0").is_dir()  # as UserScramCredentialRecord records
    assert not (tmp_path / "__scram_credentials" / "credentials.json").exists()
    assert not (tmp_path / "broker-0" / "__scram_credentials").exists()


def test_error_responses_name_the_users():
    alter_req = {"deletions": [{"name": "a", "mechanism": 1}],
                 "upsertions": [upsertion("b", "pw"), upsertion("a", "pw")]}
    body = error_response(K.ALTER_USER_SCRAM_CREDENTIALS, 0, alter_req, E.CLUSTER_AUTHORIZATION_FAILED)
    assert [(r["user"], r["error_code"]) for r in body["results"]] == [("a", E.CLUSTER_AUTHORIZATION_FAILED),
                                                                        ("b", E.CLUSTER_AUTHORIZATION_FAILED)]
    APIS[K.ALTER_USER_SCRAM_CREDENTIALS].response.build(body, 0)
    body = error_response(K.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "a"}]},
                          E.CLUSTER_AUTHORIZATION_FAILED)
    assert body["error_code"] == E.CLUSTER_AUTHORIZATION_FAILED and body["results"][0]["user"] == "a"
    body = error_response(K.SASL_AUTHENTICATE, 2, {"auth_bytes": b""}, E.ILLEGAL_SASL_STATE)
    assert "throttle_time_ms" not in body
    APIS[K.SASL_AUTHENTICATE].response.build(body, 2)


# -- a real admin client -------------------------------------------------------------------------------------------
@pytest.mark.clients
def test_kafka_python_admin_client_manages_credentials():
    from kafka.admin import KafkaAdminClient
    from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion

    from minikafka.testing import BrokerThread

    with BrokerThread(BrokerConfig(port=0)) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=10000)
        try:
            out = admin.alter_user_scram_credentials([
                UserScramCredentialUpsertion("alice", "SCRAM-SHA-512", "alice-secret", iterations=8192),
                UserScramCredentialUpsertion("bob", "SCRAM-SHA-256", "bob-secret"),
            ])
            assert out == {"alice": None, "bob": None}
            described = admin.describe_user_scram_credentials()
            assert {u: [(int(ci["mechanism"]), ci["iterations"]) for ci in d["credential_infos"]]
                    for u, d in described.items()} == {"alice": [(2, 8192)], "bob": [(1, 4096)]}
            store = b.broker.scram_credentials
            assert b.call(authenticates, store, "alice", "alice-secret")
            assert b.call(authenticates, store, "bob", "bob-secret", "SCRAM-SHA-256")
            out = admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", "SCRAM-SHA-512")])
            assert "does not exist" in out["bob"]
        finally:
            admin.close()
