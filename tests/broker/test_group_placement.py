"""Group coordinator placement: Kafka's ``partitionFor`` over ``__consumer_offsets`` and FindCoordinator."""

from __future__ import annotations

import pytest

from minikafka.broker.handlers.groups import FindCoordinatorHandler
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.request import RequestContext
from minikafka.common.hashing import java_string_hash, kafka_abs, partition_for_key
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode


@pytest.mark.parametrize("text, expected", [
    ("", 0), ("hello", 99162322), ("Aa", 2112), ("BB", 2112),
    # Overflowing int32 and non-ASCII (UTF-16 code units, a surrogate pair for the emoji), values from Java.
    ("my-group", -1906497762), ("\u00e9\U0001F600", 1996812),
])
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_kafka_abs_maps_min_int_to_zero() -> None:
    assert kafka_abs(-(1 << 31)) == 0
    assert kafka_abs(-5) == 5
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE in Java: partition 0 whatever the count.
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert partition_for_key("polygenelubricants", 50) == 0


def _cluster(n: int = 3, partitions: int = 50) -> ClusterMetadata:
    metadata = ClusterMetadata(list(range(n)), offsets_topic_partitions=partitions)
    for b in range(n):
        metadata.broker_started(b, "127.0.0.1", 9092 + b)
    return metadata


def test_groups_spread_over_brokers_by_hash() -> None:
    metadata = _cluster()
    groups = [f"group-{i}" for i in range(60)]
    owners = {g: metadata.group_coordinator(g).node_id for g in groups}
    assert set(owners.values()) == {0, 1, 2}
    for g in groups:
        assert owners[g] == partition_for_key(g, 50) % 3


def test_coordinator_moves_to_next_replica_when_its_broker_stops() -> None:
    metadata = _cluster()
    group = next(g for g in (f"g{i}" for i in range(100)) if metadata.group_coordinator(g).node_id == 1)
    metadata.broker_stopped(1)
    assert metadata.group_coordinator(group).node_id == 2  # replicas of its partition: 1, 2, 0
    metadata.broker_stopped(2)
    assert metadata.group_coordinator(group).node_id == 0
    metadata.broker_stopped(0)
    assert metadata.group_coordinator(group).node_id == -1
    metadata.broker_started(1, "127.0.0.1", 9093)
    assert metadata.group_coordinator(group).port == 9093


async def test_find_coordinator_answers_each_groups_coordinator() -> None:
    metadata = _cluster()
    handler = FindCoordinatorHandler(metadata)
    keys = [f"g{i}" for i in range(12)]
    ctx = RequestContext(int(ApiKey.FIND_COORDINATOR), 4, 1, "test", "conn", request_size=10)
    response = await handler.handle(ctx, {"key_type": 0, "coordinator_keys": keys})
    for entry in response["coordinators"]:
        node = metadata.group_coordinator(entry["key"])
        assert (entry["error_code"], entry["node_id"], entry["port"]) == (ErrorCode.NONE, node.node_id, node.port)
    assert len({e["node_id"] for e in response["coordinators"]}) > 1
    # Transactional ids are placed by their __transaction_state partition likewise.
    response = await handler.handle(ctx, {"key_type": 1, "coordinator_keys": keys})
    for entry in response["coordinators"]:
        node = metadata.transaction_coordinator(entry["key"])
        assert (entry["error_code"], entry["node_id"]) == (ErrorCode.NONE, node.node_id)
    assert len({e["node_id"] for e in response["coordinators"]}) > 1
