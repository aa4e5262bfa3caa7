"""The transactional producer against minikafka's broker (same Trio loop): commit and abort as a
read_committed / read_uncommitted consumer sees them, offsets committed through the transaction
(KIP-447 group metadata), fencing by a second producer with the same transactional id, an abortable
error, and the abort on close."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest
import trio

from helpers import stored_batches
from minikafka.client.consumer import KafkaConsumer, TopicPartition
from minikafka.client.producer import (KafkaProducer, KafkaProducerError, ProducerFencedError, TransactionAbortedError,
                                       TxnState)
from minikafka.client.producer.txn_handlers import EndTxnHandler
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import ControlRecordType, decode_control_key

from test_producer_broker import inject_faults

TIMEOUT_S = 30


def bootstrap(broker: Any) -> str:
    return f"127.0.0.1:{broker.port}"


def txn_producer(broker: Any, tid: str, **kw: Any) -> KafkaProducer:
    kw.setdefault("linger_ms", 1)
    kw.setdefault("max_block_ms", 20000)
    return KafkaProducer(bootstrap(broker), transactional_id=tid, **kw)


async def consume(broker: Any, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """All values up to the end offsets (the LSO for read_committed), partition by partition."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    async with KafkaConsumer(bootstrap_servers=bootstrap(broker), isolation_level=isolation,
                             auto_offset_reset="earliest", fetch_max_wait_ms=50) as c:
        c.assign(tps)
        ends = await c.end_offsets(tps)
        got: dict[TopicPartition, list[bytes]] = {tp: [] for tp in tps}
        while True:
            positions = {tp: await c.position(tp) for tp in tps}
            if all(positions[tp] >= ends[tp] for tp in tps):
                break
            for tp, recs in (await c.poll(timeout_ms=100)).items():
                got[tp].extend(r.value for r in recs)
    return [v for tp in tps for v in got[tp]]


async def test_committed_transaction_is_visible_to_read_committed(broker) -> None:
    topic = "txn-commit"
    broker.create_topic(topic, 2, 1)
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-commit") as p:
            await p.init_transactions()
            assert p.txn is not None and p.txn.state == TxnState.READY
            pid, epoch = p.producer_id
            assert pid >= 0 and epoch >= 0
            p.begin_transaction()
            futs = [await p.send(topic, b"v%d" % i, partition=i % 2) for i in range(10)]
            await p.commit_transaction()
            assert all(f.done() and f.exception() is None for f in futs)
            assert p.txn.state == TxnState.READY
        committed = await consume(broker, topic, 2, "read_committed")
    assert sorted(committed) == sorted(b"v%d" % i for i in range(10))
    for part in range(2):
        batches = await stored_batches(broker.port, topic, part)
        data = [(h, rs) for h, rs in batches if not h.is_control]
        control = [(h, rs) for h, rs in batches if h.is_control]
        assert data and all(h.is_transactional and h.producer_id == pid for h, _ in data)
        assert len(control) == 1 and control[0][0].is_transactional
        assert decode_control_key(control[0][1][0].key)[1] == ControlRecordType.COMMIT


async def test_aborted_transaction_is_hidden_from_read_committed_only(broker) -> None:
    topic = "txn-abort"
    broker.create_topic(topic, 1, 1)
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-abort") as p:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(5):
                fut = await p.send(topic, b"aborted-%d" % i)
            await fut.get()  # in the log before the abort
            await p.abort_transaction()
            assert p.txn is not None and p.txn.state == TxnState.READY
            p.begin_transaction()
            for i in range(5):
                await p.send(topic, b"committed-%d" % i)
            await p.commit_transaction()
        committed = await consume(broker, topic, 1, "read_committed")
        uncommitted = await consume(broker, topic, 1, "read_uncommitted")
    assert committed == [b"committed-%d" % i for i in range(5)]
    assert uncommitted == [b"aborted-%d" % i for i in range(5)] + [b"committed-%d" % i for i in range(5)]
    markers = [decode_control_key(rs[0].key)[1] for h, rs in await stored_batches(broker.port, topic) if h.is_control]
    assert markers == [ControlRecordType.ABORT, ControlRecordType.COMMIT]


