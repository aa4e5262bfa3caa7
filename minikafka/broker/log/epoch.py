"""Leader epoch -> start offset cache (Kafka's ``LeaderEpochFileCache``).

Checkpointed in Kafka's ``leader-epoch-checkpoint`` text format (version line,
entry count, then ``epoch startOffset`` lines), rewritten atomically on change.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from pathlib import Path

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
CHECKPOINT_FILE = "leader-epoch-checkpoint"


class LeaderEpochFileCache:
    """Ordered ``(epoch, start_offset)`` entries, both strictly increasing."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.epochs: list[int] = []
        self.start_offsets: list[int] = []
        if path is not None and path.exists():
            self._read()

    # -- persistence ----------------------------------------------------------------------
    def _read(self) -> None:
        assert self.path is not None
        try:
            lines = self.path.read_text().split("\n")
            if int(lines[0]) != 0:
                raise ValueError(f"unknown version {lines[0]}")
            n = int(lines[1])
            for line in lines[2 : 2 + n]:
                e, o = line.split()
                self.epochs.append(int(e))
                self.start_offsets.append(int(o))
        except (ValueError, IndexError) as exc:
            log.warning("%s: unreadable (%s); rebuilding from the log", self.path, exc)
            self.epochs.clear()
            self.start_offsets.clear()

    def _write(self) -> None:
        if self.path is None:
            return
        body = "".join(f"{e} {o}\n" for e, o in zip(self.epochs, self.start_offsets))
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(f"0\n{len(self.epochs)}\n{body}")
        os.replace(tmp, self.path)

    # -- updates --------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that *epoch* starts at *start_offset* (Kafka ``assign``): a no-op for the
        latest epoch at the same or a later offset; otherwise every entry with an epoch
        >= *epoch* or a start offset >= *start_offset* is dropped before adding it."""
        if epoch < 0 or start_offset < 0:
            return
        if self.epochs and epoch == self.epochs[-1] and start_offset >= self.start_offsets[-1]:
            return
        while self.epochs and (self.epochs[-1] >= epoch or self.start_offsets[-1] >= start_offset):
            self.epochs.pop()
            self.start_offsets.pop()
        self.epochs.append(epoch)
        self.start_offsets.append(start_offset)
        self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after *end_offset* (log truncation)."""
        i = bisect_left(self.start_offsets, end_offset)
        if i < len(self.epochs):
            del self.epochs[i:]
            del self.start_offsets[i:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before *start_offset*; the one spanning it moves up to it."""
        i = bisect_right(self.start_offsets, start_offset) - 1
        if i < 0 or (i == 0 and self.start_offsets[0] == start_offset):
            return
        del self.epochs[:i]
        del self.start_offsets[:i]
        self.start_offsets[0] = start_offset
        self._write()

    def clear(self) -> None:
        self.epochs.clear()
        self.start_offsets.clear()
        self._write()

    # -- queries --------------------------------------------------------------------------
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        i = bisect_right(self.start_offsets, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka ``endOffsetFor``: ``(epoch, end offset)`` for OffsetForLeaderEpoch."""
        if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.epochs[-1]:
            return requested_epoch, log_end_offset
        hi = bisect_right(self.epochs, requested_epoch)  # first entry with epoch > requested
        if hi >= len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if hi == 0:
            return requested_epoch, self.start_offsets[0]
        return self.epochs[hi - 1], self.start_offsets[hi]
