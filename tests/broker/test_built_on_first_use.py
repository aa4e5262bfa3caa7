"""What a broker builds on first use (issue 27's start-up): KIP-932 share groups, built by the first request
that needs them (on every broker of a cluster at once), and a lone broker's replica fetchers, which it never
needs while it leads every partition.  Until then the broker answers as if they were there and empty."""

from __future__ import annotations

from minikafka.broker.broker import Broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode as E

SHARE_METRICS = ("kafka.server:type=ShareSessionCache,name=ShareSessionsCount",
                 "kafka.server:type=ShareSessionCache,name=SharePartitionsCount",
                 "kafka.server:type=share-group-metrics,name=share-partitions",
                 "kafka.server:type=share-group-metrics,name=acquisition-locks-expired-total")
REPLICATION_BYTES_IN = "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec"


def heartbeat(group: str, topics: list[str] | None) -> dict:
    return {"group_id": group, "member_id": "m", "member_epoch": 0 if topics else -1, "rack_id": None,
            "subscribed_topic_names": topics}


async def test_share_groups_are_built_by_the_first_share_request(broker: Broker, conn: KafkaConnection) -> None:
    broker.create_topic("t", 1)
    groups = await conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    deleted = await conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["nobody"]})
    assert groups["groups"] == [] and deleted["results"][0]["error_code"] == E.GROUP_ID_NOT_FOUND
    metrics = broker.metrics()
    assert all(metrics[name] == 0 for name in SHARE_METRICS) and metrics[REPLICATION_BYTES_IN] == 0
    assert not broker.shared.share.built  # none of the above needed them

    assert (await conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat("sg", ["t"])))["error_code"] == 0
    assert broker.shared.share.built
    groups = await conn.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(g["group_id"], g["group_type"]) for g in groups["groups"]] == [("sg", "share")]
    # The broker's share-partitions were built with the groups, and hear of their deletion.
    assert broker.share_partitions.delete_group in broker.share_groups.group_listeners
    assert set(SHARE_METRICS) <= broker.metrics().keys()
    assert (await conn.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat("sg", None)))["error_code"] == 0
    deleted = await conn.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["sg"]})
    assert deleted["results"][0]["error_code"] == E.NONE
    assert not broker.share_groups.exists("sg")


async def test_a_lone_broker_builds_no_replica_fetchers(broker: Broker) -> None:
    broker.create_topic("t", 3)
    assert broker._fetcher_manager is None
    assert broker.fetcher_manager.fetchers == {}  # built when asked for, with nothing to fetch


async def test_share_groups_built_on_one_broker_are_built_on_every_broker() -> None:
    async with serve_cluster(2, BrokerConfig(port=0, offsets_topic_num_partitions=1)) as cluster:
        assert not cluster.shared.share.built
        assert all(b._fetcher_manager is not None for b in cluster.brokers.values())  # a cluster's replicate
        coordinator = cluster.broker(cluster.metadata.group_coordinator("cg").node_id)
        coordinator.create_topic("ct", 2)
        async with await KafkaConnection.connect("127.0.0.1", coordinator.port) as c:
            assert (await c.request(ApiKey.SHARE_GROUP_HEARTBEAT, 1, heartbeat("cg", ["ct"])))["error_code"] == 0
        listeners = cluster.share_groups.group_listeners
        assert all(b._share_partitions is not None and b._share_partitions.delete_group in listeners
                   for b in cluster.brokers.values())
