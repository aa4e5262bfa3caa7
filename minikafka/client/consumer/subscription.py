"""What the consumer consumes and from where (Java's ``SubscriptionState``).

Per assigned partition a :class:`TopicPartitionState` holds:

- ``position``: the offset of the next record to give the application (Java's
  ``FetchPosition``); ``None`` until known (committed offset or reset);
- ``fetch_offset``: the offset the fetcher asks for next.  It runs ahead of
  ``position`` by what sits in the fetched-chunk queue (the old Scala
  consumer's ``fetchedOffset`` vs ``consumedOffset``); Java has only one
  position because it never fetches a partition with buffered data;
- ``epoch``: bumped by every seek, reset, pause or reassignment; chunks and
  in-flight fetches carry the epoch they were made for and are dropped if it
  moved on (Java checks the position instead);
- ``high_watermark``, ``log_start_offset``, ``last_stable_offset``: from the
  latest fetch response, for lag;
- ``paused`` and ``reset_strategy`` (a pending offset reset);
- ``pending_revocation``: the group is taking the partition away (KIP-848
  reconciliation): nothing more is fetched or returned for it while its
  offsets are committed (Java's ``markPendingRevocation``).

The rebalance listener given to ``subscribe`` is kept here, as in Java.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

from ...common import OffsetAndMetadata, TopicPartition

log = logging.getLogger(__name__)

__all__ = ["SubscriptionType", "TopicPartitionState", "SubscriptionState", "OffsetAndMetadata"]


class SubscriptionType(Enum):
    NONE = "none"
    AUTO_TOPICS = "auto_topics"
    AUTO_PATTERN = "auto_pattern"
    USER_ASSIGNED = "user_assigned"


@dataclass
class TopicPartitionState:
    position: int | None = None
    fetch_offset: int | None = None
    epoch: int = 0
    paused: bool = False
    reset_strategy: str | None = None
    high_watermark: int | None = None
    log_start_offset: int | None = None
    last_stable_offset: int | None = None
    leader_epoch: int = -1
    pending_revocation: bool = False

    @property
    def has_valid_position(self) -> bool:
        return self.position is not None and self.reset_strategy is None

    @property
    def is_fetchable(self) -> bool:
        return (not self.paused and not self.pending_revocation and self.has_valid_position
                and self.fetch_offset is not None)


class SubscriptionState:
    """Subscribed topics, assigned partitions and their positions."""

    def __init__(self, default_reset_strategy: str = "latest") -> None:
        self.default_reset_strategy = default_reset_strategy
        self.type = SubscriptionType.NONE
        self.subscription: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.assignment: dict[TopicPartition, TopicPartitionState] = {}
        self.version = 0  # bumped on every change the fetcher must notice
        self.rebalance_listener: Any = None

    # -- subscribing -------------------------------------------------------------------------------
    def _set_type(self, t: SubscriptionType) -> None:
        if self.type == SubscriptionType.NONE:
            self.type = t
        elif self.type != t:
            raise ValueError("subscribe() and assign() cannot be mixed; call unsubscribe() first")

    def subscribe(self, topics: Iterable[str]) -> bool:
        """Subscribe to topics; True if the subscription changed."""
        self._set_type(SubscriptionType.AUTO_TOPICS)
        topics = set(topics)
        changed = topics != self.subscription
        self.subscription = topics
        return changed

    def subscribe_pattern(self, pattern: str | re.Pattern[str]) -> bool:
        """Subscribe to the topics matching ``pattern``; True if the pattern changed."""
        self._set_type(SubscriptionType.AUTO_PATTERN)
        compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        changed = self.pattern is None or compiled.pattern != self.pattern.pattern
        self.pattern = compiled
        return changed

    def subscribe_from_pattern(self, topics: Iterable[str]) -> bool:
        """The topics the pattern matches now (client-side matching); True if they changed."""
        topics = set(topics)
        changed = topics != self.subscription
        self.subscription = topics
        return changed

    @property
    def pattern_string(self) -> str | None:
        return self.pattern.pattern if self.pattern is not None else None

    def matches_pattern(self, topic: str) -> bool:
        return self.pattern is not None and self.pattern.fullmatch(topic) is not None

    def assign_from_user(self, partitions: Iterable[TopicPartition]) -> None:
        self._set_type(SubscriptionType.USER_ASSIGNED)
        self._set_assignment([TopicPartition(*tp) for tp in partitions])

    def assign_from_subscribed(self, partitions: Iterable[TopicPartition]) -> None:
        """The group's assignment (after SyncGroup); positions of kept partitions survive."""
        if not self.has_auto_assigned_partitions_mode:
            raise ValueError("not subscribed")
        self._set_assignment([TopicPartition(*tp) for tp in partitions])

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        new = {tp: self.assignment.get(tp) or TopicPartitionState() for tp in partitions}
        self.assignment = new
        self.version += 1

    def unsubscribe(self) -> None:
        self.subscription = set()
        self.pattern = None
        self.rebalance_listener = None
        self.assignment = {}
        self.type = SubscriptionType.NONE
        self.version += 1

    @property
    def has_auto_assigned_partitions_mode(self) -> bool:
        return self.type in (SubscriptionType.AUTO_TOPICS, SubscriptionType.AUTO_PATTERN)

    # -- positions ---------------------------------------------------------------------------------
    def state(self, tp: TopicPartition) -> TopicPartitionState:
        try:
            return self.assignment[tp]
        except KeyError:
            raise ValueError(f"partition {tp.topic}-{tp.partition} is not assigned to this consumer") from None

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.assignment

    def assigned_partitions(self) -> set[TopicPartition]:
        return set(self.assignment)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Consume from ``offset`` next (drops buffered and in-flight data for ``tp``)."""
        st = self.state(tp)
        st.position = offset
        st.fetch_offset = offset
        st.reset_strategy = None
        st.epoch += 1
        self.version += 1

    def position(self, tp: TopicPartition) -> int | None:
        st = self.state(tp)
        return st.position if st.reset_strategy is None else None

    def request_offset_reset(self, tp: TopicPartition, strategy: str | None = None) -> None:
        st = self.state(tp)
        st.reset_strategy = strategy or self.default_reset_strategy
        st.epoch += 1
        self.version += 1

    def maybe_seek_unvalidated(self, tp: TopicPartition, offset: int, epoch: int, strategy: str) -> bool:
        """Apply a reset's result unless the partition changed meanwhile (Java's ``maybeSeekUnvalidated``)."""
        st = self.assignment.get(tp)
        if st is None or st.epoch != epoch or st.reset_strategy != strategy:
            return False
        self.seek(tp, offset)
        return True

    def partitions_needing_reset(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.reset_strategy is not None]

    def missing_positions(self) -> list[TopicPartition]:
        """Partitions with neither a position nor a pending reset (need their committed offset)."""
        return [tp for tp, st in self.assignment.items() if st.position is None and st.reset_strategy is None]

    def has_all_fetch_positions(self) -> bool:
        return all(st.has_valid_position for st in self.assignment.values())

    def all_consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """Positions to commit (Java's ``allConsumed``)."""
        return {tp: OffsetAndMetadata(st.position, leader_epoch=st.leader_epoch)
                for tp, st in self.assignment.items() if st.position is not None and st.has_valid_position}

    def fetchable_partitions(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.is_fetchable]

    # -- revocation (KIP-848) ------------------------------------------------------------------------
    def mark_pending_revocation(self, partitions: Iterable[TopicPartition]) -> None:
        """Stop fetching and returning records for partitions being revoked (Java's ``markPendingRevocation``)."""
        for tp in partitions:
            st = self.assignment.get(tp)
            if st is not None and not st.pending_revocation:
                st.pending_revocation = True
                st.fetch_offset = st.position  # buffered chunks are dropped
                st.epoch += 1
                self.version += 1

    # -- pause -------------------------------------------------------------------------------------
    def pause(self, tp: TopicPartition) -> None:
        st = self.state(tp)
        if not st.paused:
            st.paused = True
            st.fetch_offset = st.position  # buffered chunks are dropped; fetch again on resume
            st.epoch += 1
            self.version += 1

    def resume(self, tp: TopicPartition) -> None:
        st = self.state(tp)
        if st.paused:
            st.paused = False
            self.version += 1

    def paused_partitions(self) -> set[TopicPartition]:
        return {tp for tp, st in self.assignment.items() if st.paused}

    # -- lag ---------------------------------------------------------------------------------------
    def partition_lag(self, tp: TopicPartition, isolation_level: int = 0) -> int | None:
        """High watermark (LSO when read_committed) minus position (Java's ``partitionLag``)."""
        st = self.assignment.get(tp)
        if st is None or st.position is None:
            return None
        end = st.last_stable_offset if isolation_level == 1 else st.high_watermark
        if end is None or end < 0:
            return None
        return end - st.position
