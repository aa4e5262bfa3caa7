"""Handlers unit-tested on in-memory storage, without a socket or a broker.

Each handler is built with just the services it declares (an in-memory
``ReplicaManager`` and ``ClusterMetadata``, purgatories, quota managers, a
manual clock), requests are built and parsed with their real schemas, and
responses built and parsed back at the same version.  The long-poll tests show
the keyed purgatory: a fetch waiting on one partition is not woken by appends
to another, and re-reads only the partition that changed.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
import trio.testing

from helpers import HandlerEnv, batch, values
from minikafka.broker.apis import KafkaApis
from minikafka.broker.handlers.fetch import FetchHandler
from minikafka.broker.handlers.list_offsets import DeleteRecordsHandler, ListOffsetsHandler
from minikafka.broker.handlers.metadata import MetadataHandler
from minikafka.broker.handlers.produce import ProduceHandler
from minikafka.broker.handlers.topics import CreateTopicsHandler
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.replica_manager import ReplicaManager
from minikafka.broker.request import Request, RequestContext
from minikafka.common import TopicPartition
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode

_corr = itertools.count(1)


class ZeroTimer:
    """The handler-time source: no time passes (request quotas are not exercised here)."""

    def task_ns(self) -> int:
        return 0


class Env(HandlerEnv):
    """One broker's worth of services in memory: node 0 registered at 127.0.0.1:9092."""

    def produce_handler(self) -> ProduceHandler:
        return ProduceHandler(self.log, self.topics, self.delayed_produce, self.quotas.produce, self.config,
                              self.clock)

    def fetch_handler(self) -> FetchHandler:
        return FetchHandler(self.log, self.metadata, self.sessions, self.delayed_fetch, self.quotas.fetch,
                            self.quotas.request, self.leader_quota, ZeroTimer(), self.config, self.clock)


async def call(handler: Any, key: ApiKey, version: int, fields: dict) -> Any:
    """Build and parse the request, run the handler, build and parse its response (None: no response)."""
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(int(key), version, next(_corr), "test", "conn", request_size=100)
    body = await handler.handle(ctx, req)
    return None if body is None else api.response.parse(api.response.build(body, version), version)


def produce_fields(topic: str, records: bytes, partition: int = 0, acks: int = 1) -> dict:
    return {"acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def fetch_fields(topic: str, partitions: dict[int, int], max_wait_ms: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "fetch_offset": off, "partition_max_bytes": 1 << 20} for p, off in partitions.items()]}]}


async def test_produce_appends_and_auto_creates() -> None:
    env = Env()
    produce = env.produce_handler()
    r = await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"a", b"b"])))
    p = r.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (0, 0)
    r = await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"c"])))
    assert r.responses[0].partition_responses[0].base_offset == 2
    assert env.log.get("t", 0).log.log_end_offset == 3
    assert env.metadata.get_topic("t") is not None  # created by the produce


async def test_produce_errors_and_acks_zero() -> None:
    env = Env(auto_create_topics_enable=False)
    produce = env.produce_handler()
    r = await call(produce, ApiKey.PRODUCE, 9, produce_fields("missing", batch([b"x"])))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    env.metadata.create_topic("t", 1, 1)
    r = await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"x"]), acks=2))
    assert r.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    assert await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"x"]), acks=0)) is None
    assert env.log.get("t", 0).log.log_end_offset == 1


async def test_fetch_reads_what_was_produced() -> None:
    env = Env()
    env.metadata.create_topic("t", 2, 1)
    await call(env.produce_handler(), ApiKey.PRODUCE, 9, produce_fields("t", batch([b"v1", b"v2"]), partition=1))
    r = await call(env.fetch_handler(), ApiKey.FETCH, 12, fetch_fields("t", {0: 0, 1: 0}))
    parts = {p.partition_index: p for p in r.responses[0].partitions}
    assert values(bytes(parts[1].records)) == [b"v1", b"v2"] and parts[1].high_watermark == 2
    assert not parts[0].records and parts[0].error_code == 0


async def test_long_poll_is_woken_only_by_its_own_partition(autojump_clock: trio.testing.MockClock) -> None:
    env = Env()
    env.metadata.create_topic("t", 2, 1)
    produce, fetch = env.produce_handler(), env.fetch_handler()
    result: list[Any] = []

    async def poll() -> None:
        result.append(await call(fetch, ApiKey.FETCH, 12, fetch_fields("t", {0: 0}, max_wait_ms=60_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.testing.wait_all_tasks_blocked()
        assert env.delayed_fetch.watched() == 1
        await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"other"]), partition=1))
        await trio.testing.wait_all_tasks_blocked()
        assert env.delayed_fetch.completions == 0 and not result  # partition 1's append woke nobody
        started = trio.current_time()
        await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"mine"]), partition=0))
    assert env.delayed_fetch.completions == 1 and env.delayed_fetch.watched() == 0
    assert trio.current_time() - started < 1  # answered on the append, not at max_wait_ms
    assert values(bytes(result[0].responses[0].partitions[0].records)) == [b"mine"]


