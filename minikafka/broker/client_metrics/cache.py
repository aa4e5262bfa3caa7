"""A size-bounded LRU cache whose entries also expire (Kafka's ``LRUCache`` plus the client metrics expiration timer).

Kafka's ``ClientMetricsManager`` keeps its client instances in an ``LRUCache`` of ``CACHE_MAX_SIZE`` (16384)
entries and gives each instance an expiration ``TimerTask`` on a timer wheel.  :class:`ExpiringLruCache` does both
in one structure: the entries in least-recently-used order (an ``OrderedDict``; adding or touching one moves it to
the end, and adding past ``max_size`` evicts from the front) and their deadlines in a heap.  Touching an entry pushes
its new deadline and leaves the old one in the heap, skipped when it comes out; the heap is rebuilt when stale
deadlines outnumber the live ones.  Adding, touching and expiring are therefore amortised O(log n): nothing scans
the whole cache per request.
"""

from __future__ import annotations

import heapq
import itertools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: How many stale deadlines the heap may hold beyond twice the live entries before it is rebuilt.
_HEAP_SLACK = 64


class ExpiringLruCache(Generic[K, V]):
    """At most ``max_size`` entries, least recently used first, each expiring at its own deadline (ms).

    ``on_remove(key, value)`` is called for every entry the cache drops by itself (evicted because it was full,
    expired, or dropped with :meth:`pop_oldest`), not for :meth:`pop`."""

    def __init__(self, max_size: int, on_remove: Callable[[K, V], None] | None = None) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be at least 1, not {max_size}")
        self.max_size = max_size
        self.on_remove = on_remove
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._deadlines: dict[K, int] = {}
        self._heap: list[tuple[int, int, K]] = []
        self._seq = itertools.count()
        self.evictions = 0  # entries dropped because the cache was full (or by pop_oldest)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._entries))

    def get(self, key: K) -> V | None:
        """The entry, without touching it."""
        return self._entries.get(key)

    def values(self) -> list[V]:
        """The entries, least recently used first (a copy: safe to change the cache while iterating)."""
        return list(self._entries.values())

    def put(self, key: K, value: V, deadline_ms: int) -> None:
        """Add (or replace) ``key`` as the most recently used entry, expiring once the time is past
        ``deadline_ms``; evicts the least recently used entries beyond ``max_size``."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        self._schedule(key, deadline_ms)
        while len(self._entries) > self.max_size:
            self.pop_oldest()

    def touch(self, key: K, deadline_ms: int) -> None:
        """Make ``key`` (which must be present) the most recently used entry, with a new deadline."""
        self._entries.move_to_end(key)
        self._schedule(key, deadline_ms)

    def pop(self, key: K) -> V | None:
        """Remove ``key`` (None if absent); ``on_remove`` is not called."""
        if key not in self._entries:
            return None
        del self._deadlines[key]
        return self._entries.pop(key)

    def pop_oldest(self) -> tuple[K, V] | None:
        """Evict the least recently used entry (None when empty)."""
        if not self._entries:
            return None
        key, value = self._entries.popitem(last=False)
        del self._deadlines[key]
        self.evictions += 1
        self._removed(key, value)
        return key, value

    def expire(self, now_ms: int) -> int:
        """Remove the entries whose deadline is before ``now_ms``; how many."""
        heap, removed = self._heap, 0
        while heap and heap[0][0] < now_ms:
            deadline, _, key = heapq.heappop(heap)
            if self._deadlines.get(key) == deadline:
                del self._deadlines[key]
                value = self._entries.pop(key)
                removed += 1
                self._removed(key, value)
        return removed

    def _schedule(self, key: K, deadline_ms: int) -> None:
        if self._deadlines.get(key) == deadline_ms:
            return  # already in the heap with that deadline
        self._deadlines[key] = deadline_ms
        heapq.heappush(self._heap, (deadline_ms, next(self._seq), key))
        if len(self._heap) > 2 * len(self._deadlines) + _HEAP_SLACK:
            self._heap = [(d, next(self._seq), k) for k, d in self._deadlines.items()]
            heapq.heapify(self._heap)

    def _removed(self, key: K, value: V) -> None:
        if self.on_remove is not None:
            self.on_remove(key, value)
