"""What the in-process cluster tests read of a cluster: a connection to one broker, a broker's replica log of a
partition and the batches stored in it.

Imported as ``cluster_logs`` (pytest puts ``tests/cluster`` on the path for the tests there; the name is unique
across the tree).
"""

from __future__ import annotations

from minikafka.broker.cluster import Cluster
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.records import iter_batches


async def connect(cluster: Cluster, broker_id: int) -> KafkaConnection:
    return await KafkaConnection.connect("127.0.0.1", cluster.configs[broker_id].port, client_id="cluster-test")


def log_of(cluster: Cluster, broker_id: int, topic: str, partition: int = 0):
    return cluster.broker(broker_id).replica_manager.get(topic, partition).log


def stored(lg) -> list[bytes]:
    """Every stored batch of a log, as bytes."""
    got = lg.read(lg.log_start_offset, 1 << 30)
    return [bytes(v) for chunk in got.chunks for _, v in iter_batches(chunk, check_crc=False)]
