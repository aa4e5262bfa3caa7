"""The transactional producer's state machine and request handlers (Kafka's ``TransactionManager``),
without a broker: handlers are fed hand-made responses, request bodies are built with the real message
declarations (strict: no undeclared keys)."""

from __future__ import annotations

from types import SimpleNamespace as NS
from typing import Any

import pytest
import trio

from minikafka.client.consumer import ConsumerGroupMetadata
from minikafka.client.producer import (IllegalStateError, KafkaProducer, KafkaProducerError, KafkaTimeoutError,
                                       ProducerConfig, ProducerFencedError, TransactionalIdAuthorizationError,
                                       TxnState)
from minikafka.client.producer.batch import ProducerBatch
from minikafka.client.producer.transaction_manager import TransactionManager
from minikafka.client.producer.txn_handlers import (AddOffsetsToTxnHandler, AddPartitionsToTxnHandler, CoordinatorType,
                                                    EndTxnHandler, FindCoordinatorHandler, InitProducerIdHandler,
                                                    TxnOffsetCommitHandler)
from minikafka.client.producer.txn_state import VALID_SOURCES
from minikafka.common import OffsetAndMetadata
from minikafka.protocol.api import APIS
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import TRANSACTIONAL_MASK, decode_records, read_header

E = ErrorCode
TID = "tx-1"


def build_all_versions(handler: Any) -> dict[int, dict]:
    """The handler's body at every version the client may send, encoded by the declaration (strict mode)."""
    api = APIS[handler.api_key]
    hi = api.max_version if handler.max_version is None else min(api.max_version, handler.max_version)
    bodies = {}
    for v in range(api.min_version, hi + 1):
        body = handler.build(v)
        api.request.build(body, v)  # raises on an undeclared key or a bad value
        bodies[v] = body
    return bodies


def coordinator_response(node: int = 0, err: int = 0) -> NS:
    return NS(error_code=err, node_id=node, host="h", port=1, coordinators=[
        NS(key=TID, node_id=node, host="h", port=1, error_code=err, error_message=None)])


def init_response(pid: int = 7, epoch: int = 0, err: int = 0) -> NS:
    return NS(error_code=err, producer_id=pid, producer_epoch=epoch, throttle_time_ms=0)


def add_partitions_response(codes: dict[tuple[str, int], int]) -> NS:
    topics: dict[str, list[NS]] = {}
    for (t, p), c in codes.items():
        topics.setdefault(t, []).append(NS(partition_index=p, partition_error_code=c))
    return NS(throttle_time_ms=0, results_by_topic_v3_and_below=[NS(name=t, results_by_partition=ps)
                                                                  for t, ps in topics.items()])


def ready_manager(coordinator: int = 0) -> TransactionManager:
    """A manager in READY with producer id 7 epoch 0 (FindCoordinator + InitProducerId answered)."""
    txn = TransactionManager(TID, 30000, retry_backoff_ms=100)
    result = txn.initialize_transactions()
    assert txn.state == TxnState.INITIALIZING
    h = txn.next_request(False)
    assert isinstance(h, InitProducerIdHandler) and h.coordinator_type == CoordinatorType.TRANSACTION
    assert txn.coordinator(CoordinatorType.TRANSACTION, TID) is None
    txn.lookup_coordinator_for(h)  # what the Sender does when the coordinator is unknown
    fc = txn.next_request(False)
    assert isinstance(fc, FindCoordinatorHandler) and fc.coordinator_type is None
    assert fc.build(4) == {"key": TID, "key_type": 1, "coordinator_keys": [TID]}
    build_all_versions(fc)
    fc.handle_response(coordinator_response(coordinator), 4)
    assert txn.coordinator(CoordinatorType.TRANSACTION, TID) == coordinator
    h2 = txn.next_request(False)
    assert h2 is h
    bodies = build_all_versions(h)
    assert bodies[4] == {"transactional_id": TID, "transaction_timeout_ms": 30000, "producer_id": -1,
                         "producer_epoch": -1}
    h.handle_response(init_response(), 4)
    assert result.is_successful and txn.state == TxnState.READY
    result.acked = True  # as KafkaProducer.init_transactions' await does
    assert (txn.producer_id, txn.producer_epoch) == (7, 0)
    assert txn.next_request(False) is None
    return txn


