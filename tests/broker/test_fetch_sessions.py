"""Fetch sessions (KIP-227) driven with raw Fetch requests through every transition."""

from __future__ import annotations

import uuid

import pytest
import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode

from helpers import batch, create, produce, wait_until


def part(p: int, offset: int = 0, max_bytes: int = 1 << 20) -> dict:
    return {"partition": p, "fetch_offset": offset, "partition_max_bytes": max_bytes, "log_start_offset": -1}


async def fetch(conn, session_id: int, epoch: int, topics: list[dict], forgotten: list[dict] | None = None,
                version: int = 12, replica_id: int = -1, max_wait_ms: int = 0):
    return await conn.request(K.FETCH, version, {
        "replica_id": replica_id, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
        "session_id": session_id, "session_epoch": epoch, "topics": topics,
        "forgotten_topics_data": forgotten or []})


def returned(resp) -> dict[tuple[str, int], object]:
    return {(t.topic, p.partition_index): p for t in resp.responses for p in t.partitions}


async def test_full_then_incremental_add_change_forget(broker, conn):
    await create(conn, "s", 4)
    cache = broker.fetch_manager.cache
    r = await fetch(conn, 0, 0, [{"topic": "s", "partitions": [part(0), part(1)]}])
    assert r.error_code == 0 and r.session_id > 0
    sid = r.session_id
    assert set(returned(r)) == {("s", 0), ("s", 1)}  # a full response carries all partitions
    assert cache.num_incremental_fetch_sessions == 1 and cache.num_incremental_fetch_partitions_cached == 2

    # Nothing changed: an incremental response carries no partitions.
    r = await fetch(conn, sid, 1, [])
    assert r.session_id == sid and returned(r) == {}

    # New data on partition 1 only: only partition 1 comes back.
    await produce(conn, "s", batch([b"x", b"y"]), partition=1)
    r = await fetch(conn, sid, 2, [])
    got = returned(r)
    assert set(got) == {("s", 1)} and got[("s", 1)].high_watermark == 2 and len(got[("s", 1)].records) > 0

    # Client moves its position on partition 1 (change) and adds partition 2 (add).
    r = await fetch(conn, sid, 3, [{"topic": "s", "partitions": [part(1, offset=2), part(2)]}])
    got = returned(r)
    assert set(got) == {("s", 2)}  # p2 is new to the session; p1 has nothing new at offset 2
    assert cache.num_incremental_fetch_partitions_cached == 3

    # Forget partition 0; data then arriving on partition 0 is not returned.
    r = await fetch(conn, sid, 4, [], forgotten=[{"topic": "s", "partitions": [0]}])
    assert returned(r) == {}
    assert cache.num_incremental_fetch_partitions_cached == 2
    await produce(conn, "s", batch([b"z"]), partition=0)
    r = await fetch(conn, sid, 5, [])
    assert returned(r) == {}
    # Data on partition 2 is returned once; the session then remembers the new high watermark.
    await produce(conn, "s", batch([b"w"]), partition=2)
    r = await fetch(conn, sid, 6, [])
    assert set(returned(r)) == {("s", 2)}


async def test_log_start_offset_change_is_reported(broker, conn):
    await create(conn, "lso")
    for i in range(3):
        await produce(conn, "lso", batch([b"%d" % i]))
    r = await fetch(conn, 0, 0, [{"topic": "lso", "partitions": [part(0, offset=3)]}])
    sid = r.session_id
    assert returned(await fetch(conn, sid, 1, [])) == {}
    await conn.request(K.DELETE_RECORDS, 2, {"topics": [{"name": "lso", "partitions": [
        {"partition_index": 0, "offset": 2}]}], "timeout_ms": 1000})
    got = returned(await fetch(conn, sid, 2, []))
    assert got[("lso", 0)].log_start_offset == 2


