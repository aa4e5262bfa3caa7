"""State and plumbing shared by every part of the group coordinator.

:class:`CoordinatorCore` is the in-memory half of Kafka's
``GroupMetadataManager`` (the group cache, loading it from and appending to
:mod:`.offset_log`) plus the clocks, the timer loop's wake-up hook and
``validateGroupStatus``.  The request handling is layered on top of it in
:mod:`.rebalance`, :mod:`.join`, :mod:`.membership`, :mod:`.offsets`,
:mod:`.admin` and :mod:`.timers`; :class:`~.coordinator.GroupCoordinator`
composes them.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Callable

import trio

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from .metadata import GroupMetadata, GroupState, JoinResult, SyncResult
from .offset_log import OffsetLog, delete_record

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
        clock: Callable[[], float] = time.monotonic,
        *,
        wall_clock: Callable[[], float] = time.time,
        retention_check_interval_s: float = DEFAULT_RETENTION_CHECK_INTERVAL_S,
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        self.retention_check_interval_s = retention_check_interval_s
        self.groups: dict[str, GroupMetadata] = {}
        self._closed = False
        self._wake = trio.Event()
        self._wakeup_at = -math.inf  # nothing scheduled until run() computes it
        self._next_cleanup = clock() + retention_check_interval_s
        self._log: OffsetLog | None = OffsetLog(Path(data_dir)) if data_dir is not None else None
        if self._log is not None:
            self._load()

    # ------------------------------------------------------------------ infra

    def _now_ms(self) -> int:
        return int(self.wall_clock() * 1000)

    def _deadline(self, timeout_ms: int) -> float:
        return self.clock() + timeout_ms / 1000.0

    def _schedule(self, deadline: float) -> None:
        """Wake the timer loop if ``deadline`` is earlier than its planned wake-up."""
        if deadline < self._wakeup_at:
            self._wake.set()

    def _load(self) -> None:
        assert self._log is not None
        for gid, loaded in self._log.load().items():
            group = GroupMetadata(gid, self._now_ms())
            group.current_state_timestamp = None  # retention counts from commit times
            group.protocol_type = loaded.protocol_type
            group.generation_id = loaded.generation_id
            group.offsets = loaded.offsets
            group.pending_txn_offsets = loaded.pending_txn_offsets
            self.groups[gid] = group

    def _persist(self, records: list[dict]) -> None:
        if self._log is not None and records:
            self._log.append(records)

    def _inactive_error(self, group_id: str | None, need_non_empty: bool) -> ErrorCode | None:
        """Kafka's ``validateGroupStatus``."""
        if group_id is None or (need_non_empty and group_id == ""):
            return E.INVALID_GROUP_ID
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
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
        self._wake.set()
        if self._log is not None:
            self._log.close()

    def now_ms(self) -> int:
        """Wall-clock milliseconds, as stamped on offset commits."""
        return self._now_ms()

    def _remove_group(self, group: GroupMetadata) -> None:
        group.transition_to(S.DEAD, self._now_ms())
        group.offsets.clear()
        group.pending_members.clear()
        self.groups.pop(group.group_id, None)
        self._persist([delete_record(group.group_id)])