def in_transaction(partitions: tuple[tuple[str, int], ...] = (("t", 0),)) -> TransactionManager:
    txn = ready_manager()
    txn.begin_transaction()
    for tp in partitions:
        txn.maybe_add_partition(tp)
    h = txn.next_request(False)
    assert isinstance(h, AddPartitionsToTxnHandler)
    h.handle_response(add_partitions_response({tp: 0 for tp in partitions}), 3)
    assert h.result.is_successful
    return txn


def make_batch(topic: str = "t", partition: int = 0) -> ProducerBatch:
    b = ProducerBatch(topic, partition, bytearray(), 1024, 1024, 0, 0)
    assert b.try_append(0, b"k", b"v", b"\x00", None) is not None
    return b


# -- state machine ------------------------------------------------------------------------------------
def test_transitions_are_javas() -> None:
    S = TxnState
    assert VALID_SOURCES[S.IN_TRANSACTION] == {S.READY}
    assert VALID_SOURCES[S.COMMITTING_TRANSACTION] == {S.IN_TRANSACTION}
    assert VALID_SOURCES[S.ABORTING_TRANSACTION] == {S.IN_TRANSACTION, S.ABORTABLE_ERROR}
    assert VALID_SOURCES[S.READY] == {S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}
    assert VALID_SOURCES[S.FATAL_ERROR] == set(S)
    txn = TransactionManager(TID)
    with pytest.raises(IllegalStateError, match="Invalid transition attempted from state UNINITIALIZED to state "
                                                "IN_TRANSACTION"):
        txn.begin_transaction()


def test_illegal_calls_before_init_and_outside_a_transaction() -> None:
    txn = TransactionManager(TID)
    with pytest.raises(IllegalStateError, match="before completing a call to init_transactions"):
        txn.fail_if_not_ready_for_send()
    txn = ready_manager()
    with pytest.raises(IllegalStateError, match="Cannot call send in state READY"):
        txn.maybe_add_partition(("t", 0))
    with pytest.raises(IllegalStateError, match="Cannot send offsets if a transaction is not in progress"):
        txn.send_offsets_to_transaction({("t", 0): OffsetAndMetadata(1)}, ConsumerGroupMetadata("g"))
    with pytest.raises(IllegalStateError, match="READY to state COMMITTING_TRANSACTION"):
        txn.begin_commit()
    with pytest.raises(IllegalStateError, match="READY to state ABORTING_TRANSACTION"):
        txn.begin_abort()
    with pytest.raises(IllegalStateError, match="READY to state INITIALIZING"):
        txn.initialize_transactions()
    txn.begin_transaction()
    with pytest.raises(IllegalStateError, match="IN_TRANSACTION to state IN_TRANSACTION"):
        txn.begin_transaction()
    non_txn = TransactionManager()
    with pytest.raises(IllegalStateError, match="non-transactional"):
        non_txn.begin_transaction()


