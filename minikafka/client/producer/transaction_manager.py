"""Producer id, epoch, sequence numbers and transactions (Kafka's ``TransactionManager`` +
``TxnPartitionMap``), without I/O: the :class:`~.sender.Sender` asks :meth:`TransactionManager.next_request`
for the next transactional request (a handler of :mod:`.txn_handlers`), sends it, and gives the response to
the handler, which reports back through the manager's :class:`~.txn_handlers.TxnHandlerContext` methods.

Idempotence.  When a sequence becomes unresolved (a batch that had been sent fails or expires, or
the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER for the batch that was next in line, or
UNKNOWN_PRODUCER_ID), the idempotent producer bumps its epoch (KIP-360 InitProducerId with the
current id/epoch, or a fresh id on old brokers) once nothing is in flight, and renumbers *every*
partition's pending batches from sequence 0, as Java does for the partitions it resets.

Transactions (KIP-98, with KIP-447's group metadata in TxnOffsetCommit).  States and transitions
are Java's (:class:`TxnState`).  ``initialize_transactions`` finds the transaction coordinator
(FindCoordinator key type 1) and sends InitProducerId with the transactional id;
``begin_transaction`` is local; a send to a partition not yet in the transaction queues it for
AddPartitionsToTxn (the v0-3 per-client form), and the accumulator drains no batch of a partition
until the coordinator has added it; ``send_offsets_to_transaction`` sends AddOffsetsToTxn, then
TxnOffsetCommit to the *group* coordinator; ``begin_commit``/``begin_abort`` queue EndTxn, which
goes out only once every batch has completed (an EndTxn v5 response may carry a bumped epoch,
KIP-890 part 2, which is adopted).  A transaction in which nothing was added ends locally.

Errors: COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR find the coordinator again and retry;
CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS retry after a short backoff;
PRODUCER_FENCED, INVALID_PRODUCER_EPOCH and TRANSACTIONAL_ID_AUTHORIZATION_FAILED are fatal (the
producer can only be closed); a failed batch or offset commit is abortable (the transaction can
only be aborted, after which the epoch is bumped, KIP-360, since sequences may be unresolved).

Deliberate differences from Java: INVALID_PRODUCER_EPOCH on a produce response of a transactional
producer is fatal (:class:`ProducerFencedError`), not KIP-588's abortable error; an epoch bump that
becomes necessary while a transaction is already being aborted is still done after the abort (Java
skips it), unless the EndTxn v5 response already bumped the epoch; EndTxn v5 is used together with
AddPartitionsToTxn (Java pairs it with transactions V2, which adds partitions implicitly); the
requests queue is FIFO within a priority.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ...protocol.errors import ErrorCode
from ...protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from .batch import ProducerBatch
from .errors import IllegalStateError, KafkaProducerError, ProducerFencedError, TransactionalIdAuthorizationError
from .txn_handlers import (TP, AddOffsetsToTxnHandler, AddPartitionsToTxnHandler, CoordinatorType, EndTxnHandler,
                           FindCoordinatorHandler, InitProducerIdHandler, TransactionalRequestResult,
                           TxnRequestHandler, error_name)
from .txn_state import VALID_SOURCES, TxnState

if TYPE_CHECKING:
    from ...common import OffsetAndMetadata
    from ..consumer.group_metadata import ConsumerGroupMetadata

log = logging.getLogger(__name__)


@dataclass
class PendingStateTransition:
    """``PendingStateTransition``: an API call whose result the caller has not seen yet."""

    result: TransactionalRequestResult
    state: TxnState
    operation: str


@dataclass
class PartitionSequences:
    """``TxnPartitionEntry``: next sequence to assign, last acknowledged, batches in flight by sequence."""

    next_sequence: int = 0
    last_acked_sequence: int = -1
    in_flight: list[tuple[int, int, ProducerBatch]] = field(default_factory=list)  # (seq, id, batch)


# -- the manager ------------------------------------------------------------------------------------
class TransactionManager:
    """``TransactionManager``: idempotent producer state, and the transaction state machine when
    ``transactional_id`` is set."""

    def __init__(self, transactional_id: str | None = None, transaction_timeout_ms: int = 60000,
                 retry_backoff_ms: float = 100) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.partitions: dict[TP, PartitionSequences] = {}
        self.epoch_bump_required = False
        self.fatal_error: BaseException | None = None
        # transactions
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.state = TxnState.UNINITIALIZED
        self.last_error: KafkaProducerError | None = None
        self.pending_transition: PendingStateTransition | None = None
        self.transaction_started = False  # something was added: EndTxn must be sent
        self.new_partitions_in_transaction: set[TP] = set()
        self.pending_partitions_in_transaction: set[TP] = set()
        self.partitions_in_transaction: set[TP] = set()
        self.coordinator_supports_bumping_epoch = True
        self.transaction_coordinator: int | None = None
        self.group_coordinators: dict[str, int] = {}
        self._pending: list[tuple[int, int, TxnRequestHandler]] = []
        self._seq = itertools.count()

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        """A new id or epoch: every partition starts again at sequence 0 (in-flight batches renumbered)."""
        log.info("producer id %d epoch %d", producer_id, epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.epoch_bump_required = False
        for entry in self.partitions.values():
            entry.last_acked_sequence = -1
            seq = 0
            renumbered = []
            for _, i, b in entry.in_flight:
                b.set_producer_state(producer_id, epoch, seq)
                renumbered.append((seq, i, b))
                seq += b.record_count
            entry.in_flight = renumbered
            entry.next_sequence = seq

    def entry(self, tp: TP) -> PartitionSequences:
        e = self.partitions.get(tp)
        if e is None:
            e = self.partitions[tp] = PartitionSequences()
        return e

    # -- state ------------------------------------------------------------------------------------
    @property
    def has_error(self) -> bool:
        return self.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    @property
    def has_fatal_error(self) -> bool:
        return self.state == TxnState.FATAL_ERROR

    @property
    def has_abortable_error(self) -> bool:
        return self.state == TxnState.ABORTABLE_ERROR

    @property
    def is_completing(self) -> bool:
        return self.state in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)

    @property
    def is_aborting(self) -> bool:
        return self.state == TxnState.ABORTING_TRANSACTION

    @property
    def is_in_transaction(self) -> bool:
        return self.state == TxnState.IN_TRANSACTION

    @property
    def has_ongoing_transaction(self) -> bool:
        """``hasOngoingTransaction``: begun and not yet committed or aborted."""
        return self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION,
                              TxnState.ABORTING_TRANSACTION, TxnState.ABORTABLE_ERROR)

    def transition_to(self, target: TxnState, error: KafkaProducerError | None = None) -> None:
        """``transitionTo``: IllegalStateError for a transition Java does not allow."""
        if self.state not in VALID_SOURCES[target]:
            raise IllegalStateError(f"TransactionalId {self.transactional_id}: Invalid transition attempted from "
                                    f"state {self.state.name} to state {target.name}")
        if target in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            if error is None:
                raise ValueError(f"Cannot transition to {target.name} without an error")
            self.last_error = error
            log.debug("transition from state %s to error state %s: %s", self.state.name, target.name, error)
        else:
            self.last_error = None
            log.debug("transition from state %s to %s", self.state.name, target.name)
        self.state = target

    def transition_to_abortable_error(self, error: KafkaProducerError) -> None:
        if self.state == TxnState.ABORTING_TRANSACTION:
            log.debug("not entering ABORTABLE_ERROR: the transaction is already being aborted (%s)", error)
            return
        if self.state not in VALID_SOURCES[TxnState.ABORTABLE_ERROR]:
            log.warning("ignoring abortable error in state %s: %s", self.state.name, error)
            return
        log.info("transaction %r: abortable error: %s", self.transactional_id, error)
        self.transition_to(TxnState.ABORTABLE_ERROR, error)

    def transition_to_fatal_error(self, error: KafkaProducerError) -> None:
        """FATAL_ERROR: every queued request and the pending API call fail with ``error``."""
        log.error("transaction %r: fatal error: %s", self.transactional_id, error)
        self.transition_to(TxnState.FATAL_ERROR, error)
        self.fatal_error = error
        self._fail_pending(error)

    def _fail_pending(self, error: BaseException) -> None:
        for _, _, h in self._pending:
            h.result.fail(error)
        self._pending.clear()
        if self.pending_transition is not None:
            self.pending_transition.result.fail(error)

    def fenced_error(self, code: int = ErrorCode.PRODUCER_FENCED) -> ProducerFencedError:
        return ProducerFencedError(
            f"Producer with transactionalId {self.transactional_id!r} and producer id {self.producer_id} "
            f"epoch {self.producer_epoch} has been fenced by another producer with the same transactionalId "
            f"({error_name(code)})", code)

    def maybe_fail_with_error(self) -> None:
        """``maybeFailWithError``: raise if in an error state."""
        if not self.has_error:
            return
        err = self.last_error
        if isinstance(err, ProducerFencedError):
            raise self.fenced_error(err.code or ErrorCode.PRODUCER_FENCED)
        raise KafkaProducerError(f"Cannot execute transactional method because we are in an error state: {err}",
                                 err.code if err is not None else None) from err

    def _ensure_transactional(self) -> None:
        if not self.is_transactional:
            raise IllegalStateError("Transactional method invoked on a non-transactional producer.")

    def _throw_if_pending_state(self, operation: str) -> None:
        pt = self.pending_transition
        if pt is not None:
            if pt.result.acked:
                self.pending_transition = None
            else:
                raise IllegalStateError(f"Cannot attempt operation `{operation}` because the previous call to "
                                        f"`{pt.operation}` timed out and must be retried")

    def _cached_result(self, next_state: TxnState, operation: str,
                       start: Callable[[], TransactionalRequestResult]) -> TransactionalRequestResult:
        """``handleCachedTransactionRequestResult``: a call repeated after a timeout waits on the first one."""
        self._ensure_transactional()
        pt = self.pending_transition
        if pt is not None:
            if pt.result.acked:
                self.pending_transition = None
            elif pt.state != next_state:
                raise IllegalStateError(f"Cannot attempt operation `{operation}` because the previous call to "
                                        f"`{pt.operation}` timed out and must be retried")
            else:
                return pt.result
        result = start()
        self.pending_transition = PendingStateTransition(result, next_state, operation)
        return result

    # -- the transactional API --------------------------------------------------------------------
    def initialize_transactions(self) -> TransactionalRequestResult:
        """``initializeTransactions``: InitProducerId (after FindCoordinator) for the transactional id."""
        self._ensure_transactional()
        self.maybe_fail_with_error()

        def start() -> TransactionalRequestResult:
            self.transition_to(TxnState.INITIALIZING)
            self.producer_id, self.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            log.info("transaction %r: invoking InitProducerId for the first time", self.transactional_id)
            handler = InitProducerIdHandler(self, is_epoch_bump=False)
            self.enqueue(handler)
            return handler.result

        return self._cached_result(TxnState.INITIALIZING, "initTransactions", start)

    def begin_transaction(self) -> None:
        """``beginTransaction``: local only."""
        self._ensure_transactional()
        self._throw_if_pending_state("beginTransaction")
        self.maybe_fail_with_error()
        self.transition_to(TxnState.IN_TRANSACTION)

    def send_offsets_to_transaction(self, offsets: dict[TP, "OffsetAndMetadata"],
                                    group: "ConsumerGroupMetadata") -> TransactionalRequestResult:
        """``sendOffsetsToTransaction``: AddOffsetsToTxn, then TxnOffsetCommit."""
        self._ensure_transactional()
        self._throw_if_pending_state("sendOffsetsToTransaction")
        self.maybe_fail_with_error()
        if self.state != TxnState.IN_TRANSACTION:
            raise IllegalStateError("Cannot send offsets if a transaction is not in progress "
                                    f"(currentState= {self.state.name})")
        log.debug("transaction %r: sending offsets %s for group %r", self.transactional_id, offsets, group.group_id)
        handler = AddOffsetsToTxnHandler(self, offsets, group)
        self.enqueue(handler)
        return handler.result

    def begin_commit(self) -> TransactionalRequestResult:
        """``beginCommit``: EndTxn(commit) once every batch has completed."""
        def start() -> TransactionalRequestResult:
            self.maybe_fail_with_error()
            self.transition_to(TxnState.COMMITTING_TRANSACTION)
            return self._begin_completing(True)

        return self._cached_result(TxnState.COMMITTING_TRANSACTION, "commitTransaction", start)

    def begin_abort(self) -> TransactionalRequestResult:
        """``beginAbort``: unsent batches are failed (by the Sender), then EndTxn(abort)."""
        def start() -> TransactionalRequestResult:
            if self.state != TxnState.ABORTABLE_ERROR:
                self.maybe_fail_with_error()
            self.transition_to(TxnState.ABORTING_TRANSACTION)
            self.new_partitions_in_transaction.clear()
            return self._begin_completing(False)

        return self._cached_result(TxnState.ABORTING_TRANSACTION, "abortTransaction", start)

    def _begin_completing(self, committed: bool) -> TransactionalRequestResult:
        if self.new_partitions_in_transaction:
            self.enqueue(self._add_partitions_handler())
        handler = EndTxnHandler(self, committed)
        self.enqueue(handler)
        return handler.result

    def complete_transaction(self, result: TransactionalRequestResult | None = None) -> None:
        """``completeTransaction``: back to READY, or INITIALIZING and an epoch bump (completing
        ``result`` once it is done)."""
        bump = self.epoch_bump_required
        self.transition_to(TxnState.INITIALIZING if bump else TxnState.READY)
        self.transaction_started = False
        self.new_partitions_in_transaction.clear()
        self.pending_partitions_in_transaction.clear()
        self.partitions_in_transaction.clear()
        if bump:
            log.info("transaction %r: bumping the epoch of producer id %d epoch %d", self.transactional_id,
                     self.producer_id, self.producer_epoch)
            self.enqueue(InitProducerIdHandler(self, is_epoch_bump=True, result=result))
        elif result is not None:
            result.done()

    # -- sending ----------------------------------------------------------------------------------
    def fail_if_not_ready_for_send(self) -> None:
        """``failIfNotReadyForSend``: ``send`` needs an ongoing transaction and no error."""
        if self.has_error:
            self.maybe_fail_with_error()
        if self.is_transactional:
            if not self.has_producer_id:
                raise IllegalStateError("Cannot perform a 'send' before completing a call to init_transactions "
                                        "when transactions are enabled.")
            if self.state != TxnState.IN_TRANSACTION:
                raise IllegalStateError(f"Cannot call send in state {self.state.name}")

    def maybe_add_partition(self, tp: TP) -> bool:
        """``maybeAddPartition``: queue ``tp`` for AddPartitionsToTxn; True if it is new to the transaction."""
        if not self.is_transactional:
            return False
        self.fail_if_not_ready_for_send()
        if (tp in self.partitions_in_transaction or tp in self.pending_partitions_in_transaction
                or tp in self.new_partitions_in_transaction):
            return False
        log.debug("transaction %r: adding partition %s-%d", self.transactional_id, *tp)
        self.new_partitions_in_transaction.add(tp)
        return True

    def is_send_to_partition_allowed(self, tp: TP) -> bool:
        """``isSendToPartitionAllowed``: a transactional batch waits until its partition is added."""
        if self.has_fatal_error:
            return False
        return not self.is_transactional or tp in self.partitions_in_transaction

    def partitions_answered(self, partitions: set[TP], unanswered: set[TP]) -> None:
        """AddPartitionsToTxn for ``partitions`` was answered: none is pending any more; the ``unanswered`` ones
        are queued again."""
        self.pending_partitions_in_transaction -= partitions
        if unanswered:
            self.new_partitions_in_transaction |= unanswered

    def partitions_added(self, partitions: set[TP]) -> None:
        """The coordinator added ``partitions`` to the transaction: their batches may be drained."""
        self.partitions_in_transaction |= partitions

    def _add_partitions_handler(self) -> AddPartitionsToTxnHandler:
        self.pending_partitions_in_transaction |= self.new_partitions_in_transaction
        handler = AddPartitionsToTxnHandler(self, self.new_partitions_in_transaction)
        self.new_partitions_in_transaction = set()
        return handler

    # -- the request queue ------------------------------------------------------------------------
    def enqueue(self, handler: TxnRequestHandler) -> None:
        log.debug("enqueuing transactional request %r", handler)
        heapq.heappush(self._pending, (int(handler.priority), next(self._seq), handler))

    def has_pending_requests(self) -> bool:
        return bool(self._pending) or bool(self.new_partitions_in_transaction)

    def next_request(self, has_incomplete_batches: bool) -> TxnRequestHandler | None:
        """``nextRequest``: the next request to send, or None (EndTxn waits for every batch)."""
        if self.new_partitions_in_transaction and not self.has_error:
            self.enqueue(self._add_partitions_handler())
        if not self._pending:
            return None
        handler = self._pending[0][2]
        if handler.is_end_txn and has_incomplete_batches:
            return None
        heapq.heappop(self._pending)
        if self._maybe_terminate_request_with_error(handler):
            log.debug("not sending %r: in state %s", handler, self.state.name)
            return None
        if handler.is_end_txn and not self.transaction_started:
            log.debug("not sending EndTxn: no partitions or offsets were added to the transaction")
            if self.state != TxnState.FATAL_ERROR:
                self.complete_transaction(handler.result)
            else:
                handler.result.done()
            return heapq.heappop(self._pending)[2] if self._pending else None
        return handler

    def _maybe_terminate_request_with_error(self, handler: TxnRequestHandler) -> bool:
        if self.has_error:
            if self.has_abortable_error and isinstance(handler, FindCoordinatorHandler):
                return False  # no harm finding the coordinator while waiting for the abort
            assert self.last_error is not None
            handler.fail(self.last_error)
            return True
        return False

    # -- coordinators -----------------------------------------------------------------------------
    def coordinator(self, key_type: CoordinatorType, key: str) -> int | None:
        if key_type == CoordinatorType.TRANSACTION:
            return self.transaction_coordinator
        return self.group_coordinators.get(key)

    def set_coordinator(self, key_type: CoordinatorType, key: str, node: int) -> None:
        if key_type == CoordinatorType.TRANSACTION:
            self.transaction_coordinator = node
        else:
            self.group_coordinators[key] = node

    def lookup_coordinator(self, key_type: CoordinatorType, key: str) -> None:
        """``lookupCoordinator``: forget the coordinator and queue FindCoordinator (once)."""
        if key_type == CoordinatorType.TRANSACTION:
            self.transaction_coordinator = None
        else:
            self.group_coordinators.pop(key, None)
        for _, _, h in self._pending:
            if isinstance(h, FindCoordinatorHandler) and h.key_type == key_type and h.key == key:
                return
        self.enqueue(FindCoordinatorHandler(self, key_type, key))

    def lookup_coordinator_for(self, handler: TxnRequestHandler) -> None:
        """The coordinator ``handler`` needs is unknown: find it, then send ``handler``."""
        assert handler.coordinator_type is not None
        self.lookup_coordinator(handler.coordinator_type, handler.coordinator_key)
        handler.is_retry = False
        self.enqueue(handler)

    def close(self, error: BaseException) -> None:
        """``close``: the Sender has stopped; whatever is still queued fails."""
        self._fail_pending(error)

    # -- drain ------------------------------------------------------------------------------------
    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a batch drained for the first time its producer state and sequence (``RecordAccumulator.drain``)."""
        e = self.entry((batch.topic, batch.partition))
        batch.is_transactional = self.is_transactional
        batch.set_producer_state(self.producer_id, self.producer_epoch, e.next_sequence)
        e.next_sequence += batch.record_count
        bisect.insort(e.in_flight, (batch.base_sequence, id(batch), batch))

    def first_in_flight_sequence(self, tp: TP) -> int:
        e = self.partitions.get(tp)
        return e.in_flight[0][0] if e and e.in_flight else NO_SEQUENCE

    def should_stop_drain(self, batch: ProducerBatch, tp: TP) -> bool:
        """``shouldStopDrainBatchesForPartition`` (and ``isSendToPartitionAllowed``): keep batches of a
        partition in sequence order; a transactional batch only once its partition is in the transaction."""
        if not self.has_producer_id:
            return True
        if self.is_transactional:
            if not self.is_send_to_partition_allowed(tp):
                return True
        elif self.epoch_bump_required:
            return True
        first = self.first_in_flight_sequence(tp)
        if batch.has_sequence:
            # A retried batch may only go when it is the first one in flight for its partition.
            return first != NO_SEQUENCE and batch.base_sequence != first
        return False

    # -- completion -------------------------------------------------------------------------------
    def remove_in_flight(self, batch: ProducerBatch) -> None:
        e = self.partitions.get((batch.topic, batch.partition))
        if e is None:
            return
        for i, (_, bid, b) in enumerate(e.in_flight):
            if b is batch:
                del e.in_flight[i]
                return

    def handle_completed(self, batch: ProducerBatch) -> None:
        e = self.entry((batch.topic, batch.partition))
        if batch.producer_epoch == self.producer_epoch and batch.producer_id == self.producer_id:
            e.last_acked_sequence = max(e.last_acked_sequence, batch.last_sequence)
        self.remove_in_flight(batch)

    def handle_failed(self, batch: ProducerBatch, error: BaseException | None = None) -> None:
        """A batch failed for good (``handleFailedBatch``).  Idempotent: if it had been sent, its sequence
        is unresolved -> bump the epoch.  Transactional: fatal for fencing and authorization errors,
        else the transaction must be aborted (and the epoch bumped afterwards, KIP-360)."""
        self.remove_in_flight(batch)
        if self.is_transactional:
            if error is None or self.has_fatal_error:
                return
            if isinstance(error, (ProducerFencedError, TransactionalIdAuthorizationError)) or (
                    isinstance(error, KafkaProducerError) and error.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
                self.transition_to_fatal_error(error)
                return
            if self.coordinator_supports_bumping_epoch:
                self.epoch_bump_required = True
            self.transition_to_abortable_error(error if isinstance(error, KafkaProducerError)
                                               else KafkaProducerError(str(error)))
            return
        if batch.has_sequence and batch.producer_id == self.producer_id:
            self.epoch_bump_required = True

    def is_next_sequence(self, batch: ProducerBatch) -> bool:
        e = self.entry((batch.topic, batch.partition))
        return batch.base_sequence == e.last_acked_sequence + 1

    def can_retry_out_of_order(self, batch: ProducerBatch) -> bool:
        """``canRetry`` for OUT_OF_ORDER_SEQUENCE_NUMBER: an earlier batch failed, so this one is retried;
        if it *was* the next sequence the broker lost our state -> bump the epoch and retry (idempotent),
        or fail the batch, and so the transaction (transactional)."""
        if batch.producer_epoch != self.producer_epoch:
            return True  # sent with an old epoch; will be renumbered
        if not self.is_next_sequence(batch):
            return True
        if self.is_transactional:
            return False
        self.epoch_bump_required = True
        return True
