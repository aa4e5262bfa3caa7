"""The persisted state of share-partitions: the compacted ``__share_group_state`` partition log.

Models what Kafka keeps through its share coordinator in the ``__share_group_state`` topic (written by
``WriteShareGroupState``, read back by ``ReadShareGroupState`` when a share-partition leader initializes):
per (share group, topic, partition) the share-partition start offset, a state epoch and the in-flight record
states with their delivery counts.  With a data dir every change is appended to
``<data_dir>/__share_group_state-<partition>/`` (a partition log with ``cleanup.policy=compact``,
:class:`~minikafka.broker.coordinator_log.CoordinatorLog`) as Kafka's
``ShareSnapshotKey(group, topic id, partition)`` -> ``ShareSnapshotValue`` record
(:mod:`minikafka.protocol.coordinator_records`; each write a new snapshot, its snapshot epoch one higher);
``DeleteShareGroupOffsets`` writes a tombstone.  Replay keeps the last record per key; a record whose topic
id no longer exists (a deleted topic) is ignored.  Logs of earlier versions
(``<data_dir>/__share_group_state/state.log``, JSON lines) are migrated into the new log on load and removed.

:class:`SharePersister` is what a share-partition leader reads and writes its state through (Kafka's
``Persister``): a :class:`ShareStateStore` on its own (unit tests, a share-partition manager used alone), or the
share coordinator on the replicated ``__share_group_state`` partitions (:mod:`.state_coordinator`), which a
broker runs and which carries over what a store of an earlier version kept in ``<data_dir>/__share_group_state-0``.

Deliberate differences: only snapshots are written (Kafka writes ``ShareUpdate`` records between snapshots); no
leader epochs (written as -1); no fsync.
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from ...common import SYSTEM_CLOCK, Clock, TopicMetadata
from ...protocol.errors import ErrorCode
from ...protocol.coordinator_records import (ShareSnapshotKey, ShareSnapshotValue, ShareStateBatch,
                                             decode_share_record, encode_record)
from ...protocol.records import RecordBatchHeader
from ..coordinator_log import (SHARE_GROUP_STATE_SEGMENT_BYTES, SHARE_GROUP_STATE_TOPIC, CoordinatorLog,
                               CoordinatorLogStore, compacted_log_config)
from ..json_lines import replay_json_lines
from ..log import LogConfig

log = logging.getLogger(__name__)

# The JSON-lines log of earlier versions, migrated on load.
LEGACY_DIR_NAME = "__share_group_state"
LEGACY_FILE_NAME = "state.log"
# A state line never needs more runs than this to be loaded (bad input must not make us allocate).
_MAX_RUNS = 1_000_000
_SNAPSHOT_EPOCHS = 1 << 16  # the snapshot epoch is a uint16
NO_LEADER_EPOCH = -1


class ShareStateKey(NamedTuple):
    group_id: str
    topic: str
    partition: int


class PersistedShareState(NamedTuple):
    """Kafka's ``PartitionAllData`` of ReadShareGroupState: the SPSO, state epoch and state batches
    ``(first offset, last offset, RecordState id, delivery count)``."""

    start_offset: int
    state_epoch: int
    batches: tuple[tuple[int, int, int, int], ...] = ()


class TopicIds(Protocol):
    """Topic names and ids (the records name topics by id): the cluster metadata."""

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...


class ShareStateError(Exception):
    """A share-partition could not be initialized: its share coordinator answered ``code``."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class SharePersister(Protocol):
    """Where a share-partition leader reads and writes share-partition state (Kafka's ``Persister``:
    ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState)."""

    def state_error(self, key: ShareStateKey, broker_id: int, *, write: bool = False) -> ErrorCode:
        """NONE when broker ``broker_id`` may read (``write``: and write) the state of ``key`` now, else the error
        its share coordinator answers (COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS...)."""
        ...

    def get(self, key: ShareStateKey) -> PersistedShareState | None: ...

    def put(self, key: ShareStateKey, state: PersistedShareState) -> ErrorCode:
        """Write ``state`` (a new snapshot): NONE; FENCED_STATE_EPOCH when its state epoch is older than the
        stored one's; the coordinator's error when it cannot be written."""
        ...

    def delete(self, key: ShareStateKey) -> bool: ...

    def keys(self, group_id: str | None = None) -> list[ShareStateKey]: ...

    async def replicated(self, key: ShareStateKey) -> ErrorCode:
        """Wait until what was written for ``key`` is durable: NONE, or COORDINATOR_NOT_AVAILABLE."""
        ...


