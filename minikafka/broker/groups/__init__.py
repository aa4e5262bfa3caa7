"""Kafka's classic consumer group protocol: coordinator, group state, offsets log.

* :mod:`.coordinator`: :class:`GroupCoordinator` (Kafka's ``GroupCoordinator``).
  It is composed of mixins from :mod:`.core` (group cache, clocks), :mod:`.timers`
  (timer loop), :mod:`.rebalance` (rebalance stages, member expiry), :mod:`.join`
  (JoinGroup), :mod:`.membership` (SyncGroup, Heartbeat, LeaveGroup), :mod:`.offsets`
  (OffsetCommit, OffsetFetch, retention) and :mod:`.admin` (List/Describe/DeleteGroups).
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
