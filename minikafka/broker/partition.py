"""A partition this broker hosts (Kafka's ``kafka.cluster.Partition``) and the result of an append."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..common import TopicPartition
from ..protocol.errors import ErrorCode
from .log import Log
from .log.validator import RecordError
from .producer_state import ProducerStateManager


@dataclass
class ReplicaState:
    """The leader's view of one follower (Kafka's ``Replica`` / ``ReplicaState``)."""

    broker_id: int
    log_end_offset: int = -1  # unknown until the follower's first fetch
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = 0
    last_fetch_time_ms: int = 0
    broker_epoch: int = -1  # the broker epoch of the follower's last fetch (Fetch v15+, KIP-903); -1: not sent


@dataclass
class Partition:
    """A partition this broker hosts: its log, leader epoch and producer state (open transactions too).

    ``leader_id`` is who leads it as this broker last heard (``local_id`` leads
    it when they are equal); as leader, ``remote`` holds each follower's state.
    """

    topic: str
    index: int
    log: Log
    leader_epoch: int = 0
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)
    local_id: int = 0
    leader_id: int = 0
    replicas: list[int] = field(default_factory=list)
    remote: dict[int, ReplicaState] = field(default_factory=dict)
    #: The ISR of this leader's AlterPartition in flight (None: none): until the controller answers, the high
    #: watermark counts its members as well as the current ISR's (Kafka's maximal ISR, KIP-497), since the
    #: controller may already have committed it and elect any of them.
    pending_isr: list[int] | None = None

    def __post_init__(self) -> None:
        self._tp = TopicPartition(self.topic, self.index)  # asked for on every append (fetch purgatory key)

    @property
    def tp(self) -> TopicPartition:
        tp = self._tp
        if tp.topic != self.topic or tp.partition != self.index:  # a partition is never renamed; if it were
            tp = self._tp = TopicPartition(self.topic, self.index)
        return tp

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_id

    @property
    def last_stable_offset(self) -> int:
        """The LSO: the high watermark, or the first offset of an unstable transaction below it."""
        hw = self.log.high_watermark
        first = self.producers.first_unstable_offset(hw)
        return hw if first is None or first > hw else first

    @property
    def is_replicated(self) -> bool:
        return len(self.replicas) > 1


class ProduceResult(NamedTuple):
    """One partition's append (Kafka's ``LogAppendResult``); ``record_errors`` name the records of a batch
    refused by the per-record checks (KIP-467)."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None
    last_offset: int = -1  # the last offset appended (or of the duplicate), for acks=all
    record_errors: tuple[RecordError, ...] = ()