async def test_long_poll_times_out_empty(autojump_clock: trio.testing.MockClock) -> None:
    env = Env()
    env.metadata.create_topic("t", 1, 1)
    start = trio.current_time()
    r = await call(env.fetch_handler(), ApiKey.FETCH, 12, fetch_fields("t", {0: 0}, max_wait_ms=500))
    assert trio.current_time() - start == pytest.approx(0.5)
    assert not r.responses[0].partitions[0].records


async def test_list_offsets_and_delete_records() -> None:
    env = Env()
    env.metadata.create_topic("t", 1, 1)
    await call(env.produce_handler(), ApiKey.PRODUCE, 9, produce_fields("t", batch([b"a", b"b", b"c"])))
    await call(env.produce_handler(), ApiKey.PRODUCE, 9, produce_fields("t", batch([b"d"])))
    d = await call(DeleteRecordsHandler(env.log), ApiKey.DELETE_RECORDS, 2, {
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 3}]}], "timeout_ms": 100})
    assert d.topics[0].partitions[0].low_watermark == 3
    lo = ListOffsetsHandler(env.log)

    async def offset(ts: int) -> int:
        r = await call(lo, ApiKey.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": ts}]}]})
        return r.topics[0].partitions[0].offset

    assert (await offset(-2), await offset(-1)) == (3, 4)


async def test_metadata_and_create_topics() -> None:
    env = Env()
    created = await call(CreateTopicsHandler(env.metadata, env.config), ApiKey.CREATE_TOPICS, 7, {
        "topics": [{"name": "a", "num_partitions": 3, "replication_factor": 1},
                   {"name": "bad topic", "num_partitions": 1, "replication_factor": 1}]})
    assert [t.error_code for t in created.topics] == [0, ErrorCode.INVALID_TOPIC_EXCEPTION]
    md = await call(MetadataHandler(env.metadata, env.topics, env.config), ApiKey.METADATA, 12,
                    {"topics": None})
    assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(0, "127.0.0.1", 9092)]
    assert [(t.name, len(t.partitions)) for t in md.topics] == [("a", 3)]
    assert TopicPartition("a", 2) in env.log.partitions  # the replica manager followed the metadata


class Channel:
    def start_throttling(self) -> None:
        pass

    def end_throttling(self) -> None:
        pass


async def test_handler_exception_becomes_an_error_response() -> None:
    """Kafka's ``handleError``: a failing handler answers UNKNOWN_SERVER_ERROR for every partition."""
    env = Env()

    async def broken(ctx: RequestContext, req: Any) -> Any:
        raise RuntimeError("boom")

    apis = KafkaApis({ApiKey.PRODUCE: broken}, env.quotas, ZeroTimer(), env.clock)
    api = APIS[ApiKey.PRODUCE]
    header = b"\x00\x00\x00\x09\x00\x00\x00\x07\x00\x01c"  # Produce v9 header (flexible: tags follow)
    body = api.request.build(produce_fields("t", batch([b"x"]), partition=3), 9)
    request: Request = apis.parse(bytearray(header + b"\x00" + body), "conn")
    response = await apis.handle(request, Channel())
    assert response.error == ErrorCode.UNKNOWN_SERVER_ERROR
    raw = b"".join(bytes(s) for s in response.segments)
    parsed = api.response.parse(raw[5:], 9)  # correlation id + empty header tags
    assert int.from_bytes(raw[:4], "big") == 7
    assert [(p.index, p.error_code) for t in parsed.responses for p in t.partition_responses] == [
        (3, ErrorCode.UNKNOWN_SERVER_ERROR)]


async def test_woken_fetch_re_reads_only_the_partition_that_changed(autojump_clock: trio.testing.MockClock) -> None:
    env = Env()
    env.metadata.create_topic("t", 8, 1)
    produce, fetch = env.produce_handler(), env.fetch_handler()
    reads: list[int] = []
    real = fetch._read_partition

    def counting(key, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(key.partition)
        return real(key, *args, **kwargs)

    fetch._read_partition = counting  # type: ignore[method-assign]
    fields = fetch_fields("t", {p: 0 for p in range(8)}, max_wait_ms=60_000)
    fields["min_bytes"] = 1 << 20  # keep waiting after the first append
    result: list[Any] = []

    async def poll() -> None:
        result.append(await call(fetch, ApiKey.FETCH, 12, fields))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(poll)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(reads) == list(range(8))  # the first pass reads every partition
        reads.clear()
        await call(produce, ApiKey.PRODUCE, 9, produce_fields("t", batch([b"x"]), partition=5))
        await trio.testing.wait_all_tasks_blocked()
        assert reads == [5] and not result  # woken, re-read partition 5 only, still below min_bytes
    assert result and [p.partition_index for p in result[0].responses[0].partitions if p.records] == [5]