def test_partitions_are_added_before_their_batches_drain() -> None:
    txn = ready_manager()
    txn.begin_transaction()
    assert txn.maybe_add_partition(("t", 0)) and txn.maybe_add_partition(("u", 1))
    assert not txn.maybe_add_partition(("t", 0))
    batch = make_batch()
    assert txn.should_stop_drain(batch, ("t", 0))  # not in the transaction yet
    h = txn.next_request(False)
    assert isinstance(h, AddPartitionsToTxnHandler) and h.max_version == 3
    assert txn.pending_partitions_in_transaction == {("t", 0), ("u", 1)} and not txn.new_partitions_in_transaction
    assert not txn.maybe_add_partition(("u", 1))  # pending counts as added
    bodies = build_all_versions(h)
    assert set(bodies) == {0, 1, 2, 3}
    assert bodies[3] == {"v3_and_below_transactional_id": TID, "v3_and_below_producer_id": 7,
                         "v3_and_below_producer_epoch": 0,
                         "v3_and_below_topics": [{"name": "t", "partitions": [0]}, {"name": "u", "partitions": [1]}]}
    h.handle_response(add_partitions_response({("t", 0): 0, ("u", 1): 0}), 3)
    assert h.result.is_successful and txn.transaction_started
    assert txn.partitions_in_transaction == {("t", 0), ("u", 1)} and not txn.pending_partitions_in_transaction
    assert not txn.should_stop_drain(batch, ("t", 0))
    txn.assign_sequence(batch)
    data = batch.build()
    h0 = read_header(data)
    assert h0.attributes & TRANSACTIONAL_MASK and h0.is_transactional and not h0.is_control
    assert (h0.producer_id, h0.producer_epoch, h0.base_sequence) == (7, 0, 0)
    assert [r.value for r in decode_records(data)] == [b"v"]


def test_idempotent_batches_are_not_transactional() -> None:
    txn = TransactionManager()
    txn.set_producer_id(3, 0)
    b = make_batch()
    assert not txn.should_stop_drain(b, ("t", 0))
    txn.assign_sequence(b)
    assert not read_header(b.build()).is_transactional


def test_commit_waits_for_batches_then_sends_end_txn() -> None:
    txn = in_transaction()
    result = txn.begin_commit()
    assert txn.state == TxnState.COMMITTING_TRANSACTION and txn.is_completing
    assert txn.next_request(has_incomplete_batches=True) is None  # EndTxn waits for the flush
    h = txn.next_request(False)
    assert isinstance(h, EndTxnHandler)
    assert build_all_versions(h)[5] == {"transactional_id": TID, "producer_id": 7, "producer_epoch": 0,
                                        "committed": True}
    h.handle_response(NS(error_code=0, throttle_time_ms=0, producer_id=-1, producer_epoch=-1), 4)
    assert result.is_successful and txn.state == TxnState.READY
    assert not txn.partitions_in_transaction and not txn.transaction_started
    with pytest.raises(IllegalStateError, match="previous call to `commitTransaction`"):
        txn.begin_transaction()  # the caller has not seen the commit's outcome yet
    result.acked = True
    txn.begin_transaction()  # the next one


def test_end_txn_v5_adopts_the_bumped_epoch() -> None:
    txn = in_transaction()
    e = txn.entry(("t", 0))
    e.next_sequence = 5
    result = txn.begin_commit()
    h = txn.next_request(False)
    assert isinstance(h, EndTxnHandler)
    h.handle_response(NS(error_code=0, throttle_time_ms=0, producer_id=7, producer_epoch=1), 5)
    assert result.is_successful and (txn.producer_id, txn.producer_epoch) == (7, 1)
    assert txn.entry(("t", 0)).next_sequence == 0  # a new epoch starts at sequence 0


def test_empty_transaction_ends_without_end_txn() -> None:
    txn = ready_manager()
    txn.begin_transaction()
    result = txn.begin_commit()
    assert txn.next_request(False) is None
    assert result.is_successful and txn.state == TxnState.READY
    result.acked = True
    txn.begin_transaction()
    result = txn.begin_abort()
    assert txn.next_request(False) is None and result.is_successful and txn.state == TxnState.READY


