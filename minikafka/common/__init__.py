"""Value types and clocks shared by the broker, the clients, capture and analysis (no I/O, no Trio)."""

from .clock import SYSTEM_CLOCK, Clock, ManualClock, SecondsClock, SystemClock
from .types import (
    Node,
    OffsetAndMetadata,
    PartitionMetadata,
    TopicIdPartition,
    TopicMetadata,
    TopicPartition,
    partitions_by_topic,
)

__all__ = [
    "SYSTEM_CLOCK", "Clock", "ManualClock", "Node", "OffsetAndMetadata", "PartitionMetadata", "SecondsClock",
    "SystemClock", "TopicIdPartition", "TopicMetadata", "TopicPartition", "partitions_by_topic",
]
