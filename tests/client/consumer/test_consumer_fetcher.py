"""The fetcher: incremental fetch sessions really used, the bounded chunk queue back-pressures
fetching while the application does not poll, and records-lag / records-lag-max against a known
backlog."""

from __future__ import annotations

import trio
import trio.testing
from helpers import batch, produce, wait_until

from minikafka.broker.broker import Broker
from minikafka.client.consumer import KafkaConsumer, TopicPartition
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.headers import request_body_offset
from minikafka.broker.request import ResponseObserver


def boot(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


def fetch_observer(into: list, client_id: str):
    """Record (session_id, epoch, partitions named) of every fetch ``client_id`` sends."""
    api = APIS[ApiKey.FETCH]

    def observe(ctx, frame, response) -> None:
        if ctx.api_key != ApiKey.FETCH or ctx.client_id != client_id:
            return
        req = api.request.parse(memoryview(frame)[request_body_offset(frame):], ctx.api_version)
        into.append((req.session_id, req.session_epoch, sum(len(t.partitions) for t in req.topics)))

    return observe


async def test_incremental_fetch_sessions_are_used(broker: Broker, conn) -> None:
    broker.create_topic("s", 8, 1)
    seen: list = []
    broker.observe(ResponseObserver(fetch_observer(seen, "sess")))
    async with KafkaConsumer(bootstrap_servers=boot(broker), client_id="sess", auto_offset_reset="earliest",
                             fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition("s", p) for p in range(8)])
        total = 0
        for rnd in range(3):
            await produce(conn, "s", batch([b"r%d-%d" % (rnd, i) for i in range(5)]), partition=rnd)
            with trio.fail_after(10):
                while total < 5 * (rnd + 1):
                    total += sum(len(v) for v in (await c.poll(200)).values())
            idle_from = len(seen)  # idle: an empty incremental fetch naming no partition
            await wait_until(lambda: any(s[1] > 0 and s[2] == 0 for s in seen[idle_from:]), what="an idle fetch")
        assert broker.fetch_manager.cache.num_incremental_fetch_sessions >= 1
        assert c.fetcher.incremental_fetches_sent >= 3
    full = [s for s in seen if s[1] == 0]
    incremental = [s for s in seen if s[1] > 0]
    assert full and full[0][2] == 8  # the first fetch names every partition and opens the session
    assert incremental and max(s[2] for s in incremental) <= 1  # later ones only the partition that moved
    assert len({s[0] for s in incremental}) == 1 and incremental[0][0] != 0


async def test_bounded_queue_back_pressures_fetching(broker: Broker, conn) -> None:
    broker.create_topic("bp", 4, 1)
    for p in range(4):
        for i in range(20):  # 20 batches of 10 per partition
            await produce(conn, "bp", batch([b"x" * 100] * 10), partition=p)
    seen: list = []
    broker.observe(ResponseObserver(fetch_observer(seen, "slow")))
    # Each fetch returns about one batch per partition; at most 3 chunks may wait in the queue.
    async with KafkaConsumer(bootstrap_servers=boot(broker), client_id="slow", auto_offset_reset="earliest",
                             max_partition_fetch_bytes=1200, queued_max_chunks=3, fetch_max_wait_ms=50) as c:
        c.assign([TopicPartition("bp", p) for p in range(4)])
        await c.poll(0)  # resolves the positions; the fetcher starts
        # The application does not poll: the fetcher fills the queue and blocks putting the next chunk in.
        queue = c.fetcher._recv
        await wait_until(lambda: queue.statistics().tasks_waiting_send == 1, what="the fetcher to block")
        stalled = len(seen)
        assert 1 <= stalled <= 2  # one fetch filled the queue (4 chunks > 3): the fetcher is blocked
        assert c.fetcher.queued_chunks == 3
        await trio.testing.wait_all_tasks_blocked()  # everything else settles ...
        assert len(seen) == stalled and queue.statistics().tasks_waiting_send == 1  # ... still blocked, no fetch
        n = 0
        with trio.fail_after(15):
            while n < 800:
                n += sum(len(v) for v in (await c.poll(200)).values())
        assert n == 800 and len(seen) > stalled + 10  # polling released the fetcher


