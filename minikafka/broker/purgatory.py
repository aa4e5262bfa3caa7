"""Waiting requests keyed by partition (Kafka's ``DelayedOperationPurgatory``).

A long-polling Fetch or an acks=all Produce watches the partitions it is
waiting on; whatever changes a partition (an append, a high watermark or log
start offset move, a leadership change, a deletion) calls
:meth:`DelayedOperationPurgatory.check_and_complete` with that partition's key,
which wakes only the requests watching it, and tells each which keys fired so
it re-reads only those.  With a hundred consumers long-polling idle
partitions, an append to another partition wakes none of them.

Expiration (Kafka's ``ExpirationReaper``): while the broker runs the
purgatory's :meth:`~DelayedOperationPurgatory.run_reaper` task, a waiting
request parks its task directly (no cancel scope, no event, no deadline of its
own in Trio's timer heap); ``check_and_complete`` reschedules it, and the one
reaper task wakes the waits whose deadline passed.  Finished waits leave their
deadline behind; like Kafka's ``purge.interval.requests`` the heap is purged
once they outnumber the live ones.  Without a reaper (a purgatory used on its
own, or once the reaper stopped) each wait times out by itself.

Completion (Kafka's ``tryComplete``): a waiting request may give its watch a
``try_complete`` callback.  While its task is parked on the reaper, a key that
fires calls it at once, in the task that changed the partition (an append, a
high watermark move), with the keys fired: it re-reads them and says whether
the request is complete.  Not complete: the task stays parked (no wake-up for
a change that does not complete it).  Complete: the callback may have answered
the request there and then (a delayed fetch writes its response before the
produce that completed it is answered, as Kafka's ``DelayedFetch`` does), and
the task is woken to finish.  Without a callback, or without the reaper, the
task is woken and re-reads by itself.
"""

from __future__ import annotations

import heapq
import logging
import math
from collections.abc import Callable, Hashable, Iterable
from types import TracebackType

import trio

from .deadline_loop import DeadlineLoop

log = logging.getLogger(__name__)

#: Finished waits' deadlines kept in the heap before it is purged (and at least as many as the live ones).
PURGE_INTERVAL = 64


class Watch:
    """One waiting request's registration on its keys; a context manager that unregisters it."""

    __slots__ = ("try_complete", "completed", "_fired", "_event", "_keys", "_purgatory", "_task", "_waits")

    def __init__(self, purgatory: DelayedOperationPurgatory, keys: list[Hashable]) -> None:
        #: Kafka's ``tryComplete``, called by :meth:`fire` while the task is parked, with the keys that fired
        #: (consumed): True when the request is complete (its task is then woken), False to keep it waiting.
        self.try_complete: Callable[[set[Hashable]], bool] | None = None
        self.completed = False  # try_complete said so: the wait returned because the request is complete
        self._purgatory = purgatory
        self._keys = keys
        self._fired: set[Hashable] = set()
        self._event: trio.Event | None = None  # only while waiting without the reaper
        self._task: trio.lowlevel.Task | None = None  # parked, until woken (a key fired, expired or cancelled)
        self._waits = 0  # which wait of this watch a heap entry is for

    def fire(self, key: Hashable) -> None:
        self._fired.add(key)
        task = self._task
        if task is not None:
            if self.try_complete is not None and not self._try_complete():
                return  # not complete: it waits on
            self._task = None
            self._purgatory._finished += 1
            trio.lowlevel.reschedule(task)
        elif self._event is not None:
            self._event.set()

    def _try_complete(self) -> bool:
        """Run ``try_complete`` on the keys fired so far; a callback that fails wakes the task with them (it
        re-reads them itself and meets the error in its own request)."""
        assert self.try_complete is not None
        fired, self._fired = self._fired, set()
        try:
            done = self.try_complete(fired)
        except Exception:
            log.exception("completing a delayed %s from the task that changed its partitions failed",
                          self._purgatory.name)
            self._fired |= fired
            return True
        self.completed = done
        return done

    async def wait(self, deadline: float) -> set[Hashable]:
        """The keys that fired since the last call (waiting until one does or the Trio
        ``deadline`` passes); empty on timeout, and when ``try_complete`` consumed them (``completed``
        tells whether it found the request complete)."""
        while not self._fired and not self.completed:
            reaper = self._purgatory._reaper
            if reaper is None:
                self._event = trio.Event()
                try:
                    with trio.move_on_at(deadline):
                        await self._event.wait()
                finally:
                    self._event = None
                break
            if trio.current_time() >= deadline:
                await trio.lowlevel.checkpoint()
                break
            await self._park(reaper, deadline)
            if self._fired or self.completed or self._purgatory._reaper is not None \
                    or trio.current_time() >= deadline:
                break  # else the reaper stopped while this wait was parked: it waits on by itself
        fired, self._fired = self._fired, set()
        return fired

    async def _park(self, reaper: DeadlineLoop, deadline: float) -> None:
        purgatory = self._purgatory
        self._waits += 1
        self._task = trio.lowlevel.current_task()
        if purgatory._finished > PURGE_INTERVAL:
            purgatory._purge()
        heapq.heappush(purgatory._deadlines, (deadline, id(self), self._waits, self))
        reaper.schedule(deadline)

        def abort(_: object) -> trio.lowlevel.Abort:  # cancelled: the connection closed or the broker stops
            self._task = None
            purgatory._finished += 1
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._purgatory._unwatch(self)


