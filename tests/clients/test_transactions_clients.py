"""Real clients' transactions against the broker (KIP-98/447/890), on one broker and on a 3-broker
cluster (topics with replication factor 3, min.insync.replicas 2):

* confluent-kafka consume-transform-produce (exactly-once: offsets committed in the transaction,
  some transactions aborted and their input reprocessed);
* fencing of a zombie producer by a new instance with the same transactional.id;
* the broker aborting a transaction left open past its transaction.timeout.ms;
* kafka-python and aiokafka transactional producers (commit, abort, offsets, fencing).
"""

from __future__ import annotations

import asyncio
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from clients_common import ck_end_offsets, ck_offsets_client, ck_read_isolated, ck_wait_stable
from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread, ClusterThread

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka
    import kafka.errors as kerrors
    from kafka.admin import KafkaAdminClient

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]

BROKER_SETTINGS = {
    "group_initial_rebalance_delay_ms": 0,
    "transaction_abort_timed_out_transaction_cleanup_interval_ms": 100,
}


# -- the broker or cluster under test --------------------------------------------------------

@dataclass
class Env:
    """One broker, or three with every topic at replication factor 3 and min.insync.replicas 2."""

    kind: str
    thread: BrokerThread | ClusterThread

    @property
    def bootstrap(self) -> str:
        return self.thread.bootstrap

    def create_topic(self, name: str, partitions: int) -> str:
        if isinstance(self.thread, ClusterThread):
            self.thread.create_topic(name, partitions, 3, {"min.insync.replicas": "2"})
        else:
            self.thread.create_topic(name, partitions)
        return name


@pytest.fixture(params=["single", "cluster"])
def env(request: pytest.FixtureRequest) -> Iterator[Env]:
    if request.param == "single":
        thread: BrokerThread | ClusterThread = BrokerThread(BrokerConfig(port=0, **BROKER_SETTINGS))
    else:
        thread = ClusterThread(3, replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=100, **BROKER_SETTINGS)
    with thread:
        yield Env(request.param, thread)


def tid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def txn_producer(bootstrap: str, transactional_id: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                     "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000, **extra})


def values(msgs: list) -> list[bytes]:
    return [m.value() for m in msgs]


def fenced(err: KafkaError) -> bool:
    return err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH)


# -- 1. consume-transform-produce ------------------------------------------------------------

N_INPUT = 300
IN_PARTS = 3
OUT_PARTS = 3


def _collect_batch(consumer: Consumer, size: int, next_offset: dict[int, int], end: dict[int, int]) -> list:
    """Up to ``size`` input messages, fewer once the consumer has reached the ``end`` offsets;
    ``next_offset`` (the application's position per partition) follows what is consumed."""
    batch: list = []
    deadline = time.monotonic() + 30
    while len(batch) < size and next_offset != end:
        assert time.monotonic() < deadline, f"stuck at {next_offset} (input end {end})"
        for m in consumer.consume(size - len(batch), 0.2):
            assert m.error() is None, m.error()
            assert m.offset() == next_offset[m.partition()], (m.partition(), m.offset(), next_offset)
            next_offset[m.partition()] = m.offset() + 1
            batch.append(m)
    return batch


