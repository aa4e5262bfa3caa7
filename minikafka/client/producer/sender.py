"""The producer's background task (Kafka's ``org.apache.kafka.clients.producer.internals.Sender``).

One Trio task loops like ``Sender.runOnce``/``sendProducerData``: make sure the idempotent
producer has an id (InitProducerId), ask the accumulator which leaders are ready, keep only nodes
whose connection is up, not throttled (KIP-219) and below max.in.flight.requests.per.connection,
drain up to max.request.size per node, expire batches past delivery.timeout.ms, and send one
ProduceRequest per node (batches grouped by topic), its record batches passed to the connection as
buffers (never joined; ``writev``).  Requests are written in drain order (so sequence numbers reach the
broker in order); each response is handed by the connection's reader to a completion handler as it
arrives (Java's ``RequestCompletionHandler``: no task per request), which completes, retries (with
retry.backoff.ms, back into the deque in sequence order) or fails the batches; the loop itself expires
requests past request.timeout.ms (``NetworkClient.handleTimedOutRequests``).

Transactions (``Sender.maybeSendAndPollTransactionalRequest``): each loop first sends the
:class:`TransactionManager`'s next transactional request (FindCoordinator, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), to any broker or to the coordinator
it needs, and awaits its response before producing anything (as Java's Sender returns while one is
in flight).  While a transaction is being completed the accumulator is flushed (EndTxn waits for
every batch); while it is being aborted or has an abortable error the batches never sent are failed;
after a fatal error every incomplete batch is failed.  A graceful close aborts an ongoing transaction.

When the broker names the records it refused (KIP-467 ``record_errors``, e.g. keyless records on a compacted
topic), each named record fails with its own message and the rest of the batch with a generic error, as
Java's ``Sender.failBatch`` does.

Deliberate differences: no separate NetworkClient poll loop (Trio tasks do the I/O);
MESSAGE_TOO_LARGE batches are failed, not split; a request timeout does not close the connection.
"""

from __future__ import annotations

import logging
import math
import uuid
from typing import TYPE_CHECKING, Any, Callable

import trio

from ...common import Node
from ...common.clock import Clock
from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.types import ZERO_UUID
from ..network import KafkaClientError, NetworkClient, is_retriable
from .accumulator import RecordAccumulator
from .batch import ProducerBatch
from .errors import (KafkaProducerError, KafkaTimeoutError, ProducerClosedError, TransactionAbortedError,
                     TransactionalIdAuthorizationError)
from .metrics import ProducerMetrics
from .transaction_manager import TransactionManager
from .txn_handlers import TxnRequestHandler

if TYPE_CHECKING:
    from .config import ProducerConfig

log = logging.getLogger(__name__)

#: errors after which the partition's leader may have moved: refresh metadata
METADATA_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.UNKNOWN_TOPIC_ID,
}

#: The newest Produce version without topic ids (v13 names topics by id), and the newest a transactional
#: producer using transactions version 1 may send (Java's ``LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2``).
PRODUCE_LAST_BEFORE_TOPIC_IDS = 12
PRODUCE_LAST_BEFORE_TRANSACTION_V2 = 11


class _InFlightProduce:
    """A produce request awaiting its response (Java's ``InFlightRequest``): its batches, and its deadline
    (request.timeout.ms after it was sent)."""

    __slots__ = ("node", "conn", "batches", "sent_ms", "deadline_ms", "corr", "done")

    def __init__(self, node: int, conn: Any, batches: list[ProducerBatch], sent_ms: float, deadline_ms: float) -> None:
        self.node = node
        self.conn = conn
        self.batches = batches
        self.sent_ms = sent_ms
        self.deadline_ms = deadline_ms
        self.corr: int | None = None
        self.done = False