async def test_wrong_epoch_and_unknown_session(broker, conn):
    await create(conn, "e")
    r = await fetch(conn, 0, 0, [{"topic": "e", "partitions": [part(0)]}])
    sid = r.session_id
    bad = await fetch(conn, sid, 5, [])
    assert bad.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH and bad.session_id == 0 and not bad.responses
    ok = await fetch(conn, sid, 1, [])  # the failed request did not advance the epoch
    assert ok.error_code == 0
    missing = await fetch(conn, sid + 1 if sid < 2**31 - 1 else 1, 1, [])
    assert missing.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_close_session_with_final_epoch(broker, conn):
    await create(conn, "c")
    r = await fetch(conn, 0, 0, [{"topic": "c", "partitions": [part(0)]}])
    sid = r.session_id
    closed = await fetch(conn, sid, -1, [{"topic": "c", "partitions": [part(0)]}])
    assert closed.error_code == 0 and closed.session_id == 0 and set(returned(closed)) == {("c", 0)}
    assert broker.fetch_manager.cache.num_incremental_fetch_sessions == 0
    assert (await fetch(conn, sid, 1, [])).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_full_fetch_naming_a_session_replaces_it(broker, conn):
    await create(conn, "r")
    sid = (await fetch(conn, 0, 0, [{"topic": "r", "partitions": [part(0)]}])).session_id
    r = await fetch(conn, sid, 0, [{"topic": "r", "partitions": [part(0)]}])
    assert r.session_id not in (0, sid)
    assert broker.fetch_manager.cache.num_incremental_fetch_sessions == 1


async def test_sessionless_fetches(broker, conn):
    await create(conn, "nl")
    r = await fetch(conn, 0, -1, [{"topic": "nl", "partitions": [part(0)]}])
    assert r.session_id == 0 and set(returned(r)) == {("nl", 0)}
    r6 = await fetch(conn, 0, 0, [{"topic": "nl", "partitions": [part(0)]}], version=6)
    assert set(returned(r6)) == {("nl", 0)}
    assert broker.fetch_manager.cache.num_incremental_fetch_sessions == 0


async def test_forgetting_every_partition_closes_the_session(broker, conn):
    await create(conn, "all")
    sid = (await fetch(conn, 0, 0, [{"topic": "all", "partitions": [part(0)]}])).session_id
    r = await fetch(conn, sid, 1, [], forgotten=[{"topic": "all", "partitions": [0]}])
    assert r.session_id == 0
    assert broker.fetch_manager.cache.num_incremental_fetch_sessions == 0


async def test_errors_are_always_reported_in_incremental_responses(broker, conn):
    await create(conn, "err")
    sid = (await fetch(conn, 0, 0, [{"topic": "err", "partitions": [part(0)]}])).session_id
    r = await fetch(conn, sid, 1, [{"topic": "err", "partitions": [part(0, offset=99)]}])
    assert returned(r)[("err", 0)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    r = await fetch(conn, sid, 2, [])
    assert returned(r)[("err", 0)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE  # still wrong, still sent
    r = await fetch(conn, sid, 3, [{"topic": "err", "partitions": [part(0, offset=0)]}])
    assert returned(r)[("err", 0)].error_code == 0  # re-sent once the error clears


async def test_incremental_long_poll_woken_by_produce(broker):
    async with await KafkaConnection.connect("127.0.0.1", broker.port) as c1, \
            await KafkaConnection.connect("127.0.0.1", broker.port) as c2:
        await create(c1, "lp", 2)
        sid = (await fetch(c1, 0, 0, [{"topic": "lp", "partitions": [part(0), part(1)]}])).session_id
        out = {}

        async def poll():
            out["r"] = await fetch(c1, sid, 1, [], max_wait_ms=10000)

        async with trio.open_nursery() as n:
            n.start_soon(poll)
            # Watching both partitions of its session (one registration per partition).
            await wait_until(lambda: broker.delayed_fetch.watched() == 2, what="the fetch to wait in the purgatory")
            assert not out  # the incremental fetch waits for data ...
            await produce(c2, "lp", batch([b"wake"]), partition=1)  # ... and this produce wakes it
        assert set(returned(out["r"])) == {("lp", 1)}


async def test_eviction_under_a_full_cache():
    cfg = BrokerConfig(port=0, max_incremental_fetch_session_cache_slots=2,
                       min_incremental_fetch_session_eviction_ms=120000)
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "ev", 8)
            cache = b.fetch_manager.cache

            async def new(n: int, replica_id: int = -1) -> int:
                r = await fetch(c, 0, 0, [{"topic": "ev", "partitions": [part(i) for i in range(n)]}],
                                replica_id=replica_id)
                return r.session_id

            small, medium = await new(2), await new(4)
            assert small and medium and cache.num_incremental_fetch_sessions == 2
            # Smaller than every cached session: no slot, served sessionless.
            assert await new(1) == 0
            assert cache.evictions == 0
            # Bigger than the smallest: evicts it.
            big = await new(6)
            assert big and cache.evictions == 1
            assert (await fetch(c, small, 1, [])).error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            # A follower session is privileged: it evicts an unprivileged one even when smaller.
            follower = await new(1, replica_id=1)
            assert follower and cache.evictions == 2
            assert {s.privileged for s in cache.sessions.values()} == {True, False}
            # Unprivileged sessions cannot evict the privileged one; the remaining unprivileged
            # one (size 6) is only evicted by a bigger one.
            assert await new(5) == 0
            assert await new(8)
            assert cache.num_incremental_fetch_sessions == 2


async def test_stale_sessions_are_evicted_first():
    cfg = BrokerConfig(port=0, max_incremental_fetch_session_cache_slots=1,
                       min_incremental_fetch_session_eviction_ms=0)
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "st", 4)
            big = (await fetch(c, 0, 0, [{"topic": "st", "partitions": [part(i) for i in range(4)]}],
                               replica_id=1)).session_id
            cache = b.fetch_manager.cache
            used = cache.sessions[big].last_used_ms
            await wait_until(lambda: cache.clock.time_ms() > used, what="the big session to become stale")
            small = (await fetch(c, 0, 0, [{"topic": "st", "partitions": [part(0)]}])).session_id
            assert big and small and b.fetch_manager.cache.evictions == 1


