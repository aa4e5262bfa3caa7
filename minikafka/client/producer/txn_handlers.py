"""The transactional producer's requests (Kafka's ``TxnRequestHandler`` family, inner classes of
``TransactionManager``): each handler builds one request to the transaction (or group) coordinator and handles
its response, reaching the manager only through :class:`TxnHandlerContext` -- the short list of what Java's
inner classes touch.  The :class:`~.transaction_manager.TransactionManager` queues them, the
:class:`~.sender.Sender` sends them.
"""

from __future__ import annotations

import logging
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Iterable, Protocol

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from ..network import is_retriable
from .errors import KafkaProducerError, KafkaTimeoutError, ProducerFencedError, TransactionalIdAuthorizationError
from .txn_state import TxnState

if TYPE_CHECKING:
    from ...common import OffsetAndMetadata
    from ..consumer.group_metadata import ConsumerGroupMetadata

log = logging.getLogger(__name__)

#: TRANSACTION_ABORTABLE (KIP-890); minikafka's ErrorCode may not name it
TRANSACTION_ABORTABLE = 120
#: Java's ADD_PARTITIONS_RETRY_BACKOFF_MS, used for CONCURRENT_TRANSACTIONS (the previous
#: transaction's markers are still being written)
CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20

TP = tuple[str, int]


class CoordinatorType(IntEnum):
    """``FindCoordinatorRequest.CoordinatorType``: the FindCoordinator key type."""

    GROUP = 0
    TRANSACTION = 1


class Priority(IntEnum):
    """``TransactionManager.Priority``: lower goes first."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3


def error_name(code: int) -> str:
    """An error code's name, for messages."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return "TRANSACTION_ABORTABLE" if code == TRANSACTION_ABORTABLE else str(code)


