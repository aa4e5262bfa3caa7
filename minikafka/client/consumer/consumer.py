"""The consumer (Java's ``KafkaConsumer``), on Trio, with either group protocol.

::

    async with KafkaConsumer("orders", bootstrap_servers="localhost:9092", group_id="g",
                             auto_offset_reset="earliest") as consumer:
        async for msg in consumer:
            print(msg.topic, msg.partition, msg.offset, msg.value)

The consumer owns a Trio nursery (entered by ``async with``) running the
fetcher, the heartbeat task and the auto-commit task; no threads.

``group_protocol="classic"`` (the default) joins with JoinGroup/SyncGroup
(:mod:`.coordinator`); ``group_protocol="consumer"`` is KIP-848's
ConsumerGroupHeartbeat, the broker assigning (:mod:`.consumer_group_coordinator`).
The API is the same for both: ``subscribe(topics | pattern=..., listener=...)``,
``poll``, ``commit``, ``assignment``, ``unsubscribe``, ``close``.  A pattern
subscription is matched by the broker under the consumer protocol (Java's
``subscribe(SubscriptionPattern)``: RE2/J syntax, evaluated by the broker) and
by the client under the classic protocol (Java's ``subscribe(Pattern)``: every
topic is listed every ``metadata_max_age_ms`` and Python's ``re.fullmatch``
picks the matching ones).

Deliberate differences from Java: the API is async (``poll``, ``commit``,
``committed``, ``position``, ``close``, offsets look-ups); ``commit_async``
starts a task in the consumer's nursery and calls ``callback(offsets, exc)``
when done; ``position`` is async because it may have to resolve a reset or
committed offset (as Java's blocking ``position``); a poll that must
(re)join the group waits for the join to finish even past ``timeout_ms``.
"""

from __future__ import annotations

import logging
import re
from typing import Any, AsyncIterator, Callable, Iterable, NamedTuple

import trio

from ...metrics import MetricName
from ...protocol.records import ConsumerRecord
from ..fetch_session import TopicPartition
from ..network import NetworkClient
from .config import ConsumerConfig
from .consumer_group_coordinator import ConsumerGroupCoordinator
from .coordinator import ConsumerCoordinator
from .coordinator_base import CoordinatorBase, refresh_all_topics
from .errors import ConsumerError
from .fetcher import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Fetcher
from .group_metadata import ConsumerGroupMetadata
from .metrics import COORDINATOR_GROUP, ConsumerMetrics
from .subscription import OffsetAndMetadata, SubscriptionState, SubscriptionType

log = logging.getLogger(__name__)

__all__ = ["KafkaConsumer", "ConsumerMessage"]

_POLL_SLICE_S = 0.1  # how often a waiting poll looks at rebalances and pending resets


