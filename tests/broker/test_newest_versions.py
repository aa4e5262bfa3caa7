"""What Kafka 4.2's newest Produce, ListOffsets and Metadata versions mean, against handlers in memory and a
broker on the test's Trio loop.

Produce v13 names topics by id (UNKNOWN_TOPIC_ID for an id the broker does not know), v11+ carries
TRANSACTION_ABORTABLE (older versions get INVALID_TXN_STATE); ListOffsets answers -4, -5 and -6 as Kafka
answers them for a topic without tiered storage, and refuses a special timestamp older versions do not
have; Metadata v13 has a top-level error code.  (Leader discovery and replica state need a cluster:
tests/cluster/test_leader_discovery.py.)
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from helpers import HandlerEnv, batch, create, produce
from minikafka.broker.broker import Broker
from minikafka.broker.handlers.list_offsets import ListOffsetsHandler
from minikafka.broker.handlers.metadata import MetadataHandler
from minikafka.broker.handlers.produce import ProduceHandler
from minikafka.client.connection import KafkaConnection
from minikafka.common import TopicPartition
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from test_handlers import call

def produce_handler(env: HandlerEnv, verifier: Any = None) -> ProduceHandler:
    return ProduceHandler(env.log, env.topics, env.delayed_produce, env.quotas.produce, env.config, env.clock,
                          verifier, metadata=env.metadata)


def produce_body(topic_data: list[dict], transactional_id: str | None = None) -> dict:
    return {"acks": 1, "timeout_ms": 1000, "transactional_id": transactional_id, "topic_data": topic_data}


# -- Produce ----------------------------------------------------------------------------------------
async def test_produce_v13_names_topics_by_id() -> None:
    env = HandlerEnv()
    topic = env.metadata.create_topic("t", 2, 1)
    handler = produce_handler(env)
    unknown = uuid.uuid4()
    r = await call(handler, K.PRODUCE, 13, produce_body([
        {"topic_id": topic.topic_id, "partition_data": [{"index": 1, "records": batch([b"a", b"b"])}]},
        {"topic_id": unknown, "partition_data": [{"index": 0, "records": batch([b"x"])}]}]))
    by_id = {t.topic_id: t.partition_responses for t in r.responses}
    [ok] = by_id[topic.topic_id]
    assert (ok.index, ok.error_code, ok.base_offset) == (1, 0, 0)
    [missing] = by_id[unknown]
    assert (missing.error_code, missing.base_offset) == (E.UNKNOWN_TOPIC_ID, -1)
    assert env.log.get("t", 1).log.log_end_offset == 2
    # The same produce at v12 names the topic, and the response names it back.
    r = await call(handler, K.PRODUCE, 12, produce_body([
        {"name": "t", "partition_data": [{"index": 1, "records": batch([b"c"])}]}]))
    assert (r.responses[0].name, r.responses[0].partition_responses[0].base_offset) == ("t", 2)


class AbortableVerifier:
    """A transaction coordinator that answers TRANSACTION_ABORTABLE (the partition is not in the transaction)."""

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition], add_partitions: bool = False) -> dict[TopicPartition, E]:
        return dict.fromkeys(partitions, E.TRANSACTION_ABORTABLE)


@pytest.mark.parametrize("version,code", [(9, E.INVALID_TXN_STATE), (10, E.INVALID_TXN_STATE),
                                          (11, E.TRANSACTION_ABORTABLE), (12, E.TRANSACTION_ABORTABLE)])
async def test_transaction_abortable_from_v11(version: int, code: E) -> None:
    """KIP-890: clients before Produce v11 do not know TRANSACTION_ABORTABLE; they get INVALID_TXN_STATE."""
    env = HandlerEnv()
    env.metadata.create_topic("t", 1, 1)
    records = batch([b"txn"], producer_id=7, producer_epoch=0, base_sequence=0, is_transactional=True)
    r = await call(produce_handler(env, AbortableVerifier()), K.PRODUCE, version, produce_body(
        [{"name": "t", "partition_data": [{"index": 0, "records": records}]}], transactional_id="tx"))
    assert r.responses[0].partition_responses[0].error_code == code
    assert env.log.get("t", 0).log.log_end_offset == 0


# -- ListOffsets ------------------------------------------------------------------------------------
def list_offsets_body(timestamp: int) -> dict:
    return {"replica_id": -1, "isolation_level": 0, "timeout_ms": 5000,
            "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": timestamp}]}]}


async def test_list_offsets_special_timestamps_without_tiered_storage() -> None:
    """As Kafka's UnifiedLog.fetchOffsetByTimestamp for a topic without remote storage: -4 (earliest local)
    is the log start offset with the epoch of its first leader epoch entry, like -2; -5 (latest tiered) and
    -6 (earliest pending upload) are no offset: -1 with leader epoch -1, and no error."""
    env = HandlerEnv()
    env.metadata.create_topic("t", 1, 1)
    handler = produce_handler(env)
    for values in ([b"a", b"b"], [b"c"]):
        await call(handler, K.PRODUCE, 13, produce_body([
            {"topic_id": env.metadata.get_topic("t").topic_id,
             "partition_data": [{"index": 0, "records": batch(values)}]}]))
    lo = ListOffsetsHandler(env.log)

    async def answer(ts: int, version: int = 11) -> tuple[int, int, int, int]:
        r = await call(lo, K.LIST_OFFSETS, version, list_offsets_body(ts))
        p = r.topics[0].partitions[0]
        return p.error_code, p.timestamp, p.offset, p.leader_epoch

    assert await answer(-2) == (0, -1, 0, 0)
    assert await answer(-4) == (0, -1, 0, 0)
    assert await answer(-1) == (0, -1, 3, 0)
    assert await answer(-5) == (0, -1, -1, -1)
    assert await answer(-6) == (0, -1, -1, -1)
    # A special timestamp is refused at versions before its own (Kafka's isListOffsetsTimestampUnsupported).
    unsupported = (E.UNSUPPORTED_VERSION, -1, -1, -1)
    assert await answer(-6, 10) == unsupported
    assert await answer(-5, 8) == unsupported
    assert await answer(-4, 7) == unsupported
    assert await answer(-3, 6) == unsupported
    assert await answer(-7) == unsupported  # no such special timestamp
    assert (await answer(-4, 8))[2] == 0 and (await answer(-5, 9))[2] == -1


# -- Metadata ---------------------------------------------------------------------------------------
async def test_metadata_v13_error_code() -> None:
    env = HandlerEnv()
    env.metadata.create_topic("t", 1, 1)
    md = MetadataHandler(env.metadata, env.topics, env.config)
    r = await call(md, K.METADATA, 13, {"topics": None})
    assert r.error_code == 0 and [t.name for t in r.topics] == ["t"]
    # Topic ids are for v12+: Kafka refuses them (and a null name) at v10-11 as an invalid request.
    with pytest.raises(Exception, match="INVALID_REQUEST|Topic IDs") as info:
        await call(md, K.METADATA, 11, {"topics": [{"topic_id": env.metadata.get_topic("t").topic_id,
                                                    "name": None}]})
    assert getattr(info.value, "code", None) == E.INVALID_REQUEST


async def test_a_failed_metadata_v13_request_carries_the_error_at_the_top(broker: Broker,
                                                                          conn: KafkaConnection) -> None:
    """MetadataRequest.getErrorResponse (KIP-1102): the request's error on each named topic and, from v13, at
    the top level; REBOOTSTRAP_REQUIRED there tells a client to rebootstrap."""
    await create(conn, "t")
    broker.faults.add(api="Metadata", error="REBOOTSTRAP_REQUIRED", count=2)
    body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}
    r13 = await conn.request(K.METADATA, 13, body)
    assert r13.error_code == E.REBOOTSTRAP_REQUIRED
    assert [(t.name, t.error_code) for t in r13.topics] == [("t", E.REBOOTSTRAP_REQUIRED)]
    r12 = await conn.request(K.METADATA, 12, body)  # no top-level code before v13
    assert r12.error_code == 0 and r12.topics[0].error_code == E.REBOOTSTRAP_REQUIRED
    ok = await conn.request(K.METADATA, 13, body)
    assert ok.error_code == 0 and ok.topics[0].error_code == 0


async def test_a_failed_produce_v13_answers_by_topic_id(broker: Broker, conn: KafkaConnection) -> None:
    """An error response to Produce v13 (here an injected one) names each topic by its id."""
    await create(conn, "t")
    topic_id = broker.metadata.get_topic("t").topic_id
    broker.faults.add(api="Produce", error="NOT_ENOUGH_REPLICAS", count=1)
    r = await conn.request(K.PRODUCE, 13, produce_body(
        [{"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch([b"x"])}]}]))
    assert [(t.topic_id, [p.error_code for p in t.partition_responses]) for t in r.responses] == [
        (topic_id, [E.NOT_ENOUGH_REPLICAS])]
    assert (await produce(conn, "t", batch([b"y"]), version=12)).base_offset == 0


async def test_a_per_partition_fault_finds_a_produce_v13_topic_by_id(broker: Broker, conn: KafkaConnection) -> None:
    """Fault rules name topics; a Produce v13 names them by id: the rule still picks its partition."""
    await create(conn, "t", partitions=2)
    topic_id = broker.metadata.get_topic("t").topic_id
    broker.faults.add(api="Produce", topic="t", partition=0, error="NOT_LEADER_OR_FOLLOWER", per_partition=True,
                      count=1)
    r = await conn.request(K.PRODUCE, 13, produce_body([{"topic_id": topic_id, "partition_data": [
        {"index": 0, "records": batch([b"p0"])}, {"index": 1, "records": batch([b"p1"])}]}]))
    assert {t.topic_id for t in r.responses} == {topic_id}
    codes = {p.index: (p.error_code, p.base_offset) for t in r.responses for p in t.partition_responses}
    assert codes[0][0] == E.NOT_LEADER_OR_FOLLOWER and codes[1] == (0, 0)