class TransactionalRequestResult:
    """``TransactionalRequestResult``: what ``init_transactions``, ``commit_transaction``, ... wait for."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.error: BaseException | None = None
        self.acked = False  # the caller has seen the outcome (Java's isAcked)
        self._event = trio.Event()

    def done(self) -> None:
        if not self._event.is_set():
            self._event.set()

    def fail(self, error: BaseException) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    @property
    def is_completed(self) -> bool:
        return self._event.is_set()

    @property
    def is_successful(self) -> bool:
        return self._event.is_set() and self.error is None

    async def wait(self, timeout_ms: float | None = None) -> None:
        """``await``: the outcome, or :class:`KafkaTimeoutError` after ``timeout_ms`` (the operation
        goes on; calling the same API again waits for it)."""
        if not self._event.is_set():
            with trio.move_on_after(timeout_ms / 1000 if timeout_ms is not None else float("inf")):
                await self._event.wait()
        if not self._event.is_set():
            raise KafkaTimeoutError(f"Timeout expired after {timeout_ms:.0f} ms while awaiting {self.operation}")
        self.acked = True
        if self.error is not None:
            raise self.error


class TxnHandlerContext(Protocol):
    """What the request handlers use of the :class:`~.transaction_manager.TransactionManager` (Java's handlers
    are inner classes that read and write its fields; this is the explicit list)."""

    transactional_id: str | None
    transaction_timeout_ms: int
    retry_backoff_ms: float
    producer_id: int
    producer_epoch: int
    coordinator_supports_bumping_epoch: bool
    epoch_bump_required: bool
    transaction_started: bool

    def enqueue(self, handler: TxnRequestHandler) -> None: ...

    def set_producer_id(self, producer_id: int, epoch: int) -> None: ...

    def transition_to(self, target: TxnState, error: KafkaProducerError | None = None) -> None: ...

    def transition_to_abortable_error(self, error: KafkaProducerError) -> None: ...

    def transition_to_fatal_error(self, error: KafkaProducerError) -> None: ...

    def fenced_error(self, code: int = ErrorCode.PRODUCER_FENCED) -> ProducerFencedError: ...

    def set_coordinator(self, key_type: CoordinatorType, key: str, node: int) -> None: ...

    def lookup_coordinator(self, key_type: CoordinatorType, key: str) -> None: ...

    def partitions_answered(self, partitions: set[TP], unanswered: set[TP]) -> None: ...

    def partitions_added(self, partitions: set[TP]) -> None: ...

    def complete_transaction(self, result: TransactionalRequestResult | None = None) -> None: ...


# -- request handlers -------------------------------------------------------------------------------
class TxnRequestHandler:
    """``TxnRequestHandler``: builds one transactional request and handles its response.

    ``coordinator_type`` None means any broker; otherwise the request goes to that coordinator,
    which is looked up first when unknown.
    """

    api_key: ApiKey
    priority: Priority
    max_version: int | None = None
    coordinator_type: CoordinatorType | None = CoordinatorType.TRANSACTION
    is_end_txn = False

    def __init__(self, txn: TxnHandlerContext, operation: str,
                 result: TransactionalRequestResult | None = None) -> None:
        self.txn = txn
        self.result = result if result is not None else TransactionalRequestResult(operation)
        self.is_retry = False
        self.retry_backoff_ms: float = txn.retry_backoff_ms

    @property
    def name(self) -> str:
        return type(self).__name__.removesuffix("Handler")

    @property
    def coordinator_key(self) -> str:
        assert self.txn.transactional_id is not None
        return self.txn.transactional_id

    def build(self, version: int) -> dict[str, Any]:
        raise NotImplementedError

    def handle_response(self, resp: Any, version: int) -> None:
        raise NotImplementedError

    # -- outcomes ---------------------------------------------------------------------------------
    def reenqueue(self, backoff_ms: float | None = None) -> None:
        """Send again (after retry.backoff.ms, or ``backoff_ms``)."""
        self.is_retry = True
        self.retry_backoff_ms = self.txn.retry_backoff_ms if backoff_ms is None else backoff_ms
        self.txn.enqueue(self)

    def fatal_error(self, error: KafkaProducerError) -> None:
        self.result.fail(error)
        self.txn.transition_to_fatal_error(error)

    def abortable_error(self, error: KafkaProducerError) -> None:
        self.result.fail(error)
        self.txn.transition_to_abortable_error(error)

    def abortable_error_if_possible(self, error: KafkaProducerError) -> None:
        """Abortable (with an epoch bump after the abort) if the coordinator can bump epochs, else fatal."""
        if self.txn.coordinator_supports_bumping_epoch:
            self.txn.epoch_bump_required = True
            self.abortable_error(error)
        else:
            self.fatal_error(error)

    def fail(self, error: BaseException) -> None:
        self.result.fail(error)

    def on_request_failed(self, error: BaseException) -> None:
        """Disconnected or timed out: find the coordinator again and retry (``onComplete`` when
        ``wasDisconnected``/``wasTimedOut``)."""
        log.debug("%s failed (%s); retrying", self.name, error)
        if self.coordinator_type is not None:
            self.txn.lookup_coordinator(self.coordinator_type, self.coordinator_key)
        self.reenqueue()

    def handle_coordinator_errors(self, err: int) -> bool:
        """The errors every transaction-coordinator response shares; True if ``err`` was one."""
        txn = self.txn
        if err in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR):
            txn.lookup_coordinator(CoordinatorType.TRANSACTION, self.coordinator_key)
            self.reenqueue()
        elif err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self.reenqueue()
        elif err == ErrorCode.CONCURRENT_TRANSACTIONS:
            self.reenqueue(min(CONCURRENT_TRANSACTIONS_BACKOFF_MS, txn.retry_backoff_ms))
        elif err in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
            self.fatal_error(txn.fenced_error(err))
        elif err == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            self.fatal_error(TransactionalIdAuthorizationError(
                f"Transactional id {txn.transactional_id!r} is not authorized"))
        elif err in (ErrorCode.UNKNOWN_PRODUCER_ID, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
            self.abortable_error_if_possible(KafkaProducerError(f"{self.name}: {error_name(err)}", err))
        elif err == TRANSACTION_ABORTABLE:
            self.abortable_error(KafkaProducerError(f"{self.name}: the transaction must be aborted", err))
        else:
            return False
        return True

    def unexpected(self, err: int) -> None:
        self.fatal_error(KafkaProducerError(f"Unexpected error in {self.name}Response: {error_name(err)}", err))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(retry={self.is_retry})"


class FindCoordinatorHandler(TxnRequestHandler):
    """``FindCoordinatorHandler``: key type 1 (transactional id) or 0 (group id)."""

    api_key = ApiKey.FIND_COORDINATOR
    priority = Priority.FIND_COORDINATOR
    coordinator_type = None  # any broker answers

    def __init__(self, txn: TxnHandlerContext, key_type: CoordinatorType, key: str) -> None:
        super().__init__(txn, "FindCoordinator")
        self.key_type = key_type
        self.key = key

    def build(self, version: int) -> dict[str, Any]:
        return {"key": self.key, "key_type": int(self.key_type), "coordinator_keys": [self.key]}

    def handle_response(self, resp: Any, version: int) -> None:
        if version >= 4:
            c = next((c for c in resp.coordinators if c.key == self.key), resp.coordinators[0])
            err, node = c.error_code, c.node_id
        else:
            err, node = resp.error_code, resp.node_id
        if err == ErrorCode.NONE:
            log.info("discovered %s coordinator %d for %r", self.key_type.name.lower(), node, self.key)
            self.txn.set_coordinator(self.key_type, self.key, node)
            self.result.done()
        elif is_retriable(err):
            self.reenqueue()
        elif err == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            self.fatal_error(TransactionalIdAuthorizationError(
                f"Transactional id {self.key!r} is not authorized"))
        elif err == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            self.abortable_error(KafkaProducerError(f"Not authorized to group {self.key!r}", err))
        else:
            self.fatal_error(KafkaProducerError(
                f"Could not find a coordinator with type {self.key_type.name} with key {self.key!r} "
                f"due to unexpected error: {error_name(err)}", err))


class InitProducerIdHandler(TxnRequestHandler):
    """``InitProducerIdHandler``: a producer id and epoch for the transactional id (fencing any older
    producer with it); with ``is_epoch_bump`` the current id and epoch are sent (KIP-360)."""

    api_key = ApiKey.INIT_PRODUCER_ID
    priority = Priority.INIT_PRODUCER_ID

    def __init__(self, txn: TxnHandlerContext, is_epoch_bump: bool,
                 result: TransactionalRequestResult | None = None) -> None:
        super().__init__(txn, "InitProducerId", result)
        self.is_epoch_bump = is_epoch_bump

    def build(self, version: int) -> dict[str, Any]:
        txn = self.txn
        txn.coordinator_supports_bumping_epoch = version >= 3
        bump = self.is_epoch_bump and version >= 3
        return {"transactional_id": txn.transactional_id, "transaction_timeout_ms": txn.transaction_timeout_ms,
                "producer_id": txn.producer_id if bump else NO_PRODUCER_ID,
                "producer_epoch": txn.producer_epoch if bump else NO_PRODUCER_EPOCH}

    def handle_response(self, resp: Any, version: int) -> None:
        err = resp.error_code
        if err == ErrorCode.NONE:
            self.txn.set_producer_id(resp.producer_id, resp.producer_epoch)
            self.txn.transition_to(TxnState.READY)
            self.result.done()
        elif not self.handle_coordinator_errors(err):
            self.unexpected(err)


class AddPartitionsToTxnHandler(TxnRequestHandler):
    """``AddPartitionsToTxnHandler`` (v0-3, the client form): the partitions the transaction writes to."""

    api_key = ApiKey.ADD_PARTITIONS_TO_TXN
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS
    max_version = 3

    def __init__(self, txn: TxnHandlerContext, partitions: Iterable[TP]) -> None:
        super().__init__(txn, "AddPartitionsToTxn")
        self.partitions = set(partitions)

    def build(self, version: int) -> dict[str, Any]:
        txn = self.txn
        topics: dict[str, list[int]] = {}
        for t, p in sorted(self.partitions):
            topics.setdefault(t, []).append(p)
        return {"v3_and_below_transactional_id": txn.transactional_id,
                "v3_and_below_producer_id": txn.producer_id, "v3_and_below_producer_epoch": txn.producer_epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def handle_response(self, resp: Any, version: int) -> None:
        txn = self.txn
        results = {(t.name, p.partition_index): p.partition_error_code
                   for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition}
        unauthorized: set[TP] = set()
        failed: dict[TP, int] = {}
        for tp, err in results.items():
            if err == ErrorCode.NONE or err == ErrorCode.OPERATION_NOT_ATTEMPTED:
                continue
            if err == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                unauthorized.add(tp)
            elif err in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
                self.reenqueue()
                return
            elif err == ErrorCode.INVALID_TXN_STATE:
                self.fatal_error(KafkaProducerError(f"AddPartitionsToTxn: {error_name(err)}", err))
                return
            elif self.handle_coordinator_errors(err):
                return
            else:
                failed[tp] = err
        missing = self.partitions - set(results)  # the broker did not answer for them: ask again
        txn.partitions_answered(self.partitions, missing)
        if unauthorized:
            self.abortable_error(KafkaProducerError(f"Not authorized to produce to {sorted(unauthorized)}",
                                                    ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        elif failed:
            self.abortable_error(KafkaProducerError(
                "Could not add partitions to transaction due to errors: "
                + ", ".join(f"{t}-{p}: {error_name(e)}" for (t, p), e in sorted(failed.items())),
                next(iter(failed.values()))))
        else:
            added = self.partitions - missing
            log.debug("added partitions %s to transaction %r", sorted(added), txn.transactional_id)
            txn.partitions_added(added)
            txn.transaction_started = True
            self.result.done()


class AddOffsetsToTxnHandler(TxnRequestHandler):
    """``AddOffsetsToTxnHandler``: puts the group's offsets partition in the transaction, then
    queues TxnOffsetCommit (same result)."""

    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS

    def __init__(self, txn: TxnHandlerContext, offsets: dict[TP, "OffsetAndMetadata"],
                 group: "ConsumerGroupMetadata") -> None:
        super().__init__(txn, "sendOffsetsToTransaction")
        self.offsets = offsets
        self.group = group

    def build(self, version: int) -> dict[str, Any]:
        txn = self.txn
        return {"transactional_id": txn.transactional_id, "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch, "group_id": self.group.group_id}

    def handle_response(self, resp: Any, version: int) -> None:
        err = resp.error_code
        if err == ErrorCode.NONE:
            log.debug("added offsets of group %r to transaction %r", self.group.group_id, self.txn.transactional_id)
            self.txn.transaction_started = True
            self.txn.enqueue(TxnOffsetCommitHandler(self.txn, self.offsets, self.group, self.result))
        elif err == ErrorCode.GROUP_AUTHORIZATION_FAILED:
            self.abortable_error(KafkaProducerError(f"Not authorized to group {self.group.group_id!r}", err))
        elif not self.handle_coordinator_errors(err):
            self.unexpected(err)


class TxnOffsetCommitHandler(TxnRequestHandler):
    """``TxnOffsetCommitHandler``: the offsets, to the group coordinator, with the consumer's
    generation, member id and group instance id (KIP-447); partitions that failed with a retriable
    error are sent again."""

    api_key = ApiKey.TXN_OFFSET_COMMIT
    priority = Priority.ADD_PARTITIONS_OR_OFFSETS
    coordinator_type = CoordinatorType.GROUP
    max_version = 4  # v5 means transactions V2 (implicit AddOffsetsToTxn)

    def __init__(self, txn: TxnHandlerContext, offsets: dict[TP, "OffsetAndMetadata"],
                 group: "ConsumerGroupMetadata", result: TransactionalRequestResult) -> None:
        super().__init__(txn, "sendOffsetsToTransaction", result)
        self.pending = dict(offsets)
        self.group = group

    @property
    def coordinator_key(self) -> str:
        return self.group.group_id

    def build(self, version: int) -> dict[str, Any]:
        txn = self.txn
        g = self.group
        topics: dict[str, list[dict[str, Any]]] = {}
        for (t, p), om in sorted(self.pending.items()):
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": om.offset,
                                             "committed_leader_epoch": om.leader_epoch,
                                             "committed_metadata": om.metadata})
        return {"transactional_id": txn.transactional_id, "group_id": g.group_id, "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch, "generation_id": g.generation_id, "member_id": g.member_id,
                "group_instance_id": g.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def handle_response(self, resp: Any, version: int) -> None:
        txn = self.txn
        had_failure = False
        looked_up = False
        for t in resp.topics:
            for p in t.partitions:
                tp = (t.name, p.partition_index)
                err = p.error_code
                if err == ErrorCode.NONE:
                    self.pending.pop(tp, None)
                elif err in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                             ErrorCode.REQUEST_TIMED_OUT):
                    had_failure = True
                    if not looked_up:
                        txn.lookup_coordinator(CoordinatorType.GROUP, self.group.group_id)
                        looked_up = True
                elif err in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                    had_failure = True
                elif err in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.FENCED_INSTANCE_ID,
                             TRANSACTION_ABORTABLE):
                    self.abortable_error(KafkaProducerError(f"TxnOffsetCommit for {tp}: {error_name(err)}", err))
                    return
                elif err in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                    self.abortable_error(KafkaProducerError(
                        f"Transaction offset Commit failed due to consumer group metadata mismatch: {error_name(err)}",
                        err))
                    return
                elif err in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH):
                    self.fatal_error(txn.fenced_error(err))
                    return
                elif err == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                    self.fatal_error(TransactionalIdAuthorizationError(
                        f"Transactional id {txn.transactional_id!r} is not authorized"))
                    return
                else:
                    self.unexpected(err)
                    return
        if had_failure and self.pending:
            self.reenqueue()
        else:
            self.result.done()


class EndTxnHandler(TxnRequestHandler):
    """``EndTxnHandler``: commit or abort; with v5 (KIP-890 part 2) adopt the epoch the coordinator
    bumped.  If an epoch bump is required afterwards, InitProducerId follows with the same result."""

    api_key = ApiKey.END_TXN
    priority = Priority.END_TXN
    is_end_txn = True

    def __init__(self, txn: TxnHandlerContext, committed: bool) -> None:
        super().__init__(txn, "commitTransaction" if committed else "abortTransaction")
        self.committed = committed

    def build(self, version: int) -> dict[str, Any]:
        txn = self.txn
        return {"transactional_id": txn.transactional_id, "producer_id": txn.producer_id,
                "producer_epoch": txn.producer_epoch, "committed": self.committed}

    def handle_response(self, resp: Any, version: int) -> None:
        txn = self.txn
        err = resp.error_code
        if err == ErrorCode.NONE:
            pid, epoch = getattr(resp, "producer_id", -1), getattr(resp, "producer_epoch", -1)
            if version >= 5 and pid >= 0 and epoch >= 0 and (pid, epoch) != (txn.producer_id, txn.producer_epoch):
                log.info("transaction %r: the coordinator bumped the producer epoch to %d (producer id %d)",
                         txn.transactional_id, epoch, pid)
                txn.set_producer_id(pid, epoch)
            txn.complete_transaction(self.result)
        elif err == ErrorCode.INVALID_TXN_STATE:
            self.fatal_error(KafkaProducerError(f"EndTxn: {error_name(err)}", err))
        elif not self.handle_coordinator_errors(err):
            self.unexpected(err)
