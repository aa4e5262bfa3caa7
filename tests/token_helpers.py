"""Delegation-token test helpers: a broker with SCRAM users and a token secret, logins, the four requests."""

from __future__ import annotations

from pathlib import Path

from minikafka.broker.broker import Broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.client.security import sasl_authenticate
from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER
from minikafka.protocol.api import ApiKey as K

SECRET = "the-cluster-secret"
DAY = 24 * 3600 * 1000
USERS = ("alice:SCRAM-SHA-512:alice-secret,alice:SCRAM-SHA-256:alice-secret,bob:SCRAM-SHA-512:bob-secret,"
         "carol:SCRAM-SHA-512:carol-secret,admin:SCRAM-SHA-512:admin-secret")
PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret", "admin": "admin-secret"}


def config(data_dir: Path | None = None, **props: str) -> BrokerConfig:
    cfg = BrokerConfig(port=0, data_dir=data_dir, group_initial_rebalance_delay_ms=0)
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512", "minikafka.scram.users": USERS,
                "delegation.token.secret.key": SECRET, **props}
    for key, value in settings.items():
        cfg.set(key, value)
    return cfg


def acl_config(data_dir: Path | None = None, **props: str) -> BrokerConfig:
    return config(data_dir, **{"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin", **props})


async def login(port: int, user: str, password: str | None = None, *, token: bool = False,
                mechanism: str = "SCRAM-SHA-512") -> KafkaConnection:
    """A connection to the SASL listener authenticated as ``user`` (a token id with ``token``)."""
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="token-test")
    try:
        await sasl_authenticate(conn.request, mechanism, user, password or PASSWORDS[user], token_auth=token)
    except BaseException:
        await conn.aclose()
        raise
    return conn


def sasl_port(b: Broker) -> int:
    return b.listener_ports["SASL_PLAINTEXT"]


async def create_token(conn: KafkaConnection, renewers: tuple[str, ...] = (), max_lifetime_ms: int = -1,
                       owner: str | None = None, version: int = 3):
    kind, _, name = (owner or ":").partition(":")
    return await conn.request(K.CREATE_DELEGATION_TOKEN, version, {
        "owner_principal_type": kind or None, "owner_principal_name": name or None,
        "renewers": [{"principal_type": r.partition(":")[0], "principal_name": r.partition(":")[2]}
                     for r in renewers],
        "max_lifetime_ms": max_lifetime_ms})


async def renew(conn: KafkaConnection, mac: bytes, period_ms: int = -1, version: int = 2):
    return await conn.request(K.RENEW_DELEGATION_TOKEN, version, {"hmac": mac, "renew_period_ms": period_ms})


async def expire(conn: KafkaConnection, mac: bytes, period_ms: int = -1, version: int = 2):
    return await conn.request(K.EXPIRE_DELEGATION_TOKEN, version, {"hmac": mac, "expiry_time_period_ms": period_ms})


async def describe(conn: KafkaConnection, owners: list[str] | None = None, version: int = 3):
    return await conn.request(K.DESCRIBE_DELEGATION_TOKEN, version, {
        "owners": None if owners is None else [{"principal_type": o.partition(":")[0],
                                                "principal_name": o.partition(":")[2]} for o in owners]})


def ids(resp) -> set[str]:
    assert resp.error_code == 0, resp
    return {t.token_id for t in resp.tokens}