def test_failed_batch_is_abortable_and_abort_bumps_the_epoch() -> None:
    txn = in_transaction()
    batch = make_batch()
    txn.assign_sequence(batch)
    txn.handle_failed(batch, KafkaProducerError("NOT_ENOUGH_REPLICAS: boom", E.NOT_ENOUGH_REPLICAS))
    assert txn.state == TxnState.ABORTABLE_ERROR and txn.epoch_bump_required
    with pytest.raises(KafkaProducerError, match="error state") as info:
        txn.fail_if_not_ready_for_send()
    assert info.value.code == E.NOT_ENOUGH_REPLICAS
    with pytest.raises(KafkaProducerError, match="error state"):
        txn.begin_commit()
    with pytest.raises(KafkaProducerError, match="error state"):
        txn.send_offsets_to_transaction({("t", 0): OffsetAndMetadata(1)}, ConsumerGroupMetadata("g"))
    result = txn.begin_abort()
    assert txn.state == TxnState.ABORTING_TRANSACTION and txn.last_error is None
    h = txn.next_request(False)
    assert isinstance(h, EndTxnHandler) and not h.committed
    h.handle_response(NS(error_code=0, throttle_time_ms=0), 3)
    assert txn.state == TxnState.INITIALIZING and not result.is_completed
    bump = txn.next_request(False)
    assert isinstance(bump, InitProducerIdHandler) and bump.is_epoch_bump and bump.result is result
    assert bump.build(4)["producer_id"] == 7 and bump.build(4)["producer_epoch"] == 0
    bump.handle_response(init_response(7, 1), 4)
    assert result.is_successful and txn.state == TxnState.READY and txn.producer_epoch == 1
    assert not txn.epoch_bump_required


def test_commit_with_an_abortable_error_fails_then_abort_succeeds() -> None:
    txn = in_transaction()
    commit = txn.begin_commit()
    batch = make_batch()
    txn.assign_sequence(batch)
    txn.handle_failed(batch, KafkaProducerError("INVALID_RECORD", E.INVALID_RECORD))
    assert txn.state == TxnState.ABORTABLE_ERROR
    assert txn.next_request(False) is None  # EndTxn(commit) is failed, not sent
    assert commit.is_completed and commit.error is not None and commit.error.code == E.INVALID_RECORD
    commit.acked = True  # the caller saw it
    abort = txn.begin_abort()
    end = txn.next_request(False)
    assert isinstance(end, EndTxnHandler) and not end.committed and end.result is abort


@pytest.mark.parametrize("code", [E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH])
def test_fencing_is_fatal(code: int) -> None:
    txn = ready_manager()
    txn.begin_transaction()
    txn.maybe_add_partition(("t", 0))
    h = txn.next_request(False)
    assert isinstance(h, AddPartitionsToTxnHandler)
    offsets = txn.send_offsets_to_transaction({("t", 0): OffsetAndMetadata(3)}, ConsumerGroupMetadata("g"))
    h.handle_response(add_partitions_response({("t", 0): code}), 3)
    assert txn.state == TxnState.FATAL_ERROR and txn.has_fatal_error
    assert isinstance(h.result.error, ProducerFencedError)
    assert isinstance(offsets.error, ProducerFencedError)  # queued requests fail too
    assert txn.next_request(False) is None
    with pytest.raises(ProducerFencedError, match="fenced by another producer"):
        txn.begin_abort()
    with pytest.raises(ProducerFencedError):
        txn.fail_if_not_ready_for_send()
    assert not txn.is_send_to_partition_allowed(("t", 0))


def test_fenced_produce_response_is_fatal() -> None:
    txn = in_transaction()
    batch = make_batch()
    txn.assign_sequence(batch)
    txn.handle_failed(batch, txn.fenced_error(E.INVALID_PRODUCER_EPOCH))
    assert txn.state == TxnState.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        txn.begin_commit()


def test_transactional_id_authorization_failure_is_fatal() -> None:
    txn = TransactionManager(TID)
    result = txn.initialize_transactions()
    h = txn.next_request(False)
    assert isinstance(h, InitProducerIdHandler)
    h.handle_response(init_response(-1, -1, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), 4)
    assert txn.state == TxnState.FATAL_ERROR
    assert isinstance(result.error, TransactionalIdAuthorizationError)


