"""The share-group coordinator: ShareGroupHeartbeat and ShareGroupDescribe (KIP-932).

Models the share-group half of Kafka's ``GroupMetadataManager`` (``shareGroupHeartbeat``,
``shareGroupLeave``, ``shareGroupDescribe``, the member session timeouts) behind
``GroupCoordinatorService``'s request validation.  One :class:`ShareGroupCoordinator` is shared by the
brokers of a cluster (as the classic group coordinator is) and keeps its own dict of share groups; group
ids form one namespace with the classic/consumer groups: ``other_group_exists`` tells whether an id is
taken by such a group (its heartbeats are then answered GROUP_ID_NOT_FOUND, as Kafka does for a group of
another type), and :meth:`ShareGroupCoordinator.exists` answers the other way round.

A heartbeat:

1. validates the request (INVALID_REQUEST: empty member/group/rack id, no subscription on joining,
   epoch below -1);
2. epoch -1 leaves: the member is removed and the group epoch bumped;
3. epoch 0 joins (creating the group; GROUP_MAX_SIZE_REACHED past ``group.share.max.size``), any other
   epoch must be the member's current one or the previous one (FENCED_MEMBER_EPOCH; UNKNOWN_MEMBER_ID for
   a member the group does not know);
4. bumps the group epoch if the member's subscription changed or the subscribed topics did (created,
   deleted, partitions added: re-read from the metadata on every heartbeat, so they are noticed on the next
   heartbeat of any member);
5. recomputes the target assignment with the ``simple`` assignor when the group epoch is ahead of the
   assignment epoch;
6. hands the member its target assignment and the assignment epoch at once (no revocation in share
   groups) and re-arms its session timeout (``share.session.timeout.ms``, per group).

The response carries the assignment when the member joined or its assignment changed, and the group's
``share.heartbeat.interval.ms``.

As Kafka, a group's epoch, members, target and current assignments are written as records to its
``__consumer_offsets`` partition (:mod:`.records`, through ``writer``: the group coordinator, whose shards hand
the groups back when a partition loads, :meth:`ShareGroupCoordinator.load_partition`, and take them when it
unloads), and a heartbeat is answered once they are replicated: a restart or a coordinator move keeps the group
and its members.

Deliberate differences from Kafka: one coordinator object holds the share groups of every broker's loaded
partitions; session timeouts are deadlines served by one timer loop (:meth:`ShareGroupCoordinator.run`)
instead of Kafka's timer wheel; the share-group state initialization that Kafka's coordinator asks of the
share coordinator is left to the share partitions, which initialize themselves on first fetch.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol


from ...common import TopicMetadata
from ...common.clock import SYSTEM_CLOCK
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..deadline_loop import DeadlineLoop
from ..groups.consumer.model import TopicImage
from ..groups.consumer.subscription import topic_images
from ..groups.group_config import GroupConfig
from ..groups.consumer.records import changed_records
from . import records as share_records
from .assignor import ASSIGNOR_NAME, simple_assign
from .group import MemberAssignment, ShareGroup, ShareGroupMember

log = logging.getLogger(__name__)

LEAVE_GROUP_MEMBER_EPOCH = -1
E = ErrorCode


class TopicsView(Protocol):
    """The topics the coordinator assigns (the broker's ``MetadataCache``)."""

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...


class GroupConfigSource(Protocol):
    def group_config(self, group_id: str) -> GroupConfig: ...


class ShareGroupError(Exception):
    """A request the coordinator refuses, with Kafka's error code and message."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass
class ShareGroupHeartbeatResult:
    """What a ShareGroupHeartbeat answers (Kafka's ``ShareGroupHeartbeatResponseData``)."""

    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: MemberAssignment | None = None  # None: unchanged since the member last heard


@dataclass
class ShareMemberDescription:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    assignment: list[tuple[uuid.UUID, str, list[int]]]  # (topic id, topic name, partitions)


@dataclass
class ShareGroupDescription:
    """One described group (Kafka's ``ShareGroupDescribeResponseData.DescribedGroup``)."""

    group_id: str
    error: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ASSIGNOR_NAME
    members: list[ShareMemberDescription] = field(default_factory=list)

    def topic_names(self) -> set[str]:
        """Every topic the group's members subscribe to or are assigned (for DESCRIBE authorization)."""
        out: set[str] = set()
        for m in self.members:
            out.update(m.subscribed_topic_names)
            out.update(name for _, name, _ in m.assignment)
        return out


class ShareGroupWriter(Protocol):
    """Where a share group's records go: the group coordinator's ``__consumer_offsets`` partitions."""

    def partition_for(self, group_id: str) -> int: ...

    def write_share_records(self, group_id: str, records: list[tuple[Any, Any]]) -> None: ...


class ShareGroupCoordinator:
    """Share-group membership for the brokers of a cluster (see the module docstring).

    ``clock`` gives seconds for session timeouts and must advance with Trio's clock while :meth:`run`
    serves them (``trio.current_time`` under a ``MockClock``).
    """

    def __init__(self, config: BrokerConfig, topics: TopicsView, group_configs: GroupConfigSource, *,
                 clock: Callable[[], float] = SYSTEM_CLOCK.monotonic,
                 other_group_exists: Callable[[str], bool] = lambda group_id: False) -> None:
        self.config = config
        self.topics = topics
        self.group_configs = group_configs
        self.clock = clock
        self.other_group_exists = other_group_exists
        self.groups: dict[str, ShareGroup] = {}
        # Where the groups' records are written (None: nowhere), and each group's records as last written.
        self.writer: ShareGroupWriter | None = None
        self._written: dict[str, share_records.Records] = {}
        # Told (group id, member id) when a member leaves or is fenced (its share sessions end, its records
        # are released) ...
        self.member_listeners: list[Callable[[str, str], None]] = []
        # ... and (group id) when a group is deleted.
        self.group_listeners: list[Callable[[str], None]] = []
        self._closed = False
        self._timer = DeadlineLoop(clock)  # members' session deadlines

    # -- what the share partitions and the admin APIs ask ---------------------------------------------
    def exists(self, group_id: str) -> bool:
        """Whether ``group_id`` is a share group (the classic coordinator's namespace check)."""
        return group_id in self.groups

    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and member_id in group.members

    def assignment(self, group_id: str, member_id: str) -> dict[uuid.UUID, set[int]]:
        """The partitions a member was last told it holds (empty for an unknown member); a copy."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is None:
            return {}
        return {t: set(ps) for t, ps in member.assigned_partitions.items()}

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics some member of a share group subscribes to."""
        group = self.groups.get(group_id)
        return group.subscribed_topic_names() if group is not None else set()

    def list_groups(self) -> list[tuple[str, str]]:
        """(group id, state) of every share group, for ListGroups (type ``share``)."""
        return [(gid, g.state.value) for gid, g in sorted(self.groups.items())]

    def create_group(self, group_id: str) -> ErrorCode:
        """Make ``group_id`` an Empty share group unless it is one already (Kafka 4.2's AlterShareGroupOffsets on
        a group that does not exist yet, KAFKA-19662: the offsets initialise the group before its first member
        joins).  GROUP_ID_NOT_FOUND when a group of another type has the id."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        try:
            self._persist(self._share_group(group_id, create=True))
        except ShareGroupError as exc:
            return exc.code
        return E.NONE

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups on a share group: only an Empty one (NON_EMPTY_GROUP otherwise, GROUP_ID_NOT_FOUND
        when there is no such share group)."""
        if self._closed:
            return E.COORDINATOR_NOT_AVAILABLE
        group = self.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        if group.members:
            return E.NON_EMPTY_GROUP
        group.dead = True
        del self.groups[group_id]
        self._write(group_id, {})  # tombstones, its epoch last
        log.info("share group %s deleted", group_id)
        _notify(self.group_listeners, group_id)
        return E.NONE

    # -- ShareGroupHeartbeat -----------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed_topic_names: list[str] | None, client_id: str = "", client_host: str = ""
                  ) -> ShareGroupHeartbeatResult:
        """Handle one ShareGroupHeartbeat; errors come back in the result (never raised)."""
        if self._closed:
            return ShareGroupHeartbeatResult(E.COORDINATOR_NOT_AVAILABLE)
        try:
            _validate_heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names)
            if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(group_id, member_id)
            return self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names,
                                   client_id, client_host)
        except ShareGroupError as exc:
            return ShareGroupHeartbeatResult(exc.code, exc.message)

    def _share_group(self, group_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is None and self.other_group_exists(group_id):
            raise ShareGroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if group is None:
            if not create:
                raise ShareGroupError(E.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
            group = self.groups[group_id] = ShareGroup(group_id)
            log.info("share group %s created", group_id)
        return group

    def _leave(self, group_id: str, member_id: str) -> ShareGroupHeartbeatResult:
        group = self._share_group(group_id, create=False)
        if member_id not in group.members:
            raise ShareGroupError(E.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        log.info("[GroupId %s] Member %s left the share group.", group_id, member_id)
        self._fence_member(group, member_id)
        return ShareGroupHeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)

    def _heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                   subscribed: list[str] | None, client_id: str, client_host: str) -> ShareGroupHeartbeatResult:
        joining = member_epoch == 0
        group = self._share_group(group_id, create=joining)
        member = group.members.get(member_id)
        max_size = self.config.group_share_max_size
        if member is None and len(group.members) >= max_size:  # Kafka's throwIfShareGroupIsFull
            raise ShareGroupError(E.GROUP_MAX_SIZE_REACHED,
                                  f"The share group has reached its maximum capacity of {max_size} members.")
        if member is None:
            if not joining:
                raise ShareGroupError(E.UNKNOWN_MEMBER_ID,
                                      f"Member {member_id} is not a member of group {group_id}.")
            member = ShareGroupMember(member_id)
            log.info("[GroupId %s] Member %s joins the share group using the share protocol.", group_id, member_id)
        elif not joining:
            _check_member_epoch(member, member_epoch)
        old_assignment = member.assigned_partitions
        new_subscription = tuple(sorted(set(subscribed))) if subscribed is not None else None
        subscription_changed = (member_id not in group.members
                                or (new_subscription is not None and new_subscription != member.subscribed_topic_names))
        if new_subscription is not None:
            member.subscribed_topic_names = new_subscription
        if rack_id is not None:
            member.rack_id = rack_id
        member.client_id = client_id
        member.client_host = client_host
        group.members[member_id] = member
        if subscription_changed:
            log.info("[GroupId %s] Member %s updated its subscribed topics to: %s.", group_id, member_id,
                     list(member.subscribed_topic_names))
        self._maybe_bump_epoch(group, subscription_changed)
        if group.group_epoch > group.assignment_epoch:
            self._update_target_assignment(group)
        # Share groups reconcile at once: the member takes its target assignment and the assignment epoch.
        if member.member_epoch != group.assignment_epoch or joining:
            target = group.assignment_of(member_id)
            if member.member_epoch != group.assignment_epoch:
                member.previous_member_epoch = member.member_epoch
                member.member_epoch = group.assignment_epoch
            member.assigned_partitions = {t: set(ps) for t, ps in target.items()}
        cfg = self.group_configs.group_config(group_id)
        self._schedule_session_timeout(member, cfg.share_session_timeout_ms)
        self._persist(group)
        changed = member.assigned_partitions != old_assignment
        return ShareGroupHeartbeatResult(
            member_id=member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=cfg.share_heartbeat_interval_ms,
            assignment={t: set(ps) for t, ps in member.assigned_partitions.items()} if joining or changed else None)

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, TopicImage]:
        """Topic id and partition count of each existing topic the group subscribes to."""
        return topic_images(sorted(group.subscribed_topic_names()), self.topics)

    def _maybe_bump_epoch(self, group: ShareGroup, membership_changed: bool) -> None:
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            log.info("[GroupId %s] Computed new subscription metadata: %s.", group.group_id, metadata)
            group.subscription_metadata = metadata
            membership_changed = True
        if membership_changed:
            group.group_epoch += 1
            log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)

    def _update_target_assignment(self, group: ShareGroup) -> None:
        meta = group.subscription_metadata
        subscriptions = {mid: frozenset(meta[t].topic_id for t in m.subscribed_topic_names if t in meta)
                         for mid, m in group.members.items()}
        counts = {img.topic_id: img.num_partitions for img in meta.values()}
        group.target_assignment = simple_assign(subscriptions, counts, group.target_assignment)
        group.assignment_epoch = group.group_epoch
        log.info("[GroupId %s] Computed a new target assignment for epoch %d with '%s' assignor: %s.",
                 group.group_id, group.group_epoch, ASSIGNOR_NAME,
                 {m: {str(t): sorted(ps) for t, ps in a.items()} for m, a in group.target_assignment.items()})

    def _fence_member(self, group: ShareGroup, member_id: str) -> None:
        """Remove a member (left or expired) and bump the group epoch; the others are reassigned when they
        next heartbeat."""
        group.members.pop(member_id, None)
        group.target_assignment.pop(member_id, None)
        group.group_epoch += 1
        group.subscription_metadata = self._subscription_metadata(group)
        log.info("[GroupId %s] Bumped group epoch to %d.", group.group_id, group.group_epoch)
        self._persist(group)
        _notify(self.member_listeners, group.group_id, member_id)

    # -- the records (Kafka's share-group records in __consumer_offsets) ------------------------------
    def _persist(self, group: ShareGroup) -> None:
        """Write what changed of the group since last written."""
        self._write(group.group_id, share_records.group_records(group))

    def _write(self, group_id: str, now: share_records.Records) -> None:
        changes = changed_records(self._written.get(group_id, {}), now)
        if now:
            self._written[group_id] = now
        else:
            self._written.pop(group_id, None)
        if changes and self.writer is not None:
            self.writer.write_share_records(group_id, changes)

    def load_partition(self, partition: int, groups: dict[str, Any]) -> None:
        """The group coordinator loaded a partition: its share groups come back with their members, each given a
        fresh session (Kafka's ``onLoaded``)."""
        for gid, records in groups.items():
            group = share_records.rebuild(gid, records)
            timeout_ms = self.group_configs.group_config(gid).share_session_timeout_ms
            for member in group.members.values():
                self._schedule_session_timeout(member, timeout_ms)
            self.groups[gid] = group
            self._written[gid] = dict(records)
        if groups:
            log.info("loaded %d share groups of __consumer_offsets-%d", len(groups), partition)

    def unload_partition(self, partition: int) -> None:
        """The partition is no longer loaded here: its share groups go (the next leader loads them)."""
        if self.writer is None:
            return
        for gid in [g for g in self.groups if self.writer.partition_for(g) == partition]:
            del self.groups[gid]
            self._written.pop(gid, None)

    # -- ShareGroupDescribe ------------------------------------------------------------------------
    def describe(self, group_ids: Iterable[str]) -> list[ShareGroupDescription]:
        """Kafka's ``shareGroupDescribe``: GROUP_ID_NOT_FOUND for an unknown id or a group of another type,
        INVALID_GROUP_ID for an empty one, COORDINATOR_NOT_AVAILABLE when closed."""
        out: list[ShareGroupDescription] = []
        for gid in group_ids:
            if self._closed:
                out.append(ShareGroupDescription(gid, E.COORDINATOR_NOT_AVAILABLE))
                continue
            if not gid:
                out.append(ShareGroupDescription(gid, E.INVALID_GROUP_ID))
                continue
            group = self.groups.get(gid)
            if group is None:
                message = (f"Group {gid} is not a share group." if self.other_group_exists(gid)
                           else f"Group {gid} not found.")
                out.append(ShareGroupDescription(gid, E.GROUP_ID_NOT_FOUND, message))
                continue
            out.append(ShareGroupDescription(
                gid, state=group.state.value, group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                members=[self._describe_member(m) for _, m in sorted(group.members.items())]))
        return out

    def _describe_member(self, m: ShareGroupMember) -> ShareMemberDescription:
        assignment: list[tuple[uuid.UUID, str, list[int]]] = []
        for topic_id, parts in sorted(m.assigned_partitions.items(), key=lambda kv: str(kv[0])):
            topic = self.topics.get_topic_by_id(topic_id)
            if topic is not None:  # a deleted topic drops out, as from Kafka's topics image
                assignment.append((topic_id, topic.name, sorted(parts)))
        return ShareMemberDescription(m.member_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                                      list(m.subscribed_topic_names), assignment)

    # -- session timeouts ---------------------------------------------------------------------------
    def _schedule_session_timeout(self, member: ShareGroupMember, timeout_ms: int) -> None:
        member.session_deadline = self.clock() + timeout_ms / 1000.0
        self._timer.schedule(member.session_deadline)

    def expire_sessions(self) -> int:
        """Fence every member whose session timed out; how many were."""
        now = self.clock()
        expired = [(g, mid) for g in self.groups.values() for mid, m in g.members.items()
                   if m.session_deadline <= now]
        for group, mid in expired:
            log.info("[GroupId %s] Member %s fenced from the group because its session expired.",
                     group.group_id, mid)
            self._fence_member(group, mid)
        return len(expired)

    def _next_deadline(self) -> float:
        return min((m.session_deadline for g in self.groups.values() for m in g.members.values()),
                   default=math.inf)

    async def run(self) -> None:
        """The session-timeout loop: fence expired members, sleep until the next deadline or a poke."""
        await self._timer.run(self.expire_sessions, self._next_deadline)

    def close(self) -> None:
        """Stop serving: heartbeats are answered COORDINATOR_NOT_AVAILABLE, the timer loop ends."""
        self._closed = True
        self._timer.close()


