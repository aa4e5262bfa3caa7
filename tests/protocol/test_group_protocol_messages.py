"""The KIP-848 and KIP-932 messages with realistic bodies, at every declared version.

The generic property tests (test_roundtrip, test_fastpath) already cover every declared API; these pin
what a real client depends on: nulls where Kafka sends null, the nullable-struct marker of an
assignment, the fields each version adds or drops, and unknown tagged fields kept through a round trip.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from construct import StreamError

from kafka_json import assert_round_trip, assert_unknown_tags_survive
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.schema import Message

K = ApiKey
ORDERS = uuid.UUID("9c3f3b1e-5d2a-4c7b-8e1f-2a3b4c5d6e7f")
PAYMENTS = uuid.UUID("1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9")

ASSIGNMENT = {"topic_partitions": [{"topic_id": ORDERS, "partitions": [0, 2]},
                                   {"topic_id": PAYMENTS, "partitions": [1]}]}
DESCRIBED_ASSIGNMENT = {"topic_partitions": [{"topic_id": ORDERS, "topic_name": "orders", "partitions": [0, 2]}]}
ACKS = [{"first_offset": 100, "last_offset": 104, "acknowledge_types": [1, 1, 2, 3, 1]},
        {"first_offset": 105, "last_offset": 109, "acknowledge_types": [1]}]
NODES = [{"node_id": 2, "host": "broker-2.local", "port": 9093, "rack": None},
         {"node_id": 3, "host": "broker-3.local", "port": 9094, "rack": "rack-b"}]

BODIES: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {
    K.CONSUMER_GROUP_HEARTBEAT: (
        {"group_id": "billing", "member_id": "Z2uZ5jL2Rz6c2nL0x1q7Ag", "member_epoch": 0, "instance_id": None,
         "rack_id": "rack-a", "rebalance_timeout_ms": 300000, "subscribed_topic_names": ["orders", "payments"],
         "subscribed_topic_regex": "^pay.*", "server_assignor": "uniform", "topic_partitions": []},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": "Z2uZ5jL2Rz6c2nL0x1q7Ag",
         "member_epoch": 7, "heartbeat_interval_ms": 5000, "assignment": ASSIGNMENT}),
    K.CONSUMER_GROUP_DESCRIBE: (
        {"group_ids": ["billing", "missing"], "include_authorized_operations": True},
        {"throttle_time_ms": 0, "groups": [
            {"error_code": 0, "error_message": None, "group_id": "billing", "group_state": "Stable",
             "group_epoch": 7, "assignment_epoch": 7, "assignor_name": "uniform", "members": [
                 {"member_id": "Z2uZ5jL2Rz6c2nL0x1q7Ag", "instance_id": "static-1", "rack_id": None,
                  "member_epoch": 7, "client_id": "rdkafka", "client_host": "/127.0.0.1",
                  "subscribed_topic_names": ["orders"], "subscribed_topic_regex": None,
                  "assignment": DESCRIBED_ASSIGNMENT, "target_assignment": DESCRIBED_ASSIGNMENT, "member_type": 1}],
             "authorized_operations": 0b111100000000},
            {"error_code": 69, "error_message": "Group missing not found.", "group_id": "missing",
             "group_state": "Dead", "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": [],
             "authorized_operations": -2147483648}]}),
    K.SHARE_GROUP_HEARTBEAT: (
        {"group_id": "queue", "member_id": "k0bq2c9RQyO8m4m5Yb2yFw", "member_epoch": 0, "rack_id": None,
         "subscribed_topic_names": ["orders"]},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "member_id": None, "member_epoch": 1,
         "heartbeat_interval_ms": 5000, "assignment": None}),
    K.SHARE_GROUP_DESCRIBE: (
        {"group_ids": ["queue"], "include_authorized_operations": False},
        {"throttle_time_ms": 0, "groups": [
            {"error_code": 0, "error_message": None, "group_id": "queue", "group_state": "Stable", "group_epoch": 3,
             "assignment_epoch": 3, "assignor_name": "simple", "members": [
                 {"member_id": "k0bq2c9RQyO8m4m5Yb2yFw", "rack_id": None, "member_epoch": 3, "client_id": "c1",
                  "client_host": "/10.0.0.5", "subscribed_topic_names": ["orders"],
                  "assignment": DESCRIBED_ASSIGNMENT}],
             "authorized_operations": -2147483648}]}),
    K.SHARE_FETCH: (
        {"group_id": "queue", "member_id": "k0bq2c9RQyO8m4m5Yb2yFw", "share_session_epoch": 2, "max_wait_ms": 500,
         "min_bytes": 1, "max_bytes": 52428800, "max_records": 500, "batch_size": 500, "share_acquire_mode": 1,
         "is_renew_ack": False, "topics": [{"topic_id": ORDERS, "partitions": [
             {"partition_index": 0, "acknowledgement_batches": ACKS},
             {"partition_index": 2, "acknowledgement_batches": []}]}],
         "forgotten_topics_data": [{"topic_id": PAYMENTS, "partitions": [1]}]},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 30000,
         "responses": [{"topic_id": ORDERS, "partitions": [
             {"partition_index": 0, "error_code": 0, "error_message": None, "acknowledge_error_code": 0,
              "acknowledge_error_message": None, "current_leader": {"leader_id": 1, "leader_epoch": 4},
              "records": b"\x00" * 61, "acquired_records": [{"first_offset": 110, "last_offset": 119,
                                                             "delivery_count": 1}]},
             {"partition_index": 2, "error_code": 6, "error_message": "not the leader",
              "acknowledge_error_code": 121, "acknowledge_error_message": "invalid record state",
              "current_leader": {"leader_id": 2, "leader_epoch": 9}, "records": None, "acquired_records": []}]}],
         "node_endpoints": NODES}),
    K.SHARE_ACKNOWLEDGE: (
        {"group_id": "queue", "member_id": "k0bq2c9RQyO8m4m5Yb2yFw", "share_session_epoch": 3, "is_renew_ack": True,
         "topics": [{"topic_id": ORDERS, "partitions": [{"partition_index": 0, "acknowledgement_batches": ACKS}]}]},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "acquisition_lock_timeout_ms": 30000,
         "responses": [{"topic_id": ORDERS, "partitions": [
             {"partition_index": 0, "error_code": 0, "error_message": None,
              "current_leader": {"leader_id": -1, "leader_epoch": -1}}]}],
         "node_endpoints": []}),
    K.DESCRIBE_SHARE_GROUP_OFFSETS: (
        {"groups": [{"group_id": "queue", "topics": [{"topic_name": "orders", "partitions": [0, 2]}]},
                    {"group_id": "all", "topics": None}]},
        {"throttle_time_ms": 0, "groups": [
            {"group_id": "queue", "topics": [{"topic_name": "orders", "topic_id": ORDERS, "partitions": [
                {"partition_index": 0, "start_offset": 110, "leader_epoch": 4, "lag": 12, "error_code": 0,
                 "error_message": None}]}],
             "error_code": 0, "error_message": None}]}),
    K.ALTER_SHARE_GROUP_OFFSETS: (
        {"group_id": "queue", "topics": [{"topic_name": "orders", "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
            {"topic_name": "orders", "topic_id": ORDERS, "partitions": [
                {"partition_index": 0, "error_code": 68, "error_message": "group is not empty"}]}]}),
    K.DELETE_SHARE_GROUP_OFFSETS: (
        {"group_id": "queue", "topics": [{"topic_name": "orders"}, {"topic_name": "gone"}]},
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": [
            {"topic_name": "orders", "topic_id": ORDERS, "error_code": 0, "error_message": None},
            {"topic_name": "gone", "topic_id": uuid.UUID(int=0), "error_code": 3, "error_message": None}]}),
}

CASES = [pytest.param(key, kind, v, id=f"{APIS[key].name}-{kind}-v{v}")
         for key in BODIES for kind in ("request", "response")
         for v in range(APIS[key].min_version, APIS[key].max_version + 1)]


def _message(key: int, kind: str) -> Message:
    return APIS[key].request if kind == "request" else APIS[key].response


@pytest.mark.parametrize("key,kind,version", CASES)
def test_realistic_round_trip(key: int, kind: str, version: int) -> None:
    """Build, parse (fast path and construct path): a reader of the version sees the body as sent."""
    assert_round_trip(_message(key, kind), BODIES[key][kind == "response"], version)


@pytest.mark.parametrize("key,kind,version", CASES)
def test_unknown_tags_survive_at_the_root_and_inside(key: int, kind: str, version: int) -> None:
    """Tagged fields a newer peer adds are kept through a round trip (KIP-482), in nested structs too."""
    assert_unknown_tags_survive(_message(key, kind), BODIES[key][kind == "response"], version, 0)


def test_assignment_is_a_nullable_struct_with_kafkas_marker() -> None:
    """Null is the int8 -1; a present assignment is 1 then the struct; any negative marker reads as null."""
    resp = APIS[K.CONSUMER_GROUP_HEARTBEAT].response
    base = {"member_id": None, "member_epoch": 7, "heartbeat_interval_ms": 5000}
    null = resp.build(dict(base, assignment=None), 1)
    assert null.endswith(b"\xff\x00")  # marker -1, then the (empty) tagged-field section
    assert resp.build(base, 1) == null  # Kafka's default for the assignment is null
    present = resp.build(dict(base, assignment={"topic_partitions": []}), 1)
    assert present.endswith(b"\x01\x01\x00\x00")  # marker 1, empty compact array, the struct's and body's tags
    assert resp.parse(null[:-2] + b"\x80\x00", 1).assignment is None
    assert resp.parse(present, 1).assignment == {"topic_partitions": []}
    with pytest.raises(StreamError):
        resp.parse(null[:-2], 1)


def test_heartbeat_v0_has_no_regex_and_v1_does() -> None:
    req = APIS[K.CONSUMER_GROUP_HEARTBEAT].request
    body = BODIES[K.CONSUMER_GROUP_HEARTBEAT][0]
    assert req.parse(req.build(body, 0), 0).subscribed_topic_regex is None
    assert req.parse(req.build(body, 1), 1).subscribed_topic_regex == "^pay.*"
    assert len(req.build(body, 1)) == len(req.build(body, 0)) + 1 + len("^pay.*")  # compact length, then utf-8
    joining = req.parse(req.build({"group_id": "g", "member_id": "m", "member_epoch": 0}, 1), 1)
    assert (joining.instance_id, joining.subscribed_topic_names, joining.topic_partitions,
            joining.rebalance_timeout_ms) == (None, None, None, -1)


def test_share_fetch_v2_adds_acquire_mode_and_renew_flag() -> None:
    req = APIS[K.SHARE_FETCH].request
    body = BODIES[K.SHARE_FETCH][0]
    v1, v2 = req.parse(req.build(body, 1), 1), req.parse(req.build(body, 2), 2)
    assert (v1.share_acquire_mode, v1.is_renew_ack) == (0, False)
    assert (v2.share_acquire_mode, v2.is_renew_ack) == (1, False)
    assert len(req.build(body, 2)) == len(req.build(body, 1)) + 2  # one int8, one bool
    ack = APIS[K.SHARE_ACKNOWLEDGE]
    assert ack.request.parse(ack.request.build(BODIES[K.SHARE_ACKNOWLEDGE][0], 1), 1).is_renew_ack is False
    assert ack.response.parse(ack.response.build(BODIES[K.SHARE_ACKNOWLEDGE][1], 1), 1).acquisition_lock_timeout_ms == 0


@pytest.mark.parametrize("version", [0, 1])
def test_describe_share_group_offsets_lag_from_v1(version: int) -> None:
    resp = APIS[K.DESCRIBE_SHARE_GROUP_OFFSETS].response
    parsed = resp.parse(resp.build(BODIES[K.DESCRIBE_SHARE_GROUP_OFFSETS][1], version), version)
    assert parsed.groups[0].topics[0].partitions[0].lag == (12 if version >= 1 else -1)


def test_offset_commit_and_fetch_v10_name_topics_by_id() -> None:
    commit = APIS[K.OFFSET_COMMIT].request
    body = {"group_id": "billing", "generation_id_or_member_epoch": 7, "member_id": "m", "topics": [
        {"name": "orders", "topic_id": ORDERS, "partitions": [
            {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 4, "committed_metadata": ""}]}]}
    v9, v10 = commit.parse(commit.build(body, 9), 9), commit.parse(commit.build(body, 10), 10)
    assert (v9.topics[0].name, v9.topics[0].topic_id) == ("orders", uuid.UUID(int=0))
    assert (v10.topics[0].name, v10.topics[0].topic_id) == ("", ORDERS)
    assert len(commit.build(body, 10)) == len(commit.build(body, 9)) - len(b"\x07orders") + 16
    fetch = APIS[K.OFFSET_FETCH].request
    group = {"group_id": "billing", "member_id": "m", "member_epoch": 7,
             "topics": [{"name": "orders", "topic_id": ORDERS, "partition_indexes": [0, 1]}]}
    f8, f9, f10 = (fetch.parse(fetch.build({"groups": [group], "require_stable": True}, v), v) for v in (8, 9, 10))
    assert (f8.groups[0].member_id, f8.groups[0].member_epoch) == (None, -1)
    assert (f9.groups[0].member_id, f9.groups[0].member_epoch, f9.groups[0].topics[0].name) == ("m", 7, "orders")
    assert (f10.groups[0].topics[0].name, f10.groups[0].topics[0].topic_id) == ("", ORDERS)


def test_describe_groups_v6_and_list_groups_v5() -> None:
    describe = APIS[K.DESCRIBE_GROUPS].response
    group = {"error_code": 69, "error_message": "Group g not found.", "group_id": "g", "group_state": "Dead",
             "protocol_type": "", "protocol_data": "", "members": []}
    assert describe.parse(describe.build({"groups": [group]}, 5), 5).groups[0].error_message is None
    assert describe.parse(describe.build({"groups": [group]}, 6), 6).groups[0].error_message == "Group g not found."
    listing = APIS[K.LIST_GROUPS]
    req = listing.request.parse(listing.request.build({"states_filter": [], "types_filter": ["consumer"]}, 5), 5)
    assert req.types_filter == ["consumer"]
    resp = listing.response.parse(listing.response.build({"groups": [
        {"group_id": "g", "protocol_type": "consumer", "group_state": "Stable", "group_type": "consumer"}]}, 5), 5)
    assert resp.groups[0].group_type == "consumer"


def test_new_group_responses_leave_throttling_to_the_broker() -> None:
    """Their responses keep AbstractResponse.shouldClientThrottle (false): the broker holds a throttled answer."""
    from minikafka.protocol.throttling import client_throttles_itself

    assert not any(client_throttles_itself(key, v) for key in BODIES
                   for v in range(APIS[key].min_version, APIS[key].max_version + 1))
    assert client_throttles_itself(K.OFFSET_COMMIT, 10) and client_throttles_itself(K.OFFSET_FETCH, 10)
