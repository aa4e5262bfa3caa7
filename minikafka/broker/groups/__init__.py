"""Kafka's classic consumer group protocol: coordinator, group state, offsets log.

* :mod:`.coordinator`: :class:`GroupCoordinator` (Kafka's ``GroupCoordinatorShard``): the core of
  :mod:`.core` (group cache, records, clocks, the shard runtime) composed with its parts: offsets
  (:mod:`.offsets`), classic groups (:mod:`.rebalance`, :mod:`.join`, :mod:`.membership`), consumer groups
  (:mod:`.consumer`), administration (:mod:`.admin`) and the timer loop (:mod:`.timers`); share groups are
  kept by :class:`~minikafka.broker.share.coordinator.ShareGroupCoordinator`, on the same partitions.
* :mod:`.metadata`: :class:`GroupMetadata`, :class:`MemberMetadata` and results.
* :mod:`.offset_log`: the ``__consumer_offsets`` partition log (persistence).
"""

from .coordinator import GroupCoordinator
from .metadata import (
    GroupMetadata,
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinResult,
    MemberMetadata,
    MemberSummary,
    OffsetAndMetadata,
    SyncResult,
)
from .offset_log import OffsetLog

__all__ = [
    "GroupCoordinator", "GroupMetadata", "GroupOverview", "GroupState", "GroupSummary", "JoinResult",
    "MemberMetadata", "MemberSummary", "OffsetAndMetadata", "OffsetLog", "SyncResult",
]
