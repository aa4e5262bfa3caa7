"""The classic consumer group coordinator.

Models Kafka's ``kafka.coordinator.group.GroupCoordinator`` (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups,
DescribeGroups, DeleteGroups) together with the in-memory half of
``GroupMetadataManager`` (the group cache, offset expiry).  Run by a broker or a cluster
(:meth:`~.core.CoordinatorCore.use_partitions`), its groups are kept per ``__consumer_offsets`` partition,
each partition's shard loaded on that partition's leader (Kafka 4's coordinator runtime,
:mod:`minikafka.broker.coordinator_runtime`); used on its own (tests), it coordinates every group and keeps
its records in a local log.

:class:`GroupCoordinator` is composed of one mixin a job:

* :mod:`.core`: the group cache, clocks, offsets-log glue, ``validateGroupStatus``, close.
* :mod:`.timers`: the timer loop, :meth:`GroupCoordinator.run`.
* :mod:`.rebalance`: rebalance stages, member removal and session expiry.
* :mod:`.join`: JoinGroup.
* :mod:`.membership`: SyncGroup, Heartbeat, LeaveGroup.
* :mod:`.offsets`: OffsetCommit, OffsetFetch, offset retention.
* :mod:`.admin`: ListGroups, DescribeGroups, DeleteGroups.
* :mod:`.consumer.heartbeat`: KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe,
  member session and rebalance timeouts); the group cache holds both kinds (``GroupMetadata.group_type``).
* :mod:`.consumer.classic_members`: classic members in consumer groups (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup to a consumer group, their join/sync timeouts), on :mod:`.consumer.migration` (the online
  upgrade and downgrade between classic and consumer groups); :mod:`.join` and :mod:`.membership` build on it.

Deliberate differences from Kafka:

* The purgatories are replaced by deadlines on groups and members, served by
  one timer loop, :meth:`GroupCoordinator.run`, which sleeps until the next
  deadline or until poked by a request that set an earlier one.
* JoinGroup/SyncGroup responses that Kafka completes through callbacks are
  :class:`~.metadata.Reply` slots the async request methods await.  A member
  that is removed while a request of its is pending gets an error answer
  instead of no answer; a JoinGroup/SyncGroup superseded by a newer one from
  the same member is answered with REBALANCE_IN_PROGRESS.
* As Kafka, a group's members and assignments are written as records (see :mod:`.offset_log`): after a
  restart or a coordinator move a classic group comes back Stable with its members, a consumer group with
  its members, target and current assignments, each member given a fresh session.
* Static membership follows ``updateStaticMemberAndRebalance``: a static
  member rejoining with an unknown member id replaces its old id; in a Stable
  group that does not rebalance unless the selected protocol would change.
"""

from __future__ import annotations

from typing import Any

from ...common import TopicPartition
from ...protocol.errors import ErrorCode
from .admin import GroupAdmin
from .consumer.heartbeat import ConsumerGroupMixin
from .core import DEFAULT_RETENTION_CHECK_INTERVAL_S
from .join import JoinGroupMixin
from .membership import MembershipMixin
from .metadata import GroupOverview, GroupSummary, OffsetAndMetadata
from .offsets import OFFSET_METADATA_MAX_SIZE, OffsetMetadataManager
from .timers import TimerLoopMixin

__all__ = ["DEFAULT_RETENTION_CHECK_INTERVAL_S", "OFFSET_METADATA_MAX_SIZE", "GroupCoordinator", "TopicPartition"]


class GroupCoordinator(TimerLoopMixin, JoinGroupMixin, MembershipMixin, ConsumerGroupMixin):
    """Kafka's classic ``GroupCoordinator`` for one broker.

    ``clock`` gives seconds for timers (session, rebalance and join-delay
    timeouts) and must advance with trio's clock (``trio.current_time`` under
    a ``MockClock``); ``wall_clock``, a :class:`~minikafka.common.clock.Clock`, gives the epoch
    milliseconds stamped on offset commits and used for offset retention.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offsets = OffsetMetadataManager(self)
        self.admin = GroupAdmin(self)

    # -- offsets (the OffsetMetadataManager part) ---------------------------------------------------------
    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata], *, api_version: int = 8
                       ) -> dict[TopicPartition, ErrorCode]:
        return self.offsets.commit_offsets(group_id, member_id, group_instance_id, generation_id, offsets,
                                           api_version=api_version)

    def txn_commit_offsets(self, group_id: str, producer_id: int, member_id: str, group_instance_id: str | None,
                           generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata], *,
                           producer_epoch: int = -1) -> dict[TopicPartition, ErrorCode]:
        return self.offsets.txn_commit_offsets(group_id, producer_id, member_id, group_instance_id, generation_id,
                                               offsets, producer_epoch=producer_epoch)

    def complete_txn_partition(self, partition: int, producer_id: int, commit: bool) -> None:
        self.offsets.complete_txn_partition(partition, producer_id, commit)

    def txn_offset_groups(self, producer_id: int) -> set[str]:
        return self.offsets.txn_offset_groups(producer_id)

    def pending_txn_partitions(self, group_id: str) -> set[TopicPartition]:
        return self.offsets.pending_txn_partitions(group_id)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool = False,
                      *, member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        return self.offsets.fetch_offsets(group_id, partitions, require_stable, member_id=member_id,
                                          member_epoch=member_epoch)

    def delete_offsets(self, group_id: str, topics: dict[str, list[int]]
                       ) -> tuple[ErrorCode, dict[str, dict[int, ErrorCode]]]:
        return self.offsets.delete_offsets(group_id, topics)

    def cleanup_group_metadata(self) -> int:
        return self.offsets.cleanup_group_metadata()

    # -- administration (the GroupAdmin part) -------------------------------------------------------------
    def list_groups(self, states: set[str] | None = None,
                    types: set[str] | None = None) -> tuple[ErrorCode, list[GroupOverview]]:
        return self.admin.list_groups(states, types)

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        return self.admin.describe_group(group_id)

    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        return self.admin.delete_groups(group_ids)
