"""The transaction coordinator on the replicated ``__transaction_state`` partitions (issue 25): the topic is
created at the first FindCoordinator for a transactional id with Kafka's partition count, replication factor
and min.insync.replicas; an id is coordinated by its partition's leader (NOT_COORDINATOR elsewhere), whose
answers wait for the record to be replicated; when leadership moves, the new leader loads the partition, an
Ongoing transaction carries on there and a prepared one gets its markers from the new coordinator, under its
higher coordinator epoch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from minikafka.broker.broker import serve_broker
from minikafka.broker.cluster import Cluster, serve_cluster
from minikafka.broker.txn.metadata import TransactionMetadata, TransactionState
from minikafka.broker.txn.state_log import TransactionStateLog
from minikafka.client.connection import KafkaConnection
from minikafka.common import TopicPartition
from minikafka.protocol.api import ApiKey
from minikafka.protocol.coordinator_records import decode_transaction_record
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import ControlRecordType, decode_records, iter_batches, read_end_txn_marker
from cluster_logs import connect, log_of, stored
from helpers import batch, produce, wait_until

K = ApiKey
TXN_TOPIC = "__transaction_state"
FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, broker_session_timeout_ms=400,
            broker_heartbeat_interval_ms=50, replica_socket_timeout_ms=500, transaction_state_log_num_partitions=5)


async def find_txn_coordinator(conn: KafkaConnection, tid: str) -> Any:
    return await conn.request(K.FIND_COORDINATOR, 3, {"key": tid, "key_type": 1})


async def init_pid(conn: KafkaConnection, tid: str) -> Any:
    return await conn.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60_000})


async def add_partition(conn: KafkaConnection, tid: str, pid: int, epoch: int, topic: str) -> int:
    r = await conn.request(K.ADD_PARTITIONS_TO_TXN, 3, {
        "v3_and_below_transactional_id": tid, "v3_and_below_producer_id": pid, "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}]})
    return r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


async def end_txn(conn: KafkaConnection, tid: str, pid: int, epoch: int, commit: bool) -> int:
    r = await conn.request(K.END_TXN, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                         "committed": commit})
    return r.error_code


async def txn_state(conn: KafkaConnection, tid: str) -> tuple[int, str]:
    r = await conn.request(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    s = r.transaction_states[0]
    return s.error_code, s.transaction_state


def coordinator_of(cluster: Cluster, tid: str) -> int:
    return cluster.metadata.transaction_coordinator(tid).node_id


def state_records(cluster: Cluster, broker_id: int, tid: str) -> list[int]:
    """The transaction states (Kafka's ids) written for ``tid`` in broker ``broker_id``'s replica."""
    partition = cluster.txn_coordinator.state.partition_for(tid)
    out = []
    for raw in stored(log_of(cluster, broker_id, TXN_TOPIC, partition)):
        for rec in decode_records(memoryview(raw), check_crc=False):
            key, value = decode_transaction_record(rec.key, rec.value)
            if key.transactional_id == tid and value is not None:
                out.append(value.transaction_status)
    return out


def markers(cluster: Cluster, broker_id: int, topic: str) -> list[tuple[bool, int]]:
    """(committed, coordinator epoch) of each transaction marker in the broker's replica of ``topic``-0."""
    out = []
    for raw in stored(log_of(cluster, broker_id, topic)):
        for h, view in iter_batches(raw, check_crc=False):
            if h.is_control:
                control_type, coordinator_epoch = read_end_txn_marker(view)
                out.append((control_type == ControlRecordType.COMMIT, coordinator_epoch))
    return out


async def test_an_id_is_coordinated_by_the_leader_of_its_partition_and_answered_once_replicated():
    async with serve_cluster(3, **FAST) as cluster:
        assert cluster.metadata.get_topic(TXN_TOPIC) is None
        c0 = await connect(cluster, 0)
        fc = await find_txn_coordinator(c0, "tx")
        topic = cluster.metadata.get_topic(TXN_TOPIC)
        assert topic is not None and topic.num_partitions == 5 and topic.replication_factor == 3
        assert topic.configs["cleanup.policy"] == "compact" and topic.configs["min.insync.replicas"] == "2"
        partition = cluster.txn_coordinator.state.partition_for("tx")
        leader = topic.partitions[partition].leader
        assert fc.error_code == 0 and fc.node_id == leader
        md = await c0.request(K.METADATA, 12, {"topics": [{"name": TXN_TOPIC}]})
        assert md.topics[0].is_internal
        other = await connect(cluster, (leader + 1) % 3)
        assert (await init_pid(other, "tx")).error_code == ErrorCode.NOT_COORDINATOR
        coordinator = await connect(cluster, leader)
        init = await init_pid(coordinator, "tx")
        assert init.error_code == 0
        # Answered once replicated: the Empty record is on every replica already.
        for b in range(3):
            assert state_records(cluster, b, "tx") == [0], b
        # Each broker lists the ids of the partitions it leads: the ids of the cluster once in all.
        listed = []
        for b in range(3):
            conn = await connect(cluster, b)
            r = await conn.request(K.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": [],
                                                             "duration_filter": -1})
            listed += [s.transactional_id for s in r.transaction_states]
            await conn.aclose()
        assert listed == ["tx"]
        for conn in (c0, other, coordinator):
            await conn.aclose()

    # Replication factor and min.insync.replicas are capped at the brokers there are.
    async with serve_cluster(1, **FAST) as cluster:
        c0 = await connect(cluster, 0)
        assert (await find_txn_coordinator(c0, "tx")).node_id == 0
        topic = cluster.metadata.get_topic(TXN_TOPIC)
        assert topic.replication_factor == 1 and topic.configs["min.insync.replicas"] == "1"
        assert (await init_pid(c0, "tx")).error_code == 0
        await c0.aclose()


