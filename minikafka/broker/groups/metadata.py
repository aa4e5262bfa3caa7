"""Group and member state of the classic group protocol.

Models Kafka's ``kafka.coordinator.group.GroupMetadata`` (group state machine,
members, static members, pending members, protocol selection by vote, committed
offsets and their expiry) and ``MemberMetadata`` (one member's protocols,
assignment, timeouts and the JoinGroup/SyncGroup response it awaits).

Deliberate differences from Kafka: a member's "awaiting callback" is a
:class:`Reply` (a one-shot trio event the request handler waits on) instead of
a callback; the delayed operations (DelayedJoin, InitialDelayedJoin,
DelayedSync, DelayedHeartbeat) are plain deadline fields on the group and its
members that :class:`~minikafka.broker.groups.coordinator.GroupCoordinator`'s
timer loop checks.  Deadlines are in the coordinator clock's seconds;
timestamps of offset commits and state changes are wall-clock milliseconds.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable, Generic, TypeVar

import trio

from ...common import OffsetAndMetadata, TopicPartition
from ...protocol.errors import ErrorCode
from .consumer.model import ConsumerGroup

log = logging.getLogger(__name__)

GROUP_TYPE_CLASSIC = "classic"
GROUP_TYPE_CONSUMER = "consumer"

CONSUMER_PROTOCOL_TYPE = "consumer"
NO_PROTOCOL = ""
NO_LEADER = ""
NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # GroupCoordinator.NewMemberJoinTimeoutMs


class GroupState(str, Enum):
    """Kafka's ``GroupState``; the value is the name DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, set[GroupState]] = {
    GroupState.DEAD: set(GroupState),
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
}

T = TypeVar("T")


class Reply(Generic[T]):
    """A one-shot response slot a handler awaits (Kafka's awaiting join/sync callback)."""

    __slots__ = ("_event", "_value")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._value: T | None = None

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def set(self, value: T) -> bool:
        """Deliver ``value``; a second delivery is ignored.  True if delivered."""
        if self._event.is_set():
            return False
        self._value = value
        self._event.set()
        return True

    async def wait(self) -> T:
        await self._event.wait()
        assert self._value is not None
        return self._value


@dataclass(slots=True)
class JoinResult:
    """Kafka's ``JoinGroupResult``."""

    member_id: str
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    skip_assignment: bool = False
    # (member_id, group_instance_id, metadata) of every member, for the leader only
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    """Kafka's ``SyncGroupResult``."""

    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(slots=True)
class MemberSummary:
    """Kafka's ``MemberSummary`` (one DescribeGroups member)."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupSummary:
    """Kafka's ``GroupSummary`` (one DescribeGroups group)."""

    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary]
    error_message: str | None = None  # why the group could not be described (DescribeGroups v6)