class Sender:
    """Drains the accumulator to the partition leaders and handles the responses."""

    def __init__(self, nc: NetworkClient, accumulator: RecordAccumulator, config: "ProducerConfig",
                 metrics: ProducerMetrics, txn: TransactionManager | None, clock: Clock,
                 nursery: trio.Nursery) -> None:
        self.nc = nc
        self.acc = accumulator
        self.config = config
        self.metrics = metrics
        self.txn = txn
        self.clock = clock
        self.nursery = nursery
        self.acks = int(config.acks)
        self.guarantee_order = config.max_in_flight_requests_per_connection == 1
        self.in_flight: dict[int, int] = {}
        self.in_flight_batches: set[ProducerBatch] = set()
        self._produce_requests: set[_InFlightProduce] = set()  # awaiting a response
        self.running = True
        self.forced = False
        self.done = trio.Event()
        self._wakeup = trio.Event()
        self._connecting: set[int] = set()
        self._refreshing = False
        self._last_refresh_ms = -math.inf
        self._metadata_wanted = False
        self._txn_flushing = False  # began an accumulator flush for a commit or abort
        self._txn_scope: trio.CancelScope | None = None  # around a transactional request (force_close)

    def _now_ms(self) -> float:
        """Milliseconds on the producer's Trio clock (linger, backoff and delivery deadlines)."""
        return self.clock.monotonic() * 1000

    # -- control ---------------------------------------------------------------------------------
    def wakeup(self) -> None:
        self._wakeup.set()

    def initiate_close(self) -> None:
        """``initiateClose``: stop accepting, send what is left, then stop."""
        self.running = False
        self.acc.close()
        self.wakeup()

    def force_close(self) -> None:
        """``forceClose``: stop now and fail everything not yet done."""
        self.forced = True
        if self._txn_scope is not None:
            self._txn_scope.cancel()
        self.initiate_close()

    @property
    def total_in_flight(self) -> int:
        return sum(self.in_flight.values())

    # -- main loop -------------------------------------------------------------------------------
    async def run(self) -> None:
        log.debug("sender started")
        try:
            while True:
                if not self.running:
                    if not self.forced:
                        self._maybe_abort_on_close()
                    if self.forced or not (self.acc.has_undrained() or self.in_flight_batches or self.acc.incomplete
                                           or self._transaction_ongoing()):
                        break
                try:
                    await self.run_once()
                except trio.Cancelled:
                    raise
                except Exception:  # a bug must not kill the Sender (Java's Sender.run catches and logs too)
                    log.exception("uncaught error in the producer's sender loop")
                    await trio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            if self.forced or self.acc.incomplete:
                err = ProducerClosedError("Producer is closed forcefully.")
                for b in self.acc.abort_incomplete(err):
                    if self.txn is not None:
                        self.txn.remove_in_flight(b)
            if self.txn is not None and self.txn.is_transactional:
                self.txn.close(ProducerClosedError("The producer closed forcefully"))
            self.done.set()
            log.debug("sender stopped")

    async def run_once(self) -> None:
        now = self._now_ms()
        next_timeout_ms = self._expire_requests(now) if self._produce_requests else math.inf
        txn = self.txn
        if txn is not None and txn.is_transactional:
            if await self._run_transactional():
                return
            now = self._now_ms()
        elif txn is not None and (not txn.has_producer_id
                                  or (txn.epoch_bump_required and not self.in_flight_batches)):
            if not await self._init_producer_id():
                await self._poll(self.config.retry_backoff_ms)
                return
            now = self._now_ms()
        leader_for = self.nc.metadata.leader_for
        res = self.acc.ready(leader_for, now)
        poll_ms = min(res.next_ready_check_delay_ms, next_timeout_ms)
        if res.unknown_leader_topics or self._metadata_wanted or (
                now - self._last_refresh_ms > self.config.metadata_max_age_ms):
            poll_ms = min(poll_ms, self._request_metadata_update(now, res.unknown_leader_topics))
        ready: set[int] = set()
        for node in res.ready_nodes:
            wait = self._node_ready(node)
            if wait == 0:
                ready.add(node)
            elif wait is not None:
                poll_ms = min(poll_ms, wait)
        if ready:
            by_node: dict[int, list[tuple[str, int]]] = {}
            for tp, dq in self.acc.batches.items():
                if dq:
                    leader = leader_for(tp[0], tp[1])
                    if leader in ready:
                        by_node.setdefault(leader, []).append(tp)
            drained = self.acc.drain(lambda n: by_node.get(n, []), ready, self.config.max_request_size, now)
        else:
            drained = {}
        if self.guarantee_order:
            for batches in drained.values():
                for b in batches:
                    self.acc.muted.add((b.topic, b.partition))
        for b in self.acc.expired_batches(now):
            self._fail_batch(b, KafkaTimeoutError(
                f"Expiring {b.record_count} record(s) for {b.topic}-{b.partition}:{now - b.created_ms:.0f} ms "
                f"has passed since batch creation"), now)
        for node, batches in drained.items():
            await self._send_produce_request(node, batches, now)
        if drained:
            poll_ms = 0
        else:
            nxt = self._next_expiry_ms(now)
            if nxt is not None:
                poll_ms = min(poll_ms, nxt)
        await self._poll(poll_ms)

    async def _poll(self, timeout_ms: float) -> None:
        if timeout_ms <= 0 or self._wakeup.is_set():
            await trio.lowlevel.checkpoint()
        else:
            with trio.move_on_after(min(timeout_ms, 3_600_000) / 1000):
                await self._wakeup.wait()
        self._wakeup = trio.Event()

    def _next_expiry_ms(self, now: float) -> float | None:
        first = None
        for dq in self.acc.batches.values():
            if dq:
                t = dq[0].created_ms
                if first is None or t < first:
                    first = t
        if first is None:
            return None
        return max(first + self.config.delivery_timeout_ms - now, 0)

    # -- transactions ----------------------------------------------------------------------------
    def _transaction_ongoing(self) -> bool:
        txn = self.txn
        return txn is not None and txn.is_transactional and txn.has_ongoing_transaction

    def _maybe_abort_on_close(self) -> None:
        """A graceful close aborts a transaction that was neither committed nor aborted (Java's
        "Aborting incomplete transaction due to shutdown")."""
        txn = self.txn
        if txn is None or not txn.is_transactional or not txn.has_ongoing_transaction or txn.is_completing:
            return
        log.info("aborting incomplete transaction %r due to shutdown", txn.transactional_id)
        pt = txn.pending_transition
        if pt is not None and pt.result.is_completed:
            pt.result.acked = True  # nobody is left to see it: it must not block the abort
        try:
            txn.begin_abort()
        except KafkaProducerError as exc:
            log.warning("cannot abort transaction %r on close: %s", txn.transactional_id, exc)

    async def _run_transactional(self) -> bool:
        """The transactional part of ``runOnce``; True when this loop is done (a transactional request
        was sent, or a fatal error stops producing)."""
        txn = self.txn
        assert txn is not None
        if txn.has_fatal_error:
            err = txn.last_error or KafkaProducerError("fatal transaction error")
            if self.acc.incomplete:
                log.error("aborting producer batches due to fatal error: %s", err)
                for b in self.acc.abort_incomplete(err):
                    txn.remove_in_flight(b)
            self._end_txn_flush()
            await self._poll(self.config.retry_backoff_ms)
            return True
        if txn.is_completing:
            if not self._txn_flushing:  # EndTxn goes once every batch is done: send them all now
                self.acc.begin_flush()
                self._txn_flushing = True
        else:
            self._end_txn_flush()
        if (txn.has_abortable_error or txn.is_aborting) and self.acc.incomplete:
            err = txn.last_error or TransactionAbortedError()
            aborted = self.acc.abort_undrained_batches(err)
            if aborted:
                log.debug("failed %d unsent batch(es) of the aborted transaction: %s", len(aborted), err)
        handler = txn.next_request(bool(self.acc.incomplete))
        if handler is None:
            return False
        if handler.is_retry:
            await trio.sleep(handler.retry_backoff_ms / 1000)
        await self._send_transactional_request(handler)
        return True

    def _end_txn_flush(self) -> None:
        if self._txn_flushing:
            self.acc.end_flush()
            self._txn_flushing = False

    async def _send_transactional_request(self, handler: TxnRequestHandler) -> None:
        """Send one transactional request to its broker (any, or the coordinator) and handle the answer."""
        txn = self.txn
        assert txn is not None
        resp: Any = None
        version = -1
        try:
            with trio.CancelScope() as scope:
                self._txn_scope = scope
                if handler.coordinator_type is None:
                    conn = await self.nc.any_connection()
                else:
                    node = txn.coordinator(handler.coordinator_type, handler.coordinator_key)
                    if node is None:
                        txn.lookup_coordinator_for(handler)
                        return
                    conn = await self.nc.connection(node)
                version = conn.pick_version(handler.api_key, handler.max_version)
                body = handler.build(version)
                log.debug("sending %s v%d to broker %d: %s", handler.name, version, conn.node_id, body)
                resp = await conn.request(handler.api_key, body, version=version)
        except KafkaClientError as exc:
            if exc.retriable:
                log.info("%s failed: %s", handler.name, exc)
                handler.on_request_failed(exc)
            else:  # the broker does not support the API (UnsupportedVersionException): fatal
                handler.fatal_error(KafkaProducerError(f"{handler.name}: {exc}", ErrorCode.UNSUPPORTED_VERSION))
            return
        except OSError as exc:
            log.info("%s failed: %s", handler.name, exc)
            handler.on_request_failed(exc)
            return
        finally:
            self._txn_scope = None
        if scope.cancelled_caught:
            handler.reenqueue()
            return
        log.debug("%s response: %s", handler.name, resp)
        try:
            handler.handle_response(resp, version)
        except Exception as exc:  # a bug or a malformed response must not leave the caller waiting
            log.exception("handling the %s response failed", handler.name)
            handler.fail(exc)

    # -- connections and metadata ----------------------------------------------------------------
    def _node_ready(self, node: int) -> float | None:
        """0 when a request can go to ``node`` now; ms to wait if throttled; None if not (yet) possible."""
        conn = self.nc._connections.get(node)  # noqa: SLF001 - NetworkClient's connection table
        if conn is None or conn.closed:
            if node not in self._connecting:
                self._connecting.add(node)
                self.nursery.start_soon(self._connect, node)
            return None
        if self.in_flight.get(node, 0) >= self.config.max_in_flight_requests_per_connection:
            return None
        throttle = conn.throttled_until - trio.current_time()
        if throttle > 0:
            return throttle * 1000
        return 0

    async def _connect(self, node: int) -> None:
        try:
            await self.nc.connection(node)
        except (KafkaClientError, OSError) as exc:
            log.info("cannot connect to broker %d: %s", node, exc)
            self._metadata_wanted = True
            await trio.sleep(self.config.retry_backoff_ms / 1000)
        finally:
            self._connecting.discard(node)
            self.wakeup()

    def _request_metadata_update(self, now: float, topics: set[str]) -> float:
        """Start a metadata refresh unless one ran within retry.backoff.ms; returns ms until one may run."""
        if self._refreshing:
            return math.inf
        wait = self._last_refresh_ms + self.config.retry_backoff_ms - now
        if wait > 0:
            return wait
        self._refreshing = True
        self._metadata_wanted = False
        self._last_refresh_ms = now
        self.nursery.start_soon(self._refresh_metadata, sorted(topics))
        return math.inf

    async def _refresh_metadata(self, topics: list[str]) -> None:
        try:
            await self.nc.refresh_metadata(topics or None, force=True)
        except (KafkaClientError, OSError) as exc:
            log.info("metadata refresh failed: %s", exc)
        finally:
            self._refreshing = False
            self._last_refresh_ms = self._now_ms()
            self.wakeup()

    async def _init_producer_id(self) -> bool:
        """InitProducerId for the idempotent producer (bumping the epoch when asked, KIP-360)."""
        txn = self.txn
        assert txn is not None
        try:
            conn = await self.nc.any_connection()
            try:
                version = conn.pick_version(ApiKey.INIT_PRODUCER_ID)
            except KafkaClientError:
                log.warning("broker does not support InitProducerId: idempotence disabled")
                self.txn = self.acc.txn = None
                return True
            bump = txn.has_producer_id and version >= 3
            body = {"transactional_id": None, "transaction_timeout_ms": 60000,
                    "producer_id": txn.producer_id if bump else -1,
                    "producer_epoch": txn.producer_epoch if bump else -1}
            resp = await conn.request(ApiKey.INIT_PRODUCER_ID, body, version=version)
        except (KafkaClientError, OSError) as exc:
            log.info("InitProducerId failed: %s", exc)
            return False
        if resp.error_code:
            log.info("InitProducerId failed: %s", ErrorCode(resp.error_code).name)
            return False
        txn.set_producer_id(resp.producer_id, resp.producer_epoch)
        return True

    # -- produce requests ------------------------------------------------------------------------
    async def _send_produce_request(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        topics: dict[str, list[dict[str, Any]]] = {}
        size = 0
        records = 0
        m = self.metrics
        now_i = int(now)
        for b in batches:
            built = b.built_size
            topics.setdefault(b.topic, []).append({"index": b.partition, "records": b.wire_chunks})
            size += built
            records += b.record_count
            # SenderMetrics.updateProduceRequestMetrics
            m.queue_time.record(now - b.created_ms, now_i, False)
            m.batch_size.record(built, now_i, False)
            if b.uncompressed_size:
                m.compression_rate.record(built / b.uncompressed_size, now_i, False)
            if b.record_count:
                m.record_size.record((b.uncompressed_size - 61) / b.record_count, now_i, False)
            if b.attempts:
                m.retries.record(b.record_count, now_i, False)
        m.records_per_request.record(records, now_i, False)
        topic_ids = {t: self.nc.metadata.topic_id(t) or ZERO_UUID for t in topics}
        body = {"transactional_id": self.txn.transactional_id if self.txn is not None else None,
                "acks": self.acks, "timeout_ms": self.config.request_timeout_ms,
                "topic_data": [{"name": t, "topic_id": topic_ids[t], "partition_data": pd}
                               for t, pd in topics.items()]}
        conn = self.nc._connections.get(node)  # noqa: SLF001
        self.in_flight[node] = self.in_flight.get(node, 0) + 1
        self.in_flight_batches.update(batches)
        req = None
        try:
            if conn is None or conn.closed:
                raise KafkaClientError(f"no connection to broker {node}", ErrorCode.NETWORK_EXCEPTION)
            version = conn.pick_version(ApiKey.PRODUCE, self._max_produce_version(topic_ids))
            if self.acks == 0:
                await conn.start_request(ApiKey.PRODUCE, body, version=version, expect_response=False)
            else:  # the connection's reader completes it (no task per request); run_once expires it
                req = sent = _InFlightProduce(node, conn, batches, now, now + conn.request_timeout_s * 1000)
                self._produce_requests.add(sent)
                sent.corr = await conn.send_request(ApiKey.PRODUCE, body, version=version,
                                                    on_response=lambda result: self._on_produce_response(sent, result))
        except KafkaClientError as exc:
            if req is not None:
                if req.done:  # the connection failed it already
                    return
                req.done = True
                self._produce_requests.discard(req)
            self.in_flight[node] -= 1
            self.in_flight_batches.difference_update(batches)
            log.info("produce request to broker %d failed: %s", node, exc)
            self.nc.invalidate(node)
            for b in batches:
                self._complete_batch(b, ErrorCode.NETWORK_EXCEPTION, -1, -1, str(exc), self._now_ms())
            return
        m.requests.record(1, now_i, False)
        m.outgoing_bytes.record(size, now_i, False)
        if self.acks == 0:
            self.in_flight[node] -= 1
            self.in_flight_batches.difference_update(batches)
            for b in batches:
                self._complete_batch(b, ErrorCode.NONE, -1, -1, None, now)

    def _max_produce_version(self, topic_ids: dict[str, uuid.UUID]) -> int | None:
        """The newest Produce version this request may use (Java's ``ProduceRequest.Builder``): 12 unless every
        topic has a topic id (v13 names topics by id, KIP-516); 11 for a transactional producer, which uses
        transactions version 1 (v12 would ask the leader to add partitions to the transaction itself)."""
        if self.txn is not None and self.txn.is_transactional:
            return PRODUCE_LAST_BEFORE_TRANSACTION_V2
        if any(tid == ZERO_UUID for tid in topic_ids.values()):
            return PRODUCE_LAST_BEFORE_TOPIC_IDS
        return None

    def _expire_requests(self, now: float) -> float:
        """Fail the produce requests past request.timeout.ms (``NetworkClient.handleTimedOutRequests``; the
        connection stays open); returns the ms until the next deadline."""
        next_ms = math.inf
        for req in list(self._produce_requests):
            if req.deadline_ms <= now and req.corr is not None:
                req.conn.cancel_request(req.corr)
                self._on_produce_response(req, KafkaClientError(
                    f"request PRODUCE to broker {req.node} timed out", ErrorCode.REQUEST_TIMED_OUT))
            else:
                next_ms = min(next_ms, max(req.deadline_ms - now, 0))
        return next_ms

    def _on_produce_response(self, req: _InFlightProduce, result: Any) -> None:
        """A produce response (or the :class:`KafkaClientError` that failed the request): complete, retry or
        fail its batches (``handleProduceResponse``)."""
        if req.done:
            return
        req.done = True
        self._produce_requests.discard(req)
        node, batches = req.node, req.batches
        self.in_flight[node] -= 1
        self.in_flight_batches.difference_update(batches)
        if isinstance(result, KafkaClientError):
            resp = None
            code = result.code or ErrorCode.NETWORK_EXCEPTION
            log.info("produce request to broker %d failed: %s", node, result)
            if code != ErrorCode.REQUEST_TIMED_OUT:
                self.nc.invalidate(node)
        else:
            resp = result
        now = self._now_ms()
        now_i = int(now)
        m = self.metrics
        m.request_time.record(now - req.sent_ms, now_i, False)
        m.responses.record(1, now_i, False)
        if resp is None:
            for b in batches:
                self._complete_batch(b, code, -1, -1, "request failed", now)
        else:
            m.throttle_time.record(resp.throttle_time_ms or 0, now_i, False)
            parts = {(t.name or self.nc.metadata.topic_name(t.topic_id), p.index): p  # v13 names topics by id
                     for t in resp.responses for p in t.partition_responses}
            learned = self._learn_leaders(resp, parts)
            for b in batches:
                p = parts.get((b.topic, b.partition))
                if p is None:
                    self._complete_batch(b, ErrorCode.NETWORK_EXCEPTION, -1, -1, "partition missing in response",
                                         now)
                else:
                    self._complete_batch(b, p.error_code, p.base_offset, p.log_append_time_ms, p.error_message, now,
                                         p.get("record_errors") if p.error_code else None,
                                         (b.topic, b.partition) in learned)
        self.wakeup()

    def _learn_leaders(self, resp: Any, parts: dict[tuple[str | None, int], Any]) -> set[tuple[str | None, int]]:
        """KIP-951 (Produce v10+): partitions answered NOT_LEADER_OR_FOLLOWER with a ``current_leader`` of a newer
        leader epoch than the metadata's move to that leader (its endpoint from ``node_endpoints``), as Java's
        ``Metadata.updatePartitionLeadership`` does; returns them (their retry needs no metadata refresh)."""
        learned: set[tuple[str | None, int]] = set()
        if all(p.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER for p in parts.values()):
            return learned  # the usual case: nothing to learn
        endpoints = {n.node_id: Node(n.node_id, n.host, n.port, n.rack) for n in resp.get("node_endpoints") or ()}
        md = self.nc.metadata
        for (topic, index), p in parts.items():
            if p.error_code != ErrorCode.NOT_LEADER_OR_FOLLOWER or topic is None:
                continue
            leader = p.get("current_leader") or {}
            leader_id, epoch = leader.get("leader_id", -1), leader.get("leader_epoch", -1)
            info = md.topics.get(topic)
            pm = info.partition(index) if info is not None else None
            node = endpoints.get(leader_id) or md.brokers.get(leader_id)
            if pm is None or leader_id < 0 or node is None or epoch <= pm.leader_epoch:
                continue
            md.brokers[leader_id] = node
            pm.leader, pm.leader_epoch, pm.error = leader_id, epoch, ErrorCode.NONE
            learned.add((topic, index))
        return learned

    # -- completion ------------------------------------------------------------------------------
    def _complete_batch(self, batch: ProducerBatch, code: int, base_offset: int, log_append_time: int,
                        message: str | None, now: float, record_errors: Any = None,
                        leader_learned: bool = False) -> None:
        """``completeBatch``: success, retry, or failure of one batch (``record_errors``: the KIP-467
        ``RecordError``s of the response, v8+; ``leader_learned``: the response named the partition's new
        leader, KIP-951, so a retry needs no metadata refresh)."""
        if self.guarantee_order:
            self.acc.muted.discard((batch.topic, batch.partition))
        if batch.is_done:
            return
        if code == ErrorCode.NONE or code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            if self.txn is not None:
                self.txn.handle_completed(batch)
            batch.complete(base_offset if code == ErrorCode.NONE else -1, log_append_time, None)
            self.acc.deallocate(batch)
            return
        if self._can_retry(batch, code, now):
            log.debug("retrying %r after %s (attempt %d)", batch, ErrorCode(code).name, batch.attempts + 1)
            self.acc.reenqueue(batch, now)
            if code in METADATA_ERRORS and not leader_learned:
                self._metadata_wanted = True
                self._last_refresh_ms = -math.inf
            return
        name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
        txn = self.txn
        if batch.has_reached_delivery_timeout(self.config.delivery_timeout_ms, now):
            err: KafkaProducerError = KafkaTimeoutError(
                f"Expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
                f"{now - batch.created_ms:.0f} ms has passed since batch creation (last error {name})")
        elif txn is not None and txn.is_transactional and code in (ErrorCode.PRODUCER_FENCED,
                                                                   ErrorCode.INVALID_PRODUCER_EPOCH):
            err = txn.fenced_error(code)
        elif txn is not None and txn.is_transactional and code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            err = TransactionalIdAuthorizationError(f"{name}: {message or 'produce failed'}")
        else:
            err = KafkaProducerError(f"{name}: {message or 'produce failed'}", code, is_retriable(code))
            if record_errors:
                self._fail_batch(batch, err, now, _record_exceptions(code, name, message, record_errors))
                return
        self._fail_batch(batch, err, now)

    def _can_retry(self, batch: ProducerBatch, code: int, now: float) -> bool:
        if batch.attempts >= self.config.retries:
            return False
        if batch.has_reached_delivery_timeout(self.config.delivery_timeout_ms, now):
            return False
        if is_retriable(code) or code == ErrorCode.NETWORK_EXCEPTION:
            return True
        txn = self.txn
        if txn is None:
            return False
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            return txn.can_retry_out_of_order(batch)
        if code == ErrorCode.UNKNOWN_PRODUCER_ID:
            if txn.is_transactional:
                return False  # fails the batch, so the transaction; the epoch is bumped after the abort
            txn.epoch_bump_required = True
            return True
        if code == ErrorCode.INVALID_PRODUCER_EPOCH and batch.producer_epoch < txn.producer_epoch:
            return True  # sent before an epoch bump; it will be renumbered
        return False

    def _fail_batch(self, batch: ProducerBatch, error: BaseException, now: float,
                    record_errors: Callable[[int], BaseException] | None = None) -> None:
        if self.txn is not None:
            self.txn.handle_failed(batch, error)
        self.metrics.errors.record(batch.record_count, int(now), False)
        log.debug("failing %r: %s", batch, error)
        batch.complete(-1, -1, error, record_errors)
        self.acc.deallocate(batch)


def _record_exceptions(code: int, name: str, message: str | None, record_errors: Any
                       ) -> Callable[[int], BaseException]:
    """Each record's error when the broker named the records it refused (Java's ``Sender.failBatch`` with
    ``recordErrors``, KIP-467): a named record gets its own message (else the partition's); with one record
    error its exception has the partition's error code, with several INVALID_RECORD (the code cannot tell
    which record failed for which reason); the other records of the batch get a generic error."""
    by_index: dict[int, BaseException] = {}
    for rec in record_errors:
        text = rec.batch_index_error_message or message or name
        if len(record_errors) == 1:
            by_index[rec.batch_index] = KafkaProducerError(f"{name}: {text}", code)
        else:
            by_index[rec.batch_index] = KafkaProducerError(f"INVALID_RECORD: {text}", ErrorCode.INVALID_RECORD)
    other = KafkaProducerError("Failed to append record because it was part of a batch which had one more more "
                               "invalid records")

    def error_for(batch_index: int) -> BaseException:
        return by_index.get(batch_index, other)

    return error_for