async def test_records_lag_and_lag_max(broker: Broker, conn) -> None:
    broker.create_topic("lag", 2, 1)
    for i in range(10):
        await produce(conn, "lag", batch([b"v"] * 100), partition=0)  # backlog of 1000 on partition 0
    await produce(conn, "lag", batch([b"v"] * 40), partition=1)  # and 40 on partition 1
    t0, t1 = TopicPartition("lag", 0), TopicPartition("lag", 1)
    async with KafkaConsumer(bootstrap_servers=boot(broker), auto_offset_reset="earliest", max_poll_records=100,
                             fetch_max_wait_ms=50) as c:
        c.assign([t0])
        got = await c.poll(5000)
        assert len(got[t0]) == 100
        assert c.metric("records-lag", topic="lag", partition=0) == 900
        assert c.metric("records-lag-max", topic="lag", partition=0) == 900
        assert c.metric("records-lag-max") == 900
        assert c.lag(t0) == 900
        n = 100
        with trio.fail_after(10):
            while n < 1000:
                n += sum(len(v) for v in (await c.poll(200)).values())
        assert c.metric("records-lag", topic="lag", partition=0) == 0
        assert c.metric("records-lag-max", topic="lag", partition=0) == 900  # the window's maximum
        assert 0 < c.metric("records-lag-avg", topic="lag", partition=0) < 900
        c.assign([t0, t1])
        c.seek(t1, 10)
        with trio.fail_after(10):
            while not (await c.poll(200)):
                pass
        assert c.metric("records-lag", topic="lag", partition=1) == 0  # 30 records, all returned
        assert c.metric("records-lag-max") == 900
        m = c.metrics()
        names = {n.name for n in m}
        assert {"records-lag-max", "fetch-rate", "fetch-latency-avg", "bytes-consumed-rate",
                "records-consumed-rate", "records-consumed-total"} <= names
        assert c.metric("records-consumed-total") == 1030


async def test_fetch_settings_reach_the_wire_and_bound_responses(broker: Broker, conn) -> None:
    """fetch.min.bytes, fetch.max.wait.ms, fetch.max.bytes and max.partition.fetch.bytes go into every
    FetchRequest, and responses respect the per-partition limit (KIP-74 aside: at least one batch)."""
    broker.create_topic("cfg", 2, 1)
    for p in range(2):
        for i in range(20):
            await produce(conn, "cfg", batch([b"x" * 200]), partition=p)
    requests: list = []
    api = APIS[ApiKey.FETCH]

    def observe(ctx, frame, response) -> None:
        if ctx.api_key == ApiKey.FETCH and ctx.client_id == "cfg":
            req = api.request.parse(memoryview(frame)[request_body_offset(frame):], ctx.api_version)
            resp_bytes = sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in response)
            requests.append((req, resp_bytes))

    broker.observe(ResponseObserver(observe))
    async with KafkaConsumer(bootstrap_servers=boot(broker), client_id="cfg", auto_offset_reset="earliest",
                             fetch_min_bytes=7, fetch_max_wait_ms=123, fetch_max_bytes=5000,
                             max_partition_fetch_bytes=1000) as c:
        c.assign([TopicPartition("cfg", p) for p in range(2)])
        got = 0
        with trio.fail_after(10):
            while got < 40:
                got += sum(len(v) for v in (await c.poll(200)).values())
    assert requests
    for req, resp_bytes in requests:
        assert (req.min_bytes, req.max_wait_ms, req.max_bytes) == (7, 123, 5000)
        assert all(p.partition_max_bytes == 1000 for t in req.topics for p in t.partitions)
        # Each batch here is ~270 bytes: at most 1000 bytes per partition, two partitions, plus overhead.
        assert resp_bytes < 2 * 1000 + 200
    assert len(requests) >= 40 * 270 // 2000  # the limits forced several rounds
