"""Persistence of committed offsets: ``<data_dir>/__consumer_offsets/offsets.log``.

Models the storage half of Kafka's ``GroupMetadataManager`` (the compacted
``__consumer_offsets`` topic and its load on start-up), as an append-only file
of JSON lines, one record per line, written with ``json.dumps`` (compact, keys
below) and flushed to the OS after every commit:

``{"t":"o","g":group,"tp":topic,"p":partition,"o":offset,"e":leader_epoch,"m":metadata,"ct":commit_ms,"xt":expire_ms|null}``
    an offset commit (Kafka's OffsetCommit record);
``{"t":"x","g":group,"tp":topic,"p":partition}``
    an offset tombstone (expired by retention);
``{"t":"g","g":group,"pt":protocol_type|null,"gen":generation[,"gt":"consumer"]}``
    group metadata written when a generation starts (Kafka's GroupMetadata
    record, without members); for a KIP-848 consumer group (``"gt":"consumer"``,
    Kafka's ConsumerGroupMetadata record) ``gen`` is the group epoch.  Logs
    written before group types existed have no ``gt``: their groups are classic;
``{"t":"d","g":group}``
    the group was deleted or went Dead: drop everything about it.
``{"t":"to","g":group,"pid":producer_id,"tp":topic,"p":partition,"o":...,"e":...,"m":...,"ct":...,"xt":...}``
    an offset committed inside a transaction (TxnOffsetCommit), pending until its end;
``{"t":"te","g":group,"pid":producer_id,"c":true|false}``
    that transaction ended: its pending offsets become committed (``c`` true) or are dropped
    (Kafka writes a COMMIT/ABORT marker into ``__consumer_offsets``).

Replay applies the records in order.  A torn last line (a crash mid-write) is
ignored and cut off so later appends start on a clean line; an unparsable line
elsewhere is skipped with a warning.  When the file holds many more records
than live state, it is compacted on load (written to a temporary file, then
renamed over the log).

Deliberate differences from Kafka: no replication, no fsync per commit (a
process crash loses nothing, a power cut may lose the tail), members are not
persisted (after a restart every group comes back Empty with its generation,
protocol type and offsets; members rejoin).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from ...common import OffsetAndMetadata, TopicPartition
from ..json_lines import replay_json_lines
from .metadata import GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER

log = logging.getLogger(__name__)

GROUP_TYPES = (GROUP_TYPE_CLASSIC, GROUP_TYPE_CONSUMER)

LOG_DIR_NAME = "__consumer_offsets"
LOG_FILE_NAME = "offsets.log"
_COMPACT_MIN_RECORDS = 1000


@dataclass
class LoadedGroup:
    """What replay recovered for one group."""

    protocol_type: str | None = None
    generation_id: int = 0  # a consumer group's group epoch
    group_type: str = GROUP_TYPE_CLASSIC
    offsets: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)


def offset_record(group_id: str, topic: str, partition: int, om: OffsetAndMetadata) -> dict[str, Any]:
    return {
        "t": "o", "g": group_id, "tp": topic, "p": partition, "o": om.offset, "e": om.leader_epoch,
        "m": om.metadata, "ct": om.commit_timestamp, "xt": om.expire_timestamp,
    }


def txn_offset_record(group_id: str, producer_id: int, topic: str, partition: int,
                      om: OffsetAndMetadata) -> dict[str, Any]:
    return {**offset_record(group_id, topic, partition, om), "t": "to", "pid": producer_id}


def txn_end_record(group_id: str, producer_id: int, commit: bool) -> dict[str, Any]:
    return {"t": "te", "g": group_id, "pid": producer_id, "c": commit}


def tombstone_record(group_id: str, topic: str, partition: int) -> dict[str, Any]:
    return {"t": "x", "g": group_id, "tp": topic, "p": partition}


def group_record(group_id: str, protocol_type: str | None, generation_id: int,
                 group_type: str = GROUP_TYPE_CLASSIC) -> dict[str, Any]:
    """The group's metadata; ``generation_id`` is a consumer group's group epoch."""
    rec: dict[str, Any] = {"t": "g", "g": group_id, "pt": protocol_type, "gen": generation_id}
    if group_type != GROUP_TYPE_CLASSIC:
        rec["gt"] = group_type
    return rec


def delete_record(group_id: str) -> dict[str, Any]:
    return {"t": "d", "g": group_id}


class OffsetLog:
    """The append-only offsets log of one broker."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = Path(data_dir) / LOG_DIR_NAME
        self.path = self.dir / LOG_FILE_NAME
        self._file: IO[str] | None = None
        self.records_written = 0

    def load(self) -> dict[str, LoadedGroup]:
        """Replay the log (creating it if missing) and open it for appending."""
        self.dir.mkdir(parents=True, exist_ok=True)
        groups: dict[str, LoadedGroup] = {}
        count = replay_json_lines(self.path, lambda rec: _apply(groups, rec))
        live = sum(len(g.offsets) + 1 + sum(map(len, g.pending_txn_offsets.values())) for g in groups.values())
        if count > _COMPACT_MIN_RECORDS and count > 2 * live:
            self._rewrite(groups)
            count = live
        self._file = open(self.path, "a", encoding="utf-8")
        self.records_written = count
        log.info("loaded %d groups from %s (%d records)", len(groups), self.path, count)
        return groups

    def _rewrite(self, groups: dict[str, LoadedGroup]) -> None:
        tmp = self.path.with_suffix(".log.compacting")
        with open(tmp, "w", encoding="utf-8") as f:
            for gid, g in groups.items():
                f.write(_dumps(group_record(gid, g.protocol_type, g.generation_id, g.group_type)))
                for (topic, partition), om in g.offsets.items():
                    f.write(_dumps(offset_record(gid, topic, partition, om)))
                for pid, pending in g.pending_txn_offsets.items():
                    for (topic, partition), om in pending.items():
                        f.write(_dumps(txn_offset_record(gid, pid, topic, partition, om)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        log.info("compacted %s", self.path)

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append records and flush them to the OS."""
        if self._file is None or not records:
            return
        self._file.write("".join(_dumps(r) for r in records))
        self._file.flush()
        self.records_written += len(records)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _dumps(rec: dict[str, Any]) -> str:
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n"


def _apply(groups: dict[str, LoadedGroup], rec: dict[str, Any]) -> None:
    kind = rec["t"]
    gid = rec["g"]
    if not isinstance(gid, str):
        raise TypeError("group id is not a string")
    if kind in ("o", "to"):
        om = OffsetAndMetadata(
            offset=int(rec["o"]), leader_epoch=int(rec.get("e", -1)), metadata=rec.get("m") or "",
            commit_timestamp=int(rec.get("ct", 0)),
            expire_timestamp=None if rec.get("xt") is None else int(rec["xt"]),
        )
        tp = TopicPartition(str(rec["tp"]), int(rec["p"]))
        group = groups.setdefault(gid, LoadedGroup())
        if kind == "o":
            group.offsets[tp] = om
        else:
            group.pending_txn_offsets.setdefault(int(rec["pid"]), {})[tp] = om
    elif kind == "te":
        g = groups.get(gid)
        pending = g.pending_txn_offsets.pop(int(rec["pid"]), None) if g is not None else None
        if g is not None and pending and rec.get("c"):
            g.offsets.update(pending)
    elif kind == "x":
        g = groups.get(gid)
        if g is not None:
            g.offsets.pop(TopicPartition(str(rec["tp"]), int(rec["p"])), None)
    elif kind == "g":
        group_type = rec.get("gt", GROUP_TYPE_CLASSIC)
        if group_type not in GROUP_TYPES:
            raise ValueError(f"unknown group type {group_type!r}")
        generation = int(rec.get("gen", 0))
        g = groups.setdefault(gid, LoadedGroup())
        g.protocol_type = rec.get("pt")
        g.generation_id = generation
        g.group_type = group_type
    elif kind == "d":
        groups.pop(gid, None)
    else:
        raise ValueError(f"unknown record type {kind!r}")
