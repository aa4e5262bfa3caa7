"""The persisted state of share-partitions: ``<data_dir>/__share_group_state/state.log``.

Models what Kafka keeps through its share coordinator in the ``__share_group_state`` topic
(``ShareSnapshot``/``ShareUpdate`` records written by ``WriteShareGroupState``, read back by
``ReadShareGroupState`` when a share-partition leader initializes): per (share group, topic,
partition) the share-partition start offset, a state epoch and the in-flight record states with
their delivery counts.

Deliberate difference: no share coordinator and no topic; a :class:`ShareStateStore` is one object
shared by the brokers of a cluster (``SharedState``) so a new partition leader reads what the old
one wrote, kept in memory and, with a data dir, in an append-only file of JSON lines flushed to the
OS after every write (no fsync)::

    {"g":group,"t":topic,"p":partition,"s":start_offset,"e":state_epoch,"b":[[first,last,state,count],...]}
    {"g":group,"t":topic,"p":partition,"d":1}      (the state was deleted: DeleteShareGroupOffsets)

Every line is a full snapshot of one share-partition; the last one wins.  A torn last line is
ignored; the file is compacted on load when it holds many more lines than live share-partitions.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO, Any, NamedTuple

from ..json_lines import replay_json_lines

log = logging.getLogger(__name__)

LOG_DIR_NAME = "__share_group_state"
LOG_FILE_NAME = "state.log"
_COMPACT_MIN_RECORDS = 1000
# A state line never needs more runs than this to be loaded (bad input must not make us allocate).
_MAX_RUNS = 1_000_000


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


class ShareStateStore:
    """Share-partition state by (group, topic, partition), optionally backed by a file in ``data_dir``."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._states: dict[ShareStateKey, PersistedShareState] = {}
        self._file: IO[str] | None = None
        self.path: Path | None = None
        self.records_written = 0
        if data_dir is not None:
            self.path = Path(data_dir) / LOG_DIR_NAME / LOG_FILE_NAME
            self._load()

    # -- reads ---------------------------------------------------------------------------------
    def get(self, key: ShareStateKey) -> PersistedShareState | None:
        return self._states.get(key)

    def keys(self, group_id: str | None = None) -> list[ShareStateKey]:
        """The share-partitions with state (of one group)."""
        return [k for k in self._states if group_id is None or k.group_id == group_id]

    # -- writes --------------------------------------------------------------------------------
    def put(self, key: ShareStateKey, state: PersistedShareState) -> None:
        if self._states.get(key) == state:
            return
        self._states[key] = state
        self._append({"g": key.group_id, "t": key.topic, "p": key.partition, "s": state.start_offset,
                      "e": state.state_epoch, "b": [list(b) for b in state.batches]})

    def delete(self, key: ShareStateKey) -> bool:
        if self._states.pop(key, None) is None:
            return False
        self._append({"g": key.group_id, "t": key.topic, "p": key.partition, "d": 1})
        return True

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # -- the file ------------------------------------------------------------------------------
    def _append(self, rec: dict[str, Any]) -> None:
        if self._file is None:
            return
        self._file.write(_dumps(rec))
        self._file.flush()
        self.records_written += 1

    def _load(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        count = replay_json_lines(self.path, self._replay)
        if count > _COMPACT_MIN_RECORDS and count > 2 * len(self._states):
            self._rewrite()
            count = len(self._states)
        self._file = open(self.path, "a", encoding="utf-8")
        self.records_written = count
        if self._states:
            log.info("loaded the state of %d share-partitions from %s", len(self._states), self.path)

    def _replay(self, rec: dict[str, Any]) -> None:
        group, topic, partition = rec["g"], rec["t"], int(rec["p"])
        if not isinstance(group, str) or not isinstance(topic, str):
            raise TypeError("group and topic must be strings")
        key = ShareStateKey(group, topic, partition)
        if rec.get("d"):
            self._states.pop(key, None)
            return
        runs = rec["b"]
        if not isinstance(runs, list) or len(runs) > _MAX_RUNS:
            raise TypeError("state batches must be a list")
        batches = tuple((int(b[0]), int(b[1]), int(b[2]), int(b[3])) for b in runs)
        self._states[key] = PersistedShareState(int(rec["s"]), int(rec.get("e", 0)), batches)

    def _rewrite(self) -> None:
        assert self.path is not None
        tmp = self.path.with_suffix(".log.compacting")
        with open(tmp, "w", encoding="utf-8") as f:
            for key, state in self._states.items():
                f.write(_dumps({"g": key.group_id, "t": key.topic, "p": key.partition, "s": state.start_offset,
                                "e": state.state_epoch, "b": [list(b) for b in state.batches]}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        log.info("compacted %s", self.path)


def _dumps(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n"
