"""What the in-process cluster tests read of a cluster: a connection to one broker, a broker's replica log of a
partition and the batches stored in it.

Imported as ``cluster_logs`` (pytest puts ``tests/cluster`` on the path for the tests there; the name is unique
across the tree).
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.cluster import Cluster
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.records import decode_records, iter_batches


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
    from minikafka.protocol.records import read_header

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


#: A stored data record: offset, value, and the producer id and epoch of its batch.
DataRecord = tuple[int, bytes | None, int, int]


def data_records(lg: Any) -> list[DataRecord]:
    """A log's data records (transaction markers left out), in offset order."""
    return [(r.offset, r.value, h.producer_id, h.producer_epoch)
            for h, view in lg.iter_batches_from(lg.log_start_offset) if not h.is_control
            for r in decode_records(view)]


def check_copies_across_epoch_bumps(records: list[DataRecord], where: str) -> None:
    """A value stored twice is one the idempotent producer sent again under a new producer epoch: librdkafka
    bumps its epoch when a partition answers OUT_OF_ORDER_SEQUENCE_NUMBER after a leader change and renumbers
    the messages of another partition that it had been told were not persisted although they were (its open
    issue #4953, met against Kafka alike); a broker cannot tell such a copy from a new record, nor does Kafka.
    Within one producer epoch the broker must have refused every retry it had stored (Kafka's sequence check)."""
    epochs: dict[bytes | None, list[tuple[int, int]]] = {}
    for _offset, value, producer_id, epoch in records:
        epochs.setdefault(value, []).append((producer_id, epoch))
    for value, seen in epochs.items():
        assert len(seen) == len(set(seen)), f"{where}: {value!r} stored twice by one producer epoch: {seen}"