async def open_transaction(cluster: Cluster) -> tuple[KafkaConnection, int, int, KafkaConnection, KafkaConnection,
                                                       int, int]:
    """Transaction ``tx`` open with one record in ``t``-0, whose only replica is on another broker than the
    transaction's coordinator: (a connection to broker 0, the coordinator, the data leader, connections to
    both, producer id, epoch)."""
    c0 = await connect(cluster, 0)
    await find_txn_coordinator(c0, "tx")
    first = coordinator_of(cluster, "tx")
    data_leader = next(b for b in range(3) if b != first)
    cluster.broker(data_leader).create_topic("t", 1, 1, assignments={0: [data_leader]})
    conn = await connect(cluster, first)
    init = await init_pid(conn, "tx")
    pid, epoch = init.producer_id, init.producer_epoch
    assert await add_partition(conn, "tx", pid, epoch, "t") == 0
    leader = await connect(cluster, data_leader)
    sent = await produce(leader, "t", batch([b"v"], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                                            is_transactional=True), transactional_id="tx")
    assert sent.error_code == 0
    return c0, first, data_leader, conn, leader, pid, epoch


async def test_an_ongoing_transaction_moves_with_its_partition_and_commits_at_the_new_coordinator():
    async with serve_cluster(3, **FAST) as cluster:
        c0, first, data_leader, conn, leader, pid, epoch = await open_transaction(cluster)
        await conn.aclose()

        await cluster.stop_broker(first)  # a controlled shutdown: leadership moves first
        second = coordinator_of(cluster, "tx")
        assert second not in (-1, first)
        new = await connect(cluster, second)
        assert await txn_state(new, "tx") == (0, "Ongoing")  # loaded from the partition, nothing lost
        assert await end_txn(new, "tx", pid, epoch, True) == 0
        await wait_until(lambda: markers(cluster, data_leader, "t") != [], what="the COMMIT marker")
        epochs = cluster.metadata.get_topic(TXN_TOPIC).partitions[cluster.txn_coordinator.state.partition_for("tx")]
        assert markers(cluster, data_leader, "t") == [(True, epochs.leader_epoch)]
        assert epochs.leader_epoch > 0
        await wait_until(lambda: cluster.txn_coordinator.describe("tx").state == TransactionState.COMPLETE_COMMIT,
                         what="CompleteCommit")
        for conn in (c0, leader, new):
            await conn.aclose()


async def test_a_prepared_transaction_gets_its_markers_from_the_next_coordinator_under_its_epoch():
    async with serve_cluster(3, **FAST) as cluster:
        c0, first, data_leader, conn, leader, pid, epoch = await open_transaction(cluster)
        # The data leader turns the coordinator's markers away: the commit is prepared, not completed ...
        rule = cluster.faults.add(api="WriteTxnMarkers", broker=data_leader, error="NOT_LEADER_OR_FOLLOWER")
        assert await end_txn(conn, "tx", pid, epoch, True) == 0
        await wait_until(lambda: rule.matched >= 1, what="a marker turned away")
        assert state_records(cluster, first, "tx")[-1] == 2  # PrepareCommit, replicated before the answer
        await conn.aclose()
        # ... when its broker crashes: the next leader of the partition loads PrepareCommit and completes it.
        await cluster.crash_broker(first)
        cluster.faults.remove(rule.id)
        await wait_until(lambda: coordinator_of(cluster, "tx") not in (-1, first), what="a new coordinator")
        await wait_until(lambda: markers(cluster, data_leader, "t") != [], what="the COMMIT marker")
        new_epoch = cluster.metadata.get_topic(TXN_TOPIC).partitions[
            cluster.txn_coordinator.state.partition_for("tx")].leader_epoch
        assert markers(cluster, data_leader, "t") == [(True, new_epoch)] and new_epoch > 0
        second = coordinator_of(cluster, "tx")
        new = await connect(cluster, second)
        await wait_until(lambda: state_records(cluster, second, "tx")[-1] == 4, what="CompleteCommit written")
        assert await txn_state(new, "tx") == (0, "CompleteCommit")
        # The read_committed view has the record.
        r = await leader.request(K.LIST_OFFSETS, 4, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]})
        assert r.topics[0].partitions[0].offset == 2  # the record and its marker
        for conn in (c0, leader, new):
            await conn.aclose()


