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

from .admin import AdminMixin
from ...common import TopicPartition
from .core import DEFAULT_RETENTION_CHECK_INTERVAL_S
from .join import JoinGroupMixin
from .membership import MembershipMixin
from .offsets import OFFSET_METADATA_MAX_SIZE, OffsetsMixin
from .consumer.heartbeat import ConsumerGroupMixin
from .timers import TimerLoopMixin

__all__ = ["DEFAULT_RETENTION_CHECK_INTERVAL_S", "OFFSET_METADATA_MAX_SIZE", "GroupCoordinator", "TopicPartition"]


class GroupCoordinator(TimerLoopMixin, JoinGroupMixin, MembershipMixin, OffsetsMixin, AdminMixin, ConsumerGroupMixin):
    """Kafka's classic ``GroupCoordinator`` for one broker.

    ``clock`` gives seconds for timers (session, rebalance and join-delay
    timeouts) and must advance with trio's clock (``trio.current_time`` under
    a ``MockClock``); ``wall_clock``, a :class:`~minikafka.common.clock.Clock`, gives the epoch
    milliseconds stamped on offset commits and used for offset retention.
    """