def test_coordinator_errors_refind_the_coordinator_and_retry() -> None:
    txn = ready_manager()
    txn.begin_transaction()
    txn.maybe_add_partition(("t", 0))
    h = txn.next_request(False)
    assert isinstance(h, AddPartitionsToTxnHandler)
    h.handle_response(add_partitions_response({("t", 0): E.NOT_COORDINATOR}), 3)
    assert txn.state == TxnState.IN_TRANSACTION and txn.transaction_coordinator is None
    fc = txn.next_request(False)
    assert isinstance(fc, FindCoordinatorHandler) and fc.key_type == CoordinatorType.TRANSACTION
    fc.handle_response(coordinator_response(2), 3)
    again = txn.next_request(False)
    assert again is h and h.is_retry and h.retry_backoff_ms == 100
    h.handle_response(add_partitions_response({("t", 0): E.CONCURRENT_TRANSACTIONS}), 3)
    again = txn.next_request(False)
    assert again is h and h.retry_backoff_ms == 20  # a short backoff
    h.handle_response(add_partitions_response({("t", 0): E.COORDINATOR_NOT_AVAILABLE}), 3)
    assert isinstance(txn.next_request(False), FindCoordinatorHandler)
    assert txn.next_request(False) is h
    h.handle_response(add_partitions_response({("t", 0): 0}), 3)
    assert h.result.is_successful and txn.partitions_in_transaction == {("t", 0)}


def test_disconnect_refinds_the_coordinator_once() -> None:
    txn = ready_manager()
    txn.begin_transaction()
    txn.maybe_add_partition(("t", 0))
    h = txn.next_request(False)
    assert h is not None
    h.on_request_failed(OSError("reset"))
    txn.lookup_coordinator(CoordinatorType.TRANSACTION, TID)  # a second lookup is not queued twice
    assert isinstance(txn.next_request(False), FindCoordinatorHandler)
    assert txn.next_request(False) is h


