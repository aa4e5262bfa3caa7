"""The producer (Kafka's ``org.apache.kafka.clients.producer.KafkaProducer``) on Trio.

::

    async with KafkaProducer(bootstrap_servers="localhost:9092", linger_ms=5) as producer:
        fut = await producer.send("topic", b"value", key=b"key")
        meta = await fut.get()            # RecordMetadata(topic, partition, offset, timestamp, ...)
        await producer.send("topic", b"v", callback=lambda meta, err: ...)
        await producer.flush()

``send`` serializes, waits for the topic's metadata (at most max.block.ms), picks the partition
(murmur2 of the key, sticky for keyless records), and appends to the :class:`RecordAccumulator`,
allocating from the :class:`BufferPool` (blocking up to max.block.ms when memory runs out).  The
:class:`Sender` runs as a task in the producer's own nursery: no threads.

Transactions (KIP-98; ``transactional_id`` set)::

    async with KafkaProducer(bootstrap_servers=..., transactional_id="tx-1") as producer:
        await producer.init_transactions()       # fences older producers with this id
        producer.begin_transaction()
        await producer.send("out", b"v")
        await producer.send_offsets_to_transaction({TopicPartition("in", 0): 42}, consumer.group_metadata())
        await producer.commit_transaction()      # or: await producer.abort_transaction()

Deliberate differences from Java: ``send`` is a coroutine (it may wait for metadata or memory,
which Java does by blocking the calling thread); it yields to the scheduler whenever a batch is
started or becomes full, so the Sender gets to run even in a tight loop of sends.  The
transactional calls that wait for the broker are coroutines too; ``begin_transaction`` (local
only) is not.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any, Mapping

import trio

from ...common import OffsetAndMetadata, SecondsClock, TopicPartition
from ...protocol.errors import ErrorCode
from ..consumer.group_metadata import ConsumerGroupMetadata
from ..network import KafkaClientError, NetworkClient
from .accumulator import RecordAccumulator
from .batch import Callback, FutureRecordMetadata, RecordMetadata, encode_headers
from .buffer_pool import BufferPool
from .config import ProducerConfig
from .errors import IllegalStateError, KafkaProducerError, KafkaTimeoutError, ProducerClosedError, RecordTooLargeError
from .metrics import ProducerMetrics
from .partitioner import BuiltInPartitioner, partition_for_key
from .sender import Sender
from .transaction_manager import TransactionManager
from .txn_handlers import TransactionalRequestResult

if TYPE_CHECKING:
    from ...metrics import Sensor

log = logging.getLogger(__name__)

_NO_HEADERS = b"\x00"
_client_ids = iter(range(1, 1 << 62))


def _to_bytes(v: Any) -> bytes | None:
    if v is None or type(v) is bytes:
        return v
    if isinstance(v, str):
        return v.encode("utf-8")
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise TypeError(f"cannot send {type(v).__name__}: give bytes or str, or configure a serializer")


class KafkaProducer:
    """Asynchronous record producer; use as ``async with KafkaProducer(...) as p``."""

    def __init__(self, bootstrap_servers: str | list[str] | None = None, *, config: ProducerConfig | None = None,
                 **settings: Any) -> None:
        if config is None:
            if bootstrap_servers is not None:
                settings["bootstrap_servers"] = bootstrap_servers
            config = ProducerConfig.from_dict(settings)
        elif bootstrap_servers is not None or settings:
            raise TypeError("give either config= or settings, not both")
        if not config.client_id:
            config.client_id = f"producer-{next(_client_ids)}"
        self.config = config
        clock = config.clock
        self.clock = SecondsClock(clock)  # Trio's: metric windows and linger move with a MockClock
        self.metrics_registry = ProducerMetrics(config.client_id, self.clock,
                                                config.metrics_sample_window_ms, config.metrics_num_samples)
        m = self.metrics_registry
        self.pool = BufferPool(config.buffer_memory, config.batch_size, clock,
                               on_wait=lambda s: m.bufferpool_wait.record(s * 1e9))
        self.txn = (TransactionManager(config.transactional_id, config.transaction_timeout_ms, config.retry_backoff_ms)
                    if config.enable_idempotence else None)
        self.accumulator = RecordAccumulator(config.batch_size, config.compression_codec, config.linger_ms,
                                             config.retry_backoff_ms, config.delivery_timeout_ms, self.pool,
                                             self.txn, self.clock)
        m.gauge("buffer-total-bytes", lambda: self.pool.total_memory, "The maximum amount of buffer memory.")
        m.gauge("buffer-available-bytes", lambda: self.pool.available_memory,
                "The total amount of buffer memory that is not being used.")
        m.gauge("waiting-threads", lambda: self.pool.queued, "Senders blocked waiting for buffer memory.")
        m.gauge("requests-in-flight", lambda: self._sender.total_in_flight if self._sender else 0)
        m.gauge("metadata-age", lambda: (self._now_ms() - self._sender._last_refresh_ms) / 1000
                if self._sender and self._sender._last_refresh_ms > -math.inf else 0)
        self._partitioners: dict[str, BuiltInPartitioner] = {}
        self._available: dict[str, tuple[int, list[int]]] = {}
        self._nc: NetworkClient | None = None
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._sender: Sender | None = None
        self._closed = False
        self._key_ser = config.key_serializer or _to_bytes
        self._value_ser = config.value_serializer or _to_bytes
        self._wall_time_ms = config.wall_clock.time_ms  # record timestamps (bound once: send's hot path)
        self._max_record_size = min(config.max_request_size, config.buffer_memory)

    def _now_ms(self) -> float:
        """Milliseconds on the producer's Trio clock (max.block.ms deadlines)."""
        return self.clock.monotonic() * 1000

    # -- lifecycle -------------------------------------------------------------------------------
    async def __aenter__(self) -> "KafkaProducer":
        c = self.config
        self._nc = NetworkClient(c.bootstrap_servers, client_id=c.client_id, request_timeout_ms=c.request_timeout_ms,
                                 metadata_max_age_ms=c.metadata_max_age_ms, retry_backoff_ms=c.retry_backoff_ms)
        await self._nc.__aenter__()
        try:
            self._nursery_cm = trio.open_nursery()
            self._nursery = await self._nursery_cm.__aenter__()
        except BaseException:
            await self._nc.__aexit__(None, None, None)
            raise
        self._sender = Sender(self._nc, self.accumulator, c, self.metrics_registry, self.txn, self.clock,
                              self._nursery)
        self._nursery.start_soon(self._sender.run)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> bool | None:
        try:
            await self.close(0 if exc_type is not None else None)
        finally:
            assert self._nursery is not None and self._nc is not None
            self._nursery.cancel_scope.cancel()
            try:
                await self._nursery_cm.__aexit__(exc_type, exc, tb)
            finally:
                await self._nc.__aexit__(None, None, None)
        return None

    async def close(self, timeout: float | None = None) -> None:
        """Send everything accepted, then stop (``close(Duration)``); after ``timeout`` seconds the
        remaining records fail with :class:`ProducerClosedError`.  ``timeout=0`` aborts at once."""
        if self._sender is None or self._sender.done.is_set():
            self._closed = True
            return
        self._closed = True
        sender = self._sender
        if timeout is not None and timeout <= 0:
            sender.force_close()
        else:
            sender.initiate_close()
        with trio.move_on_after(math.inf if timeout is None else timeout):
            await sender.done.wait()
        if not sender.done.is_set():
            log.warning("producer close timed out after %s s; aborting incomplete sends", timeout)
            sender.force_close()
            with trio.CancelScope(shield=True):
                await sender.done.wait()
        self.pool.close()

    # -- sending ---------------------------------------------------------------------------------
    async def send(self, topic: str, value: Any = None, key: Any = None, headers: Any = None,
                   partition: int | None = None, timestamp_ms: int | None = None,
                   callback: Callback | None = None) -> FutureRecordMetadata:
        """Queue one record (``KafkaProducer.send``); returns a future of its :class:`RecordMetadata`."""
        if self._closed:
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        txn = self.txn
        if txn is not None and txn.is_transactional:
            txn.fail_if_not_ready_for_send()
        else:
            txn = None
        config = self.config
        kb = key if key is None or type(key) is bytes else self._key_ser(key)
        vb = value if value is None or type(value) is bytes else self._value_ser(value)
        nc = self._nc
        assert nc is not None, "use KafkaProducer as `async with`"
        start = None
        info = nc.metadata.topics.get(topic)
        if info is None or not info.partitions or (partition is not None and info.partition(partition) is None):
            start = self._now_ms()
            info = await self._wait_on_metadata(topic, partition, config.max_block_ms)
        nparts = len(info.partitions)
        hb = encode_headers(headers) if headers else _NO_HEADERS
        est = 82 + (len(kb) if kb is not None else 0) + (len(vb) if vb is not None else 0) + len(hb)
        if est > self._max_record_size:
            raise RecordTooLargeError(f"The message is {est} bytes when serialized which is larger than "
                                      f"max.request.size ({config.max_request_size}) or buffer.memory "
                                      f"({config.buffer_memory})")
        if timestamp_ms is None:
            timestamp_ms = self._wall_time_ms()
        sticky = None
        if partition is None:
            if config.partitioner is not None:
                partition = config.partitioner(topic, kb, vb, nparts)
            elif kb is not None and not config.partitioner_ignore_keys:
                partition = partition_for_key(kb, nparts)
            else:
                sticky = self._partitioners.get(topic)
                if sticky is None:
                    sticky = self._partitioners[topic] = BuiltInPartitioner(topic, config.batch_size)
                partition = sticky.partition
                if partition < 0 or partition >= nparts:
                    partition = sticky.peek(self._available_partitions(topic), nparts)
        elif not 0 <= partition < nparts:
            raise KafkaProducerError(f"Invalid partition given with record: {partition} is not in the range "
                                     f"[0...{nparts}).", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        tp = (topic, partition)
        acc = self.accumulator
        if txn is not None:
            txn.fail_if_not_ready_for_send()  # again: the transaction may have ended while we waited
        dq = acc.batches.get(tp)  # RecordAccumulator.try_append_existing, inlined (once per record)
        fut = dq[-1].try_append(timestamp_ms, kb, vb, hb, callback) if dq else None
        if fut is None:
            size = acc.allocation_size(kb, vb, hb)
            pool = self.pool
            buf = pool.try_allocate(size)
            if buf is None:
                remaining = config.max_block_ms - (self._now_ms() - start if start is not None else 0)
                try:
                    buf = await pool.allocate(size, max(remaining, 0))
                except KafkaTimeoutError:
                    self.metrics_registry.buffer_exhausted.record(1)
                    raise
                if txn is not None:
                    try:
                        txn.fail_if_not_ready_for_send()
                    except KafkaProducerError:
                        pool.deallocate(buf, size)
                        raise
                fut = acc.try_append_existing(tp, timestamp_ms, kb, vb, hb, callback)
                if fut is not None:  # someone else started a batch while we waited
                    pool.deallocate(buf, size)
            if fut is None:
                batch = acc.new_batch(tp, buf, size)
                fut = batch.try_append(timestamp_ms, kb, vb, hb, callback)
                assert fut is not None
            if txn is not None:
                txn.maybe_add_partition(tp)
            if sticky is not None and sticky.add_bytes(partition, est):
                sticky.switch(self._available_partitions(topic), nparts)
            assert self._sender is not None
            self._sender.wakeup()
            await trio.lowlevel.checkpoint()  # let the Sender run (Java: sender.wakeup())
        else:
            if txn is not None and txn.maybe_add_partition(tp):
                assert self._sender is not None
                self._sender.wakeup()
            if sticky is not None and sticky.add_bytes(partition, est):
                sticky.switch(self._available_partitions(topic), nparts)
        return fut

    async def send_callback(self, topic: str, value: Any = None, key: Any = None, *, callback: Callback,
                            **kw: Any) -> FutureRecordMetadata:
        """``send(record, callback)``: ``callback(metadata, None)`` or ``callback(None, error)`` on completion."""
        return await self.send(topic, value, key, callback=callback, **kw)

    def _available_partitions(self, topic: str) -> list[int]:
        nc = self._nc
        assert nc is not None
        cached = self._available.get(topic)
        if cached is not None and cached[0] == nc.metadata.version:
            return cached[1]
        info = nc.metadata.topics.get(topic)
        avail = [pi.partition for pi in info.partitions if pi.leader >= 0] if info else []
        self._available[topic] = (nc.metadata.version, avail)
        return avail

    async def _wait_on_metadata(self, topic: str, partition: int | None, max_wait_ms: float) -> Any:
        """``waitOnMetadata``: refresh until the topic (and partition) is known, at most max.block.ms."""
        nc = self._nc
        assert nc is not None
        deadline = self._now_ms() + max_wait_ms
        first = True
        while True:
            info = nc.metadata.topics.get(topic)
            if info is not None and info.partitions and not info.error:
                if partition is None or info.partition(partition) is not None:
                    return info
                raise KafkaProducerError(f"Invalid partition given with record: {partition} is not in the range "
                                         f"[0...{len(info.partitions)}).", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if not first:
                left = deadline - self._now_ms()
                if left <= 0:
                    raise KafkaTimeoutError(f"Topic {topic} not present in metadata after {max_wait_ms:.0f} ms.")
                await trio.sleep(min(self.config.retry_backoff_ms, left) / 1000)
            first = False
            left = deadline - self._now_ms()
            try:
                with trio.move_on_after(max(left, 0) / 1000):
                    await nc.refresh_metadata([topic], force=True)
            except KafkaClientError as exc:
                log.info("metadata for %s not available yet: %s", topic, exc)

    # -- transactions ----------------------------------------------------------------------------
    def _transaction_manager(self) -> TransactionManager:
        """``throwIfNoTransactionManager`` + ``throwIfProducerClosed``."""
        txn = self.txn
        if txn is None or not txn.is_transactional:
            raise IllegalStateError("Cannot use transactional methods without enabling transactions by setting "
                                    "the transactional_id configuration property")
        if self._closed or (self._sender is not None and self._sender.done.is_set()):
            raise ProducerClosedError("Cannot perform operation after producer has been closed")
        if self._sender is None:
            raise IllegalStateError("use KafkaProducer as `async with` before transactional calls")
        return txn

    async def _await_result(self, result: TransactionalRequestResult, sensor: "Sensor") -> None:
        assert self._sender is not None
        self._sender.wakeup()
        clock = self.config.clock
        started = clock()
        await result.wait(self.config.max_block_ms)
        sensor.record((clock() - started) * 1e9)

    async def init_transactions(self) -> None:
        """``initTransactions``: get a producer id and epoch for ``transactional_id`` from its
        transaction coordinator, fencing any older producer with the id and completing (committing or
        aborting) its pending transaction.  Call once, before any other transactional call.

        Raises :class:`KafkaTimeoutError` after max.block.ms (call again to keep waiting),
        :class:`ProducerFencedError` or :class:`TransactionalIdAuthorizationError` (fatal).
        """
        txn = self._transaction_manager()
        await self._await_result(txn.initialize_transactions(), self.metrics_registry.txn_init_time)

    def begin_transaction(self) -> None:
        """``beginTransaction``: start a transaction (local only; the coordinator hears of it with the
        first AddPartitionsToTxn or AddOffsetsToTxn)."""
        txn = self._transaction_manager()
        clock = self.config.clock
        started = clock()
        txn.begin_transaction()
        self.metrics_registry.txn_begin_time.record((clock() - started) * 1e9)

    async def send_offsets_to_transaction(
            self, offsets: Mapping[TopicPartition | tuple[str, int], OffsetAndMetadata | int],
            group_metadata: ConsumerGroupMetadata | str) -> None:
        """``sendOffsetsToTransaction``: commit the consumer group's ``offsets`` (the next offsets to
        consume) as part of the transaction: AddOffsetsToTxn, then TxnOffsetCommit to the group
        coordinator with the consumer's generation and member id (``consumer.group_metadata()``,
        KIP-447; a bare group id commits without generation checks).  They become visible to the
        group only if the transaction commits."""
        txn = self._transaction_manager()
        group = group_metadata if isinstance(group_metadata, ConsumerGroupMetadata) \
            else ConsumerGroupMetadata(group_metadata)
        oms = {(tp[0], tp[1]): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
               for tp, om in offsets.items()}
        if not oms:
            return
        await self._await_result(txn.send_offsets_to_transaction(oms, group),
                                 self.metrics_registry.txn_send_offsets_time)

    async def commit_transaction(self) -> None:
        """``commitTransaction``: send every buffered record, then EndTxn(commit).  If a record of the
        transaction failed, this raises its error and the transaction must be aborted."""
        txn = self._transaction_manager()
        await self._await_result(txn.begin_commit(), self.metrics_registry.txn_commit_time)

    async def abort_transaction(self) -> None:
        """``abortTransaction``: fail the records not yet sent (:class:`TransactionAbortedError`), wait
        for those in flight, then EndTxn(abort).  Also the way out of an abortable error."""
        txn = self._transaction_manager()
        await self._await_result(txn.begin_abort(), self.metrics_registry.txn_abort_time)

    # -- flush, metadata, metrics ----------------------------------------------------------------
    async def flush(self) -> None:
        """Make every buffered record sendable now and wait until all have completed (``flush``)."""
        acc = self.accumulator
        acc.begin_flush()
        try:
            assert self._sender is not None
            self._sender.wakeup()
            for batch in list(acc.incomplete):
                await batch.result.wait()
        finally:
            acc.end_flush()

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (``partitionsFor``), waiting for metadata up to max.block.ms."""
        await self._wait_on_metadata(topic, None, self.config.max_block_ms)
        assert self._nc is not None
        return self._nc.metadata.partitions_for(topic)

    def metrics(self) -> dict[str, float]:
        """``{java metric name: value}`` of group producer-metrics (record-send-rate, batch-size-avg, ...)."""
        return self.metrics_registry.snapshot()

    @property
    def producer_id(self) -> tuple[int, int]:
        """(producer id, epoch) of the idempotent or transactional producer; (-1, -1) without idempotence."""
        return (self.txn.producer_id, self.txn.producer_epoch) if self.txn else (-1, -1)


__all__ = ["KafkaProducer", "RecordMetadata", "FutureRecordMetadata"]
