"""subscribe() with a consumer group: commits resumed by a new member, commit_async, and a group
shared with kafka-python's KafkaConsumer (partitions split, then taken over when it leaves)."""

from __future__ import annotations

import threading
import warnings

import pytest
import trio
from helpers import batch, produce

from minikafka.broker.broker import Broker
from minikafka.client.consumer import KafkaConsumer, TopicPartition

FAST = dict(heartbeat_interval_ms=100, session_timeout_ms=6000, auto_offset_reset="earliest")


def boot(broker: Broker) -> str:
    return f"127.0.0.1:{broker.port}"


async def put(conn, topic: str, partitions: int, per_partition: int, tag: bytes = b"") -> set[bytes]:
    sent = set()
    for p in range(partitions):
        vals = [b"%s%s-%d-%d" % (tag, topic.encode(), p, i) for i in range(per_partition)]
        await produce(conn, topic, batch(vals), partition=p)
        sent.update(vals)
    return sent


async def collect(c: KafkaConsumer, n: int, timeout: float = 15) -> list:
    out: list = []
    with trio.fail_after(timeout):
        while len(out) < n:
            for tp, recs in (await c.poll(200)).items():
                out.extend((tp, r) for r in recs)
    return out


async def test_commit_then_new_member_resumes(broker: Broker, conn) -> None:
    broker.create_topic("g1", 3, 1)
    await put(conn, "g1", 3, 10)
    async with KafkaConsumer("g1", bootstrap_servers=boot(broker), group_id="resume", enable_auto_commit=False,
                             max_poll_records=12, **FAST) as c:
        got = await collect(c, 12)
        assert 12 <= len(got) < 30
        assert c.assignment() == {TopicPartition("g1", p) for p in range(3)}
        await c.commit()
        committed = {tp: await c.committed(tp) for tp in c.assignment()}
        assert sum(committed[tp] or 0 for tp in committed) == len(got)
        done = trio.Event()
        results = []
        c.commit_async({TopicPartition("g1", 0): 5}, callback=lambda offs, exc: (results.append(exc), done.set()))
        with trio.fail_after(5):
            await done.wait()
        assert results == [None] and await c.committed(TopicPartition("g1", 0)) == 5
        await c.commit()  # back to the consumed positions
    first = {(tp, r.offset) for tp, r in got}
    async with KafkaConsumer("g1", bootstrap_servers=boot(broker), group_id="resume", **FAST) as c2:
        rest = await collect(c2, 30 - len(got))
        assert await c2.poll(300) == {}
    second = {(tp, r.offset) for tp, r in rest}
    assert not first & second and len(first | second) == 30  # exactly once across the two members


def kafka_python_member(bootstrap: str, topic: str, stop: threading.Event, seen: list, assigned: list) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer as KPConsumer
    kc = KPConsumer(topic, bootstrap_servers=bootstrap, group_id="mixed", auto_offset_reset="earliest",
                    enable_auto_commit=False, heartbeat_interval_ms=100, session_timeout_ms=6000,
                    client_id="kafka-python-member")
    try:
        while not stop.is_set():
            for tp, recs in kc.poll(timeout_ms=100).items():
                seen.extend((tp.partition, r.offset, r.value) for r in recs)
            assigned[:] = [sorted(tp.partition for tp in kc.assignment())]
            if seen:
                kc.commit()
    finally:
        kc.close()


@pytest.mark.clients
async def test_group_shared_with_kafka_python(broker: Broker, conn) -> None:
    broker.create_topic("mixed", 6, 1)
    stop = threading.Event()
    kp_seen: list = []
    kp_assigned: list = [[]]
    ours: list = []
    async with KafkaConsumer("mixed", bootstrap_servers=boot(broker), group_id="mixed", enable_auto_commit=False,
                             **FAST) as c:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: trio.to_thread.run_sync(
                kafka_python_member, boot(broker), "mixed", stop, kp_seen, kp_assigned))
            # Both members in one generation: the six partitions split three and three.
            with trio.fail_after(20):
                while not (len(c.assignment()) == 3 and len(kp_assigned[0]) == 3):
                    await c.poll(100)
            mine = {tp.partition for tp in c.assignment()}
            assert mine.isdisjoint(kp_assigned[0]) and mine | set(kp_assigned[0]) == set(range(6))
            sent = await put(conn, "mixed", 6, 20, b"r1-")
            with trio.fail_after(20):
                while len(ours) + len(kp_seen) < len(sent):
                    for tp, recs in (await c.poll(100)).items():
                        ours.extend((tp.partition, r.offset, r.value) for r in recs)
                        await c.commit()
            assert {p for p, _, _ in ours} == mine
            assert {p for p, _, _ in kp_seen} == set(kp_assigned[0])
            # kafka-python leaves: our member rebalances onto all six partitions.
            stop.set()
        with trio.fail_after(20):
            while len(c.assignment()) != 6:
                await c.poll(100)
        sent2 = await put(conn, "mixed", 6, 5, b"r2-")
        before = len(ours)
        with trio.fail_after(20):
            while len(ours) - before < len(sent2):
                for tp, recs in (await c.poll(100)).items():
                    ours.extend((tp.partition, r.offset, r.value) for r in recs)
        assert await c.poll(300) == {}
    values = [v for _, _, v in ours] + [v for _, _, v in kp_seen]
    assert sorted(values) == sorted(sent | sent2)  # every record exactly once across both clients
    assert c.coordinator is not None and c.coordinator.rebalances >= 2
