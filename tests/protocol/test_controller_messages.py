"""The KRaft controller-listener messages with realistic bodies, at every declared version.

AlterPartition (56), Envelope (58), FetchSnapshot (59), BrokerRegistration (62), BrokerHeartbeat (63) and
AllocateProducerIds (67) are what brokers send to the controller.  The generic property tests (test_roundtrip,
test_fastpath, the schema comparison) cover them with the other APIs; these pin the bodies a broker and a
controller exchange, the fields each version adds or drops, and that a broker's client listener neither offers
nor answers them.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import trio

from kafka_json import assert_round_trip, assert_unknown_tags_survive, load_schema, shared_dir
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import APIS, CONTROLLER_API_KEYS, ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.headers import RequestHeader
from minikafka.protocol.schema import Message

K = ApiKey
E = ErrorCode
ORDERS = uuid.UUID("9c3f3b1e-5d2a-4c7b-8e1f-2a3b4c5d6e7f")
INCARNATION = uuid.UUID("4a9c1f0e-8b7d-4e6f-a5b4-c3d2e1f0a9b8")
DIR_A = uuid.UUID("0f1e2d3c-4b5a-4697-8877-665544332211")
DIR_B = uuid.UUID("11223344-5566-4788-99aa-bbccddeeff00")

# An admin request as a broker forwards it inside an Envelope: CreateTopics v7, request header v2, then the body.
CREATE_TOPICS = {"topics": [{"name": "orders", "num_partitions": 3, "replication_factor": 1, "assignments": [],
                             "configs": []}], "timeout_ms": 30000, "validate_only": False}
FORWARDED = (RequestHeader.build({"request_api_key": K.CREATE_TOPICS, "request_api_version": 7, "correlation_id": 9,
                                  "client_id": "adminclient-1"}, 2)
             + APIS[K.CREATE_TOPICS].request.build(CREATE_TOPICS, 7))

BODIES: dict[int, tuple[dict[str, Any], dict[str, Any]]] = {
    K.ALTER_PARTITION: (
        {"broker_id": 1, "broker_epoch": 42, "topics": [{"topic_name": "orders", "topic_id": ORDERS, "partitions": [
            {"partition_index": 0, "leader_epoch": 5, "new_isr": [1, 2],
             "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 42}, {"broker_id": 2, "broker_epoch": -1}],
             "leader_recovery_state": 0, "partition_epoch": 7},
            {"partition_index": 2, "leader_epoch": 3, "new_isr": [1],
             "new_isr_with_epochs": [{"broker_id": 1, "broker_epoch": 42}],
             "leader_recovery_state": 1, "partition_epoch": 11}]}]},
        {"throttle_time_ms": 0, "error_code": 0, "topics": [{"topic_name": "orders", "topic_id": ORDERS, "partitions": [
            {"partition_index": 0, "error_code": 0, "leader_id": 1, "leader_epoch": 5, "isr": [1, 2],
             "leader_recovery_state": 0, "partition_epoch": 8},
            {"partition_index": 2, "error_code": E.INVALID_UPDATE_VERSION, "leader_id": 1, "leader_epoch": 3,
             "isr": [1], "leader_recovery_state": 1, "partition_epoch": 11}]}]}),
    K.ENVELOPE: (
        {"request_data": FORWARDED, "request_principal": b"\x00\x04User\x05alice\x00",
         "client_host_address": bytes([10, 0, 0, 5])},
        {"response_data": b"\x00\x00\x00\x09\x00" + b"\x00" * 12, "error_code": 0}),
    K.BROKER_REGISTRATION: (
        {"broker_id": 2, "cluster_id": "MkU3OEVBNTcwNTJENDM2Qk", "incarnation_id": INCARNATION,
         "listeners": [{"name": "PLAINTEXT", "host": "broker-2.local", "port": 9092, "security_protocol": 0},
                       {"name": "SASL_SSL", "host": "broker-2.local", "port": 65535, "security_protocol": 3}],
         "features": [{"name": "metadata.version", "min_supported_version": 7, "max_supported_version": 27},
                      {"name": "kraft.version", "min_supported_version": 0, "max_supported_version": 1}],
         "rack": "rack-b", "is_migrating_zk_broker": False, "log_dirs": [DIR_A, DIR_B], "previous_broker_epoch": 40},
        {"throttle_time_ms": 0, "error_code": 0, "broker_epoch": 43}),
    K.BROKER_HEARTBEAT: (
        {"broker_id": 2, "broker_epoch": 43, "current_metadata_offset": 1234, "want_fence": False,
         "want_shut_down": True, "offline_log_dirs": [DIR_B]},
        {"throttle_time_ms": 0, "error_code": 0, "is_caught_up": True, "is_fenced": False, "should_shut_down": True}),
    K.ALLOCATE_PRODUCER_IDS: (
        {"broker_id": 2, "broker_epoch": 43},
        {"throttle_time_ms": 0, "error_code": 0, "producer_id_start": 5000, "producer_id_len": 1000}),
    K.FETCH_SNAPSHOT: (
        {"cluster_id": "MkU3OEVBNTcwNTJENDM2Qk", "replica_id": 2, "max_bytes": 1 << 20, "topics": [
            {"name": "__cluster_metadata", "partitions": [
                {"partition": 0, "current_leader_epoch": 1, "snapshot_id": {"end_offset": 4096, "epoch": 1},
                 "position": 65536, "replica_directory_id": DIR_A}]}]},
        {"throttle_time_ms": 0, "error_code": 0, "topics": [{"name": "__cluster_metadata", "partitions": [
            {"index": 0, "error_code": 0, "snapshot_id": {"end_offset": 4096, "epoch": 1},
             "current_leader": {"leader_id": 3000, "leader_epoch": 1}, "size": 70000, "position": 65536,
             "unaligned_records": b"\x00" * 4464}]}],
         "node_endpoints": [{"node_id": 3000, "host": "controller.local", "port": 9093}]}),
}

CASES = [pytest.param(key, kind, v, id=f"{APIS[key].name}-{kind}-v{v}")
         for key in BODIES for kind in ("request", "response")
         for v in range(APIS[key].min_version, APIS[key].max_version + 1)]


def _message(key: int, kind: str) -> Message:
    return APIS[key].request if kind == "request" else APIS[key].response


def _round_trip(msg: Message, body: dict[str, Any], version: int) -> Any:
    return msg.parse(msg.build(body, version), version)


def test_the_six_apis_and_their_versions() -> None:
    """Kafka 4.2's newest versions (the same as Kafka 3.9's), all flexible, and all of them controller-only."""
    assert {APIS[k].name: (APIS[k].min_version, APIS[k].max_version) for k in BODIES} == {
        "AlterPartition": (0, 3), "Envelope": (0, 0), "BrokerRegistration": (0, 4), "BrokerHeartbeat": (0, 1),
        "AllocateProducerIds": (0, 0), "FetchSnapshot": (0, 1)}
    assert all(APIS[k].is_flexible(v) for k in BODIES for v in range(APIS[k].max_version + 1))
    assert set(BODIES) == CONTROLLER_API_KEYS


@pytest.mark.parametrize("key,kind,version", CASES)
def test_realistic_round_trip(key: int, kind: str, version: int) -> None:
    """Build, parse (fast path and construct path): a reader of the version sees the body as sent."""
    assert_round_trip(_message(key, kind), BODIES[key][kind == "response"], version)


@pytest.mark.parametrize("key,kind,version", CASES)
def test_unknown_tags_survive_at_the_root_and_inside(key: int, kind: str, version: int) -> None:
    """Tagged fields a newer peer adds are kept through a round trip (KIP-482), in nested structs too."""
    assert_unknown_tags_survive(_message(key, kind), BODIES[key][kind == "response"], version, 5)


# -- what each version adds or drops -----------------------------------------------------------------------

def test_alter_partition_names_topics_by_id_from_v2_and_isr_with_epochs_from_v3() -> None:
    req = APIS[K.ALTER_PARTITION].request
    body = BODIES[K.ALTER_PARTITION][0]
    v0, v1, v2, v3 = (_round_trip(req, body, v) for v in range(4))
    assert (v1.topics[0].topic_name, v1.topics[0].topic_id) == ("orders", uuid.UUID(int=0))
    assert (v2.topics[0].topic_name, v2.topics[0].topic_id) == ("", ORDERS)
    assert [v.topics[0].partitions[1].leader_recovery_state for v in (v0, v1)] == [0, 1]  # v1+
    assert (v2.topics[0].partitions[0].new_isr, v2.topics[0].partitions[0].new_isr_with_epochs) == ([1, 2], [])
    assert v3.topics[0].partitions[0].new_isr == []
    assert [(b.broker_id, b.broker_epoch) for b in v3.topics[0].partitions[0].new_isr_with_epochs] == [(1, 42), (2, -1)]
    # An ISR member without its epoch reads as -1 (the epoch check is not supported)
    part = {"partition_index": 0, "leader_epoch": 5, "new_isr_with_epochs": [{"broker_id": 3}], "partition_epoch": 7}
    parsed = _round_trip(req, {"broker_id": 1, "topics": [{"topic_id": ORDERS, "partitions": [part]}]}, 3)
    assert parsed.broker_epoch == -1 and parsed.topics[0].partitions[0].new_isr_with_epochs[0].broker_epoch == -1
    resp = APIS[K.ALTER_PARTITION].response
    r1, r2 = (_round_trip(resp, BODIES[K.ALTER_PARTITION][1], v) for v in (1, 2))
    assert (r1.topics[0].topic_name, r2.topics[0].topic_name, r2.topics[0].topic_id) == ("orders", "", ORDERS)
    assert resp.build(BODIES[K.ALTER_PARTITION][1], 3) == resp.build(BODIES[K.ALTER_PARTITION][1], 2)


def test_broker_registration_adds_fields_up_to_v3_and_v4_is_v3() -> None:
    req = APIS[K.BROKER_REGISTRATION].request
    body = BODIES[K.BROKER_REGISTRATION][0]
    v0, v1, v2, v3 = (_round_trip(req, body, v) for v in range(4))
    assert (v0.is_migrating_zk_broker, v0.log_dirs, v0.previous_broker_epoch) == (False, [], -1)
    assert (v1.log_dirs, v2.log_dirs, v2.previous_broker_epoch) == ([], [DIR_A, DIR_B], -1)
    assert v3.previous_broker_epoch == 40
    assert [(lst.name, lst.port, lst.security_protocol) for lst in v0.listeners] == [
        ("PLAINTEXT", 9092, 0), ("SASL_SSL", 65535, 3)]  # the port is an uint16
    assert req.build(body, 4) == req.build(body, 3)
    assert _round_trip(req, dict(body, rack=None), 0).rack is None
    resp = APIS[K.BROKER_REGISTRATION].response
    assert resp.parse(resp.build({"error_code": E.DUPLICATE_BROKER_REGISTRATION}, 4), 4).broker_epoch == -1


def test_broker_heartbeat_offline_log_dirs_are_a_tagged_field_from_v1() -> None:
    req = APIS[K.BROKER_HEARTBEAT].request
    body = BODIES[K.BROKER_HEARTBEAT][0]
    without = dict(body, offline_log_dirs=[])
    assert req.build(without, 1) == req.build(without, 0)  # an empty list is not written
    wire = req.build(body, 1)
    # One tagged field: tag 0, size 17, a compact array of one uuid
    assert wire == req.build(without, 1)[:-1] + b"\x01\x00\x11\x02" + DIR_B.bytes
    assert req.parse(wire, 1).offline_log_dirs == [DIR_B]
    assert req.parse(req.build(body, 0), 0).offline_log_dirs == []
    first, second = req.parse(req.build(without, 1), 1), req.parse(req.build(without, 1), 1)
    assert first.offline_log_dirs is not second.offline_log_dirs  # each absent list is a fresh one
    resp = APIS[K.BROKER_HEARTBEAT].response
    fenced = resp.parse(resp.build({"error_code": E.STALE_BROKER_EPOCH}, 1), 1)
    assert (fenced.is_caught_up, fenced.is_fenced, fenced.should_shut_down) == (False, True, False)


def test_envelope_carries_the_forwarded_request_and_a_null_response() -> None:
    api = APIS[K.ENVELOPE]
    parsed = _round_trip(api.request, BODIES[K.ENVELOPE][0], 0)
    assert bytes(parsed.request_data) == FORWARDED
    header = RequestHeader.parse(bytes(parsed.request_data), 2)
    assert (header.request_api_key, header.request_api_version, header.client_id) == (K.CREATE_TOPICS, 7,
                                                                                       "adminclient-1")
    assert _round_trip(api.request, dict(BODIES[K.ENVELOPE][0], request_principal=None), 0).request_principal is None
    # The response without its data: a null compact bytes (0), NOT_CONTROLLER, no tagged fields
    failed = api.response.build({"error_code": E.NOT_CONTROLLER}, 0)
    assert failed == b"\x00\x00\x29\x00"
    assert api.response.parse(failed, 0).response_data is None


def test_allocate_producer_ids_on_the_wire() -> None:
    api = APIS[K.ALLOCATE_PRODUCER_IDS]
    assert api.request.build(BODIES[K.ALLOCATE_PRODUCER_IDS][0], 0) == (
        b"\x00\x00\x00\x02" + (43).to_bytes(8, "big") + b"\x00")
    assert api.request.parse(api.request.build({"broker_id": 2}, 0), 0).broker_epoch == -1
    resp = api.response.parse(api.response.build(BODIES[K.ALLOCATE_PRODUCER_IDS][1], 0), 0)
    assert (resp.producer_id_start, resp.producer_id_len) == (5000, 1000)


# -- controller-listener only ------------------------------------------------------------------------------

def test_controller_api_keys_are_the_apis_kafka_serves_on_no_broker_listener() -> None:
    """Kafka's schemas list the listeners of each API: the controller-only ones lack ``broker``."""
    shared = shared_dir()
    if shared is None:
        pytest.skip("shared/kafka-protocol is not available")
    messages = shared / "kafka-protocol" / "messages"
    no_broker = {key for key, api in APIS.items() if (messages / f"{api.request.name}.json").is_file()
                 and "broker" not in load_schema(messages, api.request.name)["listeners"]}
    assert no_broker == CONTROLLER_API_KEYS


async def test_a_brokers_api_versions_offers_no_controller_api(conn: KafkaConnection) -> None:
    offered = await conn.negotiate()
    assert not CONTROLLER_API_KEYS & set(offered)
    assert {K.API_VERSIONS, K.DESCRIBE_QUORUM, K.UNREGISTER_BROKER} <= set(offered)


@pytest.mark.parametrize("key", sorted(CONTROLLER_API_KEYS), ids=lambda k: APIS[k].name)
async def test_a_brokers_client_listener_does_not_answer_a_controller_api(conn: KafkaConnection, key: int) -> None:
    """As for an api key it does not know: the connection is closed, no response."""
    await conn.send(key, APIS[key].max_version, BODIES[key][0])
    with trio.fail_after(5):
        assert await conn.receive_frame() is None