def test_confluent_consume_transform_produce_exactly_once(env: Env) -> None:
    bs = env.bootstrap
    src = env.create_topic("ctp-in", IN_PARTS)
    dst = env.create_topic("ctp-out", OUT_PARTS)
    # The input, non-transactional: record i in partition i % 3, value "in-i".
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(N_INPUT):
        p.produce(src, key=b"k%03d" % i, value=b"in-%03d" % i, partition=i % IN_PARTS)
    assert p.flush(30) == 0
    input_end = ck_end_offsets(bs, src, IN_PARTS, committed=False)
    assert sum(input_end.values()) == N_INPUT

    group = tid("ctp-group")
    consumer = Consumer({
        "bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50,
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 200,
    })
    producer = txn_producer(bs, tid("ctp"))
    committed_txns: dict[int, list[bytes]] = {}
    aborted_txns: dict[int, list[bytes]] = {}
    # The next input offset to process per partition, as the application knows it (consumer.position()
    # is invalid after a seek until a message of the partition is consumed).
    next_offset = dict.fromkeys(range(IN_PARTS), 0)
    try:
        producer.init_transactions(30)
        consumer.subscribe([src])

        txn = 0
        while True:
            size = 20 + (txn * 13) % 31  # 20..50
            batch = _collect_batch(consumer, size, next_offset, input_end)
            if not batch:
                break
            producer.begin_transaction()
            out = []
            for m in batch:
                v = b"out:%s|t%03d" % (m.value(), txn)
                producer.produce(dst, key=m.key(), value=v, partition=m.partition() % OUT_PARTS)
                out.append(v)
            positions = consumer.position(consumer.assignment())
            for tp in positions:
                if tp.offset >= 0:
                    assert tp.offset == next_offset[tp.partition], (positions, next_offset)
                tp.offset = next_offset[tp.partition]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            if txn % 3 == 2:
                assert producer.flush(30) == 0  # written to the log (abort_transaction purges unsent records)
                producer.abort_transaction(30)
                aborted_txns[txn] = out
                # As an EOS application does: go back to the last committed offsets and redo the work.
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    assert tp.error is None, tp
                    start = tp.offset if tp.offset >= 0 else 0
                    consumer.seek(TopicPartition(src, tp.partition, start))
                    next_offset[tp.partition] = start
            else:
                producer.commit_transaction(30)
                committed_txns[txn] = out
            txn += 1
            assert txn < 100, "the input never got fully processed"

        committed = consumer.committed([TopicPartition(src, q) for q in range(IN_PARTS)], 30)
        assert {tp.partition: tp.offset for tp in committed} == input_end
    finally:
        consumer.close()
        producer.flush(5)
    assert len(aborted_txns) >= 3, aborted_txns.keys()

    # The committed output: every input record exactly once, none from an aborted transaction.
    ck_wait_stable(bs, dst, OUT_PARTS)
    got = ck_read_isolated(bs, dst, OUT_PARTS, committed=True)
    got_values = values(got)
    want_inputs = Counter(b"in-%03d" % i for i in range(N_INPUT))
    assert Counter(v.split(b"|")[0][4:] for v in got_values) == want_inputs
    assert Counter(got_values) == Counter(v for out in committed_txns.values() for v in out)
    got_txns = {int(v.split(b"|t")[1]) for v in got_values}
    assert got_txns == set(committed_txns) and not got_txns & set(aborted_txns)
    # In each output partition, the input of its input partition, in order.
    for q in range(OUT_PARTS):
        ins = [int(m.value().split(b"|")[0][7:]) for m in got if m.partition() == q]
        assert ins == list(range(q, N_INPUT, IN_PARTS)), q

    # read_uncommitted sees the aborted transactions' records as well.
    everything = values(ck_read_isolated(bs, dst, OUT_PARTS, committed=False))
    assert len(everything) > len(got_values)
    assert Counter(everything) == Counter(got_values) + Counter(v for out in aborted_txns.values() for v in out)

    # The group's committed offsets, seen by another consumer of the group: the input's end.
    reader = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed"})
    try:
        offsets = reader.committed([TopicPartition(src, q) for q in range(IN_PARTS)], 30)
    finally:
        reader.close()
    assert {tp.partition: tp.offset for tp in offsets} == input_end


# -- 2. fencing -------------------------------------------------------------------------------

def test_confluent_fencing_aborts_the_zombies_transaction(env: Env) -> None:
    bs = env.bootstrap
    topic = env.create_topic("fence", 2)
    transactional_id = tid("fence")
    zombie = txn_producer(bs, transactional_id)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for i in range(10):
        zombie.produce(topic, value=b"zombie-%d" % i, partition=i % 2)
    assert zombie.flush(30) == 0  # written to the log, in the open transaction

    successor = txn_producer(bs, transactional_id)
    successor.init_transactions(30)  # fences the zombie; its transaction is aborted
    successor.begin_transaction()
    for i in range(5):
        successor.produce(topic, value=b"successor-%d" % i, partition=i % 2)
    successor.commit_transaction(30)

    # The zombie's next transactional operations fail, fatally (fenced).
    zombie.produce(topic, value=b"zombie-late", partition=0)
    with pytest.raises(KafkaException) as exc_info:
        zombie.commit_transaction(30)
    err = exc_info.value.args[0]
    assert fenced(err), (err, err.code(), err.fatal())

    ck_wait_stable(bs, topic, 2)
    assert sorted(values(ck_read_isolated(bs, topic, 2, committed=True))) == [b"successor-%d" % i for i in range(5)]
    # The zombie's records are in the log (read_uncommitted), aborted.
    everything = values(ck_read_isolated(bs, topic, 2, committed=False))
    assert {b"zombie-%d" % i for i in range(10)} <= set(everything)
    assert b"zombie-late" not in everything  # never written: fenced
    successor.flush(5)


