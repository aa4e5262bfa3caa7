"""Consumer exceptions (Java's ``org.apache.kafka.clients.consumer`` exceptions)."""

from __future__ import annotations

from ..network import KafkaClientError

__all__ = ["ConsumerError", "NoOffsetForPartitionError", "CommitFailedError", "GroupError"]


class ConsumerError(KafkaClientError):
    """Base of the consumer's own errors."""


class NoOffsetForPartitionError(ConsumerError):
    """No position and ``auto_offset_reset='none'`` (Java's ``NoOffsetForPartitionException``)."""

    def __init__(self, partitions: list) -> None:
        super().__init__(f"undefined offset with no reset policy for partitions: {partitions}", retriable=False)
        self.partitions = partitions


class CommitFailedError(ConsumerError):
    """The group rebalanced before the commit could be completed (Java's ``CommitFailedException``)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message, code, retriable=False)


class GroupError(ConsumerError):
    """A fatal group error (e.g. INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID)."""