@dataclass(slots=True)
class GroupOverview:
    """Kafka's ``GroupOverview`` (one ListGroups entry)."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = GROUP_TYPE_CLASSIC  # ListGroups v5


class MemberMetadata:
    """One member of a classic group (Kafka's ``MemberMetadata``)."""

    def __init__(
        self,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment: bytes = b""
        self.join_reply: Reply[JoinResult] | None = None
        self.sync_reply: Reply[SyncResult] | None = None
        self.is_new = False
        self.heartbeat_deadline: float | None = None

    def __repr__(self) -> str:
        return (
            f"MemberMetadata(member_id={self.member_id!r}, group_instance_id={self.group_instance_id!r}, "
            f"client_id={self.client_id!r}, protocols={[p for p, _ in self.protocols]})"
        )

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, in the same order, with the same metadata."""
        return len(protocols) == len(self.protocols) and all(
            a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols)
        )

    def vote(self, candidates: set[str]) -> str:
        """The first of this member's protocols (its preference order) among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {candidates}")

    def summary(self, protocol: str | None) -> MemberSummary:
        meta = self.metadata(protocol) if protocol is not None else b""
        assignment = self.assignment if protocol is not None else b""
        return MemberSummary(
            self.member_id, self.group_instance_id, self.client_id, self.client_host, meta, assignment
        )

    def resolve_join(self, result: JoinResult) -> bool:
        """Answer the pending JoinGroup, if any (Kafka's ``maybeInvokeJoinCallback``)."""
        reply, self.join_reply = self.join_reply, None
        return reply.set(result) if reply is not None else False

    def resolve_sync(self, result: SyncResult) -> bool:
        """Answer the pending SyncGroup, if any (Kafka's ``maybeInvokeSyncCallback``)."""
        reply, self.sync_reply = self.sync_reply, None
        return reply.set(result) if reply is not None else False


class GroupMetadata:
    """One classic group: state machine, members, offsets (Kafka's ``GroupMetadata``)."""

    def __init__(self, group_id: str, now_ms: int, state: GroupState = GroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        # "classic" or "consumer" (KIP-848); a consumer group's membership is ``consumer``, its
        # committed offsets stay in ``offsets`` (Kafka's OffsetMetadataManager share of the group).
        self.group_type: str = GROUP_TYPE_CLASSIC
        self.consumer: ConsumerGroup | None = None
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, float] = {}  # member id -> expiry deadline
        self.pending_sync_members: set[str] = set()
        self.supported_protocols: dict[str, int] = {}
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.offsets: dict[TopicPartition, OffsetAndMetadata] = {}
        # Offsets of open transactions by producer id (TxnOffsetCommit), visible only on commit.
        self.pending_txn_offsets: dict[int, dict[TopicPartition, OffsetAndMetadata]] = {}
        # The delayed join (DelayedJoin / InitialDelayedJoin) while PreparingRebalance.
        self.join_deadline: float | None = None
        self.join_initial = False
        self.join_delay_ms = 0
        self.join_remaining_ms = 0
        # The delayed sync (DelayedSync) after a rebalance completes.
        self.sync_deadline: float | None = None
        self.sync_generation = -1

    def __repr__(self) -> str:
        return (
            f"GroupMetadata(group_id={self.group_id!r}, state={self.state.value}, "
            f"generation={self.generation_id}, members={list(self.members)})"
        )

    # -- state ---------------------------------------------------------------

    def is_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(
                f"group {self.group_id} should be in one of {_VALID_PREVIOUS[state]} before moving to {state}"
            )
        self.state = state
        self.current_state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- members -------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def add(self, member: MemberMetadata, reply: Reply[JoinResult] | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"static member {member.group_instance_id} already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._inc_protocols(member)
        member.join_reply = reply
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> MemberMetadata | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._dec_protocols(member)
            if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def update_member(
        self,
        member: MemberMetadata,
        protocols: list[tuple[str, bytes]],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        reply: Reply[JoinResult] | None,
    ) -> None:
        self._dec_protocols(member)
        member.protocols = protocols
        self._inc_protocols(member)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_reply is not None and reply is not None and member.join_reply is not reply:
            # Kafka drops the superseded callback; answer it instead of leaving a handler hanging.
            member.join_reply.set(JoinResult(member.member_id, ErrorCode.REBALANCE_IN_PROGRESS))
        member.join_reply = reply

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """Give a static member a new member id, fencing whoever still uses the old one."""
        member = self.members.pop(old_member_id)
        member.resolve_join(JoinResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        member.resolve_sync(SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        return member

    def maybe_elect_new_joined_leader(self) -> bool:
        """Make sure the leader is a member that rejoined; False if none did."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info("group %s: new leader %s (old leader did not rejoin)", self.group_id, member_id)
                self.leader_id = member_id
                return True
        return False

    # -- protocols -----------------------------------------------------------

    def _inc_protocols(self, member: MemberMetadata) -> None:
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1

    def _dec_protocols(self, member: MemberMetadata) -> None:
        for name in member.protocol_names():
            n = self.supported_protocols.get(name, 0) - 1
            if n <= 0:
                self.supported_protocols.pop(name, None)
            else:
                self.supported_protocols[name] = n

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        if self.state == GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols.get(p, 0) == n for p in protocols)

    def select_protocol(self) -> str:
        """The protocol all members support that gets most members' votes."""
        if not self.members:
            raise RuntimeError("cannot select a protocol for an empty group")
        n = len(self.members)
        candidates = {p for p, count in self.supported_protocols.items() if count == n}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes.items(), key=lambda kv: kv[1])[0]

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.protocol_name is None:
            raise RuntimeError(f"no protocol selected for group {self.group_id}")
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """Topics the consumer members subscribe to (None when unknown)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics

    # -- summaries -----------------------------------------------------------

    def summary(self) -> GroupSummary:
        if self.state == GroupState.STABLE and self.protocol_name is not None:
            members = [m.summary(self.protocol_name) for m in self.members.values()]
            return GroupSummary(self.state.value, self.protocol_type or "", self.protocol_name, members)
        members = [m.summary(None) for m in self.members.values()]
        return GroupSummary(self.state.value, self.protocol_type or "", NO_PROTOCOL, members)

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", self.state.value)

    # -- offsets -------------------------------------------------------------

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> list[TopicPartition]:
        """Drop offsets past retention (Kafka's ``removeExpiredOffsets``); return their keys."""

        def expired(
            base: Callable[[OffsetAndMetadata], int], keep_topics: frozenset[str] | set[str] = frozenset()
        ) -> list[TopicPartition]:
            out = []
            for tp, om in self.offsets.items():
                if tp[0] in keep_topics:
                    continue
                if om.expire_timestamp is None:
                    if now_ms - base(om) >= retention_ms:
                        out.append(tp)
                elif now_ms >= om.expire_timestamp:
                    out.append(tp)
            return out

        if self.protocol_type and self.state == GroupState.EMPTY:
            state_ts = self.current_state_timestamp
            keys = expired(lambda om: state_ts if state_ts is not None else om.commit_timestamp)
        elif (
            self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
            and self.state == GroupState.STABLE
        ):
            keys = expired(lambda om: om.commit_timestamp, self.subscribed_topics)
        elif not self.protocol_type:
            keys = expired(lambda om: om.commit_timestamp)
        else:
            keys = []
        for tp in keys:
            del self.offsets[tp]
        return keys


def parse_subscription_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription (int16 version, then an int16-string array)."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        if version < 0:
            return None
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos = 6
        topics = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(bytes(metadata[pos:pos + n]).decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
