"""The group coordinator: classic and KIP-848 consumer groups and their offsets.

Models Kafka 4's ``GroupCoordinatorShard`` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat,
ConsumerGroupDescribe, OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups), which composes a
``GroupMetadataManager`` and an ``OffsetMetadataManager``.  Run by a broker or a cluster
(:meth:`~.core.CoordinatorCore.use_partitions`), its groups are kept per ``__consumer_offsets`` partition,
each partition's shard loaded on that partition's leader (Kafka 4's coordinator runtime,
:mod:`minikafka.broker.coordinator_runtime`); used on its own (tests), it coordinates every group and keeps
its records in a local log.

:class:`GroupCoordinator` is the core (:mod:`.core`: the group cache, the ``__consumer_offsets`` records, clocks,
``validateGroupStatus``, the shard runtime) composed with its parts, each a plain object given the core and the
sibling parts it calls, and answers the requests by handing each to its part:

* offsets: :class:`~.offsets.OffsetMetadataManager` (OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete,
  offset retention);
* classic groups: :class:`~.rebalance.ClassicGroupRebalance` (rebalance stages, member removal, session expiry),
  :class:`~.join.ClassicGroupJoin` (JoinGroup), :class:`~.membership.ClassicGroupMembership` (SyncGroup,
  Heartbeat, LeaveGroup);
* consumer groups: :class:`~.consumer.heartbeat.ConsumerGroupManager` (ConsumerGroupHeartbeat,
  ConsumerGroupDescribe, member session and rebalance timeouts),
  :class:`~.consumer.classic_members.ClassicMembersOfConsumerGroups` (classic members in consumer groups, their
  join/sync timeouts), :class:`~.consumer.migration.ConsumerGroupMigration` (the online upgrade and downgrade
  between classic and consumer groups); the group cache holds both kinds (``GroupMetadata.group_type``);
* administration: :class:`~.admin.GroupAdmin` (ListGroups, DescribeGroups, DeleteGroups);
* the timer loop: :class:`~.timers.GroupTimers` (:meth:`GroupCoordinator.run`).

Share groups are kept by :class:`~minikafka.broker.share.coordinator.ShareGroupCoordinator` on the same
partitions (:meth:`~.core.CoordinatorCore.attach_share_groups`).

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

from collections.abc import Callable
from typing import Any

from ...common import TopicPartition
from ...protocol.errors import ErrorCode
from .admin import GroupAdmin
from .consumer.classic_members import ClassicMembersOfConsumerGroups
from .consumer.heartbeat import ConsumerGroupManager
from .consumer.migration import ConsumerGroupMigration
from .consumer.model import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResult, DescribedConsumerGroup
from .consumer.subscription import TopicsImage
from .core import DEFAULT_RETENTION_CHECK_INTERVAL_S, CoordinatorCore
from .join import ClassicGroupJoin
from .membership import ClassicGroupMembership
from .metadata import GroupOverview, GroupSummary, JoinResult, OffsetAndMetadata, SyncResult
from .offsets import OFFSET_METADATA_MAX_SIZE, OffsetMetadataManager
from .rebalance import ClassicGroupRebalance
from .timers import GroupTimers

__all__ = ["DEFAULT_RETENTION_CHECK_INTERVAL_S", "OFFSET_METADATA_MAX_SIZE", "GroupCoordinator", "TopicPartition"]


class GroupCoordinator(CoordinatorCore):
    """Kafka's classic ``GroupCoordinator`` for one broker.

    ``clock`` gives seconds for timers (session, rebalance and join-delay
    timeouts) and must advance with trio's clock (``trio.current_time`` under
    a ``MockClock``); ``wall_clock``, a :class:`~minikafka.common.clock.Clock`, gives the epoch
    milliseconds stamped on offset commits and used for offset retention.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The parts, over this core (the groups, their records and the shard runtime).
        self.offsets = OffsetMetadataManager(self)
        self.admin = GroupAdmin(self)
        self.rebalance = ClassicGroupRebalance(self)
        self.consumer = ConsumerGroupManager(self)
        self.migration = ConsumerGroupMigration(self, self.consumer, self.rebalance)
        self.consumer.conversions = self.migration
        self.bridge = ClassicMembersOfConsumerGroups(self, self.consumer, self.migration)
        self.join = ClassicGroupJoin(self, self.rebalance, self.migration, self.bridge)
        self.membership = ClassicGroupMembership(self, self.rebalance, self.bridge)
        self.timers = GroupTimers(self, self.rebalance, self.consumer, self.bridge, self.offsets)

    async def run(self) -> None:
        """The timer loop (and the loads of large partitions) until cancelled."""
        await self.timers.run()

    # -- classic groups ---------------------------------------------------------------------------------
    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, support_skipping_assignment: bool, client_id: str,
                         client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                         protocols: list[tuple[str, bytes]], reason: str | None = None,
                         topics: TopicsImage | None = None) -> JoinResult:
        return await self.join.join_group(group_id, member_id, group_instance_id, require_known_member_id,
                                          support_skipping_assignment, client_id, client_host, rebalance_timeout_ms,
                                          session_timeout_ms, protocol_type, protocols, reason, topics)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                         protocol_name: str | None, group_instance_id: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        return await self.membership.sync_group(group_id, generation_id, member_id, protocol_type, protocol_name,
                                                group_instance_id, assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        return self.membership.heartbeat(group_id, generation_id, member_id, group_instance_id)

    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[ErrorCode, list[tuple[str, str | None, ErrorCode]]]:
        return self.membership.leave_group(group_id, members)

    # -- KIP-848 consumer groups ------------------------------------------------------------------------
    def consumer_assignors(self) -> list[str]:
        return self.consumer.consumer_assignors()

    def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, topics: TopicsImage, *,
                                 session_timeout_ms: int | None = None, heartbeat_interval_ms: int | None = None,
                                 authorized_topics: Callable[[set[str]], set[str]] | None = None
                                 ) -> ConsumerGroupHeartbeatResult:
        return self.consumer.consumer_group_heartbeat(request, topics, session_timeout_ms=session_timeout_ms,
                                                      heartbeat_interval_ms=heartbeat_interval_ms,
                                                      authorized_topics=authorized_topics)

    def consumer_group_describe(self, group_ids: list[str]) -> list[DescribedConsumerGroup]:
        return self.consumer.consumer_group_describe(group_ids)

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