def _notify(listeners: list[Callable[..., None]], *args: str) -> None:
    """Tell the listeners; one that fails is logged, never breaks the coordinator (or its timer loop)."""
    for listener in list(listeners):
        try:
            listener(*args)
        except Exception:  # noqa: BLE001 - a listener's bug must not take the coordinator down
            log.exception("share-group listener %r failed on %s", listener, args)


def _validate_heartbeat(group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                        subscribed: list[str] | None) -> None:
    """Kafka's ``throwIfShareGroupHeartbeatRequestIsInvalid``."""
    if member_id is None or not member_id.strip():
        raise ShareGroupError(E.INVALID_REQUEST, "MemberId can't be empty.")
    if group_id is None or not group_id.strip():
        raise ShareGroupError(E.INVALID_REQUEST, "GroupId can't be empty.")
    if rack_id is not None and not rack_id.strip():
        raise ShareGroupError(E.INVALID_REQUEST, "RackId can't be empty.")
    if member_epoch == 0:
        if not subscribed:
            raise ShareGroupError(E.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
        raise ShareGroupError(E.INVALID_REQUEST, "MemberEpoch is invalid.")


def _check_member_epoch(member: ShareGroupMember, received: int) -> None:
    """Kafka's ``throwIfShareGroupMemberEpochIsInvalid``: the current epoch, or the previous one (whose
    response may have been lost)."""
    if received > member.member_epoch:
        raise ShareGroupError(E.FENCED_MEMBER_EPOCH,
                              f"The share group member has a greater member epoch ({received}) than the one known "
                              f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                              "partitions and rejoin.")
    if received < member.member_epoch and received != member.previous_member_epoch:
        raise ShareGroupError(E.FENCED_MEMBER_EPOCH,
                              f"The share group member has a smaller member epoch ({received}) than the one known "
                              f"by the group coordinator ({member.member_epoch}), and it does not match the "
                              f"previous member epoch ({member.previous_member_epoch}). The member must abandon "
                              "all its partitions and rejoin.")
