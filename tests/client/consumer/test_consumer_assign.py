"""assign() without a group: seek, seek_to_beginning/end, auto offset reset earliest/latest/none,
out-of-range resets, pause/resume, async iteration, offsets look-ups."""

from __future__ import annotations

import pytest
import trio
from helpers import batch, produce

from minikafka.broker.broker import Broker
from minikafka.client.consumer import KafkaConsumer, NoOffsetForPartitionError, TopicPartition

TP0 = TopicPartition("a", 0)
TP1 = TopicPartition("a", 1)


async def fill(broker: Broker, conn, per_partition: int = 30, partitions: int = 2, topic: str = "a") -> None:
    broker.create_topic(topic, partitions, 1)
    for p in range(partitions):
        for i in range(0, per_partition, 10):
            await produce(conn, topic, batch([b"%s-%d-%d" % (topic.encode(), p, j) for j in range(i, i + 10)]),
                          partition=p)


async def drain(c: KafkaConsumer, total: int, timeout: float = 10) -> dict[TopicPartition, list]:
    got: dict[TopicPartition, list] = {}
    n = 0
    with trio.fail_after(timeout):
        while n < total:
            for tp, recs in (await c.poll(200)).items():
                got.setdefault(tp, []).extend(recs)
                n += len(recs)
    return got


def boot(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


async def test_auto_offset_reset_earliest_and_latest(broker: Broker, conn) -> None:
    await fill(broker, conn)
    async with KafkaConsumer(bootstrap_servers=boot(broker), auto_offset_reset="earliest") as c:
        c.assign([TP0, TP1])
        got = await drain(c, 60)
        assert [r.offset for r in got[TP0]] == list(range(30))
        assert got[TP1][0].value == b"a-1-0"
        assert await c.position(TP0) == 30
    async with KafkaConsumer(bootstrap_servers=boot(broker), auto_offset_reset="latest") as c:
        c.assign([TP0])
        assert await c.position(TP0) == 30
        assert await c.poll(200) == {}
        await produce(conn, "a", batch([b"new"]), partition=0)
        got = await drain(c, 1)
        assert [(r.offset, r.value) for r in got[TP0]] == [(30, b"new")]


async def test_reset_none_raises(broker: Broker, conn) -> None:
    await fill(broker, conn, 10, 1)
    async with KafkaConsumer(bootstrap_servers=boot(broker), auto_offset_reset="none") as c:
        c.assign([TP0])
        with pytest.raises(NoOffsetForPartitionError):
            await c.poll(100)
        c.seek(TP0, 4)
        got = await drain(c, 6)
        assert [r.offset for r in got[TP0]] == list(range(4, 10))


async def test_seek_mid_batch_and_rewind_with_buffered_data(broker: Broker, conn) -> None:
    await fill(broker, conn, 50, 1)
    async with KafkaConsumer(bootstrap_servers=boot(broker), max_poll_records=7) as c:
        c.assign([TP0])
        c.seek(TP0, 13)  # inside the second batch: records below the position are skipped
        first = await c.poll(2000)
        assert [r.offset for r in first[TP0]] == list(range(13, 20))
        c.seek(TP0, 2)  # chunks already queued from offset 20 on are now stale and dropped
        got = await drain(c, 48)
        assert [r.offset for r in got[TP0]] == list(range(2, 50))
        c.seek_to_beginning(TP0)
        assert await c.position(TP0) == 0
        c.seek_to_end(TP0)
        assert await c.position(TP0) == 50
        assert await c.beginning_offsets([TP0]) == {TP0: 0}
        assert await c.end_offsets([TP0]) == {TP0: 50}


async def test_out_of_range_resets(broker: Broker, conn) -> None:
    await fill(broker, conn, 20, 1)
    async with KafkaConsumer(bootstrap_servers=boot(broker), auto_offset_reset="earliest") as c:
        c.assign([TP0])
        c.seek(TP0, 1000)  # beyond the log end: OFFSET_OUT_OF_RANGE -> reset to earliest
        got = await drain(c, 20)
        assert [r.offset for r in got[TP0]] == list(range(20))


async def test_pause_resume_and_async_iteration(broker: Broker, conn) -> None:
    await fill(broker, conn, 20, 2)
    async with KafkaConsumer(bootstrap_servers=boot(broker), auto_offset_reset="earliest") as c:
        c.assign([TP0, TP1])
        c.pause(TP1)
        got = await drain(c, 20)
        assert set(got) == {TP0}
        assert await c.poll(300) == {}
        c.resume(TP1)
        seen = []
        with trio.fail_after(10):
            async for msg in c:
                seen.append((msg.topic, msg.partition, msg.offset, msg.value))
                if len(seen) == 20:
                    break
        assert seen == [("a", 1, i, b"a-1-%d" % i) for i in range(20)]
