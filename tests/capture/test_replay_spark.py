"""Spark replay across tasks: connections that depend on each other (topic created on one, produced with a
producer id made on another, fetched by topic id on a third) in different tasks, kept in order by the hub."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.capture.replay import ReplayOptions, group_connections
from minikafka.capture.replay.plan import build_plan
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import BrokerThread
from minikafka.common.clock import SYSTEM_CLOCK

TOPIC = "xt"
PRODUCES = 9


async def _capture(cap: Path) -> None:
    async with serve_broker(BrokerConfig(port=0, capture_dir=cap), captures=CAPTURE) as broker:
        connect = KafkaConnection.connect
        async with await connect("127.0.0.1", broker.port, client_id="xt-admin") as admin, \
                await connect("127.0.0.1", broker.port, client_id="xt-producer") as producer, \
                await connect("127.0.0.1", broker.port, client_id="xt-consumer") as consumer:
            await admin.negotiate()
            created = await admin.request(K.CREATE_TOPICS, 7, {
                "topics": [{"name": TOPIC, "num_partitions": 3, "replication_factor": 1}], "timeout_ms": 5000})
            assert created.topics[0].error_code == 0
            topic_id = created.topics[0].topic_id
            # The producer id is made on the consumer's connection: the producer's batches need it.
            init = await consumer.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                                  "transaction_timeout_ms": 60000})
            pid, epoch = init.producer_id, init.producer_epoch
            sequences = [0, 0, 0]
            for i in range(PRODUCES):
                p = i % 3
                batch = build_batch([Record(offset_delta=j, value=b"v%d-%d" % (i, j)) for j in range(2)],
                                    producer_id=pid, producer_epoch=epoch, base_sequence=sequences[p],
                                    base_timestamp=SYSTEM_CLOCK.time_ms())
                sequences[p] += 2
                resp = await producer.request(K.PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                             "topic_data": [{"name": TOPIC, "partition_data": [
                                                                 {"index": p, "records": batch}]}]})
                assert resp.responses[0].partition_responses[0].error_code == 0
            for offset in (0, 2, 4):  # by topic id (the one CreateTopics gave on the admin's connection)
                fetched = await consumer.request(K.FETCH, 13, {
                    "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic_id": topic_id, "partitions": [
                        {"partition": p, "fetch_offset": offset, "partition_max_bytes": 1 << 16} for p in range(3)]}]})
                assert all(pt.error_code == 0 for pt in fetched.responses[0].partitions)


@pytest.fixture(scope="module")
def cross_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cap = tmp_path_factory.mktemp("cross") / "cap"
    trio.run(_capture, cap)
    return cap


def _plan(cap: Path):
    conns = group_connections(read_capture([cap]))
    return build_plan(conns, max_speed=True)


def test_dealing_connections_to_tasks(cross_capture: Path) -> None:
    from minikafka.analysis.replay_job import deal_connections

    plan = _plan(cross_capture)
    names = {c: plan.keys[c] for c in range(len(plan.keys))}
    assert plan.sizes == [2, 4, PRODUCES] or sorted(plan.sizes) == [2, 4, PRODUCES], plan.sizes
    producer = plan.sizes.index(PRODUCES)
    # Busiest first, round-robin: the producer and the admin share a task, the consumer has its own.
    shares = deal_connections(plan, 2, "round-robin")
    assert len(shares) == 2 and sorted(map(len, shares)) == [1, 2] and any(producer in s for s in shares), names
    # One dependency component: packing components leaves one task; "auto" prefers balance then.
    assert plan.components() == [sorted(range(3))] or len(plan.components()) == 1
    assert deal_connections(plan, 2, "components") == [[0, 1, 2]]
    assert deal_connections(plan, 2, "auto") == shares
    assert deal_connections(plan, 5, "round-robin") == [[c] for c in sorted(range(3), key=lambda c: -plan.sizes[c])]
    with pytest.raises(ValueError):
        deal_connections(plan, 2, "random")


async def _other_producer_and_topic(port: int) -> None:
    """So the replay's producer id and topic ids differ from the capture's."""
    async with await KafkaConnection.connect("127.0.0.1", port) as conn:
        await conn.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000})
        await conn.request(K.CREATE_TOPICS, 7, {"topics": [{"name": "other", "num_partitions": 1,
                                                            "replication_factor": 1}], "timeout_ms": 5000})


@pytest.mark.slow
def test_spark_tasks_wait_for_each_other_and_share_values(cross_capture: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    from minikafka.analysis.replay_job import run_spark_replay

    requests = len(list(read_capture([cross_capture])))
    with BrokerThread(BrokerConfig(port=0)) as target:
        trio.run(_other_producer_and_topic, target.port)
        # 3 tasks asked for, 2 slots on local[2]: 2 tasks, all running at once.
        report = run_spark_replay([cross_capture], ReplayOptions("127.0.0.1", target.port, speed=None),
                                  master="local[2]", partitions=3, deal="round-robin")
    summary = report.summary()
    assert report.tasks == 2 and report.connections == 3, summary
    assert report.requests == report.received == requests and report.failed == 0, summary
    differing = {s.name: s.examples for s in report.per_api.values() if s.differing}
    assert not differing, differing
    assert sum(s.equal for s in report.per_api.values()) == requests
    # The producer (one task) sent the producer id the target gave the consumer's connection (the other task),
    # and the consumer fetched by the topic id the admin's CreateTopics got.
    produce = report.by_name("Produce")
    assert produce.sent == produce.rewritten == PRODUCES
    assert report.by_name("Fetch").rewritten == 3


async def test_two_replays_in_one_process_synchronised_by_the_hub(cross_capture: Path) -> None:
    """What each Spark task runs, without Spark: two replayers, each with its share and a HubSync."""
    from minikafka.analysis.replay_job import deal_connections
    from minikafka.capture.replay import ReplayReport, replay_records
    from minikafka.capture.replay.hub.sync import HubSync, remote_needs
    from minikafka.capture.replay.hub.threaded import ReplayHub

    conns = group_connections(read_capture([cross_capture]))
    plan = build_plan(conns, max_speed=True)
    shares = deal_connections(plan, 2, "round-robin")
    reports: list[ReplayReport] = []
    async with serve_broker(BrokerConfig(port=0)) as target:
        await _other_producer_and_topic(target.port)
        options = ReplayOptions("127.0.0.1", target.port, speed=None, timeout_s=10)
        with ReplayHub(host="127.0.0.1") as hub:
            async def task(i: int, share: list[int]) -> None:
                mine = {plan.keys[c]: conns[plan.keys[c]] for c in share}
                sync = HubSync(hub.address, f"t{i}", share, plan.sizes, needs=remote_needs(plan, share))
                reports.append(await replay_records(mine, options, None, plan, sync))

            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    for i, share in enumerate(shares):
                        nursery.start_soon(task, i, share)
            stats = hub.stats
    report = ReplayReport.combine(reports)
    assert report.received == len(list(read_capture([cross_capture]))) and report.failed == 0
    assert not [s.name for s in report.per_api.values() if s.differing], report.summary()
    assert report.by_name("Produce").rewritten == PRODUCES and report.by_name("Fetch").rewritten == 3
    assert stats.clients == 2 and stats.clients_lost == 0 and stats.events_in >= 2 and stats.progress_in > 0
    # Only the progress the other task waits for is published.
    assert stats.progress_in < report.received
