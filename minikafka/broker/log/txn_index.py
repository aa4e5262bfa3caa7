"""The aborted-transactions index of one partition (Kafka's ``TransactionIndex``).

Each entry is an aborted transaction: its producer id, its first offset, the
offset of its ABORT marker and the last stable offset when it was aborted.
A read_committed fetch gets the entries that overlap the fetched range
(:meth:`collect_aborted`) so the consumer can drop those batches.

Deliberate difference from Kafka: one index per partition, kept in memory and
rebuilt from the log when the partition is loaded (Kafka keeps a ``.txnindex``
file per segment).  Entries leave with the log: truncation drops those whose
marker is cut off, a moving log start drops those wholly before it.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


class TransactionIndex:
    """Aborted transactions in marker order (their ``last_offset`` only grows)."""

    def __init__(self) -> None:
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, txn: AbortedTxn) -> None:
        if self._last_offsets and txn.last_offset <= self._last_offsets[-1]:
            raise ValueError(f"aborted transaction marker {txn.last_offset} not after {self._last_offsets[-1]}")
        self.entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def collect_aborted(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Entries whose marker is at or after ``fetch_offset`` and that began before
        ``upper_bound_offset`` (Kafka's ``collectAbortedTxns``)."""
        start = bisect_left(self._last_offsets, fetch_offset)
        return [t for t in self.entries[start:] if t.first_offset < upper_bound_offset]

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset``."""
        cut = bisect_left(self._last_offsets, offset)
        del self.entries[cut:], self._last_offsets[cut:]

    def delete_before(self, log_start_offset: int) -> None:
        """Drop the entries whose marker is below the log start offset."""
        cut = bisect_left(self._last_offsets, log_start_offset)
        if cut:
            del self.entries[:cut], self._last_offsets[:cut]

    def remove_markers(self, last_offsets: set[int]) -> None:
        """Drop the entries whose ABORT marker the log cleaner removed."""
        if not last_offsets:
            return
        keep = [t for t in self.entries if t.last_offset not in last_offsets]
        self.entries = keep
        self._last_offsets = [t.last_offset for t in keep]

    def clear(self) -> None:
        self.entries.clear()
        self._last_offsets.clear()
