"""Transactions in the broker (KIP-98/447/890), over raw requests: the coordinator's state machine,
markers, the last stable offset, read_committed fetches, transactional offsets, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from helpers import K, batch, create, fetch, produce, values, wait_until
from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.log import Log, LogConfig
from minikafka.broker.log.txn_index import AbortedTxn, TransactionIndex
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.producer_state import BatchMetadata, CompletedTxn, ProducerIdManager, ProducerStateManager
from minikafka.broker.txn import TransactionCoordinator, TransactionState
from minikafka.client.connection import KafkaConnection
from minikafka.common import TopicPartition
from minikafka.common.hashing import partition_for_key
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import ControlRecordType, decode_control_key, decode_records, iter_batches

S = TransactionState


class FakeClock:
    """Milliseconds the test moves by hand."""

    def __init__(self, ms: int = 1_000_000) -> None:
        self.ms = ms

    def time_ms(self) -> int:
        return self.ms

    def time_ns(self) -> int:
        return self.ms * 1_000_000

    def monotonic_ns(self) -> int:
        return self.ms * 1_000_000


def coordinator(tmp: Path | None = None, clock: FakeClock | None = None, **cfg) -> TransactionCoordinator:
    config = BrokerConfig(**cfg)
    return TransactionCoordinator(config, tmp, ProducerIdManager(), ClusterMetadata([0], None), clock or FakeClock())


TP0 = TopicPartition("t", 0)


# -- the coordinator's state machine, without a network ------------------------------------------------
def test_init_producer_id_allocates_then_bumps_the_epoch():
    c = coordinator()
    first = c.init_producer_id("tx", 60000)
    assert first.error == E.NONE and first.producer_epoch == 0
    again = c.init_producer_id("tx", 60000)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, 1)
    assert c.init_producer_id("other", 60000).producer_id != first.producer_id
    assert c.init_producer_id("tx", 0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert c.init_producer_id("tx", 900_001).error == E.INVALID_TRANSACTION_TIMEOUT
    # KIP-360: a bump with the current pid/epoch is fine; with a stale epoch the producer is fenced.
    assert c.init_producer_id("tx", 60000, first.producer_id, 1).producer_epoch == 2
    assert c.init_producer_id("tx", 60000, first.producer_id, 0).error == E.PRODUCER_FENCED


def test_add_partitions_then_end_txn_walks_the_states():
    c = coordinator()
    p = c.init_producer_id("tx", 60000)
    assert c.describe("tx").state == S.EMPTY
    assert c.end_transaction("tx", p.producer_id, p.producer_epoch, True).error == E.INVALID_TXN_STATE
    assert c.add_partitions("tx", p.producer_id, p.producer_epoch, [TP0]) == E.NONE
    meta = c.describe("tx")
    assert meta.state == S.ONGOING and meta.partitions == {TP0}
    assert c.add_partitions("tx", p.producer_id + 1, p.producer_epoch, [TP0]) == E.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", p.producer_id, p.producer_epoch - 1, [TP0]) == E.PRODUCER_FENCED
    assert c.verify_partitions("tx", p.producer_id, p.producer_epoch, [TP0, TopicPartition("t", 1)]) == {
        TP0: E.NONE, TopicPartition("t", 1): E.TRANSACTION_ABORTABLE}  # Kafka's coordinator answer
    assert c.end_transaction("tx", p.producer_id, p.producer_epoch, True).error == E.NONE
    assert meta.state == S.PREPARE_COMMIT  # the markers go out when the coordinator runs
    # While markers are written, everything else must wait.
    assert c.end_transaction("tx", p.producer_id, p.producer_epoch, True).error == E.CONCURRENT_TRANSACTIONS
    assert c.end_transaction("tx", p.producer_id, p.producer_epoch, False).error == E.INVALID_TXN_STATE
    assert c.add_partitions("tx", p.producer_id, p.producer_epoch, [TP0]) == E.CONCURRENT_TRANSACTIONS
    assert c.init_producer_id("tx", 60000).error == E.CONCURRENT_TRANSACTIONS


def test_init_producer_id_fences_an_ongoing_transaction():
    c = coordinator()
    old = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", old.producer_id, old.producer_epoch, [TP0])
    assert c.init_producer_id("tx", 60000).error == E.CONCURRENT_TRANSACTIONS
    meta = c.describe("tx")
    assert meta.state == S.PREPARE_ABORT and meta.producer_epoch == old.producer_epoch + 1
    assert c.end_transaction("tx", old.producer_id, old.producer_epoch, True).error == E.PRODUCER_FENCED


def test_timed_out_transaction_is_aborted_under_a_bumped_epoch():
    clock = FakeClock()
    c = coordinator(clock=clock)
    p = c.init_producer_id("tx", 1000)
    c.add_partitions("tx", p.producer_id, p.producer_epoch, [TP0])
    clock.ms += 1000
    assert c.abort_timed_out_transactions() == []
    clock.ms += 1
    assert c.abort_timed_out_transactions() == ["tx"]
    meta = c.describe("tx")
    assert meta.state == S.PREPARE_ABORT and meta.producer_epoch == p.producer_epoch + 1


def test_idle_transactional_ids_expire():
    clock = FakeClock()
    c = coordinator(clock=clock, transactional_id_expiration_ms=5000)
    c.init_producer_id("idle", 60000)
    p = c.init_producer_id("busy", 60000)
    c.add_partitions("busy", p.producer_id, p.producer_epoch, [TP0])
    clock.ms += 5000
    assert c.remove_expired_transactional_ids() == ["idle"]  # an Ongoing one never expires
    assert c.describe("idle") is None and c.describe("busy") is not None
    assert [t.transactional_id for t in c.list_transactions()] == ["busy"]


def test_end_txn_v5_bumps_the_epoch_and_a_retry_gets_the_same_answer():
    c = coordinator()
    p = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", p.producer_id, p.producer_epoch, [TP0])
    got = c.end_transaction("tx", p.producer_id, p.producer_epoch, False, bump_epoch=True)
    assert got.error == E.NONE and got.producer_epoch == p.producer_epoch + 1
    retry = c.end_transaction("tx", p.producer_id, p.producer_epoch, False, bump_epoch=True)
    assert retry.error == E.CONCURRENT_TRANSACTIONS  # still writing markers


def test_list_transactions_filters():
    clock = FakeClock()
    c = coordinator(clock=clock)
    a = c.init_producer_id("a", 60000)
    c.init_producer_id("b", 60000)
    c.add_partitions("a", a.producer_id, a.producer_epoch, [TP0])
    clock.ms += 100
    assert [t.transactional_id for t in c.list_transactions({"Ongoing"})] == ["a"]
    assert [t.transactional_id for t in c.list_transactions(producer_ids={a.producer_id})] == ["a"]
    assert [t.transactional_id for t in c.list_transactions(min_duration_ms=100)] == ["a"]
    assert c.list_transactions(min_duration_ms=101) == []


def test_state_survives_a_restart_and_half_completed_transactions_resume(tmp_path):
    c = coordinator(tmp_path)
    p = c.init_producer_id("tx", 60000)
    c.add_partitions("tx", p.producer_id, p.producer_epoch, [TP0], groups=["g"])
    c.end_transaction("tx", p.producer_id, p.producer_epoch, True)
    c.close()
    again = coordinator(tmp_path)
    meta = again.describe("tx")
    assert meta.state == S.PREPARE_COMMIT and meta.partitions == {TP0}
    # The log records the group's __consumer_offsets partition, not its id (no group coordinator here to
    # find the groups holding the producer's offsets again).
    assert meta.offsets_partitions == {partition_for_key("g", 50)} and meta.groups == set()
    assert again._queued and again._queued[0][1] is True  # its markers will be sent when it runs
    assert again.producer_ids.next_id > p.producer_id  # ids are not handed out twice


# -- the log: LSO, markers, aborted index -----------------------------------------------------------------
def test_producer_state_tracks_open_transactions_and_the_first_unstable_offset():
    ps = ProducerStateManager()
    ps.update(1, 0, BatchMetadata(0, 1, 10, 11, 0), is_transactional=True)
    ps.update(2, 0, BatchMetadata(0, 0, 12, 12, 0), is_transactional=True)
    ps.update(1, 0, BatchMetadata(2, 2, 13, 13, 0), is_transactional=True)
    assert ps.first_unstable_offset(20) == 10 and ps.has_ongoing_txn(1, 0)
    assert ps.check_transactional(1, 0, is_transactional=False) == E.INVALID_TXN_STATE
    done = ps.complete_txn(1, 0, 0, 14, is_aborted=True, timestamp=0)
    assert done == CompletedTxn(1, 10, 14, True)
    assert ps.first_unstable_offset(14) == 10  # the marker is not yet below the high watermark
    assert ps.first_unstable_offset(15) == 12  # now only producer 2's transaction holds it back
    assert ps.complete_txn(2, 1, 0, 15, is_aborted=False, timestamp=0) is not None  # a bumped epoch
    assert ps.first_unstable_offset(16) is None
    assert ps.check(2, 1, 0, 0).error == E.NONE  # sequences restart at the marker's epoch
    assert ps.check_marker(2, 0, 0) == E.INVALID_PRODUCER_EPOCH
    assert ps.complete_txn(3, 0, 0, 16, is_aborted=True, timestamp=0) is None  # wrote nothing here


def test_a_producer_without_state_here_starts_anywhere_unless_transactional():
    """Kafka's ``checkSequence``: no state for the producer (its records deleted by retention) accepts any first
    sequence from an idempotent producer; a transactional one (transaction version 2) must start at 0."""
    ps = ProducerStateManager()
    assert ps.check(7, 0, 41, 42).error == E.NONE
    assert ps.check(7, 0, 41, 42, transactional=True).error == E.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert ps.check(7, 0, 0, 1, transactional=True).error == E.NONE
    ps.update(7, 0, BatchMetadata(41, 42, 0, 1, 0))
    assert ps.check(7, 0, 44, 44).error == E.OUT_OF_ORDER_SEQUENCE_NUMBER  # from then on, in sequence
    assert ps.check(7, 0, 43, 43).error == E.NONE
    assert ps.check(7, 1, 5, 5).error == E.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch starts at 0


def test_transaction_index_collects_truncates_and_follows_the_log_start():
    idx = TransactionIndex()
    for pid, first, last in ((1, 0, 5), (2, 3, 9), (3, 10, 12)):
        idx.append(AbortedTxn(pid, first, last, first))
    assert [t.producer_id for t in idx.collect_aborted(6, 100)] == [2, 3]
    assert [t.producer_id for t in idx.collect_aborted(0, 4)] == [1, 2]  # began before the upper bound
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(4, 1, 12, 1))
    idx.truncate_to(9)
    assert [t.producer_id for t in idx.entries] == [1]
    idx.delete_before(6)
    assert len(idx) == 0


def test_log_truncation_drops_aborted_entries_with_their_markers():
    lg = Log("t", 0, LogConfig(), None)
    lg.append_as_leader([memoryview(bytearray(batch([b"a", b"b", b"c"])))], 0, 0)
    lg.txn_index.append(AbortedTxn(1, 0, 2, 0))
    lg.truncate_to(2)
    assert len(lg.txn_index) == 0


async def test_lso_markers_and_read_committed_fetch():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            init = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
            pid, epoch = init.producer_id, init.producer_epoch
            assert init.error_code == 0
            # A transactional batch before AddPartitionsToTxn fails KIP-890 verification.
            txn = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0, is_transactional=True)
            early = await produce(c, "t", txn, version=9, transactional_id="tx")
            assert early.error_code == E.INVALID_TXN_STATE
            await produce(c, "t", batch([b"plain"]))  # offset 0, outside any transaction
            add = await c.request(K.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]})
            assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
            assert (await produce(c, "t", txn, transactional_id="tx")).error_code == 0  # offsets 1-2
            await produce(c, "t", batch([b"after"]))  # offset 3, behind the open transaction
            ro = await fetch_iso(c, 1)
            assert ro.high_watermark == 4 and ro.last_stable_offset == 1
            assert values(ro.records) == committed_values(ro) == [b"plain"]
            ru = await fetch_iso(c, 0)
            assert values(ru.records) == [b"plain", b"a", b"b", b"after"] and ru.last_stable_offset == 1
            assert await list_offsets(c, isolation=1) == 1 and await list_offsets(c, isolation=0) == 4
            end = await c.request(K.END_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                "producer_epoch": epoch, "committed": False})
            assert end.error_code == 0
            await wait_until(lambda: b.replica_manager.get("t", 0).last_stable_offset == 5, what="abort marker")
            ro = await fetch_iso(c, 1)
            assert ro.last_stable_offset == ro.high_watermark == 5
            assert [(a.producer_id, a.first_offset) for a in ro.aborted_transactions] == [(pid, 1)]
            kinds = [(h.base_offset, h.is_control) for h, _ in iter_batches(ro.records)]
            assert kinds == [(0, False), (1, False), (3, False), (4, True)]
            marker = [v for h, v in iter_batches(ro.records) if h.is_control][0]
            assert decode_control_key(decode_records(marker)[0].key)[1] == ControlRecordType.ABORT
            assert committed_values(ro) == [b"plain", b"after"]
            assert ru_aborted_none(await fetch_iso(c, 0))
            # The producer state is visible through DescribeProducers.
            dp = await c.request(K.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]})
            prod = dp.topics[0].partitions[0].active_producers
            assert [(p.producer_id, p.current_txn_start_offset, p.last_sequence) for p in prod] == [(pid, -1, 1)]


def committed_values(part) -> list[bytes]:
    """What a read_committed consumer keeps of a fetched partition (Java's ``CompletedFetch``): no control
    batches, no batches of a producer while an aborted transaction of its covers them."""
    aborted = sorted((a.first_offset, a.producer_id) for a in part.aborted_transactions or [])
    active: set[int] = set()
    out: list[bytes] = []
    for h, view in iter_batches(part.records):
        while aborted and aborted[0][0] <= h.last_offset:
            active.add(aborted.pop(0)[1])
        if h.is_control:
            active.discard(h.producer_id)
        elif not (h.is_transactional and h.producer_id in active):
            out.extend(r.value for r in decode_records(view))
    return out


def ru_aborted_none(part) -> bool:
    return part.aborted_transactions is None


async def fetch_iso(c: KafkaConnection, isolation: int, topic: str = "t", offset: int = 0, partition: int = 0):
    resp = await c.request(K.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation,
        "topics": [{"topic": topic, "partitions": [{"partition": partition, "fetch_offset": offset,
                                                    "partition_max_bytes": 1 << 20}]}]})
    return resp.responses[0].partitions[0]


async def list_offsets(c: KafkaConnection, isolation: int, topic: str = "t") -> int:
    resp = await c.request(K.LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
    return resp.topics[0].partitions[0].offset


async def begin(c: KafkaConnection, tid: str, topic: str = "t", partitions=(0,), version: int = 3):
    init = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000})
    assert init.error_code == 0, init
    add = await c.request(K.ADD_PARTITIONS_TO_TXN, version, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": init.producer_id,
        "v3_and_below_producer_epoch": init.producer_epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": list(partitions)}]})
    assert all(p.partition_error_code == 0 for t in add.results_by_topic_v3_and_below
               for p in t.results_by_partition), add
    return init.producer_id, init.producer_epoch


async def test_txn_offset_commit_is_visible_only_on_commit():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            for commit in (False, True):
                pid, epoch = await begin(c, "tx")
                add = await c.request(K.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                               "producer_epoch": epoch, "group_id": "g"})
                assert add.error_code == 0
                offset = 7 if commit else 5
                toc = await c.request(K.TXN_OFFSET_COMMIT, 3, {
                    "transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                    "generation_id": -1, "member_id": "", "group_instance_id": None,
                    "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                             "committed_leader_epoch": -1,
                                                             "committed_metadata": ""}]}]})
                assert toc.topics[0].partitions[0].error_code == 0
                stable = await offset_fetch(c, require_stable=True)
                assert stable.error_code == E.UNSTABLE_OFFSET_COMMIT
                plain = await offset_fetch(c, require_stable=False)
                assert (plain.error_code, plain.committed_offset) == (0, -1)  # nothing committed outside it
                done = b.txn_coordinator.completions
                end = await c.request(K.END_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                    "producer_epoch": epoch, "committed": commit})
                assert end.error_code == 0
                with trio.fail_after(5):
                    await b.txn_coordinator.wait_completions(done + 1)
                after = await offset_fetch(c, require_stable=True)
                assert after.error_code == 0 and after.committed_offset == (7 if commit else -1)


async def offset_fetch(c: KafkaConnection, require_stable: bool):
    resp = await c.request(K.OFFSET_FETCH, 7, {"group_id": "g", "require_stable": require_stable,
                                               "topics": [{"name": "t", "partition_indexes": [0]}]})
    return resp.topics[0].partitions[0]


async def test_txn_offset_commit_without_add_offsets_is_refused_and_zombie_generation_fenced():
    async with serve_broker(port=0, group_initial_rebalance_delay_ms=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            pid, epoch = await begin(c, "tx")
            body = {"transactional_id": "tx", "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
                    "generation_id": -1, "member_id": "", "group_instance_id": None,
                    "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 1,
                                                             "committed_leader_epoch": -1,
                                                             "committed_metadata": ""}]}]}
            refused = await c.request(K.TXN_OFFSET_COMMIT, 3, body)
            assert refused.topics[0].partitions[0].error_code == E.INVALID_TXN_STATE
            await c.request(K.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx", "producer_id": pid,
                                                     "producer_epoch": epoch, "group_id": "g"})
            # KIP-447: group metadata from a generation the group never had is fenced.
            zombie = await c.request(K.TXN_OFFSET_COMMIT, 3, {**body, "generation_id": 3, "member_id": "m-1"})
            assert zombie.topics[0].partitions[0].error_code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION)
            assert b.group_coordinator.pending_txn_partitions("g") == set()


async def test_fenced_producer_cannot_write_or_commit():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            pid, epoch = await begin(c, "tx")
            assert (await produce(c, "t", batch([b"zombie"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                                is_transactional=True))).error_code == 0
            # A new instance: the open transaction is aborted under a bumped epoch, then it gets its epoch.
            new = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 60000})
            assert new.error_code == E.CONCURRENT_TRANSACTIONS
            answers = []

            async def init_producer_id() -> bool:
                answers.append(await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": "tx",
                                                                        "transaction_timeout_ms": 60000}))
                assert answers[-1].error_code in (0, E.CONCURRENT_TRANSACTIONS), answers[-1]
                return answers[-1].error_code == 0

            await wait_until(init_producer_id, what="the aborted transaction to complete")
            new = answers[-1]
            assert new.producer_id == pid and new.producer_epoch == epoch + 2
            late = await produce(c, "t", batch([b"late"], producer_id=pid, producer_epoch=epoch, base_sequence=1,
                                               is_transactional=True))
            assert late.error_code == E.INVALID_PRODUCER_EPOCH
            for v, code in ((3, E.PRODUCER_FENCED), (1, E.INVALID_PRODUCER_EPOCH)):
                end = await c.request(K.END_TXN, v, {"transactional_id": "tx", "producer_id": pid,
                                                    "producer_epoch": epoch, "committed": True})
                assert end.error_code == code
            ro = await fetch_iso(c, 1)
            # The zombie's batch is returned with the aborted transaction that covers it, then its marker.
            assert [(h.base_offset, h.is_control) for h, _ in iter_batches(ro.records)] == [(0, False), (1, True)]
            assert [(a.producer_id, a.first_offset) for a in ro.aborted_transactions] == [(pid, 0)]
            assert b.replica_manager.get("t", 0).last_stable_offset == 2


async def test_broker_aborts_a_transaction_past_its_timeout():
    async with serve_broker(port=0, transaction_abort_timed_out_transaction_cleanup_interval_ms=20) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            init = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": "tx", "transaction_timeout_ms": 200})
            pid, epoch = init.producer_id, init.producer_epoch
            await c.request(K.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]})
            await produce(c, "t", batch([b"left open"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                        is_transactional=True))
            part = b.replica_manager.get("t", 0)
            assert part.last_stable_offset == 0
            await wait_until(lambda: part.last_stable_offset == part.log.high_watermark == 2, timeout=10,
                             what="the timed-out transaction's abort marker")
            await wait_until(lambda: b.txn_coordinator.describe("tx").state == S.COMPLETE_ABORT)
            desc = await c.request(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["tx", "nope"]})
            states = {s.transactional_id: (s.error_code, s.transaction_state) for s in desc.transaction_states}
            assert states == {"tx": (0, "CompleteAbort"), "nope": (E.TRANSACTIONAL_ID_NOT_FOUND, "")}
            listed = await c.request(K.LIST_TRANSACTIONS, 1, {"state_filters": ["CompleteAbort", "Bogus"],
                                                              "producer_id_filters": [], "duration_filter": -1})
            assert [t.transactional_id for t in listed.transaction_states] == ["tx"]
            assert list(listed.unknown_state_filters) == ["Bogus"]


async def test_add_partitions_v4_batched_broker_form_and_end_txn_v5():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t", partitions=2)
            pids = {}
            for tid in ("a", "b"):
                init = await c.request(K.INIT_PRODUCER_ID, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                              "producer_id": -1, "producer_epoch": -1})
                pids[tid] = (init.producer_id, init.producer_epoch)
            resp = await c.request(K.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [
                {"transactional_id": "a", "producer_id": pids["a"][0], "producer_epoch": pids["a"][1],
                 "verify_only": False, "topics": [{"name": "t", "partitions": [0, 1]}]},
                {"transactional_id": "b", "producer_id": pids["b"][0], "producer_epoch": pids["b"][1],
                 "verify_only": True, "topics": [{"name": "t", "partitions": [0]}]}]})
            got = {r.transactional_id: [p.partition_error_code for t in r.topic_results for p in t.results_by_partition]
                   for r in resp.results_by_transaction}
            assert got == {"a": [0, 0], "b": [E.INVALID_TXN_STATE]}
            end = await c.request(K.END_TXN, 5, {"transactional_id": "a", "producer_id": pids["a"][0],
                                                "producer_epoch": pids["a"][1], "committed": True})
            assert end.error_code == 0 and end.producer_epoch == pids["a"][1] + 1
            with trio.fail_after(5):
                await b.txn_coordinator.wait_completions(1)
            # Both partitions got a COMMIT marker under the new epoch.
            for p in (0, 1):
                part = b.replica_manager.get("t", p)
                assert part.log.log_end_offset == 1
                assert part.producers.producers[pids["a"][0]].epoch == pids["a"][1] + 1


async def test_open_transaction_and_aborted_index_survive_a_restart(tmp_path):
    cfg = BrokerConfig(port=0, data_dir=tmp_path)
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            pid, epoch = await begin(c, "aborted")
            await produce(c, "t", batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                        is_transactional=True))
            await c.request(K.END_TXN, 3, {"transactional_id": "aborted", "producer_id": pid,
                                          "producer_epoch": epoch, "committed": False})
            await wait_until(lambda: b.txn_coordinator.describe("aborted").state == S.COMPLETE_ABORT)
            pid2, epoch2 = await begin(c, "open")
            await produce(c, "t", batch([b"y"], producer_id=pid2, producer_epoch=epoch2, base_sequence=0,
                                        is_transactional=True))  # offset 2, left open
            await produce(c, "t", batch([b"z"]))  # offset 3
    async with serve_broker(cfg) as b:
        part = b.replica_manager.get("t", 0)
        assert part.log.high_watermark == 4 and part.last_stable_offset == 2
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in part.log.txn_index.entries] == [(pid, 0, 1)]
        assert b.txn_coordinator.describe("open").state == S.ONGOING
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            end = await c.request(K.END_TXN, 3, {"transactional_id": "open", "producer_id": pid2,
                                                "producer_epoch": epoch2, "committed": True})
            assert end.error_code == 0
            await wait_until(lambda: part.last_stable_offset == 5, what="commit after restart")
            assert committed_values(await fetch_iso(c, 1)) == [b"y", b"z"]


async def test_cluster_markers_replicate_and_followers_track_the_lso():
    async with serve_cluster(3, replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50) as cluster:
        leader_id = 0
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(0).port) as c:
            resp = await c.request(K.CREATE_TOPICS, 7, {"topics": [
                {"name": "t", "num_partitions": 1, "replication_factor": 3}], "timeout_ms": 1000})
            assert resp.topics[0].error_code == 0
            leader_id = cluster.leader("t", 0)
        # A transactional id the leader coordinates (the leader of its __transaction_state partition).
        tid = next(t for t in (f"tx{i}" for i in range(100))
                   if cluster.metadata.transaction_coordinator(t).node_id == leader_id)
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(leader_id).port) as c:
            pid, epoch = await begin(c, tid)
            assert (await produce(c, "t", batch([b"a"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                                is_transactional=True))).error_code == 0
            followers = [cluster.broker(i).replica_manager.get("t", 0) for i in range(3) if i != leader_id]
            await wait_until(lambda: all(f.log.log_end_offset == 1 for f in followers), what="replication")
            assert all(f.last_stable_offset == 0 for f in followers)
            end = await c.request(K.END_TXN, 3, {"transactional_id": tid, "producer_id": pid,
                                                "producer_epoch": epoch, "committed": False})
            assert end.error_code == 0
            await wait_until(lambda: all(f.log.log_end_offset == 2 and f.last_stable_offset == f.log.high_watermark
                                         == 2 for f in followers), what="the marker on every follower")
            assert all([t.first_offset for t in f.log.txn_index.entries] == [0] for f in followers)



async def test_producer_ids_are_not_reused_after_a_restart(tmp_path):
    cfg = BrokerConfig(port=0, data_dir=tmp_path)
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            init = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 0})
            await produce(c, "t", batch([b"x"], producer_id=init.producer_id, producer_epoch=0, base_sequence=0))
            used = init.producer_id
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            again = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 0})
            assert again.producer_id > used
