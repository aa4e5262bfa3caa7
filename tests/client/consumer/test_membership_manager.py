"""The KIP-848 member state machine (ConsumerMembershipManager) against canned ConsumerGroupHeartbeat
responses: what each heartbeat carries, reconciliation, fencing, leaving, fatal errors.

Requests are built and responses parsed with the real message declarations (api key 68), so every
body here is also a valid wire message.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from minikafka.client.consumer.config import ConsumerConfig
from minikafka.client.consumer.membership_manager import (ConsumerMembershipManager, HeartbeatError, HeartbeatResult,
                                                          LocalAssignment, MemberState, generate_member_id)
from minikafka.client.fetch_session import TopicPartition as TP
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.messages.consumer_group_heartbeat import (ConsumerGroupHeartbeatRequest,
                                                                  ConsumerGroupHeartbeatResponse)

T1, T2 = uuid.uuid4(), uuid.uuid4()
NAMES = {T1: "orders", T2: "payments"}


def wire(body: dict, version: int = 1) -> Any:
    """The request as the broker would parse it."""
    return ConsumerGroupHeartbeatRequest.parse(ConsumerGroupHeartbeatRequest.build(body, version), version)


def response(epoch: int = 1, assignment: dict[uuid.UUID, list[int]] | None = None, error: int = 0,
             interval: int = 5000, member_id: str | None = None, version: int = 1) -> Any:
    body = {"throttle_time_ms": 0, "error_code": error, "error_message": None, "member_id": member_id,
            "member_epoch": epoch, "heartbeat_interval_ms": interval,
            "assignment": None if assignment is None else {
                "topic_partitions": [{"topic_id": t, "partitions": ps} for t, ps in assignment.items()]}}
    return ConsumerGroupHeartbeatResponse.parse(ConsumerGroupHeartbeatResponse.build(body, version), version)


def joined(**kw: Any) -> ConsumerMembershipManager:
    m = ConsumerMembershipManager("g", rebalance_timeout_ms=60000, **kw)
    m.on_subscription_updated()
    m.on_consumer_poll()
    return m


def send(m: ConsumerMembershipManager, topics: tuple[str, ...] = ("orders", "payments"), pattern: str | None = None,
         version: int = 1) -> Any:
    body = m.heartbeat_request(topics, pattern, version)
    m.on_heartbeat_sent()
    return wire(body, version)


def reconcile(m: ConsumerMembershipManager, owned: set[TP]) -> set[TP]:
    """Run one reconciliation step the way the driver does; the new owned set."""
    step = m.start_reconciliation(owned, NAMES.get)
    assert step is not None and m.reconciliation_in_progress
    assert step.assigned == (owned - step.revoked) | step.added
    m.complete_reconciliation(step)
    return step.assigned


def test_member_id_is_a_client_generated_uuid_in_javas_text_form() -> None:
    ids = {generate_member_id() for _ in range(200)}
    assert len(ids) == 200
    for i in ids:
        assert len(i) == 22 and not i.startswith("-")
        assert uuid.UUID(bytes=__import__("base64").urlsafe_b64decode(i + "=="))  # 16 random bytes
    m = ConsumerMembershipManager("g")
    assert m.member_id and m.member_epoch == 0 and m.state == MemberState.UNSUBSCRIBED


def test_join_sends_every_field_then_only_what_changed() -> None:
    m = ConsumerMembershipManager("g", server_assignor="range", rebalance_timeout_ms=60000, group_instance_id="i-1")
    assert m.should_skip_heartbeat()
    m.on_subscription_updated()
    m.on_consumer_poll()
    assert m.state == MemberState.JOINING and m.should_heartbeat_now()
    req = send(m)
    assert (req.member_id, req.member_epoch, req.instance_id) == (m.member_id, 0, "i-1")
    assert req.rebalance_timeout_ms == 60000 and req.subscribed_topic_names == ["orders", "payments"]
    assert req.server_assignor == "range" and req.topic_partitions == [] and req.subscribed_topic_regex is None
    # Still JOINING (no response yet): a retried join carries everything again.
    again = send(m)
    assert again.subscribed_topic_names == ["orders", "payments"] and again.topic_partitions == []

    assert m.on_heartbeat_response(response(epoch=1, assignment={T1: [0, 1], T2: [0]})) == HeartbeatResult.OK
    assert m.member_epoch == 1 and m.state == MemberState.RECONCILING and m.heartbeat_interval_ms == 5000
    owned = reconcile(m, set())
    assert owned == {TP("orders", 0), TP("orders", 1), TP("payments", 0)}
    assert m.state == MemberState.ACKNOWLEDGING and m.should_heartbeat_now()
    ack = send(m)
    # The ack names the owned partitions and nothing else that did not change.
    assert sorted((t.topic_id, list(t.partitions)) for t in ack.topic_partitions) == sorted([(T1, [0, 1]), (T2, [0])])
    assert ack.subscribed_topic_names is None and ack.rebalance_timeout_ms == -1 and ack.server_assignor is None
    assert ack.instance_id == "i-1" and ack.member_epoch == 1
    assert m.state == MemberState.STABLE and not m.should_heartbeat_now()
    m.on_heartbeat_response(response(epoch=1))
    plain = send(m)
    assert plain.topic_partitions is None and plain.subscribed_topic_names is None and plain.member_epoch == 1
    # A subscription change goes out with the next heartbeat, alone.
    changed = send(m, topics=("orders",))
    assert changed.subscribed_topic_names == ["orders"] and changed.topic_partitions is None


def test_revoke_before_assign_and_same_assignment_is_not_reconciled_again() -> None:
    m = joined()
    send(m)
    m.on_heartbeat_response(response(epoch=1, assignment={T1: [0, 1, 2]}))
    owned = reconcile(m, set())
    send(m)
    # The broker moves orders-2 away first (epoch stays; the new owner waits for our ack)...
    m.on_heartbeat_response(response(epoch=1, assignment={T1: [0, 1]}))
    assert m.state == MemberState.RECONCILING
    step = m.start_reconciliation(owned, NAMES.get)
    assert step is not None and step.revoked == {TP("orders", 2)} and step.added == set()
    assert m.start_reconciliation(owned, NAMES.get) is None  # one step at a time
    m.complete_reconciliation(step)
    ack = send(m)
    assert [(t.topic_id, list(t.partitions)) for t in ack.topic_partitions] == [(T1, [0, 1])]
    # ...then gives us payments-0 with a new epoch.
    m.on_heartbeat_response(response(epoch=2, assignment={T1: [0, 1], T2: [0]}))
    step = m.start_reconciliation(step.assigned, NAMES.get)
    assert step is not None and step.revoked == set() and step.added == {TP("payments", 0)}
    m.complete_reconciliation(step)
    send(m)
    assert m.state == MemberState.STABLE and m.member_epoch == 2
    # The same assignment again (e.g. on every heartbeat after a coordinator move): nothing to do.
    m.on_heartbeat_response(response(epoch=2, assignment={T2: [0], T1: [1, 0]}))
    assert m.state == MemberState.STABLE and m.start_reconciliation(step.assigned, NAMES.get) is None
    assert m.rebalances == 3


def test_target_that_changes_and_changes_back_is_acknowledged_again() -> None:
    m = joined()
    send(m)
    m.on_heartbeat_response(response(epoch=1, assignment={T1: [0]}))
    owned = reconcile(m, set())
    send(m)
    m.on_heartbeat_response(response(epoch=2, assignment={T1: [0, 1]}))
    m.on_heartbeat_response(response(epoch=3, assignment={T1: [0]}))  # before reconciling: same partitions
    assert m.state == MemberState.RECONCILING  # a new local epoch, so it is acknowledged again
    assert m.target_assignment.local_epoch == 2
    reconcile(m, owned)
    assert [list(t.partitions) for t in send(m).topic_partitions] == [[0]]


@pytest.mark.parametrize("error", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_fenced_member_loses_everything_and_rejoins_with_epoch_zero(error: ErrorCode) -> None:
    m = joined(server_assignor="uniform")
    send(m)
    m.on_heartbeat_response(response(epoch=3, assignment={T1: [0]}))
    owned = reconcile(m, set())
    send(m)
    member_id = m.member_id
    assert m.on_heartbeat_response(response(error=error)) == HeartbeatResult.FENCED
    assert m.state == MemberState.FENCED and m.member_epoch == 0 and m.should_skip_heartbeat()
    assert owned  # the driver now runs on_partitions_lost for them and clears the assignment
    m.on_partitions_released()
    assert m.state == MemberState.JOINING and m.current_assignment.is_none
    rejoin = send(m)
    assert (rejoin.member_id, rejoin.member_epoch) == (member_id, 0)  # same id for the consumer's lifetime
    assert rejoin.subscribed_topic_names == ["orders", "payments"] and rejoin.topic_partitions == []
    assert rejoin.server_assignor == "uniform" and rejoin.rebalance_timeout_ms == 60000


def test_fencing_interrupts_a_reconciliation_in_progress() -> None:
    m = joined()
    send(m)
    m.on_heartbeat_response(response(epoch=1, assignment={T1: [0, 1]}))
    step = m.start_reconciliation(set(), NAMES.get)
    assert step is not None
    m.on_heartbeat_response(response(error=ErrorCode.FENCED_MEMBER_EPOCH))  # while committing, say
    m.on_partitions_released()
    assert m.should_abort_reconciliation()
    m.complete_reconciliation(step)  # too late: ignored
    assert m.current_assignment.is_none and m.state == MemberState.JOINING and not m.reconciliation_in_progress


def test_coordinator_errors_resend_everything() -> None:
    m = joined()
    send(m)
    m.on_heartbeat_response(response(epoch=1, assignment={}))
    assert m.state == MemberState.RECONCILING  # even an empty first assignment is acknowledged, as Java
    assert reconcile(m, set()) == set()
    assert send(m).topic_partitions == [] and m.state == MemberState.STABLE
    assert send(m).subscribed_topic_names is None
    for err, result in [(ErrorCode.NOT_COORDINATOR, HeartbeatResult.FIND_COORDINATOR),
                        (ErrorCode.COORDINATOR_NOT_AVAILABLE, HeartbeatResult.FIND_COORDINATOR),
                        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, HeartbeatResult.RETRY)]:
        assert m.on_heartbeat_response(response(error=err)) == result
        assert m.state == MemberState.STABLE and m.member_epoch == 1
        again = send(m)  # the new coordinator hears the whole member again
        assert again.subscribed_topic_names == ["orders", "payments"] and again.rebalance_timeout_ms == 60000
        assert again.topic_partitions == []
    m.on_heartbeat_failure()  # a disconnect too
    assert send(m).subscribed_topic_names == ["orders", "payments"]


@pytest.mark.parametrize("error", [ErrorCode.UNSUPPORTED_ASSIGNOR, ErrorCode.GROUP_MAX_SIZE_REACHED,
                                   ErrorCode.INVALID_REQUEST, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                   ErrorCode.UNRELEASED_INSTANCE_ID, ErrorCode.FENCED_INSTANCE_ID,
                                   ErrorCode.INVALID_REGULAR_EXPRESSION])
def test_fatal_errors(error: ErrorCode) -> None:
    m = joined(server_assignor="nope")
    send(m)
    assert m.on_heartbeat_response(response(error=error)) == HeartbeatResult.FATAL
    assert m.state == MemberState.FATAL and m.should_skip_heartbeat()
    assert m.fatal_error is not None and m.fatal_error.code == error and error.name in str(m.fatal_error)
    m.transition_to_joining()  # a fatal member never rejoins
    assert m.state == MemberState.FATAL


@pytest.mark.parametrize("instance_id,epoch", [(None, -1), ("static-1", -2)])
def test_leave_sends_minus_one_or_minus_two(instance_id: str | None, epoch: int) -> None:
    m = joined(group_instance_id=instance_id)
    send(m)
    m.on_heartbeat_response(response(epoch=4, assignment={T1: [0]}))
    reconcile(m, set())
    send(m)
    assert m.leave_group() and m.state == MemberState.PREPARE_LEAVING
    assert not m.leave_group()  # already leaving
    # An assignment arriving now is not taken.
    m.on_heartbeat_response(response(epoch=5, assignment={T1: [0, 1]}))
    assert m.state == MemberState.PREPARE_LEAVING and m.member_epoch == 5
    m.transition_to_sending_leave_group()
    assert m.state == MemberState.LEAVING and m.should_heartbeat_now()
    leave = send(m)
    assert (leave.member_epoch, leave.instance_id, leave.member_id) == (epoch, instance_id, m.member_id)
    assert m.state == MemberState.UNSUBSCRIBED and m.should_skip_heartbeat()
    assert m.on_heartbeat_response(response(epoch=epoch)) == HeartbeatResult.IGNORED
    # Subscribing again joins with epoch 0 on the next poll.
    m.on_subscription_updated()
    m.on_consumer_poll()
    assert m.state == MemberState.JOINING and send(m).member_epoch == 0


def test_subscribe_while_still_leaving_joins_after_the_leave() -> None:
    m = joined()
    send(m)
    m.on_heartbeat_response(response(epoch=1, assignment={}))
    assert m.leave_group()
    m.on_subscription_updated()
    m.on_consumer_poll()
    assert m.state == MemberState.PREPARE_LEAVING
    m.transition_to_sending_leave_group()
    send(m)
    m.on_consumer_poll()
    assert m.state == MemberState.JOINING


def test_fenced_while_preparing_to_leave_just_leaves() -> None:
    m = joined()
    send(m)
    m.on_heartbeat_response(response(epoch=1, assignment={}))
    m.leave_group()
    assert m.on_heartbeat_response(response(error=ErrorCode.FENCED_MEMBER_EPOCH)) == HeartbeatResult.IGNORED
    assert m.state == MemberState.UNSUBSCRIBED
    m.transition_to_sending_leave_group()  # nothing left to send
    assert m.state == MemberState.UNSUBSCRIBED


def test_regex_subscription_sent_once_and_removed_with_empty_string() -> None:
    m = joined()
    req = send(m, topics=(), pattern="orders-.*")
    assert req.subscribed_topic_regex == "orders-.*" and req.subscribed_topic_names == []
    m.on_heartbeat_response(response(epoch=1, assignment={}))
    assert send(m, topics=(), pattern="orders-.*").subscribed_topic_regex is None
    assert send(m, topics=(), pattern="o.*").subscribed_topic_regex == "o.*"
    back = send(m, topics=("orders",), pattern=None)
    assert back.subscribed_topic_regex == "" and back.subscribed_topic_names == ["orders"]


def test_version_zero_takes_the_member_id_from_the_broker_and_refuses_a_regex() -> None:
    m = joined()
    req = send(m, version=0)
    assert req.member_id == ""  # v0: the coordinator generates it
    m.on_heartbeat_response(response(epoch=1, member_id="broker-made", assignment={}, version=0))
    assert m.member_id == "broker-made" and send(m, version=0).member_id == "broker-made"
    with pytest.raises(HeartbeatError):
        m.heartbeat_request((), "x.*", 0)


def test_unresolved_topic_ids_wait_for_metadata() -> None:
    m = joined()
    send(m)
    unknown = uuid.uuid4()
    m.on_heartbeat_response(response(epoch=1, assignment={T1: [0], unknown: [0, 1]}))
    step = m.start_reconciliation(set(), NAMES.get)
    assert step is not None and step.unresolved == {unknown} and step.added == {TP("orders", 0)}
    m.complete_reconciliation(step)
    assert [(t.topic_id, list(t.partitions)) for t in send(m).topic_partitions] == [(T1, [0])]
    assert m.state == MemberState.RECONCILING  # the rest still waits
    waiting = m.start_reconciliation(step.assigned, NAMES.get)
    assert waiting is not None and waiting.unresolved == {unknown} and not m.reconciliation_in_progress
    names = {**NAMES, unknown: "late"}
    step2 = m.start_reconciliation(step.assigned, names.get)
    assert step2 is not None and step2.added == {TP("late", 0), TP("late", 1)} and not step2.unresolved
    m.complete_reconciliation(step2)
    send(m)
    assert m.state == MemberState.STABLE


def test_local_assignment_epochs() -> None:
    a = LocalAssignment(-1, {})
    assert a.is_none
    b = a.updated_with({T1: frozenset({0})})
    assert b is not None and b.local_epoch == 0 and b.updated_with({T1: frozenset({0})}) is None
    c = b.updated_with({})
    assert c is not None and c.local_epoch == 1 and c.topic_partitions() == []


def test_config_rejects_classic_settings_with_the_consumer_protocol() -> None:
    cfg = ConsumerConfig(group_protocol="CONSUMER", group_remote_assignor="uniform", group_id="g")
    assert cfg.uses_consumer_protocol and cfg.group_protocol == "consumer"
    assert not ConsumerConfig().uses_consumer_protocol  # classic stays the default
    for bad in [dict(group_protocol="consumer", session_timeout_ms=10000),
                dict(group_protocol="consumer", heartbeat_interval_ms=100),
                dict(group_protocol="consumer", partition_assignment_strategy="roundrobin"),
                dict(group_remote_assignor="range"), dict(group_protocol="share")]:
        with pytest.raises(ValueError):
            ConsumerConfig(**bad)  # type: ignore[arg-type]
    assert ConsumerConfig.from_kwargs(**{"group.protocol": "consumer", "group.remote.assignor": "range"}
                                      ).group_remote_assignor == "range"
