"""KIP-890 part 2 (transaction version 2) over the wire, as the Java producer of Kafka 4.x drives it when
ApiVersions finalizes ``transaction.version`` at 2 (no client here speaks it: kafka-python 3.0 stops at
EndTxn v3, librdkafka 2.16 at EndTxn v1, aiokafka lower still):

* no AddPartitionsToTxn: a Produce v12 transactional batch has the leader add its partition, and a
  TxnOffsetCommit v5 adds its group, through the coordinator;
* EndTxn v5 ends the transaction under a bumped producer epoch, which the markers carry and the next
  transaction uses; WriteTxnMarkers v2 (KIP-1228) fences a late copy of a TV2 marker;
* ListTransactions v2's transactional-id pattern and WriteTxnMarkers' removed v0.
"""

from __future__ import annotations

import trio

from helpers import K, batch, create, fetch, produce, wait_until
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import iter_batches

PRODUCE_TV2 = 12  # the first Produce version of a transaction-version-2 client


async def init(c: KafkaConnection, tid: str) -> tuple[int, int]:
    resp = await c.request(K.INIT_PRODUCER_ID, 5, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                                   "producer_id": -1, "producer_epoch": -1})
    assert resp.error_code == 0, resp
    return resp.producer_id, resp.producer_epoch


def txn_batch(values: list[bytes], pid: int, epoch: int, seq: int = 0) -> bytes:
    return batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True)


async def end_txn(c: KafkaConnection, tid: str, pid: int, epoch: int, commit: bool, version: int = 5):
    return await c.request(K.END_TXN, version, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                                "committed": commit})


