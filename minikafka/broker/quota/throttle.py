"""Muting throttled connections (KIP-219): Kafka's ``ThrottledChannel`` and ``ThrottledChannelReaper``.

A response that violated a quota is sent at once with ``throttle_time_ms``
set, then the connection is muted (nothing more is read from it) until the
throttle time has passed.  The reaper keeps the muted channels in a delay
queue ordered by due time and unmutes each when due; its size is the
``queue-size`` metric.  For API versions older than KIP-219, where clients do
not back off by themselves, the broker holds the response for the throttle
time instead.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from dataclasses import dataclass, field

import trio

from ...protocol.api import ApiKey

log = logging.getLogger(__name__)

# First version of each API whose clients throttle themselves on throttle_time_ms
# (Kafka's AbstractResponse.shouldClientThrottle); APIs not listed: from v0.
_CLIENT_THROTTLES_FROM = {
    ApiKey.PRODUCE: 6, ApiKey.FETCH: 8, ApiKey.LIST_OFFSETS: 3, ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4, ApiKey.OFFSET_FETCH: 4, ApiKey.FIND_COORDINATOR: 2, ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2, ApiKey.LEAVE_GROUP: 2, ApiKey.SYNC_GROUP: 2, ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2, ApiKey.API_VERSIONS: 2, ApiKey.CREATE_TOPICS: 3, ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1, ApiKey.INIT_PRODUCER_ID: 1, ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.DESCRIBE_CONFIGS: 2, ApiKey.CREATE_PARTITIONS: 1, ApiKey.DELETE_GROUPS: 1,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: 1, ApiKey.ALTER_CLIENT_QUOTAS: 1,
}


def client_throttles_itself(api_key: int, version: int) -> bool:
    """True when this response version makes the client honour throttle_time_ms (KIP-219)."""
    return version >= _CLIENT_THROTTLES_FROM.get(api_key, 0)


@dataclass(order=True)
class ThrottledChannel:
    """A muted connection and when it may be read again."""

    due: float
    seq: int
    connection_id: str = field(compare=False)
    quota_type: str = field(compare=False)
    released: trio.Event = field(default_factory=trio.Event, compare=False)


class ThrottledChannelReaper:
    """The delay queue that unmutes throttled connections when their time is up."""

    def __init__(self) -> None:
        self._queue: list[ThrottledChannel] = []
        self._seq = itertools.count()
        self._wake = trio.Event()
        self.queue_sizes: dict[str, int] = {}

    @property
    def size(self) -> int:
        return len(self._queue)

    def add(self, connection_id: str, quota_type: str, throttle_ms: int) -> ThrottledChannel:
        """Mute ``connection_id`` for ``throttle_ms``; await ``.released`` before reading from it again."""
        ch = ThrottledChannel(trio.current_time() + throttle_ms / 1000, next(self._seq), connection_id, quota_type)
        heapq.heappush(self._queue, ch)
        self.queue_sizes[quota_type] = self.queue_sizes.get(quota_type, 0) + 1
        self._wake.set()
        return ch

    async def run(self) -> None:
        """Release each channel when it is due (the reaper's loop)."""
        while True:
            now = trio.current_time()
            while self._queue and self._queue[0].due <= now:
                ch = heapq.heappop(self._queue)
                self.queue_sizes[ch.quota_type] -= 1
                ch.released.set()
            self._wake = trio.Event()
            deadline = self._queue[0].due if self._queue else float("inf")
            with trio.move_on_at(deadline):
                await self._wake.wait()

    def release_all(self) -> None:
        while self._queue:
            heapq.heappop(self._queue).released.set()
        self.queue_sizes.clear()
