"""The group coordinator's timer loop.

Kafka completes JoinGroup, SyncGroup and session timeouts through purgatories
(``DelayedJoin``, ``InitialDelayedJoin``, ``DelayedSync``,
``DelayedHeartbeat``) and runs offset expiry as a scheduled task
(``offsets.retention.check.interval.ms``).  Here they are deadlines on groups
and members, served by one loop, :meth:`GroupTimers.run`, which sleeps until
the next deadline or until poked (:meth:`~.core.CoordinatorCore._schedule`).
"""

from __future__ import annotations

import trio

from .consumer.classic_members import ClassicMembersOfConsumerGroups
from .consumer.heartbeat import ConsumerGroupManager
from .core import CoordinatorCore, log
from .offsets import OffsetMetadataManager
from .rebalance import ClassicGroupRebalance


class GroupTimers:
    """The timer loop that fires the expired deadlines of every part of the group coordinator (classic groups'
    joins, syncs and sessions; consumer groups' sessions and rebalances, their classic members' joins and syncs)
    and the offset retention check."""

    def __init__(self, core: CoordinatorCore, rebalance: ClassicGroupRebalance, consumer: ConsumerGroupManager,
                 bridge: ClassicMembersOfConsumerGroups, offsets: OffsetMetadataManager) -> None:
        self.core, self.rebalance, self.consumer, self.bridge, self.offsets = core, rebalance, consumer, bridge, offsets

    async def run(self) -> None:
        """The timer loop: expire deadlines, then sleep until the next one or a poke."""
        log.debug("group coordinator timer loop started")
        async with trio.open_nursery() as tasks:
            self.core._tasks = tasks  # the loads of large __consumer_offsets partitions
            try:
                await self.core._timer.run(lambda: self._fire_due(self.core.clock()), self._next_deadline)
            finally:
                self.core._tasks = None

    def _next_deadline(self) -> float:
        nxt = min(self.core._next_cleanup, self.consumer._consumer_next_deadline(), self.bridge.next_deadline())
        for g in self.core.groups.values():
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
        for gid, g in self.core.groups.items():
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
            found = self.core.groups.get(gid)
            if found is None:
                continue
            g = found
            if kind == 0 and g.join_deadline == deadline:
                self.rebalance._on_join_expired(g)
            elif kind == 1 and g.sync_deadline == deadline:
                self.rebalance._on_expire_pending_sync(g)
            elif kind == 2 and g.pending_members.get(mid) == deadline:
                log.info("pending member %s of group %s removed after session timeout", mid, gid)
                self.rebalance._remove_pending_member_and_update_group(g, mid)
            elif kind == 3 and mid in g.members and g.members[mid].heartbeat_deadline == deadline:
                self.rebalance._on_expire_heartbeat(g, g.members[mid])
        self.consumer._fire_consumer_timers(now)
        self.bridge.fire_timers(now)
        if now >= self.core._next_cleanup:
            self.core._next_cleanup = now + self.core.retention_check_interval_s
            self.offsets.cleanup_group_metadata()
