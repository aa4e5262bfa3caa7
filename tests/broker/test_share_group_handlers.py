"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77) v1 over the wire, against a broker the test runs
(and a 2-broker cluster for NOT_COORDINATOR), with ACLs."""

from __future__ import annotations

import uuid

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode as E

HB, DESCRIBE = ApiKey.SHARE_GROUP_HEARTBEAT, ApiKey.SHARE_GROUP_DESCRIBE


def hb(group: str, member: str, epoch: int, topics: list[str] | None = None) -> dict:
    return {"group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
            "subscribed_topic_names": topics}


async def test_heartbeat_and_describe(broker: Broker, conn: KafkaConnection) -> None:
    versions = await conn.negotiate()
    assert versions[HB] == (1, 1) and versions[DESCRIBE] == (1, 1)
    topic = broker.create_topic("sq", 3)
    r = await conn.request(HB, 1, hb("sg", "member-a", 0, ["sq"]))
    assert (r["error_code"], r["member_id"], r["member_epoch"], r["heartbeat_interval_ms"]) == (0, "member-a", 1, 5000)
    assert r["assignment"] == {"topic_partitions": [{"topic_id": topic.topic_id, "partitions": [0, 1, 2]}]}
    r = await conn.request(HB, 1, hb("sg", "member-a", 1))
    assert r["error_code"] == 0 and r["assignment"] is None
    r = await conn.request(HB, 1, hb("sg", "member-a", 7))
    assert r["error_code"] == E.FENCED_MEMBER_EPOCH and r["error_message"]
    r = await conn.request(HB, 1, hb("sg", "", 0, ["sq"]))
    assert (r["error_code"], r["error_message"]) == (E.INVALID_REQUEST, "MemberId can't be empty.")

    d = await conn.request(DESCRIBE, 1, {"group_ids": ["sg", "missing"], "include_authorized_operations": True})
    described, missing = d["groups"]
    assert (described["error_code"], described["group_state"], described["group_epoch"],
            described["assignment_epoch"], described["assignor_name"]) == (0, "Stable", 1, 1, "simple")
    [member] = described["members"]
    assert member["member_id"] == "member-a" and member["client_id"] == "raw-test"
    assert member["client_host"] == "/127.0.0.1" and member["subscribed_topic_names"] == ["sq"]
    assert member["assignment"]["topic_partitions"] == [
        {"topic_id": topic.topic_id, "topic_name": "sq", "partitions": [0, 1, 2]}]
    assert described["authorized_operations"] > 0
    assert missing["error_code"] == E.GROUP_ID_NOT_FOUND

    r = await conn.request(HB, 1, hb("sg", "member-a", -1))
    assert (r["error_code"], r["member_epoch"]) == (0, -1)
    d = await conn.request(DESCRIBE, 1, {"group_ids": ["sg"], "include_authorized_operations": False})
    assert d["groups"][0]["group_state"] == "Empty" and d["groups"][0]["members"] == []


async def test_share_group_id_taken_by_a_classic_group(broker: Broker, conn: KafkaConnection) -> None:
    broker.create_topic("cq", 1)
    # A classic group with committed offsets owns the id.
    r = await conn.request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": "classic-g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": "cq", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                  "committed_metadata": ""}]}]})
    assert r["topics"][0]["partitions"][0]["error_code"] == 0
    r = await conn.request(HB, 1, hb("classic-g", "m", 0, ["cq"]))
    assert (r["error_code"], r["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group classic-g is not a share group.")
    assert broker.share_groups.exists("classic-g") is False


async def test_classic_and_consumer_requests_on_a_share_group_id(broker: Broker, conn: KafkaConnection) -> None:
    broker.create_topic("sh", 1)
    assert (await conn.request(HB, 1, hb("share-g", "m", 0, ["sh"])))["error_code"] == 0
    join = await conn.request(ApiKey.JOIN_GROUP, 5, {
        "group_id": "share-g", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000, "member_id": "",
        "group_instance_id": None, "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
    assert join["error_code"] == E.INCONSISTENT_GROUP_PROTOCOL
    cg = await conn.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "share-g", "member_id": "m2", "member_epoch": 0, "instance_id": None, "rack_id": None,
        "rebalance_timeout_ms": 10000, "subscribed_topic_names": ["sh"], "subscribed_topic_regex": None,
        "server_assignor": None, "topic_partitions": []})
    assert (cg["error_code"], cg["error_message"]) == (E.GROUP_ID_NOT_FOUND, "Group share-g is not a consumer group.")
    commit = await conn.request(ApiKey.OFFSET_COMMIT, 2, {
        "group_id": "share-g", "generation_id_or_member_epoch": -1, "member_id": "", "retention_time_ms": -1,
        "topics": [{"name": "sh", "partitions": [{"partition_index": 0, "committed_offset": 0,
                                                  "committed_metadata": ""}]}]})
    assert commit["topics"][0]["partitions"][0]["error_code"] == E.GROUP_ID_NOT_FOUND
    fetch = await conn.request(ApiKey.OFFSET_FETCH, 7, {"group_id": "share-g", "topics": None,
                                                        "require_stable": False})
    assert fetch["error_code"] == E.GROUP_ID_NOT_FOUND
    assert broker.group_coordinator.get_group("share-g") is None  # nothing was created on the classic side


async def test_consumer_protocol_disabled() -> None:
    async with serve_broker(BrokerConfig(port=0, group_coordinator_rebalance_protocols="classic,share")) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            versions = await c.negotiate()
        assert ApiKey.CONSUMER_GROUP_HEARTBEAT not in versions and ApiKey.CONSUMER_GROUP_DESCRIBE not in versions
        assert HB in versions and ApiKey.JOIN_GROUP in versions


async def test_share_groups_disabled() -> None:
    async with serve_broker(BrokerConfig(port=0, group_coordinator_rebalance_protocols="classic,consumer")) as b:
        c = await KafkaConnection.connect("127.0.0.1", b.port)
        async with c:
            versions = await c.negotiate()
        assert HB not in versions and DESCRIBE not in versions


async def test_acls() -> None:
    cfg = BrokerConfig(port=0, authorizer_class_name="org.apache.kafka.metadata.authorizer.StandardAuthorizer")
    async with serve_broker(cfg) as b:
        b.create_topic("secret", 1)
        b.create_topic("open", 1)

        def allow(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
            return AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL),
                              AccessControlEntry("User:ANONYMOUS", "*", op, AclPermissionType.ALLOW))

        assert b.authorizer is not None
        b.authorizer.create_acls([allow(ResourceType.GROUP, "ok", AclOperation.READ),
                                  allow(ResourceType.TOPIC, "open", AclOperation.DESCRIBE)])
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            r = await c.request(HB, 1, hb("denied", "m", 0, ["open"]))
            assert r["error_code"] == E.GROUP_AUTHORIZATION_FAILED
            r = await c.request(HB, 1, hb("ok", "m", 0, ["open", "secret"]))
            assert r["error_code"] == E.TOPIC_AUTHORIZATION_FAILED
            r = await c.request(HB, 1, hb("ok", "m", 0, ["open"]))
            assert r["error_code"] == 0
            d = await c.request(DESCRIBE, 1, {"group_ids": ["ok", "denied"], "include_authorized_operations": True})
            assert d["groups"][1]["error_code"] == E.GROUP_AUTHORIZATION_FAILED
            assert d["groups"][0]["error_code"] == 0  # READ implies DESCRIBE, as in Kafka
            assert d["groups"][0]["authorized_operations"] == (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)


async def test_not_coordinator_in_a_cluster() -> None:
    async with serve_cluster(2, BrokerConfig(port=0, offsets_topic_num_partitions=4)) as cluster:
        coordinator = cluster.metadata.group_coordinator("cg").node_id
        other = 1 - coordinator
        cluster.broker(0).create_topic("ct", 2)
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(other).port) as c:
            r = await c.request(HB, 1, hb("cg", "m", 0, ["ct"]))
            assert r["error_code"] == E.NOT_COORDINATOR
            d = await c.request(DESCRIBE, 1, {"group_ids": ["cg"], "include_authorized_operations": False})
            assert d["groups"][0]["error_code"] == E.NOT_COORDINATOR
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(coordinator).port) as c:
            r = await c.request(HB, 1, hb("cg", "m", 0, ["ct"]))
            assert r["error_code"] == 0 and r["member_epoch"] == 1
        # One coordinator state for the cluster: the group survives its coordinator stopping.
        await cluster.stop_broker(coordinator)
        assert cluster.share_groups.is_member("cg", "m")
        assert isinstance(cluster.share_groups.assignment("cg", "m"), dict)
        assert all(isinstance(t, uuid.UUID) for t in cluster.share_groups.assignment("cg", "m"))
