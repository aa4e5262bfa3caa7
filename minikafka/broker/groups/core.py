"""State and plumbing shared by every part of the group coordinator.

:class:`CoordinatorCore` is the in-memory half of Kafka's
``GroupMetadataManager`` (the group cache, loading it from and writing its
records to the ``__consumer_offsets`` log of :mod:`.offset_log`) plus the clocks, the timer loop's wake-up hook and
``validateGroupStatus``.  The request handling is layered on top of it in
:mod:`.rebalance`, :mod:`.join`, :mod:`.membership`, :mod:`.offsets`,
:mod:`.admin` and :mod:`.timers`; :class:`~.coordinator.GroupCoordinator`
composes them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from ...common.clock import SYSTEM_CLOCK, Clock
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..deadline_loop import DeadlineLoop
from .consumer.model import ConsumerGroup, ConsumerGroupState
from .metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GROUP_TYPE_CLASSIC,
    GROUP_TYPE_CONSUMER,
    GroupMetadata,
    GroupState,
    JoinResult,
    SyncResult,
)
from ..coordinator_log import compacted_log_config
from ..log.cleaner_manager import CleanerTarget
from .offset_log import OffsetLog

# One logger for the whole coordinator, whichever module of it logs.
log = logging.getLogger("minikafka.broker.groups.coordinator")

E = ErrorCode
S = GroupState

DEFAULT_RETENTION_CHECK_INTERVAL_S = 600.0  # offsets.retention.check.interval.ms



class CoordinatorCore:
    """The group cache, clocks and offsets-log glue of :class:`~.coordinator.GroupCoordinator`."""

    def __init__(
        self,
        config: BrokerConfig,
        data_dir: Path | None,
        clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
        *,
        wall_clock: Clock = SYSTEM_CLOCK,
        retention_check_interval_s: float = DEFAULT_RETENTION_CHECK_INTERVAL_S,
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.retention_check_interval_s = retention_check_interval_s
        self.groups: dict[str, GroupMetadata] = {}
        # Whether a group id names a share group (one namespace with the share-group coordinator's groups).
        self.share_group_exists: Callable[[str], bool] = lambda group_id: False
        self._closed = False
        self._timer = DeadlineLoop(clock)  # session, join, sync and rebalance deadlines; offset retention
        self._next_cleanup = clock() + retention_check_interval_s
        self._log: OffsetLog | None = None
        if data_dir is not None:
            log_config = compacted_log_config(config.offsets_topic_segment_bytes, config.topic_defaults())
            self._log = OffsetLog(Path(data_dir), clock=wall_clock, config=log_config)
        # (group type, generation or group epoch) last written for each group by _persist_group_metadata.
        self._persisted_meta: dict[str, tuple[str, int]] = {}
        if self._log is not None:
            self._load()

    # ------------------------------------------------------------------ infra

    def _now_ms(self) -> int:
        return self.wall_clock.time_ms()

    def _deadline(self, timeout_ms: int) -> float:
        return self.clock() + timeout_ms / 1000.0

    def _schedule(self, deadline: float) -> None:
        """Wake the timer loop if ``deadline`` is earlier than its planned wake-up."""
        self._timer.schedule(deadline)

    def _load(self) -> None:
        assert self._log is not None
        for gid, loaded in self._log.load().items():
            group = GroupMetadata(gid, self._now_ms())
            group.current_state_timestamp = None  # retention counts from commit times
            group.protocol_type = loaded.protocol_type
            group.generation_id = loaded.generation_id
            group.offsets = loaded.offsets
            group.pending_txn_offsets = loaded.pending_txn_offsets
            if loaded.group_type == GROUP_TYPE_CONSUMER:
                # Members are not persisted: the consumer group comes back Empty at its group epoch.
                consumer = ConsumerGroup(gid)
                consumer.group_epoch = consumer.assignment_epoch = loaded.generation_id
                group.group_type, group.consumer = GROUP_TYPE_CONSUMER, consumer
                group.protocol_type = CONSUMER_PROTOCOL_TYPE
            self._persisted_meta[gid] = (loaded.group_type, loaded.generation_id)
            self.groups[gid] = group

    def _persist_group_metadata(self, group: GroupMetadata) -> None:
        """Write the group's type and generation (a consumer group's group epoch) if they changed since
        last written (Kafka's GroupMetadata / ConsumerGroupMetadata records), so a restarted broker
        knows a consumer group is one."""
        if group.consumer is not None:
            meta = (GROUP_TYPE_CONSUMER, group.consumer.group_epoch)
        else:
            meta = (GROUP_TYPE_CLASSIC, group.generation_id)
        if self._persisted_meta.get(group.group_id) != meta:
            self._persisted_meta[group.group_id] = meta
            if self._log is not None:
                state_ts = group.current_state_timestamp
                self._log.write_group_metadata(group.group_id, meta[0], group.protocol_type, meta[1],
                                               -1 if state_ts is None else state_ts)

    def _inactive_error(self, group_id: str | None, need_non_empty: bool) -> ErrorCode | None:
        """Kafka's ``validateGroupStatus``."""
        if group_id is None or (need_non_empty and group_id == ""):
            return E.INVALID_GROUP_ID
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        return None

    def _share_group_error(self, group_id: str) -> ErrorCode | None:
        """GROUP_ID_NOT_FOUND when ``group_id`` is a share group this coordinator does not hold."""
        if group_id not in self.groups and self.share_group_exists(group_id):
            return E.GROUP_ID_NOT_FOUND
        return None

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def close(self) -> None:
        """Stop the timer loop, answer pending requests with NOT_COORDINATOR, close the log."""
        if self._closed:
            return
        self._closed = True
        for group in self.groups.values():
            for member in group.members.values():
                member.resolve_join(JoinResult(member.member_id, E.NOT_COORDINATOR))
                member.resolve_sync(SyncResult(E.NOT_COORDINATOR))
        self._timer.close()
        if self._log is not None:
            self._log.close()

    def now_ms(self) -> int:
        """Wall-clock milliseconds, as stamped on offset commits."""
        return self._now_ms()

    def cleaner_targets(self) -> list[CleanerTarget]:
        """The ``__consumer_offsets`` log for the log cleaner (none without a data dir)."""
        return self._log.cleaner_targets() if self._log is not None else []

    def _remove_group(self, group: GroupMetadata) -> None:
        """The group is deleted or expired: tombstones for its offsets and metadata."""
        offsets = list(group.offsets)
        group.transition_to(S.DEAD, self._now_ms())
        if group.consumer is not None:
            group.consumer.state = ConsumerGroupState.DEAD
        group.offsets.clear()
        group.pending_members.clear()
        self.groups.pop(group.group_id, None)
        self._persisted_meta.pop(group.group_id, None)
        if self._log is not None:
            self._log.delete_group(group.group_id, offsets)