async def test_abort_fails_records_not_yet_sent(broker) -> None:
    topic = "txn-abort-unsent"
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-abort-unsent", linger_ms=60000) as p:
            await p.init_transactions()
            p.begin_transaction()
            fut = await p.send(topic, b"never")  # lingers: not sent when the abort comes
            await p.abort_transaction()
            with pytest.raises(TransactionAbortedError):
                await fut.get()
    assert await consume(broker, topic, 1, "read_uncommitted") == []


async def test_send_offsets_commits_group_offsets_only_on_commit(broker) -> None:
    src, dst, group = "txn-in", "txn-out", "txn-group"
    broker.create_topic(src, 1, 1)
    broker.create_topic(dst, 1, 1)
    tp = TopicPartition(src, 0)
    with trio.fail_after(TIMEOUT_S):
        async with KafkaProducer(bootstrap(broker), linger_ms=0) as plain:
            for i in range(6):
                await plain.send(src, b"in-%d" % i)
            await plain.flush()
        async with KafkaConsumer(src, bootstrap_servers=bootstrap(broker), group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest",
                                 isolation_level="read_committed", fetch_max_wait_ms=50) as consumer, \
                txn_producer(broker, "tx-offsets") as p:
            await p.init_transactions()
            records: list[Any] = []
            while len(records) < 6:
                for recs in (await consumer.poll(timeout_ms=200)).values():
                    records.extend(recs)
            meta = consumer.group_metadata()
            assert meta.group_id == group and meta.generation_id >= 1 and meta.member_id
            next_offset = records[-1].offset + 1

            # an aborted transaction commits nothing
            p.begin_transaction()
            for r in records[:3]:
                await p.send(dst, b"out-" + r.value)
            await p.send_offsets_to_transaction({tp: records[2].offset + 1}, meta)
            await p.abort_transaction()
            assert await consumer.committed(tp) is None

            # a committed one commits the offsets with the records
            p.begin_transaction()
            for r in records:
                await p.send(dst, b"out-" + r.value)
            await p.send_offsets_to_transaction({tp: next_offset}, consumer.group_metadata())
            await p.commit_transaction()
            assert await consumer.committed(tp) == next_offset == 6
        assert await consume(broker, dst, 1, "read_committed") == [b"out-in-%d" % i for i in range(6)]


async def test_stale_group_generation_makes_the_transaction_abortable(broker) -> None:
    src, group = "txn-in-stale", "txn-group-stale"
    broker.create_topic(src, 1, 1)
    tp = TopicPartition(src, 0)
    with trio.fail_after(TIMEOUT_S):
        async with KafkaConsumer(src, bootstrap_servers=bootstrap(broker), group_id=group,
                                 enable_auto_commit=False, auto_offset_reset="earliest") as consumer, \
                txn_producer(broker, "tx-stale") as p:
            await p.init_transactions()
            await consumer.poll(timeout_ms=200)  # joins the group
            meta = consumer.group_metadata()
            stale = type(meta)(meta.group_id, meta.generation_id + 5, meta.member_id, meta.group_instance_id)
            p.begin_transaction()
            with pytest.raises(KafkaProducerError) as info:
                await p.send_offsets_to_transaction({tp: 1}, stale)
            assert info.value.code == ErrorCode.ILLEGAL_GENERATION
            assert p.txn is not None and p.txn.state == TxnState.ABORTABLE_ERROR
            await p.abort_transaction()
            assert await consumer.committed(tp) is None