async def test_topic_id_sessions_v13(broker, conn):
    await create(conn, "tid", 2)
    md = await conn.request(K.METADATA, 12, {"topics": [{"name": "tid"}]})
    tid = md.topics[0].topic_id
    r = await fetch(conn, 0, 0, [{"topic_id": tid, "partitions": [part(0), part(1)]}], version=13)
    sid = r.session_id
    assert sid and [t.topic_id for t in r.responses] == [tid]
    await produce(conn, "tid", batch([b"a"]), partition=0)
    r = await fetch(conn, sid, 1, [], version=13)
    assert [(t.topic_id, [p.partition_index for p in t.partitions]) for t in r.responses] == [(tid, [0])]
    # A topic-id session used from a pre-13 request is an error (and vice versa).
    r = await fetch(conn, sid, 2, [], version=12)
    assert r.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    sid12 = (await fetch(conn, 0, 0, [{"topic": "tid", "partitions": [part(0)]}], version=12)).session_id
    r = await fetch(conn, sid12, 1, [], version=13)
    assert r.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # Unknown topic id: UNKNOWN_TOPIC_ID for its partitions.
    ghost = uuid.uuid4()
    r = await fetch(conn, 0, 0, [{"topic_id": ghost, "partitions": [part(0)]}], version=13)
    assert r.responses[0].topic_id == ghost and r.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    # Forgetting by topic id.
    r = await fetch(conn, sid, 2, [], forgotten=[{"topic_id": tid, "partitions": [1]}], version=13)
    assert r.error_code == 0
    assert broker.fetch_manager.cache.get(sid).size() == 1


@pytest.mark.parametrize("version", [7, 8, 9, 10, 11, 12])
async def test_sessions_at_every_session_version(broker, conn, version):
    await create(conn, f"v{version}")
    r = await fetch(conn, 0, 0, [{"topic": f"v{version}", "partitions": [part(0)]}], version=version)
    assert r.session_id > 0
    r = await fetch(conn, r.session_id, 1, [], version=version)
    assert r.error_code == 0 and returned(r) == {}


async def test_metrics_use_kafka_names(broker, conn):
    await create(conn, "m", 3)
    r = await fetch(conn, 0, 0, [{"topic": "m", "partitions": [part(0), part(1), part(2)]}])
    await fetch(conn, r.session_id, 1, [])
    m = broker.metrics()
    assert m["kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions"] == 1
    assert m["kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached"] == 3
    assert m["kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec"] == 0
    assert m["kafka.network:type=RequestMetrics,name=RequestsTotal,request=Fetch"] == 2
