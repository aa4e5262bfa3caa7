"""Raw-protocol helpers shared by the broker tests."""

from __future__ import annotations

from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.records import Record, build_batch, decode_records, iter_batches

K = ApiKey


def batch(values: list[bytes], **kw) -> bytes:
    return build_batch([Record(offset_delta=i, key=b"k%d" % i, value=v) for i, v in enumerate(values)], **kw)


async def create(conn: KafkaConnection, name: str, partitions: int = 1, **extra) -> None:
    resp = await conn.request(K.CREATE_TOPICS, 7, {
        "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1, **extra}],
        "timeout_ms": 1000})
    assert resp.topics[0].error_code == 0, resp


async def produce(conn: KafkaConnection, topic: str, records: bytes, partition: int = 0, acks: int = -1,
                  version: int = 9):
    resp = await conn.request(K.PRODUCE, version, {
        "acks": acks, "timeout_ms": 1000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]})
    return resp.responses[0].partition_responses[0]


async def fetch(conn: KafkaConnection, topic: str, offset: int = 0, partition: int = 0, version: int = 12,
                max_wait_ms: int = 0, min_bytes: int = 1, topic_id=None):
    t = {"topic": topic, "topic_id": topic_id,
         "partitions": [{"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20}]}
    resp = await conn.request(K.FETCH, version, {
        "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 50 << 20,
        "topics": [t]})
    return resp.responses[0].partitions[0]



def values(records: bytes) -> list[bytes]:
    """The record values in a fetched records blob."""
    return [r.value for _, v in iter_batches(records) for r in decode_records(v)]