async def test_second_producer_with_the_same_id_fences_the_first(broker) -> None:
    topic = "txn-fence"
    broker.create_topic(topic, 1, 1)
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-fence") as p1:
            await p1.init_transactions()
            p1.begin_transaction()
            await (await p1.send(topic, b"zombie")).get()
            async with txn_producer(broker, "tx-fence") as p2:
                await p2.init_transactions()  # bumps the epoch and aborts p1's open transaction
                assert p2.producer_id[0] == p1.producer_id[0] and p2.producer_id[1] > p1.producer_id[1]
                with pytest.raises(ProducerFencedError):
                    await p1.send(topic, b"more")
                    await p1.commit_transaction()
                assert p1.txn is not None and p1.txn.state == TxnState.FATAL_ERROR
                with pytest.raises(ProducerFencedError):
                    p1.begin_transaction()
                with pytest.raises(ProducerFencedError):
                    await p1.abort_transaction()
                p2.begin_transaction()
                await p2.send(topic, b"current")
                await p2.commit_transaction()
        assert await consume(broker, topic, 1, "read_committed") == [b"current"]


@pytest.mark.parametrize("end_txn_version", [None, 4])
async def test_failed_batch_makes_the_transaction_abortable_and_abort_recovers(broker, monkeypatch,
                                                                               end_txn_version) -> None:
    """After the abort the epoch is bumped: by EndTxn v5 itself (KIP-890), or before v5 by
    InitProducerId with the current id and epoch (KIP-360)."""
    if end_txn_version is not None:
        monkeypatch.setattr(EndTxnHandler, "max_version", end_txn_version)
    topic = "txn-fail"
    broker.create_topic(topic, 1, 1)
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-fail") as p:
            await p.init_transactions()
            epoch = p.producer_id[1]
            p.begin_transaction()
            await (await p.send(topic, b"ok-then-aborted")).get()
            inject_faults(broker, monkeypatch, ErrorCode.INVALID_RECORD, 1, False, topic)
            fut = await p.send(topic, b"bad")
            with pytest.raises(KafkaProducerError) as info:
                await fut.get()
            assert info.value.code == ErrorCode.INVALID_RECORD
            assert p.txn is not None and p.txn.state == TxnState.ABORTABLE_ERROR
            with pytest.raises(KafkaProducerError, match="error state"):
                await p.send(topic, b"refused")
            with pytest.raises(KafkaProducerError, match="error state"):
                await p.commit_transaction()
            await p.abort_transaction()
            assert p.producer_id[1] > epoch  # bumped after the abort (KIP-360)
            p.begin_transaction()
            await p.send(topic, b"after")
            await p.commit_transaction()
        assert await consume(broker, topic, 1, "read_committed") == [b"after"]


async def test_close_aborts_an_open_transaction(broker) -> None:
    topic = "txn-close"
    broker.create_topic(topic, 1, 1)
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-close") as p:
            await p.init_transactions()
            p.begin_transaction()
            await (await p.send(topic, b"left-open")).get()
        assert p.txn is not None and p.txn.state == TxnState.READY  # aborted on close
        async with txn_producer(broker, "tx-close") as p2:
            await p2.init_transactions()
            p2.begin_transaction()
            await p2.send(topic, b"next")
            await p2.commit_transaction()
        assert await consume(broker, topic, 1, "read_committed") == [b"next"]
        assert await consume(broker, topic, 1, "read_uncommitted") == [b"left-open", b"next"]


