"""Partitions hosted by this broker and the append/read paths (Kafka's ``ReplicaManager``).

``append_records`` validates each produce batch by its 61-byte header and
CRC only (records are never decoded), checks idempotent-producer sequences,
and appends; ``read`` returns stored batches as opaque chunks.  Appends wake
long-polling fetches through a Trio event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import trio

from ..protocol.errors import ErrorCode
from ..protocol.records import CorruptRecordError, iter_batches
from .log import Log, LogConfig, LogManager
from .metadata import TopicMetadata
from .producer_state import BatchMetadata, ProducerStateManager

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)


@dataclass
class Partition:
    """A partition this broker hosts (Kafka's ``Partition``): its log, leader epoch and producer state."""

    topic: str
    index: int
    log: Log
    leader_epoch: int = 0
    producers: ProducerStateManager = field(default_factory=ProducerStateManager)


class ProduceResult(NamedTuple):
    error: ErrorCode
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    message: str | None = None


def log_config_for(topic: TopicMetadata, defaults: dict[str, str]) -> LogConfig:
    """Topic configs over broker defaults, as a LogConfig."""
    cfg = {**defaults, **topic.configs}
    return LogConfig(
        segment_bytes=int(cfg["segment.bytes"]),
        retention_ms=int(cfg["retention.ms"]),
        retention_bytes=int(cfg["retention.bytes"]),
        message_timestamp_type=cfg["message.timestamp.type"],
        index_interval_bytes=int(cfg["index.interval.bytes"]),
        segment_ms=int(cfg["segment.ms"]),
    )


class ReplicaManager:
    """Owns this broker's partitions and their logs."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.log_manager = LogManager(broker.config.data_dir / "logs" if broker.config.data_dir else None)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._appended = trio.Event()
        self.append_generation = 0  # bumped on every append; unchanged means logs are as they were

    # -- partitions --------------------------------------------------------
    def load(self) -> None:
        """Open the logs of every known topic (start-up with a data dir)."""
        defaults = self.broker.config.topic_defaults()
        configs = {t.name: log_config_for(t, defaults) for t in self.broker.metadata.topics.values()}
        self.log_manager.load_existing(configs)
        for topic in self.broker.metadata.topics.values():
            self.ensure_partitions(topic)

    def ensure_partitions(self, topic: TopicMetadata) -> None:
        """Create local partitions for every replica of ``topic`` this broker hosts."""
        cfg = log_config_for(topic, self.broker.config.topic_defaults())
        me = self.broker.node_id
        for pm in topic.partitions:
            key = (topic.name, pm.partition)
            if me in pm.replicas and key not in self.partitions:
                lg = self.log_manager.get_or_create(topic.name, pm.partition, cfg)
                self.partitions[key] = Partition(topic.name, pm.partition, lg, pm.leader_epoch)

    def remove_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            del self.partitions[key]
        self.log_manager.delete_topic(name)
        self.notify_append()  # waiting fetches re-read and report the topic as gone

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    # -- append ------------------------------------------------------------
    def append_records(
        self, part: Partition, records: bytes | memoryview | None, now_ms: int, max_message_bytes: int
    ) -> ProduceResult:
        """Validate and append one partition's produce data (Kafka's ``appendToLocalLog``).

        ``records`` is normally a writable memoryview into the request frame; the
        batches are stamped with offsets in place and stored without copying.
        """
        if not records:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message="empty records")
        writable = isinstance(records, memoryview) and not records.readonly
        buf = records if writable else bytearray(records)
        batches: list[bytearray] = []
        try:
            for header, view in iter_batches(buf, produce=True):
                if header.size > max_message_bytes:
                    return ProduceResult(
                        ErrorCode.MESSAGE_TOO_LARGE,
                        message=f"batch of {header.size} bytes exceeds max.message.bytes={max_message_bytes}",
                    )
                batches.append((header, view))
        except CorruptRecordError as exc:  # bad CRC or structure (InvalidRecordError is a subclass)
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message=str(exc))
        if not batches:
            return ProduceResult(ErrorCode.CORRUPT_MESSAGE, message="no complete record batch")
        lg = part.log
        # Idempotence: every batch of an idempotent producer must be in sequence.
        to_append = []
        for header, view in batches:
            if header.producer_id >= 0 and header.base_sequence >= 0:
                last_seq = header.base_sequence + header.last_offset_delta
                check = part.producers.check(header.producer_id, header.producer_epoch, header.base_sequence, last_seq)
                if check.error:
                    return ProduceResult(check.error, message=check.error.name)
                if check.duplicate is not None:
                    if len(batches) == 1:
                        d = check.duplicate
                        return ProduceResult(ErrorCode.NONE, d.first_offset, -1, lg.log_start_offset)
                    return ProduceResult(ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
            to_append.append((header, view))
        info = lg.append_as_leader([v for _, v in to_append], part.leader_epoch, now_ms)
        offset = info.first_offset
        for header, _ in to_append:
            if header.producer_id >= 0 and header.base_sequence >= 0:
                last = offset + header.last_offset_delta
                part.producers.update(
                    header.producer_id,
                    header.producer_epoch,
                    BatchMetadata(header.base_sequence, header.base_sequence + header.last_offset_delta,
                                  offset, last, header.max_timestamp),
                )
            offset += header.last_offset_delta + 1
        self.notify_append()
        return ProduceResult(ErrorCode.NONE, info.first_offset, info.log_append_time, lg.log_start_offset)

    # -- long-poll support -------------------------------------------------
    def notify_append(self) -> None:
        """Wake every fetch waiting for data (called on appends and other log changes)."""
        self.append_generation += 1
        self._appended.set()
        self._appended = trio.Event()

    async def wait_for_append(self) -> None:
        await self._appended.wait()
