"""Client side of incremental fetch sessions (KIP-227): which partitions a fetch names.

Models ``org.apache.kafka.clients.FetchSessionHandler`` and
``org.apache.kafka.common.requests.FetchMetadata`` from the Java client.  A
:class:`FetchSessionHandler` tracks, for one broker, the partitions in the
session and the (session id, epoch) of the next request.  Before each fetch
the caller adds every partition it wants into a builder; :meth:`build` returns
a :class:`FetchRequestData` that names everything for a full fetch but only
the added, changed and removed partitions for an incremental one.  After the
response, :meth:`FetchSessionHandler.handle_response` verifies it and moves
the session on (or back to a full fetch).  Pure logic: no I/O, no Trio.

Differences from the Java client:

- ``use_sessions=False`` turns sessions off (every request is a sessionless
  full fetch, session id 0 and epoch -1, as Fetch v<7 or ``FetchMetadata.LEGACY``);
  Java has no such switch in the handler.
- :meth:`FetchRequestData.to_request` also plays ``FetchRequest.Builder``: it
  turns the data into a FetchRequest body dict for a given version.
- Responses are minikafka's parsed FetchResponse containers (or plain dicts);
  topic ids are :class:`uuid.UUID` (``ZERO_UUID`` for none).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping

from ..common import TopicIdPartition, TopicPartition
from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

ZERO_UUID = uuid.UUID(int=0)
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MAX_EPOCH = 0x7FFFFFFF

__all__ = [
    "FetchMetadata", "FetchRequestBuilder", "FetchRequestData", "FetchSessionHandler", "PartitionData",
    "TopicIdPartition", "TopicPartition", "ZERO_UUID", "INVALID_SESSION_ID", "INITIAL_EPOCH", "FINAL_EPOCH",
]


@dataclass(frozen=True, slots=True)
class FetchMetadata:
    """The session id and epoch a fetch request carries (Java's ``FetchMetadata``).

    ``INITIAL`` (0, 0) asks for a new session; ``LEGACY`` (0, -1) is a sessionless
    full fetch.  An epoch of 0 or -1 makes the request a full fetch.
    """

    session_id: int
    epoch: int

    INITIAL: ClassVar["FetchMetadata"]
    LEGACY: ClassVar["FetchMetadata"]
    INVALID_SESSION_ID: ClassVar[int] = INVALID_SESSION_ID
    INITIAL_EPOCH: ClassVar[int] = INITIAL_EPOCH
    FINAL_EPOCH: ClassVar[int] = FINAL_EPOCH

    @staticmethod
    def next_epoch(prev_epoch: int) -> int:
        """The epoch after ``prev_epoch``: FINAL stays FINAL; int32 max wraps to 1 (never 0)."""
        if prev_epoch < 0:
            return FINAL_EPOCH
        if prev_epoch == MAX_EPOCH:
            return 1
        return prev_epoch + 1

    @property
    def is_full(self) -> bool:
        """True if a request with this metadata is a full fetch (epoch INITIAL or FINAL)."""
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)

    def next_close_existing(self) -> "FetchMetadata":
        """Close the current session and do not create a new one (epoch FINAL)."""
        return FetchMetadata(self.session_id, FINAL_EPOCH)

    def next_close_existing_attempt_new(self) -> "FetchMetadata":
        """Close the current session and ask for a new one (epoch INITIAL)."""
        return FetchMetadata(self.session_id, INITIAL_EPOCH)

    @classmethod
    def new_incremental(cls, session_id: int) -> "FetchMetadata":
        """The first incremental fetch of a session the broker just created (epoch 1)."""
        return cls(session_id, cls.next_epoch(INITIAL_EPOCH))

    def next_incremental(self) -> "FetchMetadata":
        return FetchMetadata(self.session_id, self.next_epoch(self.epoch))

    def __str__(self) -> str:
        sid = "INVALID" if self.session_id == INVALID_SESSION_ID else str(self.session_id)
        ep = {INITIAL_EPOCH: "INITIAL", FINAL_EPOCH: "FINAL"}.get(self.epoch, str(self.epoch))
        return f"(sessionId={sid}, epoch={ep})"


FetchMetadata.INITIAL = FetchMetadata(INVALID_SESSION_ID, INITIAL_EPOCH)
FetchMetadata.LEGACY = FetchMetadata(INVALID_SESSION_ID, FINAL_EPOCH)


#: A fetch partition's ``high_watermark`` when the fetcher does not report one (consumers; Fetch before v18).
HIGH_WATERMARK_UNKNOWN = 0x7FFFFFFFFFFFFFFF


@dataclass(frozen=True, slots=True)
class PartitionData:
    """What to fetch from one partition (Java's ``FetchRequest.PartitionData`` plus its name).

    Two values are "the same fetch state" when all fields are equal; a changed
    value makes an incremental fetch resend the partition.
    """

    topic: str
    topic_id: uuid.UUID = ZERO_UUID
    partition: int = 0
    fetch_offset: int = 0
    log_start_offset: int = -1
    max_bytes: int = 1048576
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    # The high watermark a follower knows (Fetch v18, KIP-1166); HIGH_WATERMARK_UNKNOWN: not reported.
    high_watermark: int = 0x7FFFFFFFFFFFFFFF

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def to_request(self, version: int) -> dict:
        """The partition entry of a FetchRequest body (fields a version lacks are ignored)."""
        return {
            "partition": self.partition,
            "current_leader_epoch": self.current_leader_epoch,
            "fetch_offset": self.fetch_offset,
            "last_fetched_epoch": self.last_fetched_epoch,
            "log_start_offset": self.log_start_offset,
            "partition_max_bytes": self.max_bytes,
            "high_watermark": self.high_watermark,
        }


@dataclass(slots=True)
class FetchRequestData:
    """One built fetch: what to send, what to forget, and the session metadata.

    ``to_send`` is everything for a full fetch, or the added and altered partitions
    for an incremental one (added first, then altered, as Java orders them);
    ``to_forget`` the partitions removed from the session; ``to_replace`` the
    partitions whose topic id changed (forgotten too at v13+).
    """

    to_send: dict[TopicPartition, PartitionData]
    to_forget: list[TopicIdPartition]
    to_replace: list[TopicIdPartition]
    session_partitions: dict[TopicPartition, PartitionData]
    metadata: FetchMetadata
    can_use_topic_ids: bool = False

    @property
    def is_full(self) -> bool:
        return self.metadata.is_full

    def to_request(self, version: int, *, replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                   isolation_level: int = 0, rack_id: str = "", replica_epoch: int = -1) -> dict:
        """A FetchRequest body dict for ``version`` (what ``FetchRequest.Builder.build`` makes).

        Consecutive partitions of one topic share a topic entry, so request order
        is kept exactly (as Java does); at v13+ topics are named by topic id.
        Before v7 there are no session fields, so only full fetches can be sent.
        From v15 a follower names itself in ``replica_state`` with its broker epoch
        (KIP-903) instead of the top-level ``replica_id``.
        """
        if version >= 13 and not self.can_use_topic_ids:
            raise ValueError("Fetch v13+ needs a topic id for every partition")
        if version < 7 and not self.metadata.is_full:
            raise ValueError(f"Fetch v{version} has no sessions; cannot send incremental fetch {self.metadata}")
        by_id = version >= 13
        topics: list[dict] = []
        current = None
        for tp, data in self.to_send.items():
            key = data.topic_id if by_id else tp.topic
            if current is None or current[0] != key:
                entry: dict[str, Any] = {"topic": tp.topic, "topic_id": data.topic_id, "partitions": []}
                topics.append(entry)
                current = (key, entry)
            current[1]["partitions"].append(data.to_request(version))
        body: dict[str, Any] = {
            "replica_id": replica_id if version < 15 else -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation_level,
            "topics": topics,
            "rack_id": rack_id,
        }
        if version >= 15 and replica_id >= 0:
            body["replica_state"] = {"replica_id": replica_id, "replica_epoch": replica_epoch}
        if version >= 7:
            forgotten: dict[Any, dict] = {}
            # Before v13 a replaced partition is not forgotten: that would drop the
            # partition just re-added under the same name (Java does the same).
            to_forget = self.to_forget + self.to_replace if by_id else self.to_forget
            for tip in to_forget:
                key = tip.topic_id if by_id else tip.topic
                entry = forgotten.setdefault(key, {"topic": tip.topic, "topic_id": tip.topic_id, "partitions": []})
                entry["partitions"].append(tip.partition)
            body["session_id"] = self.metadata.session_id
            body["session_epoch"] = self.metadata.epoch
            body["forgotten_topics_data"] = list(forgotten.values())
        return body

    def __str__(self) -> str:
        kind = "Full" if self.metadata.is_full else "Incremental"
        return (f"{kind}FetchRequest({self.metadata}, toSend={len(self.to_send)}, toForget={len(self.to_forget)}, "
                f"toReplace={len(self.to_replace)}, session={len(self.session_partitions)})")


class FetchRequestBuilder:
    """Collects the partitions wanted in the next fetch (Java's ``FetchSessionHandler.Builder``)."""

    def __init__(self, handler: "FetchSessionHandler") -> None:
        self._handler = handler
        self._next: dict[TopicPartition, PartitionData] = {}
        self._topic_names: dict[uuid.UUID, str] = {}
        self._partitions_without_topic_ids = 0
        self._built = False

    def add(self, tp: TopicPartition | tuple[str, int], data: PartitionData) -> None:
        """Want data from ``tp`` in the next fetch (insertion order is request order)."""
        tp = TopicPartition(*tp)
        if (data.topic, data.partition) != tp:
            raise ValueError(f"partition data for {data.topic}-{data.partition} added as {tp}")
        self._next[tp] = data
        if data.topic_id == ZERO_UUID:
            self._partitions_without_topic_ids += 1
        else:
            self._topic_names.setdefault(data.topic_id, tp.topic)

    def build(self) -> FetchRequestData:
        if self._built:
            raise RuntimeError("a FetchRequestBuilder builds once")
        self._built = True
        return self._handler._build(self._next, self._topic_names, self._partitions_without_topic_ids == 0)


class FetchSessionHandler:
    """The fetch session state for one broker (Java's ``FetchSessionHandler``).

    With ``use_sessions=False`` every request is a sessionless full fetch
    (``FetchMetadata.LEGACY``) and responses never start a session.
    """

    def __init__(self, node: int = -1, *, use_sessions: bool = True) -> None:
        self.node = node
        self.use_sessions = use_sessions
        self.next_metadata: FetchMetadata = FetchMetadata.INITIAL if use_sessions else FetchMetadata.LEGACY
        self.session_partitions: dict[TopicPartition, PartitionData] = {}
        self.session_topic_names: dict[uuid.UUID, str] = {}

    @property
    def session_id(self) -> int:
        return self.next_metadata.session_id

    def session_topic_partitions(self) -> set[TopicPartition]:
        return set(self.session_partitions)

    def new_builder(self) -> FetchRequestBuilder:
        return FetchRequestBuilder(self)

    # -- building -----------------------------------------------------------
    def _build(self, nxt: dict[TopicPartition, PartitionData], topic_names: dict[uuid.UUID, str],
               can_use_topic_ids: bool) -> FetchRequestData:
        md = self.next_metadata
        if md.is_full:
            log.debug("built full fetch %s for node %d with %d partition(s)", md, self.node, len(nxt))
            self.session_partitions = nxt
            self.session_topic_names = topic_names if can_use_topic_ids else {}
            to_send = dict(nxt)
            return FetchRequestData(to_send, [], [], to_send, md, can_use_topic_ids)

        added: list[TopicIdPartition] = []
        removed: list[TopicIdPartition] = []
        altered: list[TopicIdPartition] = []
        replaced: list[TopicIdPartition] = []
        session = self.session_partitions
        gone: list[TopicPartition] = []
        for tp, prev in session.items():
            data = nxt.pop(tp, None)
            if data is not None:
                if prev.topic_id != data.topic_id and ZERO_UUID not in (prev.topic_id, data.topic_id):
                    nxt[tp] = data  # re-added at the end of the request
                    session[tp] = data
                    replaced.append(TopicIdPartition(prev.topic_id, *tp))
                elif prev != data:
                    nxt[tp] = data
                    session[tp] = data
                    altered.append(TopicIdPartition(data.topic_id, *tp))
            else:
                gone.append(tp)
                removed.append(TopicIdPartition(prev.topic_id, *tp))
                if prev.topic_id == ZERO_UUID:
                    can_use_topic_ids = False
        for tp in gone:
            del session[tp]
        for tp, data in nxt.items():
            if tp in session:
                # Everything from here on was re-added above: altered or replaced.
                break
            session[tp] = data
            added.append(TopicIdPartition(data.topic_id, *tp))
        self.session_topic_names = topic_names if can_use_topic_ids else {}
        log.debug("built incremental fetch %s for node %d: added %d, altered %d, removed %d, replaced %d "
                  "out of %d", md, self.node, len(added), len(altered), len(removed), len(replaced), len(session))
        return FetchRequestData(nxt, removed, replaced, dict(session), md, can_use_topic_ids)

    # -- responses ----------------------------------------------------------
    def response_data(self, response: Any, version: int) -> dict[TopicPartition, Any]:
        """The response's partitions by TopicPartition (at v13+ named via the session's topic ids;
        topics with an unknown id are left out, as Java's ``FetchResponse.responseData``)."""
        out: dict[TopicPartition, Any] = {}
        for t in _get(response, "responses", []):
            if version < 13:
                name = _get(t, "topic")
            else:
                name = self.session_topic_names.get(_get(t, "topic_id"))
            if name is None:
                continue
            for p in _get(t, "partitions", []):
                out[TopicPartition(name, _get(p, "partition_index"))] = p
        return out

    @staticmethod
    def _topic_ids(response: Any) -> set[uuid.UUID]:
        return {_get(t, "topic_id", ZERO_UUID) for t in _get(response, "responses", [])}

    def verify_full_fetch_response_partitions(self, tps: Iterable[TopicPartition], ids: set[uuid.UUID],
                                              version: int) -> str | None:
        """None if a full response names exactly the session's partitions; else the problem."""
        tps = list(tps)
        got = set(tps)
        extra = [tp for tp in tps if tp not in self.session_partitions]
        omitted = [tp for tp in self.session_partitions if tp not in got]
        extra_ids = [i for i in ids if i not in self.session_topic_names] if version >= 13 else []
        return _problem(omitted, extra, extra_ids, tps)

    def verify_incremental_fetch_response_partitions(self, tps: Iterable[TopicPartition], ids: set[uuid.UUID],
                                                     version: int) -> str | None:
        """None if an incremental response names only session partitions; else the problem."""
        tps = list(tps)
        extra = [tp for tp in tps if tp not in self.session_partitions]
        extra_ids = [i for i in ids if i not in self.session_topic_names] if version >= 13 else []
        return _problem([], extra, extra_ids, tps)

    def handle_response(self, response: Any, version: int) -> bool:
        """Move the session on after a response to a request of ``version``.

        Returns True if the response is well formed, False if it cannot be
        processed (a top-level error, or missing/unexpected partitions).
        """
        error = _get(response, "error_code", 0) or 0
        if error:
            log.info("node %d was unable to process the fetch request with %s: %s", self.node,
                     self.next_metadata, _error_name(error))
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._reset_initial()
            elif self.use_sessions:
                self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        tps = list(self.response_data(response, version))
        ids = self._topic_ids(response)
        session_id = _get(response, "session_id", INVALID_SESSION_ID) or INVALID_SESSION_ID
        if self.next_metadata.is_full:
            if not tps and (_get(response, "throttle_time_ms", 0) or 0) > 0:
                # KIP-219: an empty full response with a throttle time means "throttled".
                log.debug("node %d sent an empty full fetch response to throttle for %d ms", self.node,
                          _get(response, "throttle_time_ms"))
                self._reset_initial()
                return False
            problem = self.verify_full_fetch_response_partitions(tps, ids, version)
            if problem is not None:
                log.info("node %d sent an invalid full fetch response with %s", self.node, problem)
                self._reset_initial()
                return False
            if session_id == INVALID_SESSION_ID or not self.use_sessions:
                log.debug("node %d sent a full fetch response with %d partition(s)", self.node, len(tps))
                self._reset_initial()
                return True
            log.debug("node %d sent a full fetch response that created incremental fetch session %d "
                      "with %d partition(s)", self.node, session_id, len(tps))
            self.next_metadata = FetchMetadata.new_incremental(session_id)
            return True
        problem = self.verify_incremental_fetch_response_partitions(tps, ids, version)
        if problem is not None:
            log.info("node %d sent an invalid incremental fetch response with %s", self.node, problem)
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()
            return False
        if session_id == INVALID_SESSION_ID:
            log.debug("node %d sent an incremental fetch response closing session %d", self.node,
                      self.next_metadata.session_id)
            self.next_metadata = FetchMetadata.INITIAL
            return True
        log.debug("node %d sent an incremental fetch response for session %d with %d response partition(s), "
                  "%d implied", self.node, session_id, len(tps), len(self.session_partitions) - len(tps))
        self.next_metadata = self.next_metadata.next_incremental()
        return True

    def notify_close(self) -> None:
        """Close the session on the next request (epoch FINAL; no new session)."""
        if self.use_sessions:
            self.next_metadata = self.next_metadata.next_close_existing()

    def handle_error(self, exc: BaseException | None = None) -> None:
        """The request failed to send or got no answer: close the session, try a new one next time."""
        log.info("error sending fetch request %s to node %d: %r", self.next_metadata, self.node, exc)
        if self.use_sessions:
            self.next_metadata = self.next_metadata.next_close_existing_attempt_new()

    def _reset_initial(self) -> None:
        self.next_metadata = FetchMetadata.INITIAL if self.use_sessions else FetchMetadata.LEGACY


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def _problem(omitted: list, extra: list, extra_ids: list, response: list) -> str | None:
    if not (omitted or extra or extra_ids):
        return None
    parts = []
    if omitted:
        parts.append("omittedPartitions=(%s)" % ", ".join(f"{t}-{p}" for t, p in omitted))
    if extra:
        parts.append("extraPartitions=(%s)" % ", ".join(f"{t}-{p}" for t, p in extra))
    if extra_ids:
        parts.append("extraIds=(%s)" % ", ".join(map(str, extra_ids)))
    parts.append("response=(%s)" % ", ".join(f"{t}-{p}" for t, p in response))
    return ", ".join(parts)