def snapshot_value(snapshot_epoch: int, state: PersistedShareState) -> ShareSnapshotValue:
    """The ``ShareSnapshotValue`` record of ``state``."""
    return ShareSnapshotValue(snapshot_epoch, state.state_epoch, NO_LEADER_EPOCH, state.start_offset,
                              tuple(ShareStateBatch(*b) for b in state.batches))


def persisted_state(value: ShareSnapshotValue) -> PersistedShareState:
    """The state a ``ShareSnapshotValue`` record holds."""
    return PersistedShareState(value.start_offset, value.state_epoch, tuple(
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in value.state_batches))


def read_share_record(topics: TopicIds, raw_key: bytes, raw_value: bytes | None, unknown: set[uuid.UUID]
                      ) -> tuple[ShareStateKey, uuid.UUID, ShareSnapshotValue | None] | None:
    """A ``__share_group_state`` record as (its key by topic name, the topic id, its value or None for a
    tombstone); None, the topic id noted in ``unknown``, when its topic no longer exists."""
    k, v = decode_share_record(raw_key, raw_value)
    topic = topics.get_topic_by_id(k.topic_id)
    if topic is None:
        unknown.add(k.topic_id)
        return None
    return ShareStateKey(k.group_id, topic.name, k.partition), k.topic_id, v


def next_snapshot_epoch(previous: int | None) -> int:
    """The snapshot epoch after ``previous`` (a uint16 that wraps; 0 for the first)."""
    return 0 if previous is None else (previous + 1) % _SNAPSHOT_EPOCHS


