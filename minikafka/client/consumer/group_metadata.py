"""The consumer's group membership as the transactional producer needs it (Java's
``ConsumerGroupMetadata``, KIP-447).

``KafkaProducer.send_offsets_to_transaction(offsets, consumer.group_metadata())`` sends the group
id, generation, member id and group instance id with TxnOffsetCommit, so the group coordinator
refuses offsets from a zombie member of an older generation (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID) instead of relying on one transactional id per input partition.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConsumerGroupMetadata"]


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """``ConsumerGroupMetadata``: group id, generation id, member id and group instance id."""

    group_id: str
    generation_id: int = -1  # NO_GENERATION: offsets are committed without generation checks
    member_id: str = ""
    group_instance_id: str | None = None
