"""One transactional id's state (Kafka's ``TransactionMetadata`` and ``TransactionState``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ...common import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


class TransactionState(Enum):
    """Kafka's transaction states, by the names DescribeTransactions and ListTransactions use."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"

    @property
    def is_completing(self) -> bool:
        """Markers are being written: the next request for this id must wait (CONCURRENT_TRANSACTIONS)."""
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT,
                        TransactionState.PREPARE_EPOCH_FENCE)


S = TransactionState

# Kafka's TransactionState.validPreviousStates.
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransitionError(RuntimeError):
    """A state change Kafka's ``TransactionMetadata.prepareTransitionTo`` would refuse."""


@dataclass
class TransactionMetadata:
    """A transactional id: its producer id and epoch, state, timeout, and what the open transaction touched.

    ``groups`` are the groups whose offsets joined the transaction (AddOffsetsToTxn; the group coordinator
    is told directly when it ends) and ``offsets_partitions`` their ``__consumer_offsets`` partitions, which
    Kafka adds to the transaction and the transaction log records.  After a restart only the partitions are
    known (the log has no group ids): the coordinator finds the groups again from their pending offsets.
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = S.EMPTY
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    client_version: int = 1  # transaction version the client uses (2: KIP-890 epoch bump on every EndTxn)
    offsets_partitions: set[int] = field(default_factory=set)

    def transition(self, state: TransactionState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.state.value} -> {state.value}")
        self.state = state
        self.last_update_ms = now_ms

    def to_json(self) -> dict[str, Any]:
        """The record of the JSON-lines log of earlier versions (read back by :meth:`from_json` to migrate it)."""
        return {"id": self.transactional_id, "pid": self.producer_id, "epoch": self.producer_epoch,
                "lpid": self.last_producer_id, "lepoch": self.last_producer_epoch, "timeout": self.timeout_ms,
                "state": self.state.value, "parts": sorted([t, p] for t, p in self.partitions),
                "groups": sorted(self.groups), "start": self.start_ms, "update": self.last_update_ms,
                "tv": self.client_version}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TransactionMetadata:
        return cls(d["id"], int(d["pid"]), int(d["epoch"]), int(d["timeout"]), TransactionState(d["state"]),
                   int(d.get("lpid", -1)), int(d.get("lepoch", -1)),
                   {TopicPartition(t, int(p)) for t, p in d.get("parts", [])}, set(d.get("groups", [])),
                   int(d.get("start", -1)), int(d.get("update", -1)), int(d.get("tv", 1)))