class ShareStateStore(CoordinatorLogStore):
    """Share-partition state by (group, topic, partition), backed by a ``__share_group_state`` log with a
    data dir (``topics`` then resolves topic names to the ids the records carry); a :class:`SharePersister`
    always available, whose writes are durable at once."""

    def __init__(self, data_dir: Path | None = None, topics: TopicIds | None = None, *, partition: int = 0,
                 config: LogConfig | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        self._states: dict[ShareStateKey, PersistedShareState] = {}
        self._snapshot_epochs: dict[ShareStateKey, int] = {}
        self._topic_ids: dict[ShareStateKey, uuid.UUID] = {}  # the id each key's records were written under
        self.topics = topics
        self.partition = partition
        self._log: CoordinatorLog | None = None
        self.dir: Path | None = None
        if data_dir is not None:
            if topics is None:
                raise ValueError("a share state store with a data dir needs the topic ids")
            self.dir = Path(data_dir) / f"{SHARE_GROUP_STATE_TOPIC}-{partition}"
            self._log = CoordinatorLog(Path(data_dir), SHARE_GROUP_STATE_TOPIC, partition,
                                       config or compacted_log_config(SHARE_GROUP_STATE_SEGMENT_BYTES), clock=clock)
            legacy = Path(data_dir) / LEGACY_DIR_NAME / LEGACY_FILE_NAME
            if legacy.exists():
                self._migrate(legacy)
            self._load()

    # -- reads ---------------------------------------------------------------------------------
    def get(self, key: ShareStateKey) -> PersistedShareState | None:
        return self._states.get(key)

    def keys(self, group_id: str | None = None) -> list[ShareStateKey]:
        """The share-partitions with state (of one group)."""
        return [k for k in self._states if group_id is None or k.group_id == group_id]

    def state_error(self, key: ShareStateKey, broker_id: int, *, write: bool = False) -> ErrorCode:
        return ErrorCode.NONE

    async def replicated(self, key: ShareStateKey) -> ErrorCode:
        return ErrorCode.NONE

    # -- writes --------------------------------------------------------------------------------
    def put(self, key: ShareStateKey, state: PersistedShareState) -> ErrorCode:
        if self._states.get(key) != state:
            self._states[key] = state
            self._write_snapshot(key, state)
        return ErrorCode.NONE

    def delete(self, key: ShareStateKey) -> bool:
        if self._states.pop(key, None) is None:
            return False
        self._snapshot_epochs.pop(key, None)
        topic_id = self._topic_ids.pop(key, None)
        if self._log is not None and topic_id is not None:
            self._log.append([encode_record(ShareSnapshotKey(key.group_id, topic_id, key.partition), None)])
        return True

    # -- the log -------------------------------------------------------------------------------
    def _write_snapshot(self, key: ShareStateKey, state: PersistedShareState) -> None:
        if self._log is None:
            return
        topic_id = self._topic_id(key)
        if topic_id is None:
            log.warning("share state of %s not persisted: topic %s has no id", key, key.topic)
            return
        epoch = self._snapshot_epochs[key] = next_snapshot_epoch(self._snapshot_epochs.get(key))
        self._log.append([encode_record(ShareSnapshotKey(key.group_id, topic_id, key.partition),
                                        snapshot_value(epoch, state))])

    def _topic_id(self, key: ShareStateKey) -> uuid.UUID | None:
        known = self._topic_ids.get(key)
        topic = self.topics.get_topic(key.topic) if self.topics is not None else None
        if topic is None:
            return known
        self._topic_ids[key] = topic.topic_id
        return topic.topic_id

    def _load(self) -> None:
        assert self._log is not None and self.topics is not None
        topics = self.topics
        unknown: set[uuid.UUID] = set()

        def apply(h: RecordBatchHeader, raw_key: bytes, raw_value: bytes | None) -> None:
            read = read_share_record(topics, raw_key, raw_value, unknown)
            if read is None:
                return
            key, topic_id, v = read
            if v is None:
                self._states.pop(key, None)
                self._snapshot_epochs.pop(key, None)
                self._topic_ids.pop(key, None)
                return
            self._states[key] = persisted_state(v)
            self._snapshot_epochs[key] = v.snapshot_epoch
            self._topic_ids[key] = topic_id

        count = self._log.replay(apply)
        if unknown:
            log.info("%s: ignored the state of %d deleted topic(s)", self.dir, len(unknown))
        if self._states:
            log.info("loaded the state of %d share-partitions from %s (%d records)", len(self._states), self.dir,
                     count)

    def _migrate(self, path: Path) -> None:
        """Replay the JSON-lines log of earlier versions (a full snapshot per line, the last one wins), write it
        into the log, remove it."""
        assert self._log is not None
        legacy: dict[ShareStateKey, PersistedShareState] = {}
        count = replay_json_lines(path, lambda rec: _apply_legacy(legacy, rec))
        for key, state in legacy.items():
            self._write_snapshot(key, state)
        self._snapshot_epochs.clear()
        self._topic_ids.clear()
        self._log.sync()
        path.unlink()
        path.with_suffix(".log.compacting").unlink(missing_ok=True)
        try:
            path.parent.rmdir()
        except OSError:
            pass  # something else lives there: leave it
        log.info("migrated the state of %d share-partitions (%d records) from %s into %s", len(legacy), count,
                 path, self.dir)


def _apply_legacy(states: dict[ShareStateKey, PersistedShareState], rec: dict[str, Any]) -> None:
    """One line of the old JSON-lines log: ``{"g","t","p","s","e","b":[[first,last,state,count],...]}`` or
    ``{"g","t","p","d":1}`` (deleted)."""
    group, topic, partition = rec["g"], rec["t"], int(rec["p"])
    if not isinstance(group, str) or not isinstance(topic, str):
        raise TypeError("group and topic must be strings")
    key = ShareStateKey(group, topic, partition)
    if rec.get("d"):
        states.pop(key, None)
        return
    runs = rec["b"]
    if not isinstance(runs, list) or len(runs) > _MAX_RUNS:
        raise TypeError("state batches must be a list")
    batches = tuple((int(b[0]), int(b[1]), int(b[2]), int(b[3])) for b in runs)
    states[key] = PersistedShareState(int(rec["s"]), int(rec.get("e", 0)), batches)
