"""The consumer's fetcher (Java's ``Fetcher`` / ``AbstractFetch`` / ``CompletedFetch``
/ ``FetchCollector`` / ``OffsetFetcher``), on Trio.

One task per leader node sends one fetch at a time to that node, built by the
node's :class:`~minikafka.client.fetch_session.FetchSessionHandler` (KIP-227: a
full fetch creates a session, later fetches name only partitions whose fetch
offset changed).  Each partition's records in a response become one
:class:`CompletedFetch` ("chunk"), put on a bounded Trio memory channel of
``queued_max_chunks`` entries.  When the application does not poll, the
channel fills, the node task blocks on ``send`` and sends no more fetches: the
old Scala consumer's ``chunkQueue`` of ``queued.max.message.chunks`` (seed 004).
Records are decoded lazily, batch by batch, when the application drains them.

Deliberate differences from Java:

- Java never fetches a partition that has buffered data and so has one
  position; here the fetcher runs ahead (``fetch_offset``) of the consumed
  ``position`` by what is queued, bounded by the queue, as the old Scala
  consumer did.  Seeks, resets and pauses bump the partition's epoch and the
  stale chunks are dropped when they reach the front of the queue.
- Offset resets (ListOffsets) and committed offsets are resolved in ``poll``
  (as Java's ``updateFetchPositions``), not in the background.
- No OffsetsForLeaderEpoch validation after leader changes (KIP-320); the
  current leader epoch is sent and FENCED/UNKNOWN_LEADER_EPOCH refresh metadata.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.records import (AbortedTransactions, ConsumerRecord, RecordBatchHeader, decode_records, iter_batches)
from ..fetch_session import ZERO_UUID, FetchSessionHandler, PartitionData, TopicPartition
from ..network import KafkaClientError, NetworkClient, is_retriable
from .config import ConsumerConfig
from .errors import NoOffsetForPartitionError
from .metrics import ConsumerMetrics
from .subscription import SubscriptionState

log = logging.getLogger(__name__)

__all__ = ["CompletedFetch", "Fetcher", "EARLIEST_TIMESTAMP", "LATEST_TIMESTAMP"]

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1

#: Partition errors after which the leader must be looked up again (Java: refreshMetadata).
METADATA_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE,
}
for _name in ("UNKNOWN_TOPIC_ID", "INCONSISTENT_TOPIC_ID"):
    if hasattr(ErrorCode, _name):
        METADATA_ERRORS.add(getattr(ErrorCode, _name))
SESSION_ERRORS = {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


@dataclass
class CompletedFetch:
    """One partition's data from one fetch response (Java's ``CompletedFetch``), decoded lazily.

    ``next_fetch_offset`` is the offset after the last complete batch (control
    batches included), known from the batch headers alone.
    """

    tp: TopicPartition
    epoch: int
    fetch_offset: int
    next_fetch_offset: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: memoryview
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)
    read_committed: bool = False
    check_crcs: bool = True
    records_read: int = 0
    _it: Iterator[list[ConsumerRecord]] | None = None
    _buffer: list[ConsumerRecord] = field(default_factory=list)
    exhausted: bool = False

    @property
    def size_bytes(self) -> int:
        return self.records.nbytes

    def _iterate(self) -> Iterator[list[ConsumerRecord]]:
        """The records of each data batch in turn (decoded one batch at a time)."""
        skipped = AbortedTransactions(self.aborted_transactions, self.read_committed)
        start = self.fetch_offset
        h: RecordBatchHeader
        for h, view in iter_batches(self.records, check_crc=False, allow_truncated_tail=True):
            if h.next_offset <= start or skipped.skips(h, view, check_crc=self.check_crcs):
                continue
            recs = decode_records(view, check_crc=self.check_crcs)
            if h.base_offset < start:
                recs = [r for r in recs if r.offset >= start]
            if recs:
                yield recs

    def take(self, n: int) -> list[ConsumerRecord]:
        """Up to ``n`` more records; sets ``exhausted`` when none are left."""
        if self._it is None:
            self._it = self._iterate()
        out: list[ConsumerRecord] = []
        buf = self._buffer
        while len(out) < n:
            if not buf:
                batch = next(self._it, None)
                if batch is None:
                    self.exhausted = True
                    buf = []
                    break
                buf = batch
            want = n - len(out)
            if len(buf) <= want:
                out.extend(buf)
                buf = []
            else:
                out.extend(buf[:want])
                buf = buf[want:]
        self._buffer = buf
        self.records_read += len(out)
        return out


class Fetcher:
    """Fetches for the assigned partitions into a bounded chunk queue; drains it in ``poll``."""

    def __init__(self, client: NetworkClient, subscriptions: SubscriptionState, config: ConsumerConfig,
                 metrics: ConsumerMetrics) -> None:
        self.client = client
        self.subscriptions = subscriptions
        self.config = config
        self.metrics = metrics
        self._send, self._recv = trio.open_memory_channel[CompletedFetch](config.queued_max_chunks)
        self.sessions: dict[int, FetchSessionHandler] = {}
        self._node_tasks: set[int] = set()
        self._changed = trio.Event()
        self._current: CompletedFetch | None = None
        self._nursery: trio.Nursery | None = None
        self.fetches_sent = 0
        self.incremental_fetches_sent = 0
        self.backoff_s = config.retry_backoff_ms / 1000

    # -- background --------------------------------------------------------------------------------
    def wakeup(self) -> None:
        """Something changed (assignment, positions, metadata): re-plan the fetches."""
        self._changed.set()
        self._changed = trio.Event()

    @property
    def queued_chunks(self) -> int:
        return self._recv.statistics().current_buffer_used

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The fetch manager: start a task per leader node of the fetchable partitions."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                changed = self._changed
                unknown = False
                nodes: set[int] = set()
                for tp in self.subscriptions.fetchable_partitions():
                    leader = self.client.metadata.leader_for(*tp)
                    if leader is None:
                        unknown = True
                    else:
                        nodes.add(leader)
                for node in nodes - self._node_tasks:
                    self._node_tasks.add(node)
                    nursery.start_soon(self._node_loop, node)
                if unknown:
                    await self._refresh_metadata()
                    await trio.sleep(self.backoff_s)
                    continue
                with trio.move_on_after(self.config.metadata_max_age_ms / 1000) as scope:
                    await changed.wait()
                if scope.cancelled_caught and self.subscriptions.assignment:
                    await self._refresh_metadata()

    async def _refresh_metadata(self) -> None:
        topics = sorted({tp.topic for tp in self.subscriptions.assignment})
        try:
            await self.client.refresh_metadata(topics, force=True)
        except KafkaClientError as exc:
            log.info("metadata refresh failed: %s", exc)

    def _fetchable_on(self, node: int) -> list[TopicPartition]:
        md = self.client.metadata
        return [tp for tp in self.subscriptions.fetchable_partitions() if md.leader_for(*tp) == node]

    async def _node_loop(self, node: int) -> None:
        """Fetch from one node until it leads none of the fetchable partitions."""
        try:
            while True:
                parts = self._fetchable_on(node)
                if not parts:
                    return
                await self._fetch_once(node, parts)
        finally:
            self._node_tasks.discard(node)

    async def _fetch_once(self, node: int, parts: list[TopicPartition]) -> None:
        cfg = self.config
        md = self.client.metadata
        handler = self.sessions.get(node)
        if handler is None:
            handler = self.sessions[node] = FetchSessionHandler(node, use_sessions=cfg.enable_fetch_sessions)
        builder = handler.new_builder()
        sent: dict[TopicPartition, tuple[int, int]] = {}
        for tp in parts:
            state = self.subscriptions.assignment[tp]
            assert state.fetch_offset is not None
            info = md.topics.get(tp.topic)
            pinfo = info.partition(tp.partition) if info else None
            topic_id = info.topic_id if info and info.topic_id else ZERO_UUID
            builder.add(tp, PartitionData(tp.topic, topic_id, tp.partition, state.fetch_offset, -1,
                                          cfg.max_partition_fetch_bytes,
                                          pinfo.leader_epoch if pinfo else -1, -1))
            sent[tp] = (state.epoch, state.fetch_offset)
        data = builder.build()
        try:
            conn = await self.client.connection(node)
            version = conn.pick_version(ApiKey.FETCH)
            if not data.can_use_topic_ids:
                version = min(version, 12)
            if version < 7 and not data.is_full:  # a broker without sessions: fall back to sessionless
                handler.use_sessions = False
                handler._reset_initial()
                return
            body = data.to_request(version, replica_id=-1, max_wait_ms=cfg.fetch_max_wait_ms,
                                   min_bytes=cfg.fetch_min_bytes, max_bytes=cfg.fetch_max_bytes,
                                   isolation_level=cfg.isolation_level_id)
            started = trio.current_time()
            self.fetches_sent += 1
            if not data.is_full:
                self.incremental_fetches_sent += 1
            resp = await conn.request(ApiKey.FETCH, body, version=version)
        except KafkaClientError as exc:
            log.info("fetch from node %d failed: %s", node, exc)
            handler.handle_error(exc)
            self.client.invalidate(node)
            await trio.sleep(self.backoff_s)
            await self._refresh_metadata()  # the node may be gone: learn the partitions' new leaders
            self.wakeup()
            return
        self.metrics.record_fetch((trio.current_time() - started) * 1000, _get(resp, "throttle_time_ms", 0) or 0)
        if not handler.handle_response(resp, version):
            if (_get(resp, "error_code", 0) or 0) not in SESSION_ERRORS:
                await trio.sleep(self.backoff_s)
            return
        chunks: list[CompletedFetch] = []
        need_metadata = False
        for tp, p in handler.response_data(resp, version).items():
            expected = sent.get(tp)
            st = self.subscriptions.assignment.get(tp)
            if expected is None or st is None or (st.epoch, st.fetch_offset) != expected:
                continue  # sent for a position that has changed since (seek, reset, revocation)
            err = p.error_code
            if err == ErrorCode.NONE:
                st.high_watermark = p.high_watermark
                st.last_stable_offset = p.last_stable_offset
                st.log_start_offset = p.log_start_offset
                chunk = self._completed_fetch(tp, st.epoch, expected[1], p)
                if chunk is not None:
                    st.fetch_offset = chunk.next_fetch_offset
                    chunks.append(chunk)
                elif st.position == st.fetch_offset and not st.paused:
                    lag = self.subscriptions.partition_lag(tp, cfg.isolation_level_id)
                    if lag is not None:
                        self.metrics.record_partition_lag(tp, lag)
            elif err == ErrorCode.OFFSET_OUT_OF_RANGE:
                log.info("fetch offset %d is out of range for %s-%d", expected[1], *tp)
                if cfg.auto_offset_reset == "none":
                    st.fetch_offset = None  # stop fetching; poll raises NoOffsetForPartitionError
                    st.reset_strategy = "none"
                    st.epoch += 1
                else:
                    self.subscriptions.request_offset_reset(tp)
            elif err in METADATA_ERRORS:
                log.info("fetch for %s-%d from node %d: %s; refreshing metadata", tp.topic, tp.partition, node,
                         ErrorCode(err).name)
                need_metadata = True
            else:
                log.warning("fetch for %s-%d from node %d failed: %s", tp.topic, tp.partition, node,
                            _error_name(err))
        for chunk in chunks:
            await self._send.send(chunk)  # blocks while the queue is full: back-pressure
        if need_metadata:
            self.client.invalidate()
            await self._refresh_metadata()
            await trio.sleep(self.backoff_s)
            self.wakeup()

    def _completed_fetch(self, tp: TopicPartition, epoch: int, fetch_offset: int, p: Any) -> CompletedFetch | None:
        records = p.records
        if records is None or len(records) == 0:
            return None
        view = memoryview(records)
        next_offset = None
        for h, _ in iter_batches(view, check_crc=False, allow_truncated_tail=True):
            next_offset = h.next_offset
        if next_offset is None:
            log.warning("fetch for %s-%d at offset %d returned no complete batch (%d bytes); "
                        "max.partition.fetch.bytes may be too small", tp.topic, tp.partition, fetch_offset, len(view))
            return None
        if next_offset <= fetch_offset:
            return None
        aborted = [(a.producer_id, a.first_offset) for a in (_get(p, "aborted_transactions") or [])]
        return CompletedFetch(tp, epoch, fetch_offset, next_offset, p.high_watermark, p.last_stable_offset,
                              p.log_start_offset, view, aborted, self.config.isolation_level_id == 1,
                              self.config.check_crcs)

    # -- draining (poll) ---------------------------------------------------------------------------
    def drain(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records from the queued chunks, up to ``max_records`` (Java's ``FetchCollector.collectFetch``)."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        n = 0
        lag_of: dict[TopicPartition, CompletedFetch] = {}
        subs = self.subscriptions
        while n < max_records:
            c = self._current
            if c is None:
                try:
                    c = self._current = self._recv.receive_nowait()
                except trio.WouldBlock:
                    break
            st = subs.assignment.get(c.tp)
            if (st is None or st.epoch != c.epoch or st.paused or st.pending_revocation or st.position is None
                    or (c.records_read == 0 and st.position != c.fetch_offset)):
                log.debug("dropping a stale fetched chunk for %s-%d at %d", c.tp.topic, c.tp.partition, c.fetch_offset)
                self._current = None
                continue
            recs = c.take(max_records - n)
            if recs:
                out.setdefault(c.tp, []).extend(recs)
                st.position = recs[-1].offset + 1
                n += len(recs)
            if c.exhausted:
                st.position = max(st.position, c.next_fetch_offset)
                self.metrics.record_topic_fetch(c.size_bytes, c.records_read)
                self._current = None
            lag_of[c.tp] = c
        for tp, c in lag_of.items():
            st = subs.assignment[tp]
            end = c.last_stable_offset if self.config.isolation_level_id == 1 else c.high_watermark
            if st.position is not None and end is not None and end >= 0:
                self.metrics.record_partition_lag(tp, max(0, end - st.position))
        return out

    async def wait_for_data(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until a chunk is queued; True if one is ready."""
        if self._current is not None:
            return True
        with trio.move_on_after(max(0.0, timeout_s)):
            self._current = await self._recv.receive()
            return True
        return False

    # -- positions (ListOffsets) -------------------------------------------------------------------
    async def reset_offsets(self, partitions: list[TopicPartition]) -> None:
        """Resolve pending resets with ListOffsets (Java's ``OffsetFetcher.resetPositionsIfNeeded``)."""
        subs = self.subscriptions
        todo: dict[TopicPartition, tuple[int, str]] = {}
        for tp in partitions:
            st = subs.assignment.get(tp)
            if st is None or st.reset_strategy is None:
                continue
            if st.reset_strategy == "none":
                raise NoOffsetForPartitionError([tp])
            todo[tp] = (st.epoch, st.reset_strategy)
        if not todo:
            return
        stamps = {tp: EARLIEST_TIMESTAMP if strat == "earliest" else LATEST_TIMESTAMP
                  for tp, (_, strat) in todo.items()}
        found = await self.list_offsets(stamps)
        for tp, offset in found.items():
            epoch, strat = todo[tp]
            if subs.maybe_seek_unvalidated(tp, offset, epoch, strat):
                log.info("reset offset of %s-%d to %d (%s)", tp.topic, tp.partition, offset, strat)
        self.wakeup()

    async def list_offsets(self, timestamps: dict[TopicPartition, int],
                           timeout_s: float | None = None) -> dict[TopicPartition, int]:
        """Offsets for timestamps (-2 earliest, -1 latest) by asking each partition's leader;
        retriable errors are retried until ``timeout_s`` (default: default_api_timeout_ms)."""
        result: dict[TopicPartition, int] = {}
        remaining = dict(timestamps)
        deadline = trio.current_time() + (timeout_s if timeout_s is not None
                                          else self.config.default_api_timeout_ms / 1000)
        while remaining:
            await self.client.refresh_metadata(sorted({tp.topic for tp in remaining}))
            by_node: dict[int, list[TopicPartition]] = defaultdict(list)
            for tp in remaining:
                leader = self.client.metadata.leader_for(*tp)
                if leader is not None:
                    by_node[leader].append(tp)
            for node, tps in by_node.items():
                try:
                    got = await self._list_offsets_from(node, {tp: remaining[tp] for tp in tps})
                except KafkaClientError as exc:
                    log.info("ListOffsets to node %d failed: %s", node, exc)
                    self.client.invalidate(node)
                    continue
                for tp, offset in got.items():
                    result[tp] = offset
                    remaining.pop(tp, None)
            if remaining:
                if trio.current_time() > deadline:
                    raise KafkaClientError(f"ListOffsets timed out for {sorted(remaining)}",
                                           ErrorCode.REQUEST_TIMED_OUT)
                self.client.invalidate()
                await trio.sleep(self.backoff_s)
        return result

    async def _list_offsets_from(self, node: int, stamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        conn = await self.client.connection(node)
        version = conn.pick_version(ApiKey.LIST_OFFSETS)
        topics: dict[str, list[dict]] = defaultdict(list)
        for tp, ts in stamps.items():
            pinfo = self.client.metadata.topics[tp.topic].partition(tp.partition)
            topics[tp.topic].append({"partition_index": tp.partition, "timestamp": ts, "max_num_offsets": 1,
                                     "current_leader_epoch": pinfo.leader_epoch if pinfo else -1})
        body = {"replica_id": -1, "isolation_level": self.config.isolation_level_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout_ms": self.config.request_timeout_ms}  # v10+: bounds lookups in remote storage
        resp = await conn.request(ApiKey.LIST_OFFSETS, body, version=version)
        out: dict[TopicPartition, int] = {}
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if p.error_code == ErrorCode.NONE:
                    if version == 0:
                        out[tp] = p.old_style_offsets[0] if p.old_style_offsets else -1
                    else:
                        out[tp] = p.offset
                elif is_retriable(p.error_code):
                    log.info("ListOffsets for %s-%d: %s (retrying)", tp.topic, tp.partition,
                             _error_name(p.error_code))
                else:
                    raise KafkaClientError(f"ListOffsets for {tp.topic}-{tp.partition} failed: "
                                           f"{_error_name(p.error_code)}", p.error_code, retriable=False)
        return out


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)