class DelayedOperationPurgatory:
    """Watchers by key; ``check_and_complete(key)`` wakes the watchers of ``key`` only; while
    :meth:`run_reaper` runs, one task expires every wait."""

    def __init__(self, name: str = "Fetch") -> None:
        self.name = name
        self._watchers: dict[Hashable, set[Watch]] = {}
        self.completions = 0  # watchers woken so far (a metric)
        self.expirations = 0  # waits the reaper ended at their deadline (Kafka's ExpiresPerSec)
        self._reaper: DeadlineLoop | None = None
        # (deadline, id, wait number, watch) of parked waits, and of finished waits not yet purged
        self._deadlines: list[tuple[float, int, int, Watch]] = []
        self._finished = 0  # heap entries of waits that no longer park

    def watch(self, keys: Iterable[Hashable]) -> Watch:
        """Register a waiting request on ``keys`` (use as ``with purgatory.watch(keys) as w``)."""
        keys = list(dict.fromkeys(keys))
        w = Watch(self, keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(w)
        return w

    def _unwatch(self, w: Watch) -> None:
        for key in w._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.discard(w)
                if not watchers:
                    del self._watchers[key]

    def check_and_complete(self, key: Hashable) -> int:
        """Wake the requests waiting on ``key``; returns how many."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        n = len(watchers)
        for w in tuple(watchers):  # a copy: try_complete runs code that could watch or unwatch
            w.fire(key)
        self.completions += n
        return n

    def watched(self) -> int:
        """Number of (key, watcher) registrations (Kafka's ``NumDelayedOperations`` is per request)."""
        return sum(len(ws) for ws in self._watchers.values())

    def parked(self) -> int:
        """Waits parked on the reaper now."""
        return len(self._deadlines) - self._finished

    # -- expiration (Kafka's ExpirationReaper) -----------------------------------------------------------
    async def run_reaper(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Expire the waits whose deadline passed, from this one task, until cancelled; when it ends, the
        waits still parked carry on timing out by themselves."""
        if self._reaper is not None:
            raise RuntimeError(f"the {self.name} purgatory's reaper is already running")
        reaper = self._reaper = DeadlineLoop(trio.current_time)
        try:
            task_status.started()
            await reaper.run(self._expire, self._next_deadline)
        finally:
            self._reaper = None
            for _, _, waits, w in self._deadlines:
                task = w._task
                if task is not None and w._waits == waits:
                    w._task = None
                    trio.lowlevel.reschedule(task)  # it waits on by itself
            self._deadlines, self._finished = [], 0

    def _expire(self) -> None:
        heap = self._deadlines
        now = trio.current_time()
        while heap and heap[0][0] <= now:
            _, _, waits, w = heapq.heappop(heap)
            task = w._task
            if task is not None and w._waits == waits:
                w._task = None
                self.expirations += 1
                trio.lowlevel.reschedule(task)
            else:
                self._finished -= 1

    def _purge(self) -> None:
        """Drop the finished waits' deadlines once they outnumber the parked ones (and PURGE_INTERVAL)."""
        if self._finished > PURGE_INTERVAL and self._finished * 2 > len(self._deadlines):
            self._deadlines = [e for e in self._deadlines if e[3]._task is not None and e[3]._waits == e[2]]
            heapq.heapify(self._deadlines)
            self._finished = 0

    def _next_deadline(self) -> float:
        """The earliest deadline of a parked wait (finished waits' deadlines on top go first: the reaper
        does not wake for them)."""
        heap = self._deadlines
        while heap:
            _, _, waits, w = heap[0]
            if w._task is not None and w._waits == waits:
                return heap[0][0]
            heapq.heappop(heap)
            self._finished -= 1
        return math.inf
