"""The share-partitions a broker leads and the share sessions of their consumers (KIP-932).

Models Kafka's ``SharePartitionManager`` (with its ``SharePartitionCache``) plus the acquisition
lock timer (``AcquisitionLockTimerTask`` on a ``SystemTimer``) and the persister calls:

* :meth:`SharePartitionManager.share_partition` finds or initializes the share-partition of a group
  on a partition this broker leads: from the persisted state (:mod:`.partition_state`), or at the
  offset ``share.auto.offset.reset`` picks (``latest``: the high watermark, ``earliest``: the log
  start offset, ``by_duration:<ISO-8601 duration>``: the first record at or after now minus the
  duration).  A leader epoch change drops the cached share-partition so the new leader reads the
  state the previous one wrote.
* :meth:`~SharePartitionManager.acquire`, :meth:`~SharePartitionManager.acknowledge`,
  :meth:`~SharePartitionManager.release_member` drive :class:`~.partition.SharePartition`; every
  change that is not an acquisition is written to the state store (Kafka's WriteShareGroupState),
  and every change that may let a waiting ShareFetch acquire something wakes the watchers of the
  share-partition's :class:`~.partition_state.ShareStateKey` in the fetch purgatory.
* :meth:`~SharePartitionManager.run` is the lock timer: a Trio task the broker runs that sleeps until
  the earliest acquisition lock deadline (or a poke) and releases expired records.
* Share sessions (:mod:`.session`): closing one (the final epoch) or its connection closing releases the
  member's records.  As in Kafka, a member leaving its share group (ShareGroupHeartbeat) does not release
  them by itself: the share-partition leader hears of it only through those two (a consumer closing sends
  its last acknowledgements with the final epoch after or before its leave heartbeat, and those must still
  apply), and records a vanished member held come back when their locks expire.

Times: acquisition locks use ``clock`` (seconds, Trio's clock by default, so a ``MockClock`` drives
them); ``wall_clock`` gives the epoch milliseconds ``by_duration`` counts back from.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import trio

from ...common import SYSTEM_CLOCK, Clock
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..deadline_loop import DeadlineLoop
from ..groups.group_config import GroupConfig
from ..partition import Partition
from .partition import (AckBatch, AcquiredRecords, FetchedBatch, InFlightBatch, RecordState, ShareAcquireMode,
                        SharePartition)
from .partition_state import PersistedShareState, SharePersister, ShareStateError, ShareStateKey, ShareStateStore
from .session import ShareFetchContext, ShareSessionCache, ShareSessionKey, TopicIdPartition

log = logging.getLogger(__name__)

_STATE_IDS = frozenset(int(s) for s in RecordState)

class GroupConfigSource(Protocol):
    """Per-group configs (the broker's ``GroupConfigManager``)."""

    def group_config(self, group_id: str) -> GroupConfig: ...


class PartitionSource(Protocol):
    """The partitions this broker hosts (the replica manager)."""

    def get(self, topic: str, index: int) -> Partition | None: ...


class ShareGroupSettings(NamedTuple):
    """A share group's effective configs (Kafka's ``GroupConfig`` share.* with the broker's defaults)."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    auto_offset_reset: str  # latest | earliest | by_duration
    reset_duration_ms: int  # by_duration: how far back from now
    read_committed: bool


@dataclass(slots=True)
class _Cached:
    share_partition: SharePartition
    leader_epoch: int


class SharePartitionManager:
    """This broker's share-partitions, share sessions and acquisition lock timer."""

    def __init__(self, config: BrokerConfig, store: SharePersister | None = None, *,
                 group_configs: GroupConfigSource | None = None, partitions: PartitionSource | None = None,
                 notify: Callable[[Hashable], object] | None = None,
                 clock: Callable[[], float] = trio.current_time, wall_clock: Clock = SYSTEM_CLOCK,
                 broker_id: int | None = None) -> None:
        """``store``: where the state is read and written (the share coordinator; an in-memory store by default).
        ``partitions`` lets the lock timer check it still leads a partition before writing its state;
        ``notify(key)`` wakes the ShareFetches waiting on a share-partition (the fetch purgatory)."""
        self.config = config
        self.broker_id = config.node_id if broker_id is None else broker_id
        self.store: SharePersister = store if store is not None else ShareStateStore()
        self.group_configs = group_configs
        self.partitions = partitions
        self.notify = notify
        self.clock = clock
        self.wall_clock = wall_clock
        self.sessions = ShareSessionCache(config.group_share_max_share_sessions)
        self._cache: dict[ShareStateKey, _Cached] = {}
        self._timer = DeadlineLoop(clock)  # acquisition lock deadlines, seconds
        self._closed = False
        self.locks_expired = 0  # records released by lock expiry (a metric)

    # -- configuration ---------------------------------------------------------------------------
    def settings(self, group_id: str) -> ShareGroupSettings:
        cfg = self.config
        if self.group_configs is None:
            return ShareGroupSettings(cfg.group_share_record_lock_duration_ms, cfg.group_share_delivery_count_limit,
                                      "latest", 0, False)
        gc = self.group_configs.group_config(group_id)
        reset = gc.share_auto_offset_reset
        return ShareGroupSettings(gc.share_record_lock_duration_ms, gc.share_delivery_count_limit, reset.type,
                                  reset.duration_ms or 0, gc.share_read_committed)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- share-partitions ------------------------------------------------------------------------
    def get(self, group_id: str, topic: str, partition: int) -> SharePartition | None:
        cached = self._cache.get(ShareStateKey(group_id, topic, partition))
        return cached.share_partition if cached is not None else None

    def share_partition(self, group_id: str, part: Partition) -> SharePartition:
        """The share-partition of ``group_id`` on ``part`` (a partition this broker leads), initialized
        from its persisted state or ``share.auto.offset.reset`` (Kafka's ``maybeInitialize``); raises
        :class:`ShareStateError` when its share coordinator cannot be read.  A cached one whose persisted state
        epoch moved on (AlterShareGroupOffsets started it over) is initialized again."""
        key = ShareStateKey(group_id, part.topic, part.index)
        cached = self._cache.get(key)
        if cached is not None and cached.leader_epoch == part.leader_epoch and not self._started_over(key, cached):
            sp = cached.share_partition
        else:
            err = self.store.state_error(key, self.broker_id)
            if err:
                raise ShareStateError(err)
            sp = self._load(key, part)
            self._cache[key] = _Cached(sp, part.leader_epoch)
        log_start = part.log.log_start_offset
        if sp.start_offset < log_start:
            # Records below the log start offset are gone (retention, DeleteRecords).
            sp.move_start_to(log_start)
            self._persist(key, sp)
        return sp

    def _started_over(self, key: ShareStateKey, cached: _Cached) -> bool:
        persisted = self.store.get(key)
        return persisted is not None and persisted.state_epoch > cached.share_partition.state_epoch

    def _load(self, key: ShareStateKey, part: Partition) -> SharePartition:
        state = self.store.get(key)
        if state is not None:
            batches = [InFlightBatch(f, last, RecordState(s), dc) for f, last, s, dc in state.batches
                       if s in _STATE_IDS]
            sp = SharePartition(key.group_id, key.topic, key.partition, state.start_offset, batches,
                                state_epoch=state.state_epoch)
            log.debug("%r: loaded", sp)
            return sp
        start = self._reset_offset(key.group_id, part)
        sp = SharePartition(key.group_id, key.topic, key.partition, start)
        self._persist(key, sp)
        log.info("%r: initialized at %d (share.auto.offset.reset=%s)", sp, start,
                 self.settings(key.group_id).auto_offset_reset)
        return sp

    def _reset_offset(self, group_id: str, part: Partition) -> int:
        settings = self.settings(group_id)
        lg = part.log
        if settings.auto_offset_reset == "earliest":
            return lg.log_start_offset
        if settings.auto_offset_reset == "by_duration":
            found = lg.offset_for_timestamp(self.wall_clock.time_ms() - settings.reset_duration_ms)
            if found is not None:
                return found[0]
        return lg.high_watermark

    def _persist(self, key: ShareStateKey, sp: SharePartition) -> ErrorCode:
        """Write the share-partition's state (a snapshot).  When the write is refused the state stays in memory
        (the next snapshot carries it); FENCED_STATE_EPOCH drops the share-partition, as Kafka's fenced
        share-partition handler does: the next fetch initializes it from the state written meanwhile."""
        start, epoch, runs = sp.snapshot()
        err = self.store.put(key, PersistedShareState(start, epoch, tuple(runs)))
        if err == ErrorCode.FENCED_STATE_EPOCH:
            self._cache.pop(key, None)
        return err

    async def persisted(self, group_id: str, topic: str, partition: int) -> ErrorCode:
        """Wait until the state written for the share-partition is durable (its snapshot replicated): NONE, or
        COORDINATOR_NOT_AVAILABLE."""
        return await self.store.replicated(ShareStateKey(group_id, topic, partition))

    def _changed(self, key: ShareStateKey) -> None:
        if self.notify is not None:
            self.notify(key)

    # -- fetch and acknowledge ---------------------------------------------------------------------
    def acquire(self, group_id: str, member_id: str, part: Partition, fetched: list[FetchedBatch], *,
                max_records: int, batch_size: int = 0,
                mode: ShareAcquireMode = ShareAcquireMode.BATCH_OPTIMIZED) -> list[AcquiredRecords]:
        """Acquire records of ``fetched`` (batches read from the share-partition's next fetch offset)."""
        settings = self.settings(group_id)
        sp = self.share_partition(group_id, part)
        acquired = sp.acquire(member_id, fetched, self.now_ms(), settings.record_lock_duration_ms,
                              max_records=max_records, max_in_flight=self.config.group_share_partition_max_record_locks,
                              batch_size=batch_size, mode=mode)
        if acquired:
            self._schedule(sp.next_lock_deadline())
        if any(fb.aborted for fb in fetched):
            self._persist(ShareStateKey(group_id, part.topic, part.index), sp)  # aborted records were archived
        return acquired

    def acknowledge(self, group_id: str, member_id: str, part: Partition, batches: list[AckBatch]) -> ErrorCode:
        """Apply one request partition's acknowledgements (UNKNOWN_TOPIC_OR_PARTITION when this broker
        holds no share-partition for it: nothing was ever acquired here)."""
        key = ShareStateKey(group_id, part.topic, part.index)
        cached = self._cache.get(key)
        if cached is None or cached.leader_epoch != part.leader_epoch:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        err = self.store.state_error(key, self.broker_id, write=True)
        if err:
            return err  # refused before anything changed, as Kafka rolls back a failed write
        sp = cached.share_partition
        settings = self.settings(group_id)
        err = sp.acknowledge(member_id, batches, self.now_ms(), settings.record_lock_duration_ms,
                             settings.delivery_count_limit)
        if err == ErrorCode.NONE:
            err = self._persist(key, sp)
            self._schedule(sp.next_lock_deadline())
            self._changed(key)
        return err

    # -- members and sessions ----------------------------------------------------------------------
    def new_context(self, group_id: str, member_id: str, epoch: int, requested: list[TopicIdPartition],
                    forgotten: list[TopicIdPartition], has_acknowledgements: bool,
                    connection_id: str = "") -> ShareFetchContext:
        """The share-session step of a ShareFetch (raises :class:`~.session.ShareSessionError`)."""
        return self.sessions.new_context(group_id, member_id, epoch, requested, forgotten, has_acknowledgements,
                                         connection_id)

    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """The share-session step of a ShareAcknowledge (raises :class:`~.session.ShareSessionError`)."""
        self.sessions.acknowledge_session_update(group_id, member_id, epoch)

    def session_partitions(self, group_id: str, member_id: str) -> list[TopicIdPartition]:
        return self.sessions.partitions(ShareSessionKey(group_id, member_id))

    def release_member(self, group_id: str, member_id: str, partitions: list[tuple[str, int]] | None = None) -> int:
        """Release the records ``member_id`` holds (in ``partitions``, or every share-partition of the
        group here); returns how many records were released."""
        limit = self.settings(group_id).delivery_count_limit
        keys = ([ShareStateKey(group_id, t, p) for t, p in partitions] if partitions is not None
                else [k for k in self._cache if k.group_id == group_id])
        released = 0
        for key in keys:
            cached = self._cache.get(key)
            if cached is None:
                continue
            ranges = cached.share_partition.release_member(member_id, limit)
            if ranges:
                released += sum(last - first + 1 for first, last in ranges)
                self._persist(key, cached.share_partition)
                self._changed(key)
        return released

    def close_session(self, group_id: str, member_id: str, partitions: list[tuple[str, int]]) -> None:
        """Kafka's ``releaseSession``: the session ends (final epoch) and the member's records go back."""
        self.sessions.remove(ShareSessionKey(group_id, member_id))
        self.release_member(group_id, member_id, partitions)

    def connection_closed(self, connection_id: str) -> None:
        """Kafka's ``ShareSessionCache`` connection-disconnect listener."""
        for key in self.sessions.connection_closed(connection_id):
            self.release_member(key.group_id, key.member_id)

    # -- share group offsets (Describe/Alter/DeleteShareGroupOffsets) ------------------------------
    def start_offset(self, group_id: str, topic: str, partition: int) -> int:
        """The persisted share-partition start offset, -1 if the share-partition was never initialized."""
        state = self.store.get(ShareStateKey(group_id, topic, partition))
        return state.start_offset if state is not None else -1

    def delivery_complete_count(self, group_id: str, topic: str, partition: int) -> int:
        """In-flight records already acknowledged or archived (for the lag)."""
        state = self.store.get(ShareStateKey(group_id, topic, partition))
        if state is None:
            return 0
        return sum(last - first + 1 for first, last, s, _ in state.batches
                   if s in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))

    def initialized_partitions(self, group_id: str) -> list[tuple[str, int]]:
        return sorted((k.topic, k.partition) for k in self.store.keys(group_id))

    async def alter_start_offset(self, group_id: str, topic: str, partition: int, offset: int) -> ErrorCode:
        """Reset a share-partition to start at ``offset`` with nothing in flight (Kafka's
        InitializeShareGroupState from AlterShareGroupOffsets, with a new state epoch; the share-partition leader
        starts over from it); answered once durable."""
        key = ShareStateKey(group_id, topic, partition)
        err = self.store.state_error(key, self.broker_id, write=True)
        if err:
            return err
        old = self.store.get(key)
        self._cache.pop(key, None)
        err = self.store.put(key, PersistedShareState(offset, (old.state_epoch + 1) if old is not None else 0, ()))
        self._changed(key)
        return err or await self.store.replicated(key)

    def delete_state(self, group_id: str, topic: str, partition: int) -> bool:
        """Forget a share-partition (Kafka's DeleteShareGroupState): the next fetch initializes it again."""
        key = ShareStateKey(group_id, topic, partition)
        self._cache.pop(key, None)
        return self.store.delete(key)

    def delete_group(self, group_id: str) -> None:
        """Forget every share-partition of a deleted share group."""
        for key in self.store.keys(group_id):
            self.delete_state(*key)
        for key in [k for k in self._cache if k.group_id == group_id]:
            del self._cache[key]

    # -- the acquisition lock timer ----------------------------------------------------------------
    def _schedule(self, deadline_ms: int | None) -> None:
        """Wake the timer loop if ``deadline_ms`` comes before its planned wake-up."""
        if deadline_ms is not None:
            self._timer.schedule(deadline_ms / 1000)

    def expire_locks(self) -> int:
        """Release every record whose acquisition lock expired; returns how many."""
        now = self.now_ms()
        released = 0
        for key, cached in list(self._cache.items()):
            sp = cached.share_partition
            deadline = sp.next_lock_deadline()
            if deadline is None or deadline > now:
                continue
            if not self._still_leader(key, cached):
                del self._cache[key]
                continue
            ranges = sp.expire_locks(now, self.settings(key.group_id).delivery_count_limit)
            if ranges:
                released += sum(last - first + 1 for first, last in ranges)
                self._persist(key, sp)
                self._changed(key)
        self.locks_expired += released
        return released

    def _still_leader(self, key: ShareStateKey, cached: _Cached) -> bool:
        if self.partitions is None:
            return True
        part = self.partitions.get(key.topic, key.partition)
        return part is not None and part.is_leader and part.leader_epoch == cached.leader_epoch

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for c in self._cache.values() if (d := c.share_partition.next_lock_deadline()) is not None]
        return min(deadlines) if deadlines else None

    async def run(self) -> None:
        """The acquisition lock timer: release expired locks, then sleep until the next deadline (or until
        an acquisition with an earlier one pokes it)."""
        def next_deadline() -> float:
            nxt = self.next_deadline_ms()
            return math.inf if nxt is None else nxt / 1000

        await self._timer.run(self.expire_locks, next_deadline)

    def close(self) -> None:
        self._closed = True
        self._timer.close()

    def metrics(self) -> dict[str, float]:
        out = self.sessions.metrics()
        prefix = "kafka.server:type=share-group-metrics,name="
        out[prefix + "share-partitions"] = len(self._cache)
        out[prefix + "acquisition-locks-expired-total"] = self.locks_expired
        return out
