"""confluent-kafka (librdkafka) against the broker: group configs (DescribeConfigs /
IncrementalAlterConfigs on GROUP resources) and KIP-932 share-group membership (ShareConsumer
joining through ShareGroupHeartbeat, seen with ShareGroupDescribe)."""

from __future__ import annotations

import pytest
import trio
from clients_common import (
    report_client_versions,  # noqa: F401  (session fixture, used via pytestmark)
    wait_for,
)
from confluent_kafka import KafkaException, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]


def test_group_configs_with_admin_client(broker_thread) -> None:
    a = AdminClient({"bootstrap.servers": broker_thread.bootstrap})
    res = ConfigResource(ResourceType.GROUP, "cfg-group", incremental_configs=[
        ConfigEntry("share.record.lock.duration.ms", "20000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    assert a.incremental_alter_configs([res])[res].result(timeout=10) is None

    described = a.describe_configs([ConfigResource(ResourceType.GROUP, "cfg-group")])
    configs = next(iter(described.values())).result(timeout=10)
    assert configs["share.record.lock.duration.ms"].value == "20000"
    assert configs["share.auto.offset.reset"].value == "earliest"
    assert configs["share.isolation.level"].value == "read_uncommitted"
    assert configs["share.isolation.level"].is_default
    assert configs["consumer.session.timeout.ms"].value == "45000"
    assert broker_thread.broker.group_configs.group_config("cfg-group").share_record_lock_duration_ms == 20000

    bad = ConfigResource(ResourceType.GROUP, "cfg-group", incremental_configs=[
        ConfigEntry("share.record.lock.duration.ms", "999999", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc_info:
        a.incremental_alter_configs([bad])[bad].result(timeout=10)
    assert "group.share.max.record.lock.duration.ms" in str(exc_info.value)
    assert broker_thread.broker.group_configs.group_config("cfg-group").share_record_lock_duration_ms == 20000


# -- share-group membership with confluent-kafka's ShareConsumer -----------------------------------------

def describe_share_group(b: BrokerThread, group: str) -> dict:
    """ShareGroupDescribe v1 through minikafka's own client connection."""
    async def ask() -> dict:
        async with await KafkaConnection.connect("127.0.0.1", b.port, client_id="describer") as conn:
            resp = await conn.request(ApiKey.SHARE_GROUP_DESCRIBE, 1, {"group_ids": [group],
                                                                       "include_authorized_operations": False})
        return resp["groups"][0]
    return trio.run(ask)


def assigned(described: dict) -> dict[str, set[tuple[str, int]]]:
    return {m["member_id"]: {(tp["topic_name"], p) for tp in m["assignment"]["topic_partitions"]
                             for p in tp["partitions"]} for m in described["members"]}


def share_consumer(b: BrokerThread, group: str, name: str) -> ShareConsumer:
    return ShareConsumer({"bootstrap.servers": b.bootstrap, "group.id": group, "client.id": name})


def poll_until(consumers: list[ShareConsumer], done, what: str, timeout: float = 30):
    """Poll every consumer (they heartbeat in the background, poll keeps them within max.poll.interval)
    until ``done()`` returns something truthy."""
    def step():
        for c in consumers:
            c.poll(0.05)
        return done()
    return wait_for(step, timeout=timeout, what=what)


def test_two_share_consumers_join_share_and_leave() -> None:
    cfg = BrokerConfig(port=0, group_share_min_heartbeat_interval_ms=100, group_share_heartbeat_interval_ms=300)
    with BrokerThread(cfg) as b:
        b.create_topic("queue", 3)
        c1, c2 = share_consumer(b, "sq-group", "sc-1"), share_consumer(b, "sq-group", "sc-2")
        closed: list[ShareConsumer] = []
        try:
            c1.subscribe(["queue"])
            c2.subscribe(["queue"])

            def two_members_cover_all() -> dict | None:
                d = describe_share_group(b, "sq-group")
                parts = assigned(d)
                if len(parts) != 2 or any(not p for p in parts.values()):
                    return None
                if set().union(*parts.values()) != {("queue", p) for p in range(3)}:
                    return None
                if any(m["member_epoch"] != d["assignment_epoch"] for m in d["members"]):
                    return None
                return d

            d = poll_until([c1, c2], two_members_cover_all, "both share consumers holding the 3 partitions")
            assert d["group_state"] == "Stable" and d["assignor_name"] == "simple"
            assert sorted(m["client_id"] for m in d["members"]) == ["sc-1", "sc-2"]
            assert all(m["subscribed_topic_names"] == ["queue"] for m in d["members"])
            assert sorted(len(p) for p in assigned(d).values()) == [1, 2]  # balanced, no overlap with 3 > 2
            assert b.call(lambda: b.broker.share_groups.list_groups()) == [("sq-group", "Stable")]

            # A partition added later is noticed and handed out.
            b.call(lambda: b.broker.add_partitions("queue", 4))
            poll_until([c1, c2], lambda: set().union(*assigned(describe_share_group(b, "sq-group")).values())
                       == {("queue", p) for p in range(4)}, "the 4th partition assigned")

            # One leaves (close sends the leave heartbeat): the other takes every partition.
            c2.close()
            closed.append(c2)
            def one_member_holds_all() -> dict | None:
                d = describe_share_group(b, "sq-group")
                parts = assigned(d)
                return d if len(parts) == 1 and len(next(iter(parts.values()))) == 4 else None

            d = poll_until([c1], one_member_holds_all, "the remaining member holding every partition")
            assert d["members"][0]["client_id"] == "sc-1"
        finally:
            for c in (c1, c2):
                if c not in closed:
                    c.close()
        d = describe_share_group(b, "sq-group")
        assert d["group_state"] == "Empty" and d["members"] == []
