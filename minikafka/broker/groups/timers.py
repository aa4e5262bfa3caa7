"""The group coordinator's timer loop.

Kafka completes JoinGroup, SyncGroup and session timeouts through purgatories
(``DelayedJoin``, ``InitialDelayedJoin``, ``DelayedSync``,
``DelayedHeartbeat``) and runs offset expiry as a scheduled task
(``offsets.retention.check.interval.ms``).  Here they are deadlines on groups
and members, served by one loop, :meth:`TimerLoopMixin.run`, which sleeps until
the next deadline or until poked (:meth:`~.core.CoordinatorCore._schedule`).
"""

from __future__ import annotations

from typing import Callable

import trio

from .core import log
from .rebalance import RebalanceMixin


class TimerLoopMixin(RebalanceMixin):
    """The timer loop that fires expired deadlines and the offset retention check."""

    cleanup_group_metadata: Callable[[], int]  # the offsets part's, through GroupCoordinator
    # KIP-848 member session and rebalance timeouts, provided by consumer.heartbeat.ConsumerGroupMixin
    _consumer_next_deadline: Callable[[], float]
    _fire_consumer_timers: Callable[[float], None]

    async def run(self) -> None:
        """The timer loop: expire deadlines, then sleep until the next one or a poke."""
        log.debug("group coordinator timer loop started")
        async with trio.open_nursery() as tasks:
            self._tasks = tasks  # the loads of large __consumer_offsets partitions
            try:
                await self._timer.run(lambda: self._fire_due(self.clock()), self._next_deadline)
            finally:
                self._tasks = None

    def _next_deadline(self) -> float:
        nxt = min(self._next_cleanup, self._consumer_next_deadline())
        for g in self.groups.values():
            if g.join_deadline is not None:
                nxt = min(nxt, g.join_deadline)
            if g.sync_deadline is not None:
                nxt = min(nxt, g.sync_deadline)
            for dl in g.pending_members.values():
                nxt = min(nxt, dl)
            for m in g.members.values():
                if m.heartbeat_deadline is not None:
                    nxt = min(nxt, m.heartbeat_deadline)
        return nxt

    def _fire_due(self, now: float) -> None:
        due: list[tuple[float, int, str, str]] = []
        for gid, g in self.groups.items():
            if g.join_deadline is not None and g.join_deadline <= now:
                due.append((g.join_deadline, 0, gid, ""))
            if g.sync_deadline is not None and g.sync_deadline <= now:
                due.append((g.sync_deadline, 1, gid, ""))
            for mid, dl in g.pending_members.items():
                if dl <= now:
                    due.append((dl, 2, gid, mid))
            for mid, m in g.members.items():
                if m.heartbeat_deadline is not None and m.heartbeat_deadline <= now:
                    due.append((m.heartbeat_deadline, 3, gid, mid))
        due.sort()
        for deadline, kind, gid, mid in due:
            found = self.groups.get(gid)
            if found is None:
                continue
            g = found
            if kind == 0 and g.join_deadline == deadline:
                self._on_join_expired(g)
            elif kind == 1 and g.sync_deadline == deadline:
                self._on_expire_pending_sync(g)
            elif kind == 2 and g.pending_members.get(mid) == deadline:
                log.info("pending member %s of group %s removed after session timeout", mid, gid)
                self._remove_pending_member_and_update_group(g, mid)
            elif kind == 3 and mid in g.members and g.members[mid].heartbeat_deadline == deadline:
                self._on_expire_heartbeat(g, g.members[mid])
        self._fire_consumer_timers(now)
        if now >= self._next_cleanup:
            self._next_cleanup = now + self.retention_check_interval_s
            self.cleanup_group_metadata()
