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


def where_stored(cluster: Cluster, topic: str, values: set[bytes]) -> list[str]:
    """Where each of ``values`` is stored, replica by replica: broker, partition, offset, and its batch's producer
    id, epoch, base sequence and partition leader epoch (for a failure message)."""
    from minikafka.protocol.records import decode_records, read_header

    out = []
    meta = cluster.metadata.get_topic(topic)
    for p in meta.partitions if meta is not None else []:
        for b in p.replicas:
            if b not in cluster.brokers:
                continue
            for batch in stored(log_of(cluster, b, topic, p.partition)):
                h = read_header(batch)
                for r in decode_records(batch, check_crc=False):
                    if r.value in values:
                        out.append(f"{r.value!r} broker {b} {topic}-{p.partition}@{r.offset} pid {h.producer_id} "
                                   f"epoch {h.producer_epoch} seq {h.base_sequence}+{r.offset - h.base_offset} "
                                   f"leader epoch {h.partition_leader_epoch}")
    return sorted(out)
