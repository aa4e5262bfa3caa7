"""A member of a KIP-848 consumer group, sans-I/O (Java's ``ConsumerMembershipManager`` +
``AbstractMembershipManager``, with ``ConsumerHeartbeatRequestManager.HeartbeatState`` and the
error handling of ``AbstractHeartbeatRequestManager``).

The broker computes the assignment; the member heartbeats (ConsumerGroupHeartbeat,
api key 68) and reconciles what it is given:

- it joins with member epoch 0 and a member id it generated itself (v1,
  KIP-1082; a v0 broker hands one out), sending every field;
- later heartbeats carry only what changed since the last one sent (the
  subscription, the regex, the assignor, the owned partitions), null otherwise;
  after an error the next heartbeat sends everything again;
- a heartbeat response's assignment (topic ids and partitions) becomes the
  *target*; the member revokes what it no longer owns (commit, callback),
  assigns what is new, then acknowledges the reconciled assignment by sending
  its owned partitions in the next heartbeat (sent at once);
- FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID: the partitions are lost and the
  member rejoins with epoch 0; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: the
  coordinator is looked up again; leaving sends epoch -1 (a static member -2).

This class holds the state and decides; :mod:`.consumer_group_coordinator`
does the I/O (requests, commits, callbacks).  States and transitions are
Java's ``MemberState`` except ``STALE`` (no poll timer here: the consumer
never leaves the group because the application polls too rarely).
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Callable, Iterable, Mapping

from ...protocol.errors import ErrorCode
from ..fetch_session import TopicPartition

log = logging.getLogger(__name__)

__all__ = [
    "MemberState", "LocalAssignment", "Reconciliation", "HeartbeatResult", "ConsumerMembershipManager",
    "JOIN_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_MEMBER_EPOCH", "LEAVE_GROUP_STATIC_MEMBER_EPOCH", "generate_member_id",
]

#: ``ConsumerGroupHeartbeatRequest``'s epochs
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class MemberState(Enum):
    """Java's ``MemberState`` (without ``STALE``)."""

    UNSUBSCRIBED = "UNSUBSCRIBED"
    JOINING = "JOINING"
    RECONCILING = "RECONCILING"
    ACKNOWLEDGING = "ACKNOWLEDGING"
    STABLE = "STABLE"
    FENCED = "FENCED"
    PREPARE_LEAVING = "PREPARE_LEAVING"
    LEAVING = "LEAVING"
    FATAL = "FATAL"

    @property
    def can_handle_new_assignment(self) -> bool:
        return self in (MemberState.JOINING, MemberState.STABLE, MemberState.RECONCILING, MemberState.ACKNOWLEDGING)


_S = MemberState
_IN_GROUP = {_S.JOINING, _S.STABLE, _S.RECONCILING, _S.ACKNOWLEDGING}
#: state -> the states it may be entered from (Java's ``MemberState.getPreviousValidStates``)
_PREVIOUS: dict[MemberState, set[MemberState]] = {
    _S.UNSUBSCRIBED: {_S.PREPARE_LEAVING, _S.LEAVING, _S.FENCED},
    _S.JOINING: {_S.UNSUBSCRIBED, _S.FENCED},
    _S.RECONCILING: _IN_GROUP,
    _S.ACKNOWLEDGING: {_S.RECONCILING},
    _S.STABLE: {_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING},
    _S.FENCED: _IN_GROUP,
    _S.PREPARE_LEAVING: _IN_GROUP,
    _S.LEAVING: {_S.PREPARE_LEAVING},
    _S.FATAL: set(MemberState),
}