# -- 3. the broker aborts a transaction past its timeout --------------------------------------

def test_confluent_transaction_timeout_is_aborted_by_the_broker(env: Env) -> None:
    bs = env.bootstrap
    topic = env.create_topic("timeout", 1)
    transactional_id = tid("slow")
    # Every client started first (a new librdkafka client may take a second or more to get going).
    lso_client, hw_client = ck_offsets_client(bs, committed=True), ck_offsets_client(bs, committed=False)
    live = Consumer({"bootstrap.servers": bs, "group.id": tid("live"), "isolation.level": "read_committed",
                     "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    live.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    slow = txn_producer(bs, transactional_id, **{"transaction.timeout.ms": 1500})
    other = txn_producer(bs, tid("quick"))
    try:
        assert ck_end_offsets(bs, topic, 1, committed=True, client=lso_client) == {0: 0}
        assert ck_end_offsets(bs, topic, 1, committed=False, client=hw_client) == {0: 0}
        other.init_transactions(30)
        slow.init_transactions(30)

        slow.begin_transaction()
        for i in range(10):
            slow.produce(topic, value=b"slow-%d" % i, partition=0)
        assert slow.flush(30) == 0
        # Records committed after the open transaction (another producer): held back by the LSO for now.
        other.begin_transaction()
        for i in range(5):
            other.produce(topic, value=b"quick-%d" % i, partition=0)
        other.commit_transaction(30)
        hw = ck_end_offsets(bs, topic, 1, committed=False, client=hw_client)[0]
        assert hw in (15, 16)  # 10 + 5 (+ the COMMIT marker once written: EndTxn does not wait for it)
        lso = ck_end_offsets(bs, topic, 1, committed=True, client=lso_client)[0]
        if lso != 0:  # only if the 1.5 s ran out already (a very slow machine)
            assert lso == hw, lso

        # The broker aborts it; the LSO moves on: the live read_committed consumer gets the later
        # transaction, never the timed-out one.
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 5:
            assert time.monotonic() < deadline, got
            for m in live.consume(10, 0.1):
                assert m.error() is None, m.error()
                got.append(m.value())
        assert got == [b"quick-%d" % i for i in range(5)]
        ck_wait_stable(bs, topic, 1)
        assert live.consume(10, 0.3) == []
    finally:
        live.close()
        lso_client.close()
        hw_client.close()
    assert values(ck_read_isolated(bs, topic, 1, committed=True)) == [b"quick-%d" % i for i in range(5)]
    assert [v for v in values(ck_read_isolated(bs, topic, 1, committed=False)) if v.startswith(b"slow")] == \
        [b"slow-%d" % i for i in range(10)]

    # The slow producer learns of it at its next transactional step.
    slow.produce(topic, value=b"slow-late", partition=0)
    with pytest.raises(KafkaException) as exc_info:
        slow.commit_transaction(30)
    err = exc_info.value.args[0]
    assert fenced(err) or err.txn_requires_abort(), err
    ck_wait_stable(bs, topic, 1)
    assert values(ck_read_isolated(bs, topic, 1, committed=True)) == [b"quick-%d" % i for i in range(5)]
    other.flush(5)

    # DescribeTransactions / ListTransactions (confluent-kafka's AdminClient has neither: kafka-python's).
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000)
    try:
        desc = admin.describe_transactions([transactional_id])[transactional_id]
        assert desc.state.value == "CompleteAbort", desc
        assert desc.producer_epoch >= 1, desc  # bumped by the abort: the slow producer is fenced
        assert desc.transaction_timeout_ms == 1500
        assert not desc.topic_partitions
        # Kafka's tools list transactions by asking every broker; each answers for the transactional ids
        # it coordinates (an empty list when none), so the listing has each id once.
        by_broker = admin.list_transactions(state_filters=["CompleteAbort"])
        listed = [(t.transactional_id, t.producer_id) for ts in by_broker.values() for t in ts]
        assert listed == [(transactional_id, desc.producer_id)], by_broker
    finally:
        admin.close()


# -- 4. kafka-python and aiokafka transactional producers --------------------------------------

def kp_read(bs: str, topic: str, partitions: int, *, committed: bool, timeout: float = 20) -> list[bytes]:
    """The values a kafka-python consumer reads from the beginning of ``topic`` to its end offsets
    (read_committed: the LSO).  Call it once the partitions are stable (:func:`ck_wait_stable`)."""
    c = kafka.KafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, fetch_max_wait_ms=100,
                            request_timeout_ms=10000,
                            isolation_level="read_committed" if committed else "read_uncommitted")
    try:
        tps = [kafka.TopicPartition(topic, q) for q in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        end = c.end_offsets(tps)
        got: list[bytes] = []
        deadline = time.monotonic() + timeout
        while any(c.position(tp) < end[tp] for tp in tps):
            assert time.monotonic() < deadline, (f"read {len(got)} records: positions "
                                                 f"{[c.position(tp) for tp in tps]}, end {end}")
            for records in c.poll(timeout_ms=100).values():
                got.extend(r.value for r in records)
        return got
    finally:
        c.close()


def group_offsets(bs: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch) of the partitions that have one."""
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, q) for q in range(partitions)], 15)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in got if tp.offset >= 0}


def batch(prefix: str, n: int) -> list[bytes]:
    return [b"%s-%d" % (prefix.encode(), i) for i in range(n)]


def test_kafka_python_transactions_commit_abort_offsets_and_fencing(env: Env) -> None:
    bs = env.bootstrap
    topic = env.create_topic("kp-txn", 2)
    group = tid("kp-group")
    transactional_id = tid("kp")
    tp0 = kafka.TopicPartition(topic, 0)

    def producer() -> kafka.KafkaProducer:
        return kafka.KafkaProducer(bootstrap_servers=bs, transactional_id=transactional_id, linger_ms=5,
                                   request_timeout_ms=10000, retry_backoff_ms=50, metadata_max_age_ms=2000)

    def send_all(p: kafka.KafkaProducer, vals: list[bytes]) -> None:
        for i, v in enumerate(vals):
            p.send(topic, value=v, partition=i % 2)

    p = producer()
    try:
        p.init_transactions()
        p.begin_transaction()
        send_all(p, batch("a", 10))
        p.send_offsets_to_transaction({tp0: kafka.OffsetAndMetadata(3, "", -1)}, group)
        p.commit_transaction()

        p.begin_transaction()
        send_all(p, batch("b", 10))
        p.flush()  # written to the log before the abort
        p.send_offsets_to_transaction({tp0: kafka.OffsetAndMetadata(7, "", -1)}, group)
        p.abort_transaction()

        p.begin_transaction()
        send_all(p, batch("c", 5))
        p.commit_transaction()

        ck_wait_stable(bs, topic, 2)
        assert sorted(kp_read(bs, topic, 2, committed=True)) == sorted(batch("a", 10) + batch("c", 5))
        assert sorted(kp_read(bs, topic, 2, committed=False)) == sorted(batch("a", 10) + batch("b", 10) +
                                                                        batch("c", 5))
        assert group_offsets(bs, group, topic, 2) == {0: 3}  # the aborted transaction's offset was dropped

        # A new instance with the same transactional id fences this one.
        successor = producer()
        try:
            successor.init_transactions()
            with pytest.raises(kerrors.KafkaError) as exc_info:
                p.begin_transaction()
                send_all(p, batch("zombie", 4))
                p.commit_transaction()
            # Raised as such, or (by a send after the fenced AddPartitionsToTxn) wrapped in a KafkaError.
            fenced_errors = (kerrors.ProducerFencedError, kerrors.InvalidProducerEpochError)
            assert isinstance(exc_info.value, fenced_errors) or \
                any(isinstance(a, fenced_errors) for a in exc_info.value.args), repr(exc_info.value)
            successor.begin_transaction()
            send_all(successor, batch("d", 4))
            successor.commit_transaction()
        finally:
            successor.close(timeout=5)
    finally:
        p.close(timeout=0)
    ck_wait_stable(bs, topic, 2)
    assert sorted(kp_read(bs, topic, 2, committed=True)) == sorted(batch("a", 10) + batch("c", 5) + batch("d", 4))


def test_aiokafka_transactions_commit_abort_offsets_and_fencing(env: Env) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.errors import ProducerFenced
    from aiokafka.structs import TopicPartition as ATopicPartition

    bs = env.bootstrap
    topic = env.create_topic("aio-txn", 2)
    group = tid("aio-group")
    transactional_id = tid("aio")
    tp0 = ATopicPartition(topic, 0)

    class Abort(Exception):
        pass

    def producer() -> AIOKafkaProducer:
        return AIOKafkaProducer(bootstrap_servers=bs, transactional_id=transactional_id, linger_ms=5,
                                request_timeout_ms=10000, retry_backoff_ms=50)

    async def send_all(p: AIOKafkaProducer, vals: list[bytes]) -> None:
        futs = [await p.send(topic, value=v, partition=i % 2) for i, v in enumerate(vals)]
        for f in futs:
            await f

    async def read(committed: bool) -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=bs, enable_auto_commit=False, fetch_max_wait_ms=100,
                             isolation_level="read_committed" if committed else "read_uncommitted")
        await c.start()
        try:
            tps = [ATopicPartition(topic, q) for q in range(2)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            end = await c.end_offsets(tps)
            got: list[bytes] = []
            deadline = time.monotonic() + 20
            while any([await c.position(tp) < end[tp] for tp in tps]):
                assert time.monotonic() < deadline, f"read {len(got)} records, end {end}"
                for records in (await c.getmany(timeout_ms=100)).values():
                    got.extend(r.value for r in records)
            return got
        finally:
            await c.stop()

    async def part1() -> tuple[list[bytes], list[bytes]]:
        p = producer()
        await p.start()  # InitProducerId
        try:
            async with p.transaction():
                await send_all(p, batch("a", 10))
                await p.send_offsets_to_transaction({tp0: 3}, group)
            with pytest.raises(Abort):
                async with p.transaction():
                    await send_all(p, batch("b", 10))  # acknowledged: in the log
                    await p.send_offsets_to_transaction({tp0: 7}, group)
                    raise Abort
            async with p.transaction():
                await send_all(p, batch("c", 5))
        finally:
            await p.stop()
        await asyncio.to_thread(ck_wait_stable, bs, topic, 2)
        return await read(True), await read(False)

    committed_vals, all_vals = asyncio.run(part1())
    assert sorted(committed_vals) == sorted(batch("a", 10) + batch("c", 5))
    assert sorted(all_vals) == sorted(batch("a", 10) + batch("b", 10) + batch("c", 5))
    assert group_offsets(bs, group, topic, 2) == {0: 3}

    async def fencing() -> list[bytes]:
        def quiet_fenced(loop: asyncio.AbstractEventLoop, context: dict) -> None:
            # aiokafka leaves the fenced producer's internal futures unretrieved: not worth a traceback
            if not isinstance(context.get("exception"), ProducerFenced):
                loop.default_exception_handler(context)

        asyncio.get_running_loop().set_exception_handler(quiet_fenced)
        zombie = producer()
        await zombie.start()
        try:
            successor = producer()
            await successor.start()  # fences the zombie
            try:
                with pytest.raises(ProducerFenced):
                    async with zombie.transaction():
                        await send_all(zombie, batch("zombie", 4))
                async with successor.transaction():
                    await send_all(successor, batch("d", 4))
            finally:
                await successor.stop()
        finally:
            try:
                await zombie.stop()
            except ProducerFenced:
                pass
        await asyncio.to_thread(ck_wait_stable, bs, topic, 2)
        return await read(True)

    assert sorted(asyncio.run(fencing())) == sorted(batch("a", 10) + batch("c", 5) + batch("d", 4))
