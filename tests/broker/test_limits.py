"""Kafka's answers to absurd but well-formed requests (KRaft's per-request limits, replication factor
against live brokers) and minikafka's documented ceiling on partitions, over the wire."""

from __future__ import annotations

import psutil
import pytest

from helpers import K, create
from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.metadata import EXCESSIVE_BATCH, EXCESSIVE_PARTITIONS
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.headers import RequestHeader


def topic(name: str, partitions: int, rf: int = 1) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": rf}


async def create_topics(conn: KafkaConnection, *topics: dict, version: int = 7) -> list[tuple[str, int, str]]:
    resp = await conn.request(K.CREATE_TOPICS, version, {"topics": list(topics), "timeout_ms": 1000})
    return [(t.name, t.error_code, t.error_message) for t in resp.topics]


async def test_the_59_byte_request_for_67_million_partitions(broker, conn) -> None:
    """The request that wedged the broker (14.6 GB RSS) is refused at once, as KRaft refuses it."""
    header = RequestHeader.build({"request_api_key": 19, "request_api_version": 7, "correlation_id": 1,
                                  "client_id": "x"}, 2)
    body = (b"\x02" + b"\x02t" + (67_108_867).to_bytes(4, "big") + (1).to_bytes(2, "big") + b"\x01\x01\x00"
            + (1000).to_bytes(4, "big") + b"\x00\x00")
    frame = header + body
    assert len(frame) + 4 <= 59
    await conn.send_raw(frame)
    resp = conn.decode_response(K.CREATE_TOPICS, 7, await conn.receive_frame())[1]
    assert [(t.name, t.error_code, t.error_message) for t in resp.topics] == [
        ("t", E.POLICY_VIOLATION, EXCESSIVE_PARTITIONS)]
    assert broker.metadata.get_topic("t") is None
    assert psutil.Process().memory_info().rss < 1 << 30


async def test_more_than_ten_thousand_partitions_in_one_request(broker, conn) -> None:
    results = await create_topics(conn, topic("a", 6000), topic("b", 4001), topic("bad name", 1))
    assert results == [(n, E.POLICY_VIOLATION, EXCESSIVE_PARTITIONS) for n in ("a", "b", "bad name")]
    assert broker.metadata.all_topics() == []


async def test_more_than_ten_thousand_records_in_one_request(broker, conn) -> None:
    """KRaft writes a record per topic, partition and config: 10,000 at most per request."""
    topics = [topic(f"t{i}", 1) for i in range(5001)]  # 5001 topic + 5001 partition records
    results = await create_topics(conn, *topics)
    assert {(code, msg) for _, code, msg in results} == {(E.POLICY_VIOLATION, EXCESSIVE_BATCH)}
    assert broker.metadata.all_topics() == []
    ok = await create_topics(conn, topic("big", 9999))  # 10,000 records: allowed
    assert ok == [("big", 0, None)] and broker.metadata.get_topic("big").num_partitions == 9999


async def test_create_partitions_beyond_ten_thousand(broker, conn) -> None:
    await create(conn, "grow", 1)
    await create(conn, "other", 1)
    resp = await conn.request(K.CREATE_PARTITIONS, 3, {"topics": [
        {"name": "grow", "count": 6001, "assignments": None}, {"name": "other", "count": 4002, "assignments": None}],
        "timeout_ms": 1000, "validate_only": False})
    assert [(r.name, r.error_code, r.error_message) for r in resp.results] == [
        ("grow", 0, None), ("other", E.POLICY_VIOLATION, EXCESSIVE_BATCH)]
    assert broker.metadata.get_topic("grow").num_partitions == 6001
    assert broker.metadata.get_topic("other").num_partitions == 1


async def test_auto_creation_of_more_than_ten_thousand_partitions(conn, broker) -> None:
    names = [f"auto-{i}" for i in range(10_001)]
    resp = await conn.request(K.METADATA, 12, {"topics": [{"name": n, "topic_id": None} for n in names],
                                               "allow_auto_topic_creation": True})
    assert {t.error_code for t in resp.topics} == {E.POLICY_VIOLATION}
    assert broker.metadata.all_topics() == []
    resp = await conn.request(K.METADATA, 12, {"topics": [{"name": n, "topic_id": None} for n in names[:50]],
                                               "allow_auto_topic_creation": True})
    assert {t.error_code for t in resp.topics} == {0} and len(broker.metadata.all_topics()) == 50


async def test_partition_ceiling() -> None:
    async with serve_broker(BrokerConfig(port=0, max_partitions=100)) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert await create_topics(conn, topic("fits", 60)) == [("fits", 0, None)]
            (name, code, message), = await create_topics(conn, topic("over", 41))
            assert code == E.POLICY_VIOLATION and "minikafka.max.partitions is 100" in message
            assert await create_topics(conn, topic("last", 40)) == [("last", 0, None)]


@pytest.mark.parametrize("rf", [4, 3])
async def test_replication_factor_above_live_brokers(rf: int) -> None:
    async with serve_cluster(3) as cluster:
        await cluster.stop_broker(2)
        async with await KafkaConnection.connect("127.0.0.1", cluster.configs[0].port) as conn:
            (name, code, message), = await create_topics(conn, topic("rf", 1, rf))
        assert code == E.INVALID_REPLICATION_FACTOR
        assert message == (f"Unable to replicate the partition {rf} time(s): The target replication factor of "
                           f"{rf} cannot be reached because only 2 broker(s) are registered.")