def generate_member_id() -> str:
    """A random member id as Java's ``Uuid.randomUuid().toString()``: URL-safe base64, no padding, 22 chars,
    never starting with '-' (Java's rule, so the id cannot be taken for a command-line option)."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-") and any(raw):
            return text


@dataclass(frozen=True)
class LocalAssignment:
    """An assignment with a local epoch bumped on every new target (Java's ``LocalAssignment``), so two
    targets with the same partitions are still told apart (and re-acknowledged)."""

    local_epoch: int
    partitions: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)

    NONE_EPOCH = -1

    @property
    def is_none(self) -> bool:
        return self.local_epoch == self.NONE_EPOCH

    def updated_with(self, partitions: Mapping[uuid.UUID, frozenset[int]]) -> "LocalAssignment | None":
        """The next target, or None when ``partitions`` is what this assignment already holds."""
        if not self.is_none and dict(partitions) == dict(self.partitions):
            return None
        return LocalAssignment(self.local_epoch + 1, dict(partitions))

    def topic_partitions(self) -> list[dict]:
        """As the heartbeat's ``topic_partitions``."""
        return [{"topic_id": tid, "partitions": sorted(ps)} for tid, ps in sorted(self.partitions.items())]


NO_ASSIGNMENT = LocalAssignment(LocalAssignment.NONE_EPOCH, {})


@dataclass
class Reconciliation:
    """One reconciliation step: what to revoke, then what to assign (Java's ``maybeReconcile``)."""

    target: LocalAssignment  # the resolvable part of the target assignment (the local epoch of the target)
    assigned: set[TopicPartition]
    added: set[TopicPartition]
    revoked: set[TopicPartition]
    unresolved: set[uuid.UUID]


class HeartbeatResult(Enum):
    """What the driver does after a heartbeat response."""

    OK = "ok"
    IGNORED = "ignored"  # the member is leaving or out of the group
    RETRY = "retry"  # back off, then heartbeat again
    FIND_COORDINATOR = "find_coordinator"  # forget the coordinator, heartbeat as soon as a new one is found
    FENCED = "fenced"  # release the partitions (lost), then rejoin
    FATAL = "fatal"  # the member stops: ``fatal_error`` is raised from poll


class HeartbeatError(Exception):
    """A fatal ConsumerGroupHeartbeat error (``code`` is Kafka's error code)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


@dataclass
class _SentFields:
    """The fields of the last heartbeat sent (Java's ``HeartbeatState.SentFields``)."""

    rebalance_timeout_ms: int = -1
    subscribed_topic_names: frozenset[str] | None = None
    pattern: str | None = None
    server_assignor: str | None = None
    local_assignment: LocalAssignment | None = None


class ConsumerMembershipManager:
    """The member's state in its consumer group (KIP-848), without I/O."""

    def __init__(self, group_id: str, *, group_instance_id: str | None = None, server_assignor: str | None = None,
                 rebalance_timeout_ms: int = 300000, member_id: str | None = None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.server_assignor = server_assignor
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = member_id if member_id is not None else generate_member_id()
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.state = MemberState.UNSUBSCRIBED
        self.current_assignment = NO_ASSIGNMENT
        self.target_assignment = NO_ASSIGNMENT
        self.heartbeat_interval_ms: int | None = None
        self.fatal_error: HeartbeatError | None = None
        self.topic_names: dict[uuid.UUID, str] = {}  # Java's assignedTopicNamesCache
        self.subscription_updated = False
        self.reconciliation_in_progress = False
        self.rejoined_while_reconciling = False
        self.rebalances = 0  # reconciliations completed
        self._sent = _SentFields()

    # -- state -------------------------------------------------------------------------------------
    def transition_to(self, state: MemberState) -> None:
        if state != self.state and self.state not in _PREVIOUS[state]:
            raise RuntimeError(f"invalid member state transition from {self.state.name} to {state.name}")
        if state != self.state:
            log.info("group %s: member %s epoch %d: %s -> %s", self.group_id, self.member_id, self.member_epoch,
                     self.state.name, state.name)
        self.state = state

    @property
    def in_group(self) -> bool:
        """False when the member is out of the group (Java's ``!isNotInGroup``)."""
        return self.state not in (_S.UNSUBSCRIBED, _S.FENCED, _S.FATAL)

    def should_heartbeat_now(self) -> bool:
        return self.state in (_S.JOINING, _S.ACKNOWLEDGING, _S.LEAVING)

    def should_skip_heartbeat(self) -> bool:
        return self.state in (_S.UNSUBSCRIBED, _S.FATAL, _S.FENCED)

    def leave_epoch(self) -> int:
        return LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id is not None else LEAVE_GROUP_MEMBER_EPOCH

    # -- subscribing and joining -------------------------------------------------------------------
    def on_subscription_updated(self) -> None:
        """``subscribe`` changed the subscription: an unsubscribed member joins on the next poll; a member
        already in the group sends the new subscription with its next heartbeat."""
        self.subscription_updated = True

    def on_consumer_poll(self) -> None:
        """Join if the subscription changed while out of the group (Java's ``onConsumerPoll``)."""
        if not self.subscription_updated or self.state in (_S.PREPARE_LEAVING, _S.LEAVING):
            return  # a member still leaving (unsubscribe) joins once it is out
        self.subscription_updated = False
        if self.state == _S.UNSUBSCRIBED:
            self.transition_to_joining()

    def transition_to_joining(self) -> None:
        if self.state == _S.FATAL:
            log.warning("group %s: member %s is in FATAL state and does not rejoin", self.group_id, self.member_id)
            return
        if self.reconciliation_in_progress:
            self.rejoined_while_reconciling = True
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.transition_to(_S.JOINING)
        self.target_assignment = NO_ASSIGNMENT
        self.topic_names.clear()

    # -- heartbeats --------------------------------------------------------------------------------
    def heartbeat_request(self, subscribed_topics: Iterable[str], pattern: str | None, version: int = 1) -> dict:
        """The next ConsumerGroupHeartbeat body: every field when joining, then only what changed (null
        otherwise), as Java's ``HeartbeatState.buildRequestData``."""
        sent = self._sent
        body: dict[str, Any] = {
            "group_id": self.group_id,
            "member_id": self.member_id if version >= 1 or self.member_epoch != JOIN_GROUP_MEMBER_EPOCH else "",
            "member_epoch": self.member_epoch,
            "instance_id": self.group_instance_id,
            "rack_id": None,
            "rebalance_timeout_ms": -1,
            "subscribed_topic_names": None,
            "server_assignor": None,
            "topic_partitions": None,
        }
        if version >= 1:
            body["subscribed_topic_regex"] = None
        send_all = self.state == _S.JOINING
        if send_all or sent.rebalance_timeout_ms != self.rebalance_timeout_ms:
            body["rebalance_timeout_ms"] = sent.rebalance_timeout_ms = self.rebalance_timeout_ms
        names = frozenset(subscribed_topics)
        if send_all or names != sent.subscribed_topic_names:
            body["subscribed_topic_names"] = sorted(names)
            sent.subscribed_topic_names = names
        if pattern is not None and version < 1:
            raise HeartbeatError("a regex subscription needs ConsumerGroupHeartbeat v1, which the broker lacks",
                                 ErrorCode.UNSUPPORTED_VERSION)
        if (send_all and pattern is not None) or pattern != sent.pattern:
            body["subscribed_topic_regex"] = pattern if pattern is not None else ""  # "": the regex is removed
            sent.pattern = pattern
        if self.server_assignor is not None and (send_all or self.server_assignor != sent.server_assignor):
            body["server_assignor"] = sent.server_assignor = self.server_assignor
        local = self.current_assignment
        if send_all or local != sent.local_assignment:
            body["topic_partitions"] = local.topic_partitions()
            sent.local_assignment = local
        return body

    def reset_heartbeat_state(self) -> None:
        """Forget what was sent: the next heartbeat carries every field again (after an error)."""
        self._sent = _SentFields()

    def on_heartbeat_sent(self) -> None:
        """A heartbeat went out: ACKNOWLEDGING and LEAVING end there (Java's ``onHeartbeatRequestGenerated``)."""
        if self.state == _S.ACKNOWLEDGING:
            self.transition_to(_S.STABLE if self._target_reconciled() else _S.RECONCILING)
        elif self.state == _S.LEAVING:
            self.transition_to(_S.UNSUBSCRIBED)

    def on_heartbeat_skipped(self) -> None:
        """The leave heartbeat could not be sent (no coordinator): the member is out anyway."""
        if self.state == _S.LEAVING:
            self.transition_to(_S.UNSUBSCRIBED)

    def on_heartbeat_failure(self) -> None:
        """The heartbeat got no response (disconnect, timeout): send everything next time."""
        self.reset_heartbeat_state()

    def on_heartbeat_response(self, resp: Any) -> HeartbeatResult:
        """Apply a ConsumerGroupHeartbeat response (Java's ``onResponse`` / ``onErrorResponse`` /
        ``onHeartbeatSuccess``)."""
        err = _get(resp, "error_code", 0) or 0
        if err:
            return self._on_error_response(err, _get(resp, "error_message"))
        interval = _get(resp, "heartbeat_interval_ms", 0) or 0
        if interval > 0:
            self.heartbeat_interval_ms = interval
        if self.state == _S.LEAVING or not self.in_group:
            log.debug("group %s: ignoring heartbeat response in state %s", self.group_id, self.state.name)
            return HeartbeatResult.IGNORED
        member_id = _get(resp, "member_id")
        if member_id and member_id != self.member_id:  # a v0 broker generates the member id
            self.member_id = member_id
        self.member_epoch = _get(resp, "member_epoch", self.member_epoch)
        assignment = _get(resp, "assignment")
        if assignment is not None:
            if not self.state.can_handle_new_assignment:
                log.debug("group %s: ignoring an assignment in state %s", self.group_id, self.state.name)
                return HeartbeatResult.OK
            target: dict[uuid.UUID, frozenset[int]] = {}
            for t in _get(assignment, "topic_partitions", None) or []:
                ps = frozenset(_get(t, "partitions", None) or [])
                if ps:
                    tid = _get(t, "topic_id")
                    target[tid] = target.get(tid, frozenset()) | ps
            self._process_assignment_received(target)
        return HeartbeatResult.OK

    def _on_error_response(self, err: int, message: str | None) -> HeartbeatResult:
        self.reset_heartbeat_state()
        name = _error_name(err)
        if self.state in (_S.LEAVING, _S.UNSUBSCRIBED, _S.FATAL):
            log.info("group %s: heartbeat answered %s after the member left", self.group_id, name)
            return HeartbeatResult.IGNORED
        if err in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
            log.info("group %s: heartbeat: %s, looking the coordinator up again", self.group_id, name)
            return HeartbeatResult.FIND_COORDINATOR
        if err == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or err == ErrorCode.REQUEST_TIMED_OUT:
            return HeartbeatResult.RETRY
        if err in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            log.info("group %s: member %s epoch %d fenced (%s): %s", self.group_id, self.member_id,
                     self.member_epoch, name, message)
            return self.transition_to_fenced()
        reasons: dict[int, str] = {
            ErrorCode.GROUP_AUTHORIZATION_FAILED: f"not authorized to access group {self.group_id}",
            ErrorCode.UNRELEASED_INSTANCE_ID: f"instance id {self.group_instance_id} is still in use",
            ErrorCode.FENCED_INSTANCE_ID: f"instance id {self.group_instance_id} was fenced by another member",
            ErrorCode.INVALID_REGULAR_EXPRESSION: "invalid RE2/J subscription pattern",
            ErrorCode.UNSUPPORTED_VERSION: "the broker does not support the consumer group protocol",
        }
        what = reasons.get(int(err), "heartbeat failed")
        self.transition_to_fatal(HeartbeatError(f"group {self.group_id}: {what}: {name}"
                                                + (f" ({message})" if message else ""), err))
        return HeartbeatResult.FATAL

    def _process_assignment_received(self, target: dict[uuid.UUID, frozenset[int]]) -> None:
        updated = self.target_assignment.updated_with(target)
        if updated is not None:
            self.target_assignment = updated
        if not self._target_reconciled():
            self.transition_to(_S.RECONCILING)
        elif self.state in (_S.RECONCILING, _S.JOINING):
            self.transition_to(_S.STABLE)

    def _target_reconciled(self) -> bool:
        return self.current_assignment == self.target_assignment

    # -- reconciliation ----------------------------------------------------------------------------
    def start_reconciliation(self, owned: Iterable[TopicPartition],
                             topic_name: Callable[[uuid.UUID], str | None]) -> Reconciliation | None:
        """The next reconciliation step, or None when there is nothing to do now.

        ``topic_name`` resolves a topic id from the consumer's metadata; ids it cannot resolve stay in
        ``unresolved`` (the driver refreshes metadata and tries again) and the resolvable part is
        reconciled meanwhile, as Java does.
        """
        if self.state != _S.RECONCILING or self._target_reconciled() or self.reconciliation_in_progress:
            return None
        target = self.target_assignment
        resolved: dict[uuid.UUID, frozenset[int]] = {}
        unresolved: set[uuid.UUID] = set()
        for tid, ps in target.partitions.items():
            name = topic_name(tid) or self.topic_names.get(tid)
            if name is None:
                unresolved.add(tid)
                continue
            self.topic_names[tid] = name
            resolved[tid] = ps
        step = LocalAssignment(target.local_epoch, resolved)
        if step == self.current_assignment:
            # only unresolved topics differ: wait for metadata (Java would ack the same partitions again)
            return Reconciliation(step, set(), set(), set(), unresolved) if unresolved else None
        if (unresolved and not self.current_assignment.is_none
                and dict(step.partitions) == dict(self.current_assignment.partitions)):
            self.current_assignment = step  # the resolvable part is already owned: acknowledge it
            self.transition_to(_S.ACKNOWLEDGING)
            return Reconciliation(step, set(), set(), set(), unresolved)
        assigned = {TopicPartition(self.topic_names[tid], p) for tid, ps in resolved.items() for p in ps}
        owned = set(owned)
        self.reconciliation_in_progress = True
        self.rejoined_while_reconciling = False
        log.info("group %s: member %s reconciling local epoch %d: assigned %s, revoking %s, adding %s",
                 self.group_id, self.member_id, step.local_epoch, _fmt(assigned), _fmt(owned - assigned),
                 _fmt(assigned - owned))
        return Reconciliation(step, assigned, assigned - owned, owned - assigned, unresolved)

    def should_abort_reconciliation(self) -> bool:
        """True if the member left RECONCILING or rejoined since the step started (Java's
        ``maybeAbortReconciliation``); the step is then over."""
        abort = self.state != _S.RECONCILING or self.rejoined_while_reconciling
        if abort and self.reconciliation_in_progress:
            log.info("group %s: interrupting a reconciliation (state %s%s)", self.group_id, self.state.name,
                     ", rejoined" if self.rejoined_while_reconciling else "")
            self._reconciliation_done()
        return abort

    def complete_reconciliation(self, step: Reconciliation) -> None:
        """The partitions of ``step`` are revoked and assigned: acknowledge them with the next heartbeat."""
        if not self.reconciliation_in_progress or self.should_abort_reconciliation():
            return
        self.current_assignment = step.target
        assigned_topics = {tp.topic for tp in step.assigned}
        self.topic_names = {tid: n for tid, n in self.topic_names.items()
                            if n in assigned_topics or tid in self.target_assignment.partitions}
        self.rebalances += 1
        self.transition_to(_S.ACKNOWLEDGING)
        self._reconciliation_done()

    def fail_reconciliation(self) -> None:
        self._reconciliation_done()

    def _reconciliation_done(self) -> None:
        self.reconciliation_in_progress = False
        self.rejoined_while_reconciling = False

    # -- fencing, leaving, failing -----------------------------------------------------------------
    def transition_to_fenced(self) -> HeartbeatResult:
        """The broker fenced the member: its partitions are lost; after the driver released them
        (``on_partitions_released``) the member rejoins with epoch 0."""
        if self.state == _S.PREPARE_LEAVING:
            # fenced while releasing for a leave: out of the group already, no leave heartbeat needed
            self.member_epoch = self.leave_epoch()
            self.current_assignment = NO_ASSIGNMENT
            self.transition_to(_S.LEAVING)
            self.transition_to(_S.UNSUBSCRIBED)
            return HeartbeatResult.IGNORED
        if self.state == _S.LEAVING:
            self.transition_to(_S.UNSUBSCRIBED)
            return HeartbeatResult.IGNORED
        if self.state in (_S.UNSUBSCRIBED, _S.FATAL, _S.FENCED):
            return HeartbeatResult.IGNORED
        self.transition_to(_S.FENCED)
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        return HeartbeatResult.FENCED

    def on_partitions_released(self) -> None:
        """The driver ran ``on_partitions_lost`` and cleared the assignment: rejoin if still fenced."""
        self._clear_assignment()
        if self.state == _S.FENCED:
            self.transition_to_joining()

    def _clear_assignment(self) -> None:
        self.current_assignment = NO_ASSIGNMENT
        self.target_assignment = NO_ASSIGNMENT
        self.topic_names.clear()

    def leave_group(self) -> bool:
        """Start leaving (close or unsubscribe): True if the member must release its partitions and then
        call ``transition_to_sending_leave_group``; False if it is not in the group."""
        if not self.in_group:
            if self.state == _S.FENCED:
                self._clear_assignment()
                self.transition_to(_S.UNSUBSCRIBED)
            return False
        if self.state in (_S.PREPARE_LEAVING, _S.LEAVING):
            return False
        self.transition_to(_S.PREPARE_LEAVING)
        return True

    def transition_to_sending_leave_group(self) -> None:
        """Partitions released: the next heartbeat leaves with epoch -1 (-2 for a static member)."""
        if self.state == _S.FATAL or self.state == _S.UNSUBSCRIBED:
            return
        self._clear_assignment()
        self.member_epoch = self.leave_epoch()
        self.transition_to(_S.LEAVING)

    def transition_to_fatal(self, error: HeartbeatError) -> None:
        log.error("%s", error)
        self.fatal_error = error
        self.transition_to(_S.FATAL)


def _fmt(tps: Iterable[TopicPartition]) -> list[str]:
    return sorted(f"{tp.topic}-{tp.partition}" for tp in tps)
