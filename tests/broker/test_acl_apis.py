"""CreateAcls / DescribeAcls / DeleteAcls over the wire: literal, prefixed, ANY and MATCH filters, every
version, the cluster permissions they need, SECURITY_DISABLED without an authorizer, ACLs shared by a
cluster's brokers and kept across restarts; and confluent-kafka's AdminClient against them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.security.acl import (CLUSTER_NAME, AclBinding, AclOperation, AclPermissionType, PatternType,
                                           ResourceType)
from minikafka.broker.security.authorizer import ACL_AUTHORIZER, STANDARD_AUTHORIZER
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import BrokerThread

K = ApiKey
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE, ANY, MATCH = PatternType.LITERAL, PatternType.PREFIXED, PatternType.ANY, PatternType.MATCH
O = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ADMIN = {"authorizer_class_name": STANDARD_AUTHORIZER, "super_users": "User:ANONYMOUS"}


def creation(rtype: int, name: str, pattern: int, principal: str, op: int, perm: int = ALLOW,
             host: str = "*") -> dict[str, Any]:
    return {"resource_type": rtype, "resource_name": name, "resource_pattern_type": pattern, "principal": principal,
            "host": host, "operation": op, "permission_type": perm}


def acl_filter(rtype: int = ResourceType.ANY, name: str | None = None, pattern: int = ANY,
               principal: str | None = None, host: str | None = None, op: int = O.ANY,
               perm: int = AclPermissionType.ANY) -> dict[str, Any]:
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


def described(resp: Any) -> set[tuple]:
    """(type, name, pattern, principal, host, operation, permission) of every ACL a DescribeAcls answered."""
    return {(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
            for r in resp.resources for a in r.acls}


def row(c: dict[str, Any]) -> tuple:
    return (c["resource_type"], c["resource_name"], c["resource_pattern_type"], c["principal"], c["host"],
            c["operation"], c["permission_type"])


ACLS = [creation(T, "orders", LIT, "User:alice", O.READ),
        creation(T, "orders-", PRE, "User:bob", O.WRITE),
        creation(T, "*", LIT, "User:carol", O.DESCRIBE),
        creation(G, "billing", LIT, "User:alice", O.READ),
        creation(C, CLUSTER_NAME, LIT, "User:bob", O.ALTER, DENY, "10.0.0.5")]


async def connect(broker: Broker) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", broker.port, client_id="acl-test")


@pytest.fixture
async def admin_broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with serve_broker(BrokerConfig(port=0, data_dir=tmp_path / "data", **ADMIN)) as b:
        yield b


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_describe_delete(admin_broker: Broker, version: int) -> None:
    async with await connect(admin_broker) as conn:
        r = await conn.request(K.CREATE_ACLS, version, {"creations": ACLS})
        assert [x.error_code for x in r.results] == [0] * len(ACLS)
        everything = await conn.request(K.DESCRIBE_ACLS, version, acl_filter())
        assert everything.error_code == 0 and described(everything) == {row(c) for c in ACLS}
        # LITERAL by name; PREFIXED by name; ANY pattern type by exact name; MATCH: everything that applies.
        lit = await conn.request(K.DESCRIBE_ACLS, version, acl_filter(T, "orders", LIT))
        assert described(lit) == {row(ACLS[0])}
        pre = await conn.request(K.DESCRIBE_ACLS, version, acl_filter(T, None, PRE))
        assert described(pre) == {row(ACLS[1])}
        any_ = await conn.request(K.DESCRIBE_ACLS, version, acl_filter(T, "orders-", ANY))
        assert described(any_) == {row(ACLS[1])}
        match = await conn.request(K.DESCRIBE_ACLS, version, acl_filter(T, "orders-eu", MATCH))
        assert described(match) == {row(ACLS[1]), row(ACLS[2])}
        by_principal = await conn.request(K.DESCRIBE_ACLS, version, acl_filter(principal="User:alice"))
        assert described(by_principal) == {row(ACLS[0]), row(ACLS[3])}
        by_host = await conn.request(K.DESCRIBE_ACLS, version, acl_filter(host="10.0.0.5", perm=DENY))
        assert described(by_host) == {row(ACLS[4])}

        d = await conn.request(K.DELETE_ACLS, version, {"filters": [
            acl_filter(T, "orders-eu", MATCH, principal="User:bob"), acl_filter(G), acl_filter(T, "nothing", LIT)]})
        assert [f.error_code for f in d.filter_results] == [0, 0, 0]
        assert [(m.resource_name, m.pattern_type, m.principal, m.operation, m.error_code)
                for m in d.filter_results[0].matching_acls] == [("orders-", PRE, "User:bob", O.WRITE, 0)]
        assert [m.resource_name for m in d.filter_results[1].matching_acls] == ["billing"]
        assert d.filter_results[2].matching_acls == []
        left = await conn.request(K.DESCRIBE_ACLS, version, acl_filter())
        assert described(left) == {row(ACLS[0]), row(ACLS[2]), row(ACLS[4])}


async def test_version_0_is_literal_only(admin_broker: Broker) -> None:
    async with await connect(admin_broker) as conn:
        await conn.request(K.CREATE_ACLS, 1, {"creations": ACLS[:2]})
        r = await conn.request(K.CREATE_ACLS, 0, {"creations": [creation(T, "v0", LIT, "User:dan", O.READ)]})
        assert r.results[0].error_code == 0
        d = await conn.request(K.DESCRIBE_ACLS, 0, acl_filter(T))
        # A v0 filter is LITERAL: the PREFIXED ACL is not listed (v0 could not say it is prefixed).
        assert {(x.resource_name, x.pattern_type) for x in d.resources} == {("orders", LIT), ("v0", LIT)}
        gone = await conn.request(K.DELETE_ACLS, 0, {"filters": [acl_filter(T, "v0")]})
        assert [m.resource_name for m in gone.filter_results[0].matching_acls] == ["v0"]


async def test_invalid_creations_and_filters(admin_broker: Broker) -> None:
    async with await connect(admin_broker) as conn:
        r = await conn.request(K.CREATE_ACLS, 3, {"creations": [
            creation(C, "not-the-cluster", LIT, "User:a", O.ALTER),
            creation(T, "", LIT, "User:a", O.READ),
            creation(T, "t", MATCH, "User:a", O.READ),
            creation(T, "t", LIT, "nocolon", O.READ),
            creation(T, "t", LIT, "User:a", O.ANY),
            creation(T, "ok", LIT, "User:a", O.READ)]})
        assert [x.error_code for x in r.results] == [ErrorCode.INVALID_REQUEST] * 5 + [0]
        assert "kafka-cluster" in r.results[0].error_message
        d = await conn.request(K.DESCRIBE_ACLS, 3, acl_filter(op=O.UNKNOWN))
        assert d.error_code == ErrorCode.INVALID_REQUEST
        gone = await conn.request(K.DELETE_ACLS, 3, {"filters": [acl_filter(ResourceType.UNKNOWN)]})
        assert gone.filter_results[0].error_code == ErrorCode.INVALID_REQUEST
        everything = await conn.request(K.DESCRIBE_ACLS, 3, acl_filter())
        assert {x.resource_name for x in everything.resources} == {"ok"}


async def test_security_disabled_without_an_authorizer(broker: Broker) -> None:
    async with await connect(broker) as conn:
        d = await conn.request(K.DESCRIBE_ACLS, 3, acl_filter())
        assert d.error_code == ErrorCode.SECURITY_DISABLED and "No Authorizer" in d.error_message
        c = await conn.request(K.CREATE_ACLS, 3, {"creations": ACLS[:2]})
        assert [x.error_code for x in c.results] == [ErrorCode.SECURITY_DISABLED] * 2
        x = await conn.request(K.DELETE_ACLS, 3, {"filters": [acl_filter()]})
        assert x.filter_results[0].error_code == ErrorCode.SECURITY_DISABLED
        versions = await conn.negotiate()
        assert {versions[k] for k in (K.DESCRIBE_ACLS, K.CREATE_ACLS, K.DELETE_ACLS)} == {(0, 3)}


async def test_acl_apis_need_cluster_describe_and_alter() -> None:
    """ANONYMOUS (a PLAINTEXT client) is no super user here: DescribeAcls needs DESCRIBE on the cluster,
    CreateAcls and DeleteAcls ALTER."""
    async with serve_broker(BrokerConfig(port=0, authorizer_class_name=ACL_AUTHORIZER)) as broker:
        assert broker.authorizer is not None
        async with await connect(broker) as conn:
            d = await conn.request(K.DESCRIBE_ACLS, 3, acl_filter())
            assert d.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and d.resources == []
            c = await conn.request(K.CREATE_ACLS, 3, {"creations": ACLS[:1]})
            assert c.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            broker.authorizer.create_acls([AclBinding.of(C, CLUSTER_NAME, LIT, "User:ANONYMOUS", "*", O.DESCRIBE,
                                                         ALLOW)])
            d = await conn.request(K.DESCRIBE_ACLS, 3, acl_filter())
            assert d.error_code == 0 and len(described(d)) == 1
            c = await conn.request(K.CREATE_ACLS, 3, {"creations": ACLS[:1]})
            assert c.results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # DESCRIBE is not ALTER
            x = await conn.request(K.DELETE_ACLS, 3, {"filters": [acl_filter()]})
            assert x.filter_results[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
            broker.authorizer.create_acls([AclBinding.of(C, CLUSTER_NAME, LIT, "User:*", "*", O.ALTER, ALLOW)])
            c = await conn.request(K.CREATE_ACLS, 3, {"creations": ACLS[:1]})
            assert c.results[0].error_code == 0
            x = await conn.request(K.DELETE_ACLS, 3, {"filters": [acl_filter(T)]})
            assert len(x.filter_results[0].matching_acls) == 1


async def test_acls_survive_a_restart(tmp_path: Path) -> None:
    config = BrokerConfig(port=0, data_dir=tmp_path / "data", **ADMIN)
    async with serve_broker(config) as broker:
        async with await connect(broker) as conn:
            await conn.request(K.CREATE_ACLS, 3, {"creations": ACLS})
            await conn.request(K.DELETE_ACLS, 3, {"filters": [acl_filter(G)]})
    assert (tmp_path / "data" / "__cluster_metadata-0").is_dir() and not (tmp_path / "data" / "acls.json").exists()
    async with serve_broker(config) as broker:
        async with await connect(broker) as conn:
            d = await conn.request(K.DESCRIBE_ACLS, 3, acl_filter())
            assert described(d) == {row(c) for c in ACLS if c["resource_type"] != G}
        # And they are enforced, prefix index included.
        assert broker.authorizer is not None
        assert broker.authorizer.authorize("User:bob", "1.2.3.4", O.WRITE, T, "orders-eu")
        assert not broker.authorizer.authorize("User:bob", "1.2.3.4", O.WRITE, T, "orders")


async def test_a_cluster_shares_its_acls_and_keeps_them(tmp_path: Path) -> None:
    config = BrokerConfig(port=0, data_dir=tmp_path / "cluster", **ADMIN)
    async with serve_cluster(2, config) as cluster:
        b0, b1 = cluster.broker(0), cluster.broker(1)
        async with await connect(b0) as c0, await connect(b1) as c1:
            await c0.request(K.CREATE_ACLS, 3, {"creations": ACLS[:2]})
            assert described(await c1.request(K.DESCRIBE_ACLS, 3, acl_filter())) == {row(ACLS[0]), row(ACLS[1])}
            await c1.request(K.DELETE_ACLS, 3, {"filters": [acl_filter(T, "orders", LIT)]})
            assert described(await c0.request(K.DESCRIBE_ACLS, 3, acl_filter())) == {row(ACLS[1])}
        await cluster.restart_broker(1)
        async with await connect(cluster.broker(1)) as c1:
            assert described(await c1.request(K.DESCRIBE_ACLS, 3, acl_filter())) == {row(ACLS[1])}
    assert not (tmp_path / "cluster" / "acls.json").exists()  # records of the cluster's metadata log
    async with serve_cluster(2, config) as cluster:
        async with await connect(cluster.broker(0)) as c0:
            assert described(await c0.request(K.DESCRIBE_ACLS, 3, acl_filter())) == {row(ACLS[1])}


def test_confluent_admin_client_manages_acls(tmp_path: Path) -> None:
    """librdkafka's AdminClient (CreateAcls/DescribeAcls/DeleteAcls) against the broker."""
    ck = pytest.importorskip("confluent_kafka")
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    AclBindingCK, AclBindingFilterCK = admin_mod.AclBinding, admin_mod.AclBindingFilter
    RT, RPT, AO, APT = (admin_mod.ResourceType, admin_mod.ResourcePatternType, admin_mod.AclOperation,
                        admin_mod.AclPermissionType)
    with BrokerThread(BrokerConfig(port=0, data_dir=tmp_path / "data", **ADMIN)) as broker:
        admin = ck.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
        bindings = [AclBindingCK(RT.TOPIC, "payments", RPT.LITERAL, "User:alice", "*", AO.READ, APT.ALLOW),
                    AclBindingCK(RT.TOPIC, "payments-", RPT.PREFIXED, "User:bob", "*", AO.WRITE, APT.ALLOW),
                    AclBindingCK(RT.GROUP, "g", RPT.LITERAL, "User:alice", "*", AO.READ, APT.DENY)]
        for future in admin.create_acls(bindings, request_timeout=10).values():
            assert future.result(timeout=10) is None
        everything = AclBindingFilterCK(RT.ANY, None, RPT.ANY, None, None, AO.ANY, APT.ANY)
        got = admin.describe_acls(everything, request_timeout=10).result(timeout=10)
        assert {(b.name, b.resource_pattern_type, b.principal, b.operation, b.permission_type) for b in got} == {
            ("payments", RPT.LITERAL, "User:alice", AO.READ, APT.ALLOW),
            ("payments-", RPT.PREFIXED, "User:bob", AO.WRITE, APT.ALLOW),
            ("g", RPT.LITERAL, "User:alice", AO.READ, APT.DENY)}
        match = AclBindingFilterCK(RT.TOPIC, "payments-eu", RPT.MATCH, None, None, AO.ANY, APT.ANY)
        assert [b.name for b in admin.describe_acls(match, request_timeout=10).result(timeout=10)] == ["payments-"]
        deleted = admin.delete_acls([AclBindingFilterCK(RT.TOPIC, None, RPT.ANY, None, None, AO.ANY, APT.ANY)],
                                    request_timeout=10)
        assert sorted(b.name for f in deleted.values() for b in f.result(timeout=10)) == ["payments", "payments-"]
        left = admin.describe_acls(everything, request_timeout=10).result(timeout=10)
        assert [b.name for b in left] == ["g"]


