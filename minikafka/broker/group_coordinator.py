"""The classic group coordinator (Kafka's ``GroupCoordinator``); see :mod:`minikafka.broker.groups`.

The implementation lives in the :mod:`minikafka.broker.groups` package; this
module re-exports it under the name the broker imports.
"""

from .groups import (  # noqa: F401
    GroupCoordinator,
    GroupMetadata,
    GroupOverview,
    GroupState,
    GroupSummary,
    JoinResult,
    MemberMetadata,
    MemberSummary,
    OffsetAndMetadata,
    OffsetLog,
    SyncResult,
)

__all__ = [
    "GroupCoordinator", "GroupMetadata", "GroupOverview", "GroupState", "GroupSummary", "JoinResult",
    "MemberMetadata", "MemberSummary", "OffsetAndMetadata", "OffsetLog", "SyncResult",
]