def test_send_offsets_adds_offsets_then_commits_them_to_the_group_coordinator() -> None:
    txn = ready_manager()
    txn.begin_transaction()
    group = ConsumerGroupMetadata("g", 5, "member-1", "instance-1")
    offsets = {("in", 0): OffsetAndMetadata(10, leader_epoch=2, metadata="m"), ("in", 1): OffsetAndMetadata(20)}
    result = txn.send_offsets_to_transaction(offsets, group)
    add = txn.next_request(False)
    assert isinstance(add, AddOffsetsToTxnHandler)
    assert build_all_versions(add)[4] == {"transactional_id": TID, "producer_id": 7, "producer_epoch": 0,
                                          "group_id": "g"}
    add.handle_response(NS(error_code=E.CONCURRENT_TRANSACTIONS, throttle_time_ms=0), 4)
    assert txn.next_request(False) is add
    add.handle_response(NS(error_code=0, throttle_time_ms=0), 4)
    assert txn.transaction_started and not result.is_completed
    commit = txn.next_request(False)
    assert isinstance(commit, TxnOffsetCommitHandler) and commit.result is result
    assert commit.coordinator_type == CoordinatorType.GROUP and commit.coordinator_key == "g"
    assert txn.coordinator(CoordinatorType.GROUP, "g") is None
    txn.lookup_coordinator_for(commit)
    fc = txn.next_request(False)
    assert isinstance(fc, FindCoordinatorHandler) and fc.build(3)["key_type"] == 0 and fc.build(3)["key"] == "g"
    fc.handle_response(NS(error_code=0, node_id=4, host="h", port=1), 3)
    assert txn.coordinator(CoordinatorType.GROUP, "g") == 4
    assert txn.next_request(False) is commit
    bodies = build_all_versions(commit)
    assert max(bodies) == 4
    assert bodies[3] == {
        "transactional_id": TID, "group_id": "g", "producer_id": 7, "producer_epoch": 0, "generation_id": 5,
        "member_id": "member-1", "group_instance_id": "instance-1",
        "topics": [{"name": "in", "partitions": [
            {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": 2, "committed_metadata": "m"},
            {"partition_index": 1, "committed_offset": 20, "committed_leader_epoch": -1,
             "committed_metadata": ""}]}]}
    commit.handle_response(NS(throttle_time_ms=0, topics=[NS(name="in", partitions=[
        NS(partition_index=0, error_code=0), NS(partition_index=1, error_code=E.COORDINATOR_LOAD_IN_PROGRESS)])]), 3)
    assert not result.is_completed and set(commit.pending) == {("in", 1)}
    assert txn.next_request(False) is commit
    assert [p["partition_index"] for p in commit.build(3)["topics"][0]["partitions"]] == [1]
    commit.handle_response(NS(throttle_time_ms=0, topics=[NS(name="in", partitions=[
        NS(partition_index=1, error_code=0)])]), 3)
    assert result.is_successful and txn.state == TxnState.IN_TRANSACTION


def test_stale_group_generation_is_abortable() -> None:
    txn = ready_manager()
    txn.begin_transaction()
    result = txn.send_offsets_to_transaction({("in", 0): OffsetAndMetadata(1)}, ConsumerGroupMetadata("g", 1, "m"))
    add = txn.next_request(False)
    assert add is not None
    add.handle_response(NS(error_code=0, throttle_time_ms=0), 4)
    txn.set_coordinator(CoordinatorType.GROUP, "g", 0)
    commit = txn.next_request(False)
    assert commit is not None
    commit.handle_response(NS(throttle_time_ms=0, topics=[NS(name="in", partitions=[
        NS(partition_index=0, error_code=E.ILLEGAL_GENERATION)])]), 3)
    assert txn.state == TxnState.ABORTABLE_ERROR
    assert result.error is not None and "group metadata mismatch" in str(result.error)


async def test_timed_out_call_must_be_retried() -> None:
    txn = in_transaction()
    result = txn.begin_commit()
    with pytest.raises(KafkaTimeoutError, match="while awaiting commitTransaction"):
        await result.wait(10)
    with pytest.raises(IllegalStateError, match="previous call to `commitTransaction` timed out"):
        txn.begin_abort()
    assert txn.begin_commit() is result  # the same call waits on
    h = txn.next_request(False)
    assert h is not None
    h.handle_response(NS(error_code=0, throttle_time_ms=0), 3)
    await result.wait(10)
    txn.begin_transaction()


def test_config_transactional_id_implies_idempotence() -> None:
    c = ProducerConfig(transactional_id="t")
    assert c.enable_idempotence and c.transaction_timeout_ms == 60000
    assert ProducerConfig.from_dict({"transactional.id": "t", "transaction.timeout.ms": 1000}).transaction_timeout_ms \
        == 1000
    with pytest.raises(ValueError, match="without also enabling idempotence"):
        ProducerConfig(transactional_id="t", enable_idempotence=False)
    with pytest.raises(ValueError, match="acks=all"):
        ProducerConfig(transactional_id="t", acks=1)
    with pytest.raises(ValueError):
        ProducerConfig(transactional_id="")


async def test_transactional_methods_need_a_transactional_id() -> None:
    p = KafkaProducer("127.0.0.1:1")
    with pytest.raises(IllegalStateError, match="transactional_id"):
        await p.init_transactions()
    with pytest.raises(IllegalStateError, match="transactional_id"):
        p.begin_transaction()


async def test_abort_fails_unsent_batches_only() -> None:
    from minikafka.client.producer import TransactionAbortedError
    from test_producer_accumulator import append, make
    txn = in_transaction((("t", 0), ("t", 1)))
    acc, _ = make(txn=txn)
    sent = append(acc, ("t", 0), b"sent")
    unsent = append(acc, ("t", 1), b"unsent")
    first = acc.batches[("t", 0)].popleft()
    txn.assign_sequence(first)  # drained: has a sequence
    aborted = acc.abort_undrained_batches(TransactionAbortedError())
    assert [b.partition for b in aborted] == [1]
    assert isinstance(unsent.exception(), TransactionAbortedError)
    assert not sent.done() and first in acc.incomplete and not acc.batches[("t", 1)]
    await trio.lowlevel.checkpoint()
