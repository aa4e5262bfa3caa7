"""Share sessions (KIP-932): the fetch sessions of share consumers, keyed by (group, member).

Models Kafka's ``ShareSessionCache``, ``ShareSession`` and the session half of
``SharePartitionManager.newContext`` / ``acknowledgeSessionUpdate``:

* ShareSessionEpoch 0 opens a session with the request's partitions (replacing the member's
  previous one; acknowledgements are not allowed: INVALID_REQUEST), -1 closes it (the request
  fetches nothing and the member's records are released), any other epoch must equal the
  session's (INVALID_SHARE_SESSION_EPOCH; no session: SHARE_SESSION_NOT_FOUND) and then adds the
  request's partitions, drops the forgotten ones and moves the epoch on.
* ``group.share.max.share.sessions`` caps the cache: a new session beyond it is
  SHARE_SESSION_LIMIT_REACHED.  Sessions are not evicted by age: as in Kafka 4.1+, a session ends
  with its final epoch, a new initial epoch, or its client's connection closing
  (:meth:`ShareSessionCache.connection_closed`).
* An incremental response carries only the session partitions with something to say (acquired
  records or an error), a full one every partition of the request.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import NamedTuple

from ...protocol.errors import ErrorCode
# Share sessions count epochs as fetch sessions do (Kafka's ShareRequestMetadata mirrors FetchMetadata).
from ..fetch_session import FINAL_EPOCH, INITIAL_EPOCH, next_epoch  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)



class ShareSessionKey(NamedTuple):
    group_id: str
    member_id: str


class TopicIdPartition(NamedTuple):
    """A partition as share requests name it (by topic id)."""

    topic_id: uuid.UUID
    partition: int


class ShareSessionError(Exception):
    """A share session error answered at the top level of ShareFetch/ShareAcknowledge."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class ShareSession:
    """One member's session: its partitions in the order they were added, and the expected epoch."""

    key: ShareSessionKey
    partitions: dict[TopicIdPartition, None]
    epoch: int
    connection_id: str = ""


@dataclass
class ShareFetchContext:
    """What a ShareFetch does after its session step (Kafka's ``ShareSessionContext``/``FinalContext``):
    ``partitions`` to fetch, ``incremental`` responses leave out partitions with nothing to say, a
    ``final`` request fetches nothing."""

    partitions: list[TopicIdPartition] = field(default_factory=list)
    incremental: bool = False
    final: bool = False


class ShareSessionCache:
    """Share sessions by (group, member), at most ``max_entries`` of them."""

    def __init__(self, max_entries: int = 2000) -> None:
        self.max_entries = max_entries
        self.sessions: dict[ShareSessionKey, ShareSession] = {}
        self._by_connection: dict[str, set[ShareSessionKey]] = {}

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, key: ShareSessionKey) -> ShareSession | None:
        return self.sessions.get(key)

    def partitions(self, key: ShareSessionKey) -> list[TopicIdPartition]:
        session = self.sessions.get(key)
        return list(session.partitions) if session is not None else []

    def remove(self, key: ShareSessionKey) -> ShareSession | None:
        session = self.sessions.pop(key, None)
        if session is not None:
            keys = self._by_connection.get(session.connection_id)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._by_connection[session.connection_id]
        return session

    def connection_closed(self, connection_id: str) -> list[ShareSessionKey]:
        """Remove the sessions opened on a connection that closed; returns their keys (their members'
        records are to be released)."""
        keys = self._by_connection.pop(connection_id, set())
        for key in keys:
            self.sessions.pop(key, None)
        return sorted(keys)

    def metrics(self) -> dict[str, float]:
        """Kafka's ``ShareSessionCache`` gauges."""
        prefix = "kafka.server:type=ShareSessionCache,name="
        return {prefix + "ShareSessionsCount": len(self.sessions),
                prefix + "SharePartitionsCount": sum(len(s.partitions) for s in self.sessions.values())}

    # -- ShareFetch ----------------------------------------------------------------------------
    def new_context(self, group_id: str, member_id: str, epoch: int, requested: list[TopicIdPartition],
                    forgotten: list[TopicIdPartition], has_acknowledgements: bool,
                    connection_id: str = "") -> ShareFetchContext:
        """Kafka's ``SharePartitionManager.newContext``; raises :class:`ShareSessionError`."""
        key = ShareSessionKey(group_id, member_id)
        if epoch == FINAL_EPOCH:
            if key not in self.sessions:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {key}")
            return ShareFetchContext(final=True)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                raise ShareSessionError(ErrorCode.INVALID_REQUEST,
                                        "acknowledgements in the initial ShareFetch of a share session")
            if self.remove(key) is not None:
                log.debug("share session %s replaced by a new one", key)
            if len(self.sessions) >= self.max_entries:
                raise ShareSessionError(ErrorCode.SHARE_SESSION_LIMIT_REACHED,
                                        f"the broker holds {len(self.sessions)} share sessions already "
                                        "(group.share.max.share.sessions)")
            parts = dict.fromkeys(requested)
            self.sessions[key] = ShareSession(key, parts, next_epoch(INITIAL_EPOCH), connection_id)
            self._by_connection.setdefault(connection_id, set()).add(key)
            return ShareFetchContext(list(parts))
        session = self.sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {key}")
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"share session epoch {epoch}, expected {session.epoch}")
        for tip in requested:
            session.partitions.setdefault(tip, None)
        for tip in forgotten:
            session.partitions.pop(tip, None)
        session.epoch = next_epoch(session.epoch)
        return ShareFetchContext(list(session.partitions), incremental=True)

    # -- ShareAcknowledge ----------------------------------------------------------------------
    def acknowledge_session_update(self, group_id: str, member_id: str, epoch: int) -> None:
        """Kafka's ``acknowledgeSessionUpdate``: epoch 0 is not allowed, -1 leaves the session for the
        caller to close, others must match and move the epoch on.  Raises :class:`ShareSessionError`."""
        if epoch == INITIAL_EPOCH:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    "ShareAcknowledge cannot open a share session (epoch 0)")
        key = ShareSessionKey(group_id, member_id)
        session = self.sessions.get(key)
        if session is None:
            raise ShareSessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for {key}")
        if epoch == FINAL_EPOCH:
            return
        if session.epoch != epoch:
            raise ShareSessionError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                                    f"share session epoch {epoch}, expected {session.epoch}")
        session.epoch = next_epoch(session.epoch)
