"""Replaying an append-only JSON-lines state log: the offsets, transaction and share-group state logs of
earlier versions, which the coordinators migrate on load into their compacted logs.

Each line is one JSON record. A torn last line (a crash mid-append) is dropped and the file truncated to the
last whole record; an unreadable record in the middle is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def replay_json_lines(path: Path, apply: Callable[[Any], None]) -> int:
    """Call ``apply`` on each record of ``path`` (if it exists) in order; returns how many were applied.
    ``apply`` raising ValueError, KeyError or TypeError marks the record unreadable."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    count = good_end = pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            log.warning("%s: ignoring torn last record (%d bytes)", path, len(data) - pos)
            break
        line = data[pos:nl]
        pos = nl + 1
        if line.strip():
            try:
                apply(json.loads(line))
                count += 1
            except (ValueError, KeyError, TypeError) as exc:
                if pos >= len(data):
                    log.warning("%s: ignoring torn last record (%s)", path, exc)
                    break
                log.warning("%s: skipping unreadable record at byte %d (%s)", path, pos - len(line) - 1, exc)
        good_end = pos
    if good_end < len(data):
        with open(path, "r+b") as f:
            f.truncate(good_end)
    return count