async def test_retriable_coordinator_errors_are_retried(broker, monkeypatch) -> None:
    """COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR make the producer find the coordinator again;
    CONCURRENT_TRANSACTIONS is retried after a short backoff."""
    topic = "txn-retry"
    broker.create_topic(topic, 1, 1)
    handlers = broker.apis.handlers
    calls: dict[int, int] = {}

    def wrap(key: ApiKey, fail_times: int, answer: Any) -> None:
        real = handlers[key]

        async def faulty(ctx: Any, req: Any) -> Any:
            if key == ApiKey.ADD_PARTITIONS_TO_TXN and ctx.api_version >= 4:  # the broker's own verification
                return await real(ctx, req)
            calls[key] = calls.get(key, 0) + 1
            if calls[key] <= fail_times:
                return answer(req)
            return await real(ctx, req)

        monkeypatch.setitem(handlers, key, faulty)

    wrap(ApiKey.FIND_COORDINATOR, 0, None)
    wrap(ApiKey.INIT_PRODUCER_ID, 1, lambda req: {"throttle_time_ms": 0, "producer_id": -1, "producer_epoch": -1,
                                                  "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE})
    wrap(ApiKey.ADD_PARTITIONS_TO_TXN, 2, lambda req: {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": t.name, "results_by_partition": [
            {"partition_index": p, "partition_error_code": ErrorCode.CONCURRENT_TRANSACTIONS} for p in t.partitions]}
        for t in req.v3_and_below_topics]})
    wrap(ApiKey.END_TXN, 1, lambda req: {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR})
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-retry", retry_backoff_ms=50) as p:
            await p.init_transactions()
            p.begin_transaction()
            t0 = trio.current_time()
            await (await p.send(topic, b"v")).get()
            assert trio.current_time() - t0 < 1  # two short CONCURRENT_TRANSACTIONS backoffs
            await p.commit_transaction()
    assert calls[ApiKey.INIT_PRODUCER_ID] == 2 and calls[ApiKey.ADD_PARTITIONS_TO_TXN] == 3
    assert calls[ApiKey.END_TXN] == 2
    assert calls[ApiKey.FIND_COORDINATOR] == 3  # initially, then after each coordinator error
    assert await consume(broker, topic, 1, "read_committed") == [b"v"]


async def test_open_transaction_is_invisible_until_commit_which_flushes(broker) -> None:
    topic = "txn-open"
    broker.create_topic(topic, 1, 1)
    with trio.fail_after(TIMEOUT_S):
        async with txn_producer(broker, "tx-open", linger_ms=60000) as p:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(3):
                await p.send(topic, b"v%d" % i)
            await p.flush()
            assert await consume(broker, topic, 1, "read_committed") == []  # above the LSO
            assert await consume(broker, topic, 1, "read_uncommitted") == [b"v0", b"v1", b"v2"]
            futs = [await p.send(topic, b"v%d" % i) for i in range(3, 5)]
            t0 = trio.current_time()
            await p.commit_transaction()  # sends the lingering records first
            assert trio.current_time() - t0 < 5 and all(f.done() for f in futs)
        assert await consume(broker, topic, 1, "read_committed") == [b"v%d" % i for i in range(5)]


async def test_transaction_across_a_cluster() -> None:
    """Three brokers, RF 3: the transaction coordinator (broker 0) leads none of the partitions
    written, so AddPartitionsToTxn/EndTxn and Produce go to different brokers."""
    from minikafka.broker.cluster import serve_cluster
    with trio.fail_after(TIMEOUT_S):
        async with serve_cluster(3, replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50,
                                 group_initial_rebalance_delay_ms=0) as cluster:
            cluster.broker(0).create_topic("txn-cluster", 2, 3, assignments={0: [1, 2, 0], 1: [2, 0, 1]})
            broker = NS(port=cluster.configs[1].port)  # bootstrap through a non-coordinator
            async with txn_producer(broker, "tx-cluster") as p:
                await p.init_transactions()
                assert p.txn is not None and p.txn.transaction_coordinator == 0
                p.begin_transaction()
                futs = [await p.send("txn-cluster", b"a%d" % i, partition=i % 2) for i in range(6)]
                for f in futs:
                    await f.get()  # written (and replicated) before the abort
                await p.abort_transaction()
                p.begin_transaction()
                for i in range(6):
                    await p.send("txn-cluster", b"c%d" % i, partition=i % 2)
                await p.commit_transaction()
            committed = await consume(broker, "txn-cluster", 2, "read_committed")
            uncommitted = await consume(broker, "txn-cluster", 2, "read_uncommitted")
    assert committed == [b"c0", b"c2", b"c4", b"c1", b"c3", b"c5"]
    assert sorted(uncommitted) == sorted(committed + [b"a%d" % i for i in range(6)])
