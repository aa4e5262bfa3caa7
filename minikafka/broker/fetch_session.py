"""Incremental fetch sessions (KIP-227): the broker-side session cache and fetch contexts.

Models Kafka's ``kafka.server.FetchSession`` family:

* :class:`CachedPartition` and :class:`FetchSession`: what a session remembers
  per partition (the fetch position the client last sent, and the high
  watermark / log start offset / last stable offset it was last told).
* :class:`FetchSessionCache`: at most ``max.incremental.fetch.session.cache.slots``
  sessions; a new session may evict first a stale one (unused for
  ``min.incremental.fetch.session.eviction.ms``), else the least valuable one
  by (privileged, size), followers being privileged and bigger sessions more
  valuable.  When nothing can be evicted the fetch is served sessionless.
* :class:`FetchManager` with the contexts Kafka's ``FetchManager.newContext``
  returns: :class:`SessionErrorContext`, :class:`SessionlessFetchContext`,
  :class:`FullFetchContext` and :class:`IncrementalFetchContext`.

Deliberate differences: one event loop, so no locking; eviction candidates
are found by a scan (the cache holds at most a few thousand sessions) instead
of Kafka's two sorted maps, with the same order.
"""

from __future__ import annotations

import functools
import logging
import random
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Concatenate, Iterable, NamedTuple, ParamSpec