async def txn_offset_commit(c: KafkaConnection, tid: str, pid: int, epoch: int, offset: int, version: int = 5):
    resp = await c.request(K.TXN_OFFSET_COMMIT, version, {
        "transactional_id": tid, "group_id": "g", "producer_id": pid, "producer_epoch": epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return resp.topics[0].partitions[0].error_code


async def committed_offset(c: KafkaConnection) -> int:
    resp = await c.request(K.OFFSET_FETCH, 7, {"group_id": "g", "require_stable": True,
                                               "topics": [{"name": "t", "partition_indexes": [0]}]})
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0, part
    return part.committed_offset


async def test_a_transaction_version_2_producer_needs_no_add_requests_and_bumps_its_epoch_per_transaction():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            versions = await c.request(K.API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
            assert {f.name: f.max_version_level for f in versions.finalized_features}["transaction.version"] == 2
            await create(c, "t")
            coordinator = b.txn_coordinator
            pid, epoch = await init(c, "tx")

            # Transaction 1: produce and commit offsets without AddPartitionsToTxn / AddOffsetsToTxn.
            sent = await produce(c, "t", txn_batch([b"a", b"b"], pid, epoch), version=PRODUCE_TV2,
                                 transactional_id="tx")
            assert sent.error_code == 0, sent
            meta = coordinator.describe("tx")
            assert meta.state.value == "Ongoing" and {(tp.topic, tp.partition) for tp in meta.partitions} == {("t", 0)}
            assert await txn_offset_commit(c, "tx", pid, epoch, 2) == 0
            assert meta.groups == {"g"} and meta.client_version == 2
            end = await end_txn(c, "tx", pid, epoch, commit=True)
            assert (end.error_code, end.producer_id, end.producer_epoch) == (0, pid, epoch + 1)
            with trio.fail_after(5):
                await coordinator.wait_completions(1)
            part = b.replica_manager.get("t", 0)
            assert part.producers.producers[pid].epoch == epoch + 1  # the COMMIT marker's epoch
            assert await committed_offset(c) == 2
            # A retried EndTxn (the client missed the answer) gets the same answer, not a second bump.
            again = await end_txn(c, "tx", pid, epoch, commit=True)
            assert (again.error_code, again.producer_epoch) == (0, epoch + 1)

            # Transaction 2 under the new epoch, its sequences from 0; aborted, under yet another epoch.
            epoch += 1
            sent = await produce(c, "t", txn_batch([b"c"], pid, epoch), version=PRODUCE_TV2, transactional_id="tx")
            assert sent.error_code == 0 and sent.base_offset == 3, sent
            assert await txn_offset_commit(c, "tx", pid, epoch, 9) == 0
            end = await end_txn(c, "tx", pid, epoch, commit=False)
            assert (end.error_code, end.producer_epoch) == (0, epoch + 1)
            with trio.fail_after(5):
                await coordinator.wait_completions(2)
            assert await committed_offset(c) == 2  # the aborted transaction's offsets are dropped
            markers = [(h.base_offset, h.producer_epoch) for h, _ in iter_batches((await fetch(c, "t")).records)
                       if h.is_control]
            assert markers == [(2, epoch), (4, epoch + 1)]

            # The previous epoch is fenced: its batches and its EndTxn.
            stale = await produce(c, "t", txn_batch([b"z"], pid, epoch, seq=1), version=PRODUCE_TV2,
                                  transactional_id="tx")
            assert stale.error_code == E.INVALID_PRODUCER_EPOCH
            assert (await end_txn(c, "tx", pid, epoch - 1, commit=True)).error_code == E.PRODUCER_FENCED


async def test_a_late_copy_of_a_transaction_version_2_marker_is_fenced():
    """KIP-1228: a TV2 marker must be above the producer's epoch on the partition; a legacy one may equal it."""
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            pid, epoch = await init(c, "tx")
            assert (await produce(c, "t", txn_batch([b"a"], pid, epoch), version=PRODUCE_TV2,
                                  transactional_id="tx")).error_code == 0
            end = await end_txn(c, "tx", pid, epoch, commit=True)
            with trio.fail_after(5):
                await b.txn_coordinator.wait_completions(1)

            async def marker(version: int, transaction_version: int) -> int:
                m = {"producer_id": pid, "producer_epoch": end.producer_epoch, "transaction_result": True,
                     "coordinator_epoch": 0, "topics": [{"name": "t", "partition_indexes": [0]}]}
                if version >= 2:
                    m["transaction_version"] = transaction_version
                resp = await c.request(K.WRITE_TXN_MARKERS, version, {"markers": [m]})
                return resp.markers[0].topics[0].partitions[0].error_code

            end_offset = b.replica_manager.get("t", 0).log.log_end_offset
            assert await marker(2, 2) == E.INVALID_PRODUCER_EPOCH
            assert b.replica_manager.get("t", 0).log.log_end_offset == end_offset  # nothing appended
            assert await marker(1, 0) == 0  # a legacy marker at the same epoch is written (Kafka's >= check)


async def test_a_transaction_version_1_client_still_adds_partitions_and_keeps_its_epoch():
    """EndTxn v4 and AddPartitionsToTxn v3 (what every client here sends): no bump, verification as before."""
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            await create(c, "t")
            pid, epoch = await init(c, "tx")
            early = await produce(c, "t", txn_batch([b"a"], pid, epoch), version=11, transactional_id="tx")
            assert early.error_code == E.TRANSACTION_ABORTABLE  # v11 knows it (KIP-890); v9 got INVALID_TXN_STATE
            add = await c.request(K.ADD_PARTITIONS_TO_TXN, 3, {
                "v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": [{"name": "t", "partitions": [0]}]})
            assert add.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
            assert (await produce(c, "t", txn_batch([b"a"], pid, epoch), version=11,
                                  transactional_id="tx")).error_code == 0
            end = await end_txn(c, "tx", pid, epoch, commit=True, version=4)
            assert end.error_code == 0
            with trio.fail_after(5):
                await b.txn_coordinator.wait_completions(1)
            meta = b.txn_coordinator.describe("tx")
            assert (meta.producer_epoch, meta.client_version) == (epoch, 0)
            assert b.replica_manager.get("t", 0).producers.producers[pid].epoch == epoch


async def test_transactions_the_coordinator_aborts_follow_the_finalized_transaction_version():
    """A timed-out transaction is aborted as the cluster's transaction.version says (Kafka: server TV)."""
    cfg = BrokerConfig(port=0, bootstrap_features="transaction.version=1",
                       transaction_abort_timed_out_transaction_cleanup_interval_ms=20)
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            versions = await c.request(K.API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})
            assert {f.name: f.max_version_level for f in versions.finalized_features}["transaction.version"] == 1
            await create(c, "t")
            resp = await c.request(K.INIT_PRODUCER_ID, 5, {"transactional_id": "tx", "transaction_timeout_ms": 50,
                                                           "producer_id": -1, "producer_epoch": -1})
            pid, epoch = resp.producer_id, resp.producer_epoch
            assert (await produce(c, "t", txn_batch([b"a"], pid, epoch), version=PRODUCE_TV2,
                                  transactional_id="tx")).error_code == 0
            with trio.fail_after(5):
                await b.txn_coordinator.wait_completions(1)
            meta = b.txn_coordinator.describe("tx")
            assert meta.state.value == "CompleteAbort" and meta.client_version == 1
            assert meta.producer_epoch == epoch + 1  # fenced, and the marker written under that epoch
            await wait_until(lambda: b.replica_manager.get("t", 0).last_stable_offset == 2, what="abort marker")


async def test_list_transactions_v2_filters_by_a_transactional_id_pattern():
    async with serve_broker(port=0) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            for tid in ("orders-1", "orders-22", "payments-1", "xorders-1"):
                await init(c, tid)

            async def listed(pattern: str | None, version: int = 2) -> tuple[int, list[str]]:
                body = {"state_filters": [], "producer_id_filters": [], "duration_filter": -1}
                if version >= 2:
                    body["transactional_id_pattern"] = pattern
                resp = await c.request(K.LIST_TRANSACTIONS, version, body)
                return resp.error_code, sorted(t.transactional_id for t in resp.transaction_states)

            assert await listed("orders-\\d+") == (0, ["orders-1", "orders-22"])  # the whole id must match
            assert await listed("orders") == (0, [])
            assert await listed(".*-1") == (0, ["orders-1", "payments-1", "xorders-1"])
            assert await listed(None) == await listed("") == await listed(None, version=1)
            assert len((await listed(None))[1]) == 4
            assert await listed("orders-(") == (E.INVALID_REGULAR_EXPRESSION, [])
            assert await listed("(?=o)orders-1") == (E.INVALID_REGULAR_EXPRESSION, [])  # RE2: no lookahead
