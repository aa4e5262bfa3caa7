"""Waiting requests keyed by partition (Kafka's ``DelayedOperationPurgatory``).

A long-polling Fetch or an acks=all Produce watches the partitions it is
waiting on; whatever changes a partition (an append, a high watermark or log
start offset move, a leadership change, a deletion) calls
:meth:`DelayedOperationPurgatory.check_and_complete` with that partition's key,
which wakes only the requests watching it, and tells each which keys fired so
it re-reads only those.  With a hundred consumers long-polling idle
partitions, an append to another partition wakes none of them.

Deliberate difference: Kafka's purgatory runs ``tryComplete`` callbacks; here
the waiting task is woken and completes itself (one event loop, no locks).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from types import TracebackType

import trio


class Watch:
    """One waiting request's registration on its keys; a context manager that unregisters it."""

    __slots__ = ("_fired", "_event", "_keys", "_purgatory")

    def __init__(self, purgatory: DelayedOperationPurgatory, keys: list[Hashable]) -> None:
        self._purgatory = purgatory
        self._keys = keys
        self._fired: set[Hashable] = set()
        self._event = trio.Event()

    def fire(self, key: Hashable) -> None:
        self._fired.add(key)
        self._event.set()

    async def wait(self, deadline: float) -> set[Hashable]:
        """The keys that fired since the last call (waiting until one does or the Trio
        ``deadline`` passes); empty on timeout."""
        if not self._fired:
            with trio.move_on_at(deadline):
                await self._event.wait()
        fired, self._fired = self._fired, set()
        self._event = trio.Event()
        return fired

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._purgatory._unwatch(self)


class DelayedOperationPurgatory:
    """Watchers by key; ``check_and_complete(key)`` wakes the watchers of ``key`` only."""

    def __init__(self, name: str = "Fetch") -> None:
        self.name = name
        self._watchers: dict[Hashable, set[Watch]] = {}
        self.completions = 0  # watchers woken so far (a metric)

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
        for w in watchers:
            w.fire(key)
        self.completions += len(watchers)
        return len(watchers)

    def watched(self) -> int:
        """Number of (key, watcher) registrations (Kafka's ``NumDelayedOperations`` is per request)."""
        return sum(len(ws) for ws in self._watchers.values())
