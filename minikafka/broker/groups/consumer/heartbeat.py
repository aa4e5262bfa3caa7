"""ConsumerGroupHeartbeat and ConsumerGroupDescribe of the group coordinator (KIP-848).

Models the consumer-group half of Kafka's ``GroupMetadataManager`` (``consumerGroupHeartbeat``,
``consumerGroupLeave``, ``consumerGroupFenceMembers``, ``updateTargetAssignment``, ``maybeReconcile``,
the session and rebalance timeouts, ``consumerGroupDescribe``) and the request validation of
``GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid``.
:class:`ConsumerGroupManager` is the consumer-groups part of
:class:`~minikafka.broker.groups.coordinator.GroupCoordinator`; consumer groups live in the same ``groups`` map as
classic ones, as the
``consumer`` of a :class:`~minikafka.broker.groups.metadata.GroupMetadata` whose ``group_type`` is
``"consumer"`` (its committed offsets stay on the ``GroupMetadata``).

Deliberate differences from Kafka:

* Each heartbeat updates the in-memory group directly; what changed is then written as Kafka's records
  (:meth:`~.core.CoordinatorCore._persist_group_metadata`, :mod:`.records`) and the heartbeat answered once they
  are replicated.
* Regular expressions are resolved synchronously (see :mod:`.subscription`): a member bringing a new regex
  gets its topics in the same heartbeat, and the group epoch is bumped then rather than by a later
  asynchronous resolution.
* Subscribed topic metadata (ids, partition counts) is compared on every heartbeat instead of after a
  refresh interval or a metadata image change, so a created, deleted or grown topic is noticed at the next
  heartbeat of any member.
* Timers are deadlines on members served by the coordinator's timer loop (:mod:`..timers`).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

from ....protocol.errors import ErrorCode
from ..core import CoordinatorCore
from ..metadata import (
    CONSUMER_PROTOCOL_TYPE,
    GROUP_TYPE_CLASSIC,
    GROUP_TYPE_CONSUMER,
    GroupMetadata,
    GroupState,
)
from .assignors import (
    ASSIGNORS,
    MemberSubscriptionSpec,
    PartitionAssignorError,
    configured_assignors,
)
from .model import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResult,
    ConsumerGroupMember,
    DescribedConsumerGroup,
    DescribedConsumerGroupMember,
    MemberState,
    copy_assignment,
)
from .reconciliation import MemberFencedError, ReconciledState, current_state, reconcile
from .subscription import (
    InvalidRegexError,
    TopicsImage,
    compile_topic_regex,
    metadata_hash,
    regex_error_message,
    resolve_regex,
    topic_images,
)

log = logging.getLogger("minikafka.broker.groups.coordinator")

E = ErrorCode
# ConsumerGroupHeartbeat v1+: the member generates its id (KIP-1082).
CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


class ConsumerGroupError(Exception):
    """A heartbeat or leave fails with ``code`` (Kafka's ``ApiException`` subclasses)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def new_member_id() -> str:
    """Kafka's ``Uuid.randomUuid().toString()``: 22 url-safe base64 characters."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _blank(value: str | None) -> bool:
    """Kafka's ``throwIfEmptyString``: a present value that trims to nothing."""
    return value is not None and not value.strip()


def _regex(value: str | None) -> str | None:
    return value or None


def validate_heartbeat(req: ConsumerGroupHeartbeatRequest, assignors: list[str]) -> None:
    """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
    def invalid(message: str) -> ConsumerGroupError:
        return ConsumerGroupError(E.INVALID_REQUEST, message)

    if (req.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION or req.member_epoch > 0
            or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and not req.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not req.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if _blank(req.instance_id):
        raise invalid("InstanceId can't be empty.")
    if _blank(req.rack_id):
        raise invalid("RackId can't be empty.")
    if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            raise invalid("RebalanceTimeoutMs must be provided in first request.")
        if req.owned_partitions is None or req.owned_partitions:
            raise invalid("TopicPartitions must be empty when (re-)joining.")
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
    elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            raise invalid("InstanceId can't be null.")
    elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise invalid("MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignors:
        raise ConsumerGroupError(E.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {req.server_assignor} is not supported. "
                                 f"Supported assignors: {', '.join(assignors)}.")


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    """Kafka's ``isSubset``: the member owns only partitions it is assigned (unknown: no)."""
    if owned is None:
        return False
    return all(ps <= assigned.get(t, set()) for t, ps in owned.items() if ps) and all(
        t in assigned for t, ps in owned.items() if ps)


def _check_member_epoch(member: ConsumerGroupMember, received: int, owned: Assignment | None) -> None:
    """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``."""
    if received == JOIN_GROUP_MEMBER_EPOCH:
        return
    if received > member.member_epoch:
        raise ConsumerGroupError(E.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 "all its partitions and rejoin.")
    if received < member.member_epoch and (received != member.previous_member_epoch
                                           or not _is_subset(owned, member.assigned_partitions)):
        raise ConsumerGroupError(E.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a smaller member epoch ({received}) than the one "
                                 f"known by the group coordinator ({member.member_epoch}). The member must abandon "
                                 "all its partitions and rejoin.")


class GroupConversions(Protocol):
    """The conversions between group types a consumer group's heartbeats may lead to (Kafka's online upgrade
    and downgrade): :class:`~.migration.ConsumerGroupMigration`."""

    def online_upgrade(self, group: GroupMetadata, request: ConsumerGroupHeartbeatRequest) -> bool:
        """Kafka's online upgrade of a non-empty classic group on a joining ConsumerGroupHeartbeat
        (``group.consumer.migration.policy``): True once ``group.consumer`` holds the converted group."""
        ...

    def maybe_downgrade(self, group: GroupMetadata) -> bool:
        """Called after consumer-protocol members left: convert the group back to a classic one when only
        classic members remain and the policy allows it (Kafka's online downgrade).  True if converted."""
        ...


class ConsumerGroupManager:
    """KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe, their timers (the consumer-group
    half of Kafka's ``GroupMetadataManager``), over the groups of ``core``: the consumer-groups part of the group
    coordinator.  ``conversions`` (wired once built) converts groups between types."""

    def __init__(self, core: CoordinatorCore) -> None:
        self.core = core
        self.conversions: GroupConversions | None = None

    # Kafka's metadataImage: the topic metadata last handed to the coordinator (by a ConsumerGroupHeartbeat or
    # a JoinGroup), for the requests that come without it (an online upgrade, SyncGroup's assignment encoding).
    _metadata_image: TopicsImage | None = None

    def _topics(self, topics: TopicsImage | None = None) -> TopicsImage | None:
        """Remember ``topics`` as the metadata image when given; the current image."""
        if topics is not None:
            self._metadata_image = topics
        return self._metadata_image

    # ------------------------------------------------------------------ hooks (classic interplay)

    # ------------------------------------------------------------------ settings

    def consumer_assignors(self) -> list[str]:
        """``group.consumer.assignors`` by name; the first is the default."""
        return configured_assignors(self.core.config.group_consumer_assignors)

    # ------------------------------------------------------------------ ConsumerGroupHeartbeat

    def consumer_group_heartbeat(
        self,
        request: ConsumerGroupHeartbeatRequest,
        topics: TopicsImage,
        *,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
        authorized_topics: Callable[[set[str]], set[str]] | None = None,
    ) -> ConsumerGroupHeartbeatResult:
        """Kafka's ``GroupCoordinatorService.consumerGroupHeartbeat``: validate, then join/heartbeat or leave.

        ``session_timeout_ms``/``heartbeat_interval_ms``: the group's effective configs (default: the
        broker's); ``authorized_topics`` keeps the regex-resolved topics the member may DESCRIBE."""
        if self.core._closed:
            return ConsumerGroupHeartbeatResult(error=E.COORDINATOR_NOT_AVAILABLE)
        self._topics(topics)
        session_ms = session_timeout_ms if session_timeout_ms is not None else \
            self.core.config.group_consumer_session_timeout_ms
        interval_ms = heartbeat_interval_ms if heartbeat_interval_ms is not None else \
            self.core.config.group_consumer_heartbeat_interval_ms
        try:
            validate_heartbeat(request, self.consumer_assignors())
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._consumer_group_leave(request)
            return self._consumer_group_heartbeat(request, topics, session_ms, interval_ms, authorized_topics)
        except ConsumerGroupError as exc:
            log.debug("ConsumerGroupHeartbeat of %s in group %s failed: %s %s", request.member_id,
                      request.group_id, exc.code.name, exc.message)
            return ConsumerGroupHeartbeatResult(error=exc.code, error_message=exc.message)

    def _consumer_group_for(self, group_id: str, create: bool,
                            request: ConsumerGroupHeartbeatRequest) -> tuple[GroupMetadata, ConsumerGroup, bool]:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: (group record, consumer group, whether it must still be
        put in ``groups``/converted when the heartbeat succeeds)."""
        gm = self.core.groups.get(group_id)
        if gm is not None and gm.state == GroupState.DEAD and gm.consumer is None:
            gm = None
        if gm is None:
            if self.core.share_group_exists(group_id):
                raise ConsumerGroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            if not create:
                raise ConsumerGroupError(E.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            gm = GroupMetadata(group_id, self.core._now_ms())
            return gm, ConsumerGroup(group_id), True
        if gm.consumer is not None and gm.group_type == GROUP_TYPE_CONSUMER:
            return gm, gm.consumer, False
        if create and gm.group_type == GROUP_TYPE_CLASSIC:
            if gm.state == GroupState.EMPTY and not gm.members:
                log.info("converting the empty classic group %s to a consumer group", group_id)
                return gm, ConsumerGroup(group_id), True
            if self.conversions is not None and self.conversions.online_upgrade(gm, request) \
                    and gm.consumer is not None:
                return gm, gm.consumer, False
        raise ConsumerGroupError(E.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")

    def _install_consumer_group(self, gm: GroupMetadata, cg: ConsumerGroup) -> None:
        """Make ``gm`` (new or an empty classic group, offsets kept) the record of consumer group ``cg``."""
        gm.group_type = GROUP_TYPE_CONSUMER
        gm.consumer = cg
        gm.protocol_type = CONSUMER_PROTOCOL_TYPE
        gm.protocol_name = None
        gm.leader_id = None
        self.core.groups[gm.group_id] = gm

    def _consumer_group_heartbeat(
        self, req: ConsumerGroupHeartbeatRequest, topics: TopicsImage, session_ms: int, interval_ms: int,
        authorized_topics: Callable[[set[str]], set[str]] | None,
    ) -> ConsumerGroupHeartbeatResult:
        """Kafka's ``consumerGroupHeartbeat`` (a join, a rejoin or a regular heartbeat)."""
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        gm, cg, install = self._consumer_group_for(req.group_id, joining, req)
        max_size = self.core.config.group_consumer_max_size
        if len(cg.members) >= max_size and (not req.member_id or req.member_id not in cg.members):
            raise ConsumerGroupError(E.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum "
                                                               f"capacity of {max_size} members.")
        member_id = req.member_id or new_member_id()

        # -- find (or plan) the member, validating before anything changes
        replaced: ConsumerGroupMember | None = None
        if req.instance_id is None:
            existing = cg.members.get(member_id)
            if existing is None and not joining:
                raise ConsumerGroupError(E.UNKNOWN_MEMBER_ID,
                                         f"Member {member_id} is not a member of group {req.group_id}.")
            if existing is not None:
                _check_member_epoch(existing, req.member_epoch, req.owned_partitions)
        else:
            static = cg.static_member(req.instance_id)
            if joining:
                existing = None
                if static is not None:
                    if not static.uses_classic_protocol and static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                        raise ConsumerGroupError(
                            E.UNRELEASED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {req.instance_id} cannot join the group "
                            f"because the instance id is owned by {static.member_id} member.")
                    replaced = static
                elif member_id in cg.members:
                    existing = cg.members[member_id]
            else:
                if static is None:
                    raise ConsumerGroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
                if static.member_id != member_id:
                    log.info("static member %s with instance id %s of group %s is fenced by member %s",
                             member_id, req.instance_id, req.group_id, static.member_id)
                    raise ConsumerGroupError(
                        E.FENCED_INSTANCE_ID,
                        f"Static member {member_id} with instance id {req.instance_id} was fenced by member "
                        f"{static.member_id}.")
                _check_member_epoch(static, req.member_epoch, req.owned_partitions)
                existing = static

        new_regex = _regex(req.subscribed_topic_regex)
        old_regex = _regex(existing.subscribed_topic_regex) if existing is not None else \
            _regex(replaced.subscribed_topic_regex) if replaced is not None else None
        if req.subscribed_topic_regex is not None and new_regex is not None and new_regex != old_regex \
                and new_regex not in cg.resolved_regexes:
            try:
                compile_topic_regex(new_regex)
            except InvalidRegexError as exc:
                raise ConsumerGroupError(E.INVALID_REGULAR_EXPRESSION, regex_error_message(new_regex, exc)) from None

        # -- from here on the heartbeat succeeds: apply it
        if install:
            self._install_consumer_group(gm, cg)
        now_ms = self.core._now_ms()
        if replaced is not None:
            member = self._replace_static_member(cg, replaced, member_id)
            before = _snapshot(replaced)
            log.info("static member with instance id %s rejoins group %s as %s (replacing %s)",
                     req.instance_id, req.group_id, member_id, replaced.member_id)
        elif existing is not None:
            member = existing
            before = _snapshot(existing)
        else:
            member = ConsumerGroupMember(member_id)
            before = _snapshot(member)
            cg.members[member_id] = member
            log.info("member %s joins consumer group %s%s", member_id, req.group_id,
                     f" with instance id {req.instance_id}" if req.instance_id else "")

        if req.instance_id is not None and cg.static_members.get(req.instance_id) != member.member_id:
            if member.instance_id is not None and cg.static_members.get(member.instance_id) == member.member_id:
                del cg.static_members[member.instance_id]
            cg.static_members[req.instance_id] = member.member_id
        if req.instance_id is not None:
            member.instance_id = req.instance_id
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            member.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            member.subscribed_topic_names = sorted(set(req.subscribed_topic_names))
        if req.subscribed_topic_regex is not None:
            member.subscribed_topic_regex = req.subscribed_topic_regex
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.classic_protocols = None

        names_changed = set(before.subscribed_topic_names) != set(member.subscribed_topic_names)
        regex_changed = old_regex != _regex(member.subscribed_topic_regex)
        bump = cg.group_epoch == 0 or names_changed or regex_changed
        if regex_changed:
            log.debug("member %s of group %s now subscribes to regex %s", member_id, req.group_id,
                      member.subscribed_topic_regex)
        if self._refresh_regexes(cg, topics, authorized_topics):
            bump = True
        if self._refresh_subscribed_topics(cg, topics):
            bump = True
        if bump:
            self._bump_group_epoch(gm, cg)

        # -- target assignment
        if cg.group_epoch > cg.assignment_epoch:
            self._update_target_assignment(cg)
        target = cg.target_assignment.get(member_id, {})

        # -- reconcile this member
        subscription_changed = names_changed or regex_changed
        if subscription_changed or not member.is_reconciled_to(cg.assignment_epoch):
            try:
                nxt = reconcile(member, cg.assignment_epoch, target, self._subscribed_topic_ids(cg, member),
                                cg.partition_epoch, req.owned_partitions, subscription_changed)
            except MemberFencedError as exc:
                raise ConsumerGroupError(E.FENCED_MEMBER_EPOCH, str(exc)) from None
            self._apply_reconciliation(cg, member, nxt)

        member.session_deadline = self.core._deadline(session_ms)
        self.core._schedule(member.session_deadline)
        cg.update_state(now_ms)
        self.core._persist_group_metadata(gm)

        full_request = (req.rebalance_timeout_ms != -1
                        and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
                        and req.owned_partitions is not None)
        send_assignment = (joining or full_request
                           or not _same_assignment(before.assigned_partitions, member.assigned_partitions))
        return ConsumerGroupHeartbeatResult(
            member_id=member.member_id, member_epoch=member.member_epoch, heartbeat_interval_ms=interval_ms,
            assignment=copy_assignment(member.assigned_partitions) if send_assignment else None)

    # ------------------------------------------------------------------ subscription and assignment

    def _refresh_regexes(self, cg: ConsumerGroup, topics: TopicsImage,
                         authorized_topics: Callable[[set[str]], set[str]] | None) -> bool:
        """Resolve the group's regexes that are new or, when the topic names changed, all of them; drop those
        no member uses.  True if any resolution changed (the group epoch must be bumped)."""
        regexes = {r for m in cg.members.values() if (r := _regex(m.subscribed_topic_regex)) is not None}
        changed = False
        for stale in set(cg.resolved_regexes) - regexes:
            changed = changed or bool(cg.resolved_regexes[stale])
            del cg.resolved_regexes[stale]
        if not regexes:
            cg.regex_topic_names = None
            return changed
        names = frozenset(t.name for t in topics.all_topics())
        todo = regexes if names != cg.regex_topic_names else regexes - set(cg.resolved_regexes)
        cg.regex_topic_names = names
        for regex in todo:
            resolved = resolve_regex(regex, names)
            if authorized_topics is not None and resolved:
                resolved = authorized_topics(resolved)
            if cg.resolved_regexes.get(regex) != resolved:
                if cg.resolved_regexes.get(regex, set()) != resolved:
                    changed = True
                cg.resolved_regexes[regex] = resolved
                log.info("group %s: regex %s resolves to %s", cg.group_id, regex, sorted(resolved))
        return changed

    def _refresh_subscribed_topics(self, cg: ConsumerGroup, topics: TopicsImage) -> bool:
        """Kafka's ``updateSubscriptionMetadata``: the subscribed topics' metadata and hash; True if the hash
        changed (a topic created, deleted or grown)."""
        images = topic_images(cg.subscribed_topic_names(), topics)
        new_hash = metadata_hash(images)
        cg.subscribed_topics = images
        if new_hash != cg.metadata_hash:
            cg.metadata_hash = new_hash
            return True
        return False

    def _bump_group_epoch(self, gm: GroupMetadata, cg: ConsumerGroup) -> None:
        cg.group_epoch += 1
        log.info("bumped the epoch of consumer group %s to %d", cg.group_id, cg.group_epoch)

    def _subscribed_topic_ids(self, cg: ConsumerGroup, member: ConsumerGroupMember) -> frozenset[uuid.UUID]:
        return frozenset(cg.subscribed_topics[name].topic_id for name in cg.member_subscription(member)
                         if name in cg.subscribed_topics)

    def _preferred_assignor(self, cg: ConsumerGroup) -> str:
        """Kafka's ``computePreferredServerAssignor``: the assignor most members ask for, else the default."""
        counts: dict[str, int] = {}
        for m in cg.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        assignors = self.consumer_assignors()
        if counts:
            best = max(sorted(counts), key=lambda name: counts[name])
            if best in ASSIGNORS:
                return best
        return assignors[0]

    def _update_target_assignment(self, cg: ConsumerGroup) -> None:
        """Kafka's ``TargetAssignmentBuilder``: run the assignor over every member at the group epoch."""
        name = self._preferred_assignor(cg)
        specs = {mid: MemberSubscriptionSpec(self._subscribed_topic_ids(cg, m), cg.target_assignment.get(mid, {}),
                                             m.instance_id, m.rack_id)
                 for mid, m in cg.members.items()}
        counts = {img.topic_id: img.num_partitions for img in cg.subscribed_topics.values()}
        try:
            target = ASSIGNORS[name].assign(specs, counts)
        except PartitionAssignorError as exc:
            msg = f"Failed to compute a new target assignment for epoch {cg.group_epoch}: {exc}"
            log.error("group %s: %s", cg.group_id, msg)
            raise ConsumerGroupError(E.UNKNOWN_SERVER_ERROR, msg) from None
        cg.target_assignment = {mid: {t: ps for t, ps in a.items() if ps} for mid, a in target.items()}
        cg.assignment_epoch = cg.group_epoch
        cg.assignor_name = name
        log.info("computed a new target assignment for consumer group %s at epoch %d with the %s assignor",
                 cg.group_id, cg.group_epoch, name)

    def _apply_reconciliation(self, cg: ConsumerGroup, member: ConsumerGroupMember, nxt: ReconciledState) -> None:
        """Move the member to its next state, keeping the partition epochs and its rebalance timer in step
        (Kafka's ``ConsumerGroup.updateMember`` and the timer part of ``maybeReconcile``)."""
        if nxt == current_state(member):
            return
        cg.remove_partition_epochs(member.assigned_partitions, member.member_epoch)
        cg.remove_partition_epochs(member.partitions_pending_revocation, member.member_epoch)
        nxt.apply(member)
        cg.add_partition_epochs(member.assigned_partitions, member.member_epoch)
        cg.add_partition_epochs(member.partitions_pending_revocation, member.member_epoch)
        log.debug("member %s of group %s: epoch %d (previous %d), %s, assigned %s, revoking %s",
                  member.member_id, cg.group_id, member.member_epoch, member.previous_member_epoch,
                  member.state.value, member.assigned_partitions, member.partitions_pending_revocation)
        if member.uses_classic_protocol:
            return
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            member.rebalance_deadline = self.core._deadline(member.rebalance_timeout_ms)
            member.rebalance_deadline_epoch = member.member_epoch
            self.core._schedule(member.rebalance_deadline)
        else:
            member.rebalance_deadline = None

    def _replace_static_member(self, cg: ConsumerGroup, old: ConsumerGroupMember,
                               new_member_id: str) -> ConsumerGroupMember:
        """Kafka's ``replaceMember``: a static member rejoins under a new member id with its assignment."""
        cg.remove_partition_epochs(old.assigned_partitions, old.member_epoch)
        cg.remove_partition_epochs(old.partitions_pending_revocation, old.member_epoch)
        cg.members.pop(old.member_id, None)
        target = cg.target_assignment.pop(old.member_id, None)
        new = ConsumerGroupMember(
            new_member_id, instance_id=old.instance_id, rack_id=old.rack_id, client_id=old.client_id,
            client_host=old.client_host, rebalance_timeout_ms=old.rebalance_timeout_ms,
            subscribed_topic_names=list(old.subscribed_topic_names),
            subscribed_topic_regex=old.subscribed_topic_regex, server_assignor=old.server_assignor,
            member_epoch=0, previous_member_epoch=0, state=old.state,
            assigned_partitions=copy_assignment(old.assigned_partitions),
            partitions_pending_revocation=copy_assignment(old.partitions_pending_revocation),
            classic_protocols=old.classic_protocols)
        if target is not None:
            cg.target_assignment[new_member_id] = target
        cg.members[new_member_id] = new
        assert old.instance_id is not None
        cg.static_members[old.instance_id] = new_member_id
        cg.add_partition_epochs(new.assigned_partitions, new.member_epoch)
        cg.add_partition_epochs(new.partitions_pending_revocation, new.member_epoch)
        old.session_deadline = old.rebalance_deadline = None
        return new

    # ------------------------------------------------------------------ leaving and fencing

    def _consumer_group_leave(self, req: ConsumerGroupHeartbeatRequest) -> ConsumerGroupHeartbeatResult:
        """Kafka's ``consumerGroupLeave``: -1 leaves, -2 is a static member's temporary leave."""
        gm = self.core.groups.get(req.group_id)
        if gm is None:
            raise ConsumerGroupError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        cg = gm.consumer
        if cg is None or gm.group_type != GROUP_TYPE_CONSUMER:
            raise ConsumerGroupError(E.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        if req.instance_id is None:
            member = cg.members.get(req.member_id)
            if member is None:
                raise ConsumerGroupError(E.UNKNOWN_MEMBER_ID,
                                         f"Member {req.member_id} is not a member of group {req.group_id}.")
            log.info("member %s left consumer group %s", req.member_id, req.group_id)
            self._fence_consumer_members(gm, [member])
            return ConsumerGroupHeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)
        static = cg.static_member(req.instance_id)
        if static is None:
            raise ConsumerGroupError(E.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if static.member_id != req.member_id:
            raise ConsumerGroupError(
                E.FENCED_INSTANCE_ID,
                f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member "
                f"{static.member_id}.")
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            log.info("static member %s with instance id %s temporarily left consumer group %s",
                     static.member_id, req.instance_id, req.group_id)
            self._apply_reconciliation(cg, static, ReconciledState(
                LEAVE_GROUP_STATIC_MEMBER_EPOCH, static.previous_member_epoch, static.state,
                static.assigned_partitions, {}))
            static.rebalance_deadline = None
            cg.update_state(self.core._now_ms())
            return ConsumerGroupHeartbeatResult(member_id=static.member_id,
                                                member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
        log.info("static member %s with instance id %s left consumer group %s", static.member_id,
                 req.instance_id, req.group_id)
        self._fence_consumer_members(gm, [static])
        return ConsumerGroupHeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)

    def _fence_consumer_members(self, gm: GroupMetadata, members: Iterable[ConsumerGroupMember]) -> None:
        """Kafka's ``consumerGroupFenceMembers``: remove the members, bump the group epoch (the target
        assignment is recomputed at the next heartbeat), then maybe downgrade the group to classic."""
        cg = gm.consumer
        assert cg is not None
        removed = False
        for member in members:
            if cg.members.get(member.member_id) is not member:
                continue
            cg.remove_partition_epochs(member.assigned_partitions, member.member_epoch)
            cg.remove_partition_epochs(member.partitions_pending_revocation, member.member_epoch)
            del cg.members[member.member_id]
            cg.target_assignment.pop(member.member_id, None)
            if member.instance_id is not None and cg.static_members.get(member.instance_id) == member.member_id:
                del cg.static_members[member.instance_id]
            member.session_deadline = member.rebalance_deadline = None
            removed = True
        if not removed:
            return
        # The subscription without them, over the topic metadata last seen (Kafka recomputes the hash).
        regexes = {r for m in cg.members.values() if (r := _regex(m.subscribed_topic_regex)) is not None}
        for stale in set(cg.resolved_regexes) - regexes:
            del cg.resolved_regexes[stale]
        names = cg.subscribed_topic_names()
        cg.subscribed_topics = {n: img for n, img in cg.subscribed_topics.items() if n in names}
        cg.metadata_hash = metadata_hash(cg.subscribed_topics)
        self._bump_group_epoch(gm, cg)
        cg.update_state(self.core._now_ms())
        if self.conversions is None or not self.conversions.maybe_downgrade(gm):
            self.core._persist_group_metadata(gm)

    # ------------------------------------------------------------------ timers

    def _consumer_next_deadline(self) -> float:
        """The earliest session or rebalance deadline of any consumer group member."""
        nxt = float("inf")
        for g in self.core.groups.values():
            if g.consumer is None:
                continue
            for m in g.consumer.members.values():
                if m.session_deadline is not None and m.session_deadline < nxt:
                    nxt = m.session_deadline
                if m.rebalance_deadline is not None and m.rebalance_deadline < nxt:
                    nxt = m.rebalance_deadline
        return nxt

    def _fire_consumer_timers(self, now: float) -> None:
        """Fence members whose session expired or who did not revoke within their rebalance timeout."""
        for gid in list(self.core.groups):
            gm = self.core.groups.get(gid)
            if gm is None or gm.consumer is None:
                continue
            cg = gm.consumer
            expired: list[ConsumerGroupMember] = []
            for m in list(cg.members.values()):
                if m.session_deadline is not None and m.session_deadline <= now:
                    log.info("member %s fenced from consumer group %s because the member session expired",
                             m.member_id, gid)
                    expired.append(m)
                elif m.rebalance_deadline is not None and m.rebalance_deadline <= now:
                    m.rebalance_deadline = None
                    if m.member_epoch == m.rebalance_deadline_epoch:
                        log.info("member %s fenced from consumer group %s because it failed to transition from "
                                 "epoch %d within %dms", m.member_id, gid, m.member_epoch, m.rebalance_timeout_ms)
                        expired.append(m)
            if expired and gm.consumer is cg:
                self._fence_consumer_members(gm, expired)

    # ------------------------------------------------------------------ ConsumerGroupDescribe

    def consumer_group_describe(self, group_ids: list[str]) -> list[DescribedConsumerGroup]:
        """Kafka's ``consumerGroupDescribe``: GROUP_ID_NOT_FOUND for unknown and non-consumer groups."""
        out = []
        default_assignor = self.consumer_assignors()[0]
        for gid in group_ids:
            if self.core._closed:
                out.append(DescribedConsumerGroup(gid, E.COORDINATOR_NOT_AVAILABLE))
                continue
            gm = self.core.groups.get(gid)
            if gm is None:
                out.append(DescribedConsumerGroup(gid, E.GROUP_ID_NOT_FOUND, f"Group {gid} not found."))
                continue
            cg = gm.consumer
            if cg is None or gm.group_type != GROUP_TYPE_CONSUMER:
                out.append(DescribedConsumerGroup(gid, E.GROUP_ID_NOT_FOUND,
                                                  f"Group {gid} is not a consumer group."))
                continue
            assignor = self._preferred_assignor(cg) if cg.members else (cg.assignor_name or default_assignor)
            out.append(DescribedConsumerGroup(
                gid, group_state=cg.compute_state().value, group_epoch=cg.group_epoch,
                assignment_epoch=cg.assignment_epoch, assignor_name=assignor,
                members=[DescribedConsumerGroupMember(
                    m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
                    list(m.subscribed_topic_names), m.subscribed_topic_regex,
                    copy_assignment(m.assigned_partitions), copy_assignment(cg.target_assignment.get(mid, {})),
                    MEMBER_TYPE_CLASSIC if m.uses_classic_protocol else MEMBER_TYPE_CONSUMER)
                    for mid, m in cg.members.items()]))
        return out


class _Snapshot:
    """What the heartbeat compares against after updating a member."""

    __slots__ = ("assigned_partitions", "subscribed_topic_names")

    def __init__(self, names: list[str], assigned: Assignment) -> None:
        self.subscribed_topic_names = names
        self.assigned_partitions = assigned


def _snapshot(member: ConsumerGroupMember) -> _Snapshot:
    return _Snapshot(list(member.subscribed_topic_names), copy_assignment(member.assigned_partitions))


def _same_assignment(a: Assignment, b: Assignment) -> bool:
    return {t: p for t, p in a.items() if p} == {t: p for t, p in b.items() if p}
