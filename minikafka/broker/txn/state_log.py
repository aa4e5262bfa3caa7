"""Persistence of transaction state: ``<data_dir>/__transaction_state/transactions.log``.

Models the storage half of Kafka's ``TransactionStateManager`` (the compacted
``__transaction_state`` topic, loaded when a broker becomes coordinator) as an
append-only file of JSON lines: each line is a transactional id's whole
:class:`~.metadata.TransactionMetadata` after a change (``{"id":..., "pid":...,
"state":...}``) or its removal (``{"id":..., "dead":true}``).  Replay keeps the
last line per id; a torn last line is cut off; the file is compacted on load
when it holds far more lines than live ids.  Deliberate difference: no
replication (the cluster's brokers share one coordinator in one process) and
no fsync per change.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import IO

from .metadata import TransactionMetadata

log = logging.getLogger(__name__)

LOG_DIR_NAME = "__transaction_state"
LOG_FILE_NAME = "transactions.log"
_COMPACT_MIN_LINES = 1000


class TransactionStateLog:
    """Appends and replays transaction metadata; a no-op without a data dir."""

    def __init__(self, data_dir: Path | None) -> None:
        self.path = data_dir / LOG_DIR_NAME / LOG_FILE_NAME if data_dir is not None else None
        self._file: IO[str] | None = None
        self._lines = 0

    def load(self) -> dict[str, TransactionMetadata]:
        """Replay the file (creating it if needed) and open it for appends."""
        out: dict[str, TransactionMetadata] = {}
        if self.path is None:
            return out
        self.path.parent.mkdir(parents=True, exist_ok=True)
        good_end = 0
        if self.path.exists():
            with open(self.path, "rb") as fh:
                data = fh.read()
            pos = 0
            for raw in data.splitlines(keepends=True):
                pos += len(raw)
                if not raw.endswith(b"\n"):
                    log.warning("%s: torn last line cut off", self.path)
                    break
                good_end = pos
                try:
                    rec = json.loads(raw)
                    if rec.get("dead"):
                        out.pop(rec["id"], None)
                    else:
                        out[rec["id"]] = TransactionMetadata.from_json(rec)
                    self._lines += 1
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("%s: skipping unreadable line: %s", self.path, exc)
            if good_end < len(data):
                os.truncate(self.path, good_end)
        if self._lines > max(_COMPACT_MIN_LINES, 4 * len(out)):
            self._compact(out)
        self._file = open(self.path, "a", encoding="utf-8")
        return out

    def _compact(self, live: dict[str, TransactionMetadata]) -> None:
        assert self.path is not None
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for meta in live.values():
                fh.write(json.dumps(meta.to_json(), separators=(",", ":")) + "\n")
        os.replace(tmp, self.path)
        log.info("%s: compacted %d lines to %d", self.path, self._lines, len(live))
        self._lines = len(live)

    def write(self, meta: TransactionMetadata) -> None:
        self._append(meta.to_json())

    def remove(self, transactional_id: str) -> None:
        self._append({"id": transactional_id, "dead": True})

    def _append(self, rec: dict) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(rec, separators=(",", ":")) + "\n")
        self._file.flush()
        self._lines += 1

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