async def test_a_partition_below_its_min_insync_replicas_takes_no_state_change():
    """``transaction.state.log.min.isr`` (2, capped at the replicas): with its ISR shrunk to the leader, the
    coordinator answers COORDINATOR_NOT_AVAILABLE (Kafka's append fails with NOT_ENOUGH_REPLICAS) and changes
    nothing; with the follower back in sync, it takes the change."""
    async with serve_cluster(2, **FAST) as cluster:
        c0 = await connect(cluster, 0)
        await find_txn_coordinator(c0, "tx")
        partition = cluster.txn_coordinator.state.partition_for("tx")
        pm = cluster.metadata.get_topic(TXN_TOPIC).partitions[partition]
        assert cluster.metadata.get_topic(TXN_TOPIC).configs["min.insync.replicas"] == "2" and len(pm.isr) == 2
        leader, follower = pm.leader, next(b for b in pm.replicas if b != pm.leader)
        conn = await connect(cluster, leader)
        await cluster.crash_broker(follower)
        await wait_until(lambda: pm.isr == [leader], what="the ISR shrunk to the leader")
        assert (await init_pid(conn, "tx")).error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert cluster.txn_coordinator.describe("tx") is None and state_records(cluster, leader, "tx") == []
        await cluster.start_broker(follower)
        await wait_until(lambda: len(pm.isr) == 2, what="the follower back in sync")
        assert (await init_pid(conn, "tx")).error_code == 0
        for conn_ in (c0, conn):
            await conn_.aclose()


async def test_a_lone_brokers_transactions_survive_a_restart_and_an_earlier_local_log_is_carried_over(
        tmp_path: Path):
    # What an earlier version kept in <data_dir>/__transaction_state-0 ...
    legacy = TransactionStateLog(tmp_path)
    legacy.load()
    legacy.write(TransactionMetadata("old", 5000, 3, 60_000, TransactionState.COMPLETE_COMMIT))
    legacy.close()
    settings = dict(data_dir=tmp_path, transaction_state_log_num_partitions=3)
    async with serve_broker(**settings) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            # ... is in the replicated topic once it exists, and the local log is gone.
            assert (await find_txn_coordinator(conn, "new")).error_code == 0
            assert await txn_state(conn, "old") == (0, "CompleteCommit")
            assert not (tmp_path / "__transaction_state-0").exists()
            init = await init_pid(conn, "new")
            assert init.error_code == 0 and init.producer_id > 5000  # past the ids carried over
            assert await add_partition(conn, "new", init.producer_id, init.producer_epoch, "t") == \
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    async with serve_broker(**settings) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port) as conn:
            assert await txn_state(conn, "old") == (0, "CompleteCommit")
            assert await txn_state(conn, "new") == (0, "Empty")
            again = await init_pid(conn, "new")
            assert again.producer_id == init.producer_id and again.producer_epoch == init.producer_epoch + 1
            assert any((tmp_path / "logs").glob(f"{TXN_TOPIC}-*"))


async def test_the_markers_of_a_deposed_coordinator_are_fenced():
    """A partition fences markers whose coordinator epoch is below the last it saw (Kafka's
    TRANSACTION_COORDINATOR_FENCED), which the epochs of __transaction_state leaders make of a deposed one."""
    async with serve_cluster(1, **FAST) as cluster:
        broker = cluster.broker(0)
        broker.create_topic("t", 1)
        conn = await connect(cluster, 0)
        pid = (await conn.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": None,
                                                          "transaction_timeout_ms": 0})).producer_id
        assert (await produce(conn, "t", batch([b"v"], producer_id=pid, producer_epoch=0, base_sequence=0,
                                               is_transactional=True))).error_code == 0

        async def marker(coordinator_epoch: int) -> int:
            r = await conn.request(K.WRITE_TXN_MARKERS, 1, {"markers": [
                {"producer_id": pid, "producer_epoch": 0, "transaction_result": True,
                 "coordinator_epoch": coordinator_epoch, "topics": [{"name": "t", "partition_indexes": [0]}]}]})
            return r.markers[0].topics[0].partitions[0].error_code

        assert await marker(3) == 0
        assert (await produce(conn, "t", batch([b"w"], producer_id=pid, producer_epoch=0, base_sequence=1,
                                               is_transactional=True))).error_code == 0
        assert await marker(2) == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        await conn.aclose()