class ConsumerMessage(NamedTuple):
    """A record with its topic and partition (what async iteration yields; Java's ``ConsumerRecord``)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class KafkaConsumer:
    """Consume records from Kafka (any broker speaking the protocol)."""

    def __init__(self, *topics: str, config: ConsumerConfig | None = None, **settings: Any) -> None:
        self.config = config if config is not None else ConsumerConfig.from_kwargs(**settings)
        self.client: NetworkClient | None = None
        self.subscriptions = SubscriptionState(self.config.auto_offset_reset)
        self._metrics = ConsumerMetrics(self.config.client_id, samples=self.config.metrics_num_samples,
                                        window_ms=self.config.metrics_sample_window_ms)
        self._initial_topics = list(topics)
        self._fetcher: Fetcher | None = None
        self._coordinator: CoordinatorBase | None = None
        self._pattern_checked = -1e9
        self._nursery: trio.Nursery | None = None
        self._nursery_cm: Any = None
        self._closed = False
        self._background_scope = trio.CancelScope()

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect and start the background tasks (``async with`` does this)."""
        cfg = self.config
        self.client = NetworkClient(cfg.bootstrap_servers, client_id=cfg.client_id,
                                    request_timeout_ms=cfg.request_timeout_ms,
                                    metadata_max_age_ms=cfg.metadata_max_age_ms, retry_backoff_ms=cfg.retry_backoff_ms)
        await self.client.__aenter__()
        self._nursery_cm = trio.open_nursery()
        self._nursery = await self._nursery_cm.__aenter__()
        self._fetcher = Fetcher(self.client, self.subscriptions, cfg, self._metrics)
        if cfg.group_id is not None:
            coordinator = ConsumerGroupCoordinator if cfg.uses_consumer_protocol else ConsumerCoordinator
            self._coordinator = coordinator(self.client, self.subscriptions, cfg, self._metrics)
        await self._nursery.start(self._background)
        self._metrics.add_gauge("assigned-partitions", COORDINATOR_GROUP, lambda: len(self.subscriptions.assignment))
        await self.client.refresh_metadata(self._initial_topics or None, force=True)
        if self._initial_topics:
            self.subscribe(self._initial_topics)

    async def _background(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """The fetcher, heartbeat and auto-commit tasks, under a scope that ``close`` cancels."""
        assert self._fetcher is not None
        with self._background_scope:
            async with trio.open_nursery() as nursery:
                await nursery.start(self._fetcher.run)
                if self._coordinator is not None:
                    nursery.start_soon(self._coordinator.heartbeat_loop)
                    if self.config.enable_auto_commit:
                        nursery.start_soon(self._coordinator.auto_commit_loop)
                task_status.started()

    async def __aenter__(self) -> "KafkaConsumer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        try:
            await self.close()
        finally:
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
                nursery_cm, self._nursery = self._nursery_cm, None
                try:
                    await nursery_cm.__aexit__(*exc)
                finally:
                    assert self.client is not None
                    await self.client.__aexit__(None, None, None)
        return None

    async def close(self, autocommit: bool = True) -> None:
        """Commit (if auto-commit), leave the group, close the connections. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with trio.CancelScope(shield=True):
            with trio.move_on_after(self.config.request_timeout_ms / 1000):
                if self._coordinator is not None:
                    if autocommit and self.config.enable_auto_commit:
                        await self._coordinator.maybe_auto_commit()
                    if self.subscriptions.has_auto_assigned_partitions_mode:
                        await self._coordinator.leave_group()
                    await self._coordinator.close()
            self._background_scope.cancel()
            if self.client is not None:
                await self.client.close()

    def _require_group(self) -> CoordinatorBase:
        if self._coordinator is None:
            raise ConsumerError("this needs a group_id", retriable=False)
        return self._coordinator

    def _require_started(self) -> Fetcher:
        if self._fetcher is None:
            raise ConsumerError("the consumer is not started: use `async with KafkaConsumer(...)`", retriable=False)
        return self._fetcher

    # -- subscription ------------------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | re.Pattern[str] | None = None, listener: Any = None, *,
                  pattern: str | re.Pattern[str] | None = None) -> None:
        """Subscribe to topics, or to the topics matching ``pattern`` (a string or a compiled ``re``
        pattern, also accepted as ``topics``), with the group (needs ``group_id``); the assignment comes
        with ``poll``.  ``listener``: a :class:`~.listener.ConsumerRebalanceListener`."""
        coordinator = self._require_group()
        if isinstance(topics, re.Pattern):
            topics, pattern = None, topics
        if (topics is None) == (pattern is None):
            raise ValueError("subscribe() takes topics or a pattern")
        if pattern is not None:
            changed = self.subscriptions.subscribe_pattern(pattern)
            self._pattern_checked = -1e9
        else:
            names = list(topics) if topics is not None else []
            if any(not t or not t.strip() for t in names):
                raise ValueError("topic names must not be empty")
            changed = self.subscriptions.subscribe(names)
            if changed:
                assert self.client is not None
                self.client.want_topics(names)
        self.subscriptions.rebalance_listener = listener
        if changed:
            coordinator.on_subscription_updated()
        self._wakeup()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Consume exactly these partitions (no group membership)."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self.subscriptions.assign_from_user(tps)
        if self.client is not None:
            self.client.want_topics(sorted({tp.topic for tp in tps}))
        self._wakeup()

    def unsubscribe(self) -> None:
        """Drop the subscription (and leave the group under the consumer protocol) or the assignment."""
        if self._coordinator is not None and self.config.uses_consumer_protocol:
            self._coordinator.on_unsubscribe()  # needs the assignment: before it is cleared
        self.subscriptions.unsubscribe()
        if self._coordinator is not None and not self.config.uses_consumer_protocol:
            self._coordinator.on_unsubscribe()
        self._wakeup()

    def subscription(self) -> set[str]:
        return set(self.subscriptions.subscription)

    def assignment(self) -> set[TopicPartition]:
        return self.subscriptions.assigned_partitions()

    def _wakeup(self) -> None:
        if self._fetcher is not None:
            self._fetcher.wakeup()

    # -- positions ---------------------------------------------------------------------------------
    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        """Consume ``tp`` from ``offset`` on the next poll."""
        if offset < 0:
            raise ValueError("seek offset must not be negative")
        self.subscriptions.seek(TopicPartition(*tp), offset)
        self._wakeup()

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Reset to the earliest offset lazily, on the next poll or position (all assigned if none given)."""
        for tp in partitions or tuple(self.subscriptions.assignment):
            self.subscriptions.request_offset_reset(TopicPartition(*tp), "earliest")
        self._wakeup()

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        for tp in partitions or tuple(self.subscriptions.assignment):
            self.subscriptions.request_offset_reset(TopicPartition(*tp), "latest")
        self._wakeup()

    async def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        """The offset of the next record to be returned, resolving it first if needed."""
        tp = TopicPartition(*tp)
        pos = self.subscriptions.position(tp)
        while pos is None:
            await self._update_fetch_positions()
            pos = self.subscriptions.position(tp)
        return pos

    async def _update_fetch_positions(self) -> None:
        """Committed offsets for new partitions, then pending resets (Java's ``updateFetchPositions``)."""
        fetcher = self._require_started()
        missing = self.subscriptions.missing_positions()
        if missing:
            committed = await self._coordinator.fetch_committed(missing) if self._coordinator else {}
            for tp in missing:
                if not self.subscriptions.is_assigned(tp):
                    continue
                om = committed.get(tp)
                if om is not None:
                    self.subscriptions.seek(tp, om.offset)
                else:
                    self.subscriptions.request_offset_reset(tp)
        need = self.subscriptions.partitions_needing_reset()
        if need:
            await fetcher.reset_offsets(need)
        fetcher.wakeup()

    # -- polling -----------------------------------------------------------------------------------
    async def poll(self, timeout_ms: float = 0, max_records: int | None = None
                   ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records fetched for the assigned partitions, waiting up to ``timeout_ms`` for some."""
        fetcher = self._require_started()
        if self._closed:
            raise ConsumerError("the consumer is closed", retriable=False)
        max_records = max_records or self.config.max_poll_records
        deadline = trio.current_time() + timeout_ms / 1000
        while True:
            if self._coordinator is not None:
                await self._maybe_match_pattern()
                await self._coordinator.ensure_active_group()
            if not self.subscriptions.has_all_fetch_positions():
                await self._update_fetch_positions()
            records = fetcher.drain(max_records)
            if records:
                return records
            now = trio.current_time()
            if now >= deadline:
                return {}
            await fetcher.wait_for_data(min(deadline - now, _POLL_SLICE_S))

    async def _maybe_match_pattern(self) -> None:
        """Classic protocol, pattern subscription: the matching topics, looked up every ``metadata_max_age_ms``
        (Java's ``updatePatternSubscription``); a change makes the classic member rejoin."""
        subs = self.subscriptions
        if subs.type != SubscriptionType.AUTO_PATTERN or self.config.uses_consumer_protocol:
            return
        now = trio.current_time()
        if now - self._pattern_checked < self.config.metadata_max_age_ms / 1000:
            return
        assert self.client is not None
        md = await refresh_all_topics(self.client)
        self._pattern_checked = now
        matching = sorted(t for t, info in md.topics.items() if not info.error and subs.matches_pattern(t))
        if subs.subscribe_from_pattern(matching):
            self.client.want_topics(matching)

    def __aiter__(self) -> AsyncIterator[ConsumerMessage]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerMessage]:
        while True:
            batch = await self.poll(timeout_ms=1000)
            for tp, records in batch.items():
                for r in records:
                    yield ConsumerMessage(tp.topic, tp.partition, *r)

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self.subscriptions.pause(TopicPartition(*tp))
        self._wakeup()

    def resume(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self.subscriptions.resume(TopicPartition(*tp))
        self._wakeup()

    def paused(self) -> set[TopicPartition]:
        return self.subscriptions.paused_partitions()

    # -- offsets -----------------------------------------------------------------------------------
    @staticmethod
    def _offsets(offsets: dict[TopicPartition, int | OffsetAndMetadata]) -> dict[TopicPartition, OffsetAndMetadata]:
        return {TopicPartition(*tp): om if isinstance(om, OffsetAndMetadata) else OffsetAndMetadata(int(om))
                for tp, om in offsets.items()}

    async def commit(self, offsets: dict[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """Commit ``offsets`` (default: the consumed positions) and wait for the answer."""
        coord = self._require_group()
        oms = self.subscriptions.all_consumed() if offsets is None else self._offsets(offsets)
        await coord.commit_offsets(oms)

    def commit_async(self, offsets: dict[TopicPartition, int | OffsetAndMetadata] | None = None,
                     callback: Callable[[dict, BaseException | None], Any] | None = None) -> None:
        """Commit in the background; ``callback(offsets, exception_or_None)`` when done."""
        coord = self._require_group()
        assert self._nursery is not None
        oms = self.subscriptions.all_consumed() if offsets is None else self._offsets(offsets)

        async def run() -> None:
            exc: BaseException | None = None
            try:
                await coord.commit_offsets(oms, retries=False)
            except Exception as e:  # reported to the callback, as Java's OffsetCommitCallback
                exc = e
                if callback is None:
                    log.warning("async commit failed: %s", e)
            if callback is not None:
                callback(oms, exc)

        self._nursery.start_soon(run)

    async def committed(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """The group's committed offset for ``tp`` (None if nothing is committed)."""
        got = await self._require_group().fetch_committed([TopicPartition(*tp)])
        om = got.get(TopicPartition(*tp))
        return om.offset if om is not None else None

    async def committed_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        return await self._require_group().fetch_committed(partitions)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """``groupMetadata``: the group id, generation, member id and group instance id, for
        ``KafkaProducer.send_offsets_to_transaction`` (KIP-447).  Needs ``group_id``."""
        return self._require_group().group_metadata()

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._require_started().list_offsets({TopicPartition(*tp): EARLIEST_TIMESTAMP
                                                           for tp in partitions})

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await self._require_started().list_offsets({TopicPartition(*tp): LATEST_TIMESTAMP
                                                           for tp in partitions})

    async def offsets_for_times(self, timestamps: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return await self._require_started().list_offsets({TopicPartition(*tp): ts for tp, ts in timestamps.items()})

    async def partitions_for(self, topic: str) -> list[int]:
        assert self.client is not None
        await self.client.refresh_metadata([topic])
        return self.client.metadata.partitions_for(topic)

    # -- metrics -----------------------------------------------------------------------------------
    def metrics(self) -> dict[MetricName, float]:
        """Every metric by Java name (``MetricName``) with its current value."""
        return self._metrics.snapshot()

    def metric(self, name: str, group: str = "consumer-fetch-manager-metrics", **tags: Any) -> float | None:
        """One metric's value, e.g. ``metric("records-lag", topic="t", partition=0)``."""
        return self._metrics.value(name, group, **tags)

    def lag(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        """High watermark (LSO if read_committed) minus position, from the latest fetch response."""
        return self.subscriptions.partition_lag(TopicPartition(*tp), self.config.isolation_level_id)

    @property
    def fetcher(self) -> Fetcher:
        return self._require_started()

    @property
    def coordinator(self) -> CoordinatorBase | None:
        return self._coordinator