from ..common.clock import SYSTEM_CLOCK, Clock
from ..metrics import Meter, MetricConfig, MetricName, WindowedCount
from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    """Kafka's ``FetchMetadata.nextEpoch``: 0 -> 1, wraps from int32 max to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 0x7FFFFFFF else epoch + 1


class PartitionKey(NamedTuple):
    """A fetched partition: by topic id (v13+) or by name; ``topic`` may be None for an unknown id."""

    topic_id: uuid.UUID | None
    topic: str | None
    partition: int


@dataclass(slots=True)
class PartitionRequest:
    """The per-partition fields of a fetch request."""

    fetch_offset: int
    max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    # The high watermark the fetching replica knows (Fetch v18, KIP-1166); INT64_MAX: not reported.
    high_watermark: int = 0x7FFFFFFFFFFFFFFF


@dataclass(slots=True)
class FetchPartitionData:
    """One partition's part of a fetch response, as read from the log (Kafka's ``FetchPartitionData``).

    ``records`` is the stored batches (a list of chunks sent by reference) and ``size`` their bytes.
    """

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview | list = b""
    size: int = 0
    aborted_transactions: list[dict] | None = None  # read_committed: [{producer_id, first_offset}]
    current_leader: dict | None = None  # KIP-951 (v16+): {leader_id, leader_epoch} on a leadership error

    def to_response(self) -> dict:
        """The FetchResponse partition entry."""
        out: dict[str, Any] = {"partition_index": self.partition_index, "error_code": self.error_code,
                               "high_watermark": self.high_watermark, "last_stable_offset": self.last_stable_offset,
                               "log_start_offset": self.log_start_offset,
                               "aborted_transactions": self.aborted_transactions, "records": self.records}
        if self.current_leader is not None:
            out["current_leader"] = self.current_leader
        return out


@dataclass(slots=True)
class CachedPartition:
    """A partition in a fetch session (Kafka's ``CachedPartition``)."""

    key: PartitionKey
    fetch_offset: int
    max_bytes: int
    fetcher_log_start_offset: int = -1
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    high_watermark: int = -1
    last_stable_offset: int = -1
    local_log_start_offset: int = -1

    def request(self) -> PartitionRequest:
        return PartitionRequest(self.fetch_offset, self.max_bytes, self.fetcher_log_start_offset,
                                self.current_leader_epoch, self.last_fetched_epoch)

    def update_request_params(self, req: PartitionRequest) -> None:
        self.fetch_offset = req.fetch_offset
        self.max_bytes = req.max_bytes
        self.fetcher_log_start_offset = req.log_start_offset
        self.current_leader_epoch = req.current_leader_epoch
        self.last_fetched_epoch = req.last_fetched_epoch

    def maybe_update_response_data(self, resp: FetchPartitionData, update: bool) -> bool:
        """Whether an incremental response must carry this partition (and remember what it says).

        New records, a changed high watermark / last stable offset / log start
        offset, or an error; after an error the cached high watermark is reset so
        the partition is re-sent once the error clears.
        """
        must = resp.size > 0
        hw = resp.high_watermark
        if hw != self.high_watermark:
            must = True
            if update:
                self.high_watermark = hw
        lso = resp.last_stable_offset
        if lso != self.last_stable_offset:
            must = True
            if update:
                self.last_stable_offset = lso
        lso_start = resp.log_start_offset
        if lso_start != self.local_log_start_offset:
            must = True
            if update:
                self.local_log_start_offset = lso_start
        if resp.error_code:
            must = True
            if update:
                self.high_watermark = -1
        return must


@dataclass
class FetchSession:
    """One incremental fetch session (Kafka's ``FetchSession``)."""

    id: int
    privileged: bool
    partitions: "OrderedDict[PartitionKey, CachedPartition]"
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int
    cached_size: int = -1

    def size(self) -> int:
        return len(self.partitions)

    def eviction_key(self) -> tuple[bool, int, int]:
        """Kafka's ``EvictableKey``: (privileged, size, id); smaller is evicted first."""
        return (self.privileged, self.cached_size, self.id)

    def update(
        self, fetch_data: "OrderedDict[PartitionKey, PartitionRequest]", to_forget: Iterable[PartitionKey]
    ) -> tuple[list[PartitionKey], list[PartitionKey], list[PartitionKey]]:
        """Merge an incremental request: returns (added, updated, removed)."""
        added, updated, removed = [], [], []
        for key, req in fetch_data.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = CachedPartition(key, req.fetch_offset, req.max_bytes, req.log_start_offset,
                                                       req.current_leader_epoch, req.last_fetched_epoch)
                added.append(key)
            else:
                cached.update_request_params(req)
                updated.append(key)
        for key in to_forget:
            if self.partitions.pop(key, None) is not None:
                removed.append(key)
        return added, updated, removed


class FetchSessionCache:
    """The bounded set of incremental fetch sessions on one broker."""

    def __init__(self, max_entries: int = 1000, eviction_ms: int = 120000, clock: Clock = SYSTEM_CLOCK) -> None:
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.clock = clock
        self.sessions: dict[int, FetchSession] = {}
        self.num_partitions = 0
        # Kafka's IncrementalFetchSessionEvictionsPerSec meter: a rate over the default 2 x 30 s windows.
        self._eviction_config = MetricConfig()
        self.eviction_meter = Meter(MetricName.of("IncrementalFetchSessionEvictionsPerSec", "FetchSessionCache"),
                                    MetricName.of("IncrementalFetchSessionEvictionsTotal", "FetchSessionCache"),
                                    rate_stat=WindowedCount())
        self._rng = random.Random()

    # -- metrics, with Kafka's names -------------------------------------------
    @property
    def num_incremental_fetch_sessions(self) -> int:
        return len(self.sessions)

    @property
    def num_incremental_fetch_partitions_cached(self) -> int:
        return self.num_partitions

    @property
    def evictions(self) -> int:
        return int(self.eviction_meter.total.measure(self._eviction_config, self.clock.time_ms()))

    def _mark_eviction(self) -> None:
        self.eviction_meter.record(self._eviction_config, 1.0, self.clock.time_ms())

    def metrics(self) -> dict[str, float]:
        return {
            "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions": len(self.sessions),
            "kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached": self.num_partitions,
            "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec":
                self.eviction_meter.rate.measure(self._eviction_config, self.clock.time_ms()),
            "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsTotal": self.evictions,
        }

    # -- lookups and updates --------------------------------------------------
    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def _new_session_id(self) -> int:
        while True:
            sid = self._rng.randint(1, 0x7FFFFFFF)
            if sid not in self.sessions:
                return sid

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Record a use of ``session`` and its (possibly changed) size."""
        if session.id in self.sessions:
            self.num_partitions -= max(session.cached_size, 0)
            session.cached_size = session.size()
            self.num_partitions += session.cached_size
        session.last_used_ms = now_ms

    def remove(self, session_or_id: FetchSession | int) -> FetchSession | None:
        sid = session_or_id if isinstance(session_or_id, int) else session_or_id.id
        session = self.sessions.pop(sid, None)
        if session is not None:
            self.num_partitions -= max(session.cached_size, 0)
        return session

    def maybe_create_session(
        self,
        now_ms: int,
        privileged: bool,
        size: int,
        uses_topic_ids: bool,
        create_partitions: Callable[[], "OrderedDict[PartitionKey, CachedPartition]"],
    ) -> int:
        """Create a session if there is room (evicting if allowed); the new id, or 0."""
        if len(self.sessions) < self.max_entries or self._try_evict(privileged, (privileged, size, 0), now_ms):
            partitions = create_partitions()
            session = FetchSession(self._new_session_id(), privileged, partitions, uses_topic_ids,
                                   now_ms, now_ms, next_epoch(INITIAL_EPOCH))
            self.sessions[session.id] = session
            self.touch(session, now_ms)
            log.debug("created fetch session %d with %d partitions", session.id, session.size())
            return session.id
        log.debug("no fetch session slot for a %s session of %d partitions",
                  "privileged" if privileged else "unprivileged", size)
        return INVALID_SESSION_ID

    def _try_evict(self, privileged: bool, key: tuple[bool, int, int], now_ms: int) -> bool:
        """Kafka's ``tryEvict``: a stale session first, else one less valuable than ``key``."""
        if not self.sessions:
            return False
        oldest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - oldest.last_used_ms > self.eviction_ms:
            log.info("evicting stale fetch session %d", oldest.id)
            self.remove(oldest)
            self._mark_eviction()
            return True
        weakest = min(self.sessions.values(), key=FetchSession.eviction_key)
        if key > weakest.eviction_key():
            log.info("evicting fetch session %d (privileged=%s, size=%d) for a more valuable one",
                     weakest.id, weakest.privileged, weakest.cached_size)
            self.remove(weakest)
            self._mark_eviction()
            return True
        return False


# -- fetch contexts ------------------------------------------------------------

@dataclass
class FetchContext:
    """What a fetch request reads and how its response is shaped."""

    error: ErrorCode = ErrorCode.NONE
    session_id: int = INVALID_SESSION_ID
    is_incremental: bool = False
    kind: str = "sessionless"

    def partitions(self) -> list[tuple[PartitionKey, PartitionRequest]]:
        return []

    def update_and_generate_response(
        self, data: "OrderedDict[PartitionKey, FetchPartitionData]"
    ) -> tuple[int, "OrderedDict[PartitionKey, FetchPartitionData]"]:
        """(response session id, partitions to put in the response)."""
        return self.session_id, data

    def peek_response(self, data: "OrderedDict[PartitionKey, FetchPartitionData]"
                      ) -> "OrderedDict[PartitionKey, FetchPartitionData]":
        """The partitions a response would carry, without touching session state (for sizing)."""
        return data

    def throttled_session_id(self) -> int:
        """The session id of the empty response a throttled fetch gets (Kafka's getThrottledResponse)."""
        return INVALID_SESSION_ID


@dataclass
class SessionErrorContext(FetchContext):
    """A session error: a top-level error code, no partitions."""

    kind: str = "error"


@dataclass
class SessionlessFetchContext(FetchContext):
    """A full fetch outside any session (epoch -1, or pre-v7, or no cache slot)."""

    fetch_data: "OrderedDict[PartitionKey, PartitionRequest]" = field(default_factory=OrderedDict)

    def partitions(self) -> list[tuple[PartitionKey, PartitionRequest]]:
        return list(self.fetch_data.items())

    def update_and_generate_response(
        self, data: "OrderedDict[PartitionKey, FetchPartitionData]"
    ) -> "tuple[int, OrderedDict[PartitionKey, FetchPartitionData]]":
        return INVALID_SESSION_ID, data


@dataclass
class FullFetchContext(FetchContext):
    """A full fetch that tries to create a new session from what it returns."""

    fetch_data: "OrderedDict[PartitionKey, PartitionRequest]" = field(default_factory=OrderedDict)
    cache: FetchSessionCache | None = None
    privileged: bool = False
    uses_topic_ids: bool = False
    kind: str = "full"

    def partitions(self) -> list[tuple[PartitionKey, PartitionRequest]]:
        return list(self.fetch_data.items())

    def update_and_generate_response(
        self, data: "OrderedDict[PartitionKey, FetchPartitionData]"
    ) -> "tuple[int, OrderedDict[PartitionKey, FetchPartitionData]]":
        assert self.cache is not None

        def create() -> "OrderedDict[PartitionKey, CachedPartition]":
            cached: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
            for key, resp in data.items():
                req = self.fetch_data[key]
                cp = CachedPartition(key, req.fetch_offset, req.max_bytes, req.log_start_offset,
                                     req.current_leader_epoch, req.last_fetched_epoch)
                cp.maybe_update_response_data(resp, True)
                cached[key] = cp
            return cached

        self.session_id = self.cache.maybe_create_session(
            self.cache.clock.time_ms(), self.privileged, len(data), self.uses_topic_ids, create)
        return self.session_id, data


@dataclass
class IncrementalFetchContext(FetchContext):
    """A fetch within an existing session: reads every session partition, answers with the changed ones."""

    session: FetchSession | None = None
    is_incremental: bool = True
    kind: str = "incremental"

    def partitions(self) -> list[tuple[PartitionKey, PartitionRequest]]:
        assert self.session is not None
        return [(k, cp.request()) for k, cp in self.session.partitions.items()]

    def peek_response(
        self, data: "OrderedDict[PartitionKey, FetchPartitionData]"
    ) -> "OrderedDict[PartitionKey, FetchPartitionData]":
        session = self.session
        assert session is not None
        return OrderedDict(
            (key, resp) for key, resp in data.items()
            if (cp := session.partitions.get(key)) is not None and cp.maybe_update_response_data(resp, False)
        )

    def throttled_session_id(self) -> int:
        assert self.session is not None
        return self.session.id

    def update_and_generate_response(
        self, data: "OrderedDict[PartitionKey, FetchPartitionData]"
    ) -> "tuple[int, OrderedDict[PartitionKey, FetchPartitionData]]":
        session = self.session
        assert session is not None
        selected: OrderedDict[PartitionKey, FetchPartitionData] = OrderedDict()
        for key, resp in data.items():
            cp = session.partitions.get(key)
            if cp is not None and cp.maybe_update_response_data(resp, True):
                selected[key] = resp
                # Partitions that made it into the response move to the end, so a size
                # limit cannot starve the ones after them (Kafka does the same).
                session.partitions.move_to_end(key)
        return session.id, selected


_P = ParamSpec("_P")


def _counted(pick: Callable[Concatenate[FetchManager, _P], FetchContext]
             ) -> Callable[Concatenate[FetchManager, _P], FetchContext]:
    """Count the contexts ``pick`` returns by kind in ``FetchManager.contexts`` (a plain increment)."""

    @functools.wraps(pick)
    def counted(self: FetchManager, *args: _P.args, **kwargs: _P.kwargs) -> FetchContext:
        context = pick(self, *args, **kwargs)
        self.contexts[context.kind] = self.contexts.get(context.kind, 0) + 1
        return context

    return counted


class FetchManager:
    """Picks the fetch context for each Fetch request (Kafka's ``FetchManager.newContext``)."""

    def __init__(self, cache: FetchSessionCache) -> None:
        self.cache = cache
        # Fetch requests by the context they got: "full", "incremental", "sessionless", "error" (counted only).
        self.contexts: dict[str, int] = {}

    @_counted
    def new_context(
        self,
        version: int,
        session_id: int,
        epoch: int,
        is_follower: bool,
        fetch_data: "OrderedDict[PartitionKey, PartitionRequest]",
        to_forget: list[PartitionKey],
    ) -> FetchContext:
        uses_topic_ids = version >= 13
        if version < 7:
            return SessionlessFetchContext(fetch_data=fetch_data)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                # Any session named in a full fetch request is closed.
                if self.cache.remove(session_id) is not None:
                    log.debug("closed fetch session %d", session_id)
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data=fetch_data)
            return FullFetchContext(fetch_data=fetch_data, cache=self.cache, privileged=is_follower,
                                    uses_topic_ids=uses_topic_ids)
        session = self.cache.get(session_id)
        if session is None:
            return SessionErrorContext(error=ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(error=ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionErrorContext(error=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetch_data, to_forget)
        if not session.partitions:
            log.debug("closing fetch session %d: no partitions left", session.id)
            self.cache.remove(session)
            return SessionlessFetchContext(fetch_data=fetch_data)
        self.cache.touch(session, self.cache.clock.time_ms())
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session=session, session_id=session.id)