async def test_kafka_cli_style_anonymous_denied_everything_is_still_answered() -> None:
    """With an authorizer and no ACL, a PLAINTEXT (ANONYMOUS) client is denied but never disconnected:
    every API answers with its authorization error."""
    async with serve_broker(BrokerConfig(port=0, authorizer_class_name=STANDARD_AUTHORIZER)) as broker:
        broker.create_topic("t", 1, 1)
        async with await connect(broker) as conn:
            md = await conn.request(K.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
            assert md.topics == []  # hidden
            md = await conn.request(K.METADATA, 12, {"topics": [{"name": "t"}], "allow_auto_topic_creation": False})
            assert md.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
            with trio.fail_after(10):
                p = await conn.request(K.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
                    {"name": "t", "partition_data": [{"index": 0, "records": None}]}]})
            assert p.responses[0].partition_responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED



PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')


def poll_until(consumer: Any, want_error: bool, timeout_s: float = 30) -> Any:
    """Poll until a message (or, ``want_error``, an error event) arrives; None when the time is up."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and (msg.error() is not None) == want_error:
            return msg
    return None


def test_real_clients_are_allowed_and_denied_as_the_acls_say() -> None:
    """confluent-kafka over SASL_PLAINTEXT (PLAIN) as alice and bob; the ACLs are set over the PLAINTEXT
    listener, whose ANONYMOUS principal is the super user here."""
    ck = pytest.importorskip("confluent_kafka")
    a = pytest.importorskip("confluent_kafka.admin")
    config = BrokerConfig(port=0, group_initial_rebalance_delay_ms=0, **ADMIN)
    for key, value in {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                       "sasl.enabled.mechanisms": "PLAIN",
                       "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}.items():
        config.set(key, value)
    with BrokerThread(config) as broker:
        for topic in ("orders", "payroll"):
            broker.create_topic(topic, 1, 1)
        admin = a.AdminClient({"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")})

        def allow(rtype: Any, name: str, pattern: Any, user: str, op: Any) -> None:
            binding = a.AclBinding(rtype, name, pattern, user, "*", op, a.AclPermissionType.ALLOW)
            for future in admin.create_acls([binding], request_timeout=10).values():
                future.result(timeout=10)

        allow(a.ResourceType.TOPIC, "orders", a.ResourcePatternType.LITERAL, "User:alice", a.AclOperation.WRITE)
        allow(a.ResourceType.TOPIC, "ord", a.ResourcePatternType.PREFIXED, "User:bob", a.AclOperation.READ)

        def client(user: str) -> dict[str, str]:
            return {"bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"}

        def produce(user: str, topic: str) -> Any:
            outcome: list[Any] = []
            producer = ck.Producer({**client(user), "message.timeout.ms": 10000})
            producer.produce(topic, b"value", callback=lambda err, msg: outcome.append(err))
            producer.flush(15)
            assert outcome, "no delivery report"
            return outcome[0]

        assert produce("alice", "orders") is None
        for user, topic in (("alice", "payroll"), ("bob", "orders")):  # bob may read "orders", not write it
            denied = produce(user, topic)
            assert denied is not None and denied.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, (user, topic)

        # bob may read "orders" (prefixed READ) but nothing on the group: the group is refused ...
        settings = {**client("bob"), "group.id": "bob-group", "auto.offset.reset": "earliest"}
        consumer = ck.Consumer(settings)
        consumer.subscribe(["orders"])
        refused = poll_until(consumer, want_error=True)
        consumer.close()
        assert refused is not None and refused.error().code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
        # ... until he may read the group too.
        allow(a.ResourceType.GROUP, "bob-", a.ResourcePatternType.PREFIXED, "User:bob", a.AclOperation.READ)
        consumer = ck.Consumer(settings)
        consumer.subscribe(["orders"])
        msg = poll_until(consumer, want_error=False)
        consumer.close()
        assert msg is not None and msg.value() == b"value"
