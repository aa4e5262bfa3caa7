"""Each request's error response (Kafka's ``getErrorResponse``): every api key, every version.

A handler that raises gets its request answered with :func:`error_response`: the
body must encode at the request's version (strict mode: no undeclared key) and
carry the error code wherever it has one; the transaction, KIP-848 and KIP-932
APIs are checked entity by entity.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from message_strategies import message_strategy
from minikafka.broker import error_responses
from minikafka.broker.error_responses import error_response
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.schema import Field

K = ApiKey
CODE = ErrorCode.COORDINATOR_NOT_AVAILABLE

API_VERSIONS = [(key, v) for key, api in sorted(APIS.items()) for v in range(api.min_version, api.max_version + 1)]


def error_codes(fields: list[Field], body: Any, version: int) -> list[int]:
    """Every ``error_code`` and ``partition_error_code`` ``version`` carries in a parsed body, at any depth.

    (CreateTopics' ``topic_config_error_code`` is about the configs returned, not the request: Kafka
    leaves it 0.)
    """
    out: list[int] = []
    for fl in fields:
        value = body[fl.name] if fl.present(version) else None
        if value is None:
            continue
        if fl.name in ("error_code", "partition_error_code"):
            out.append(value)
        elif fl.is_struct:
            out += error_codes(fl.subfields, value, version)
        elif fl.is_array_of_structs:
            out += [c for item in value for c in error_codes(fl.subfields, item, version)]
    return out


def answer(key: int, version: int, request: dict, code: int = CODE, throttle_time_ms: int = 0) -> Any:
    """The error response to ``request`` as the client reads it (request and response through the wire)."""
    api = APIS[key]
    parsed_request = api.request.parse(api.request.build(request, version), version)
    body = error_response(key, version, parsed_request, code, throttle_time_ms)
    return api.response.parse(api.response.build(body, version), version)


def test_every_api_has_its_own_builder() -> None:
    """No api key falls back to a bare top-level error code by accident."""
    assert set(error_responses._BUILDERS) == set(APIS)


@pytest.mark.parametrize("key,version", API_VERSIONS, ids=[f"{APIS[k].name}-v{v}" for k, v in API_VERSIONS])
def test_error_response_encodes_for_any_request(key: int, version: int) -> None:
    """Random valid requests: the error response encodes, and each error code in it is the one given."""

    @settings(max_examples=10, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(message_strategy(APIS[key].request, version))
    def check(request: dict) -> None:
        parsed = answer(key, version, request)
        assert set(error_codes(APIS[key].response.fields, parsed, version)) <= {CODE}

    check()


# -- the transaction APIs, entity by entity -----------------------------------------------------------

def test_add_partitions_to_txn_client_form_names_every_partition() -> None:
    request = {"v3_and_below_transactional_id": "tx", "v3_and_below_producer_id": 5,
               "v3_and_below_producer_epoch": 1,
               "v3_and_below_topics": [{"name": "a", "partitions": [0, 2]}, {"name": "b", "partitions": [1]}]}
    for version in range(4):
        parsed = answer(K.ADD_PARTITIONS_TO_TXN, version, request, throttle_time_ms=9)
        assert parsed.throttle_time_ms == 9
        assert [(t.name, p.partition_index, p.partition_error_code)
                for t in parsed.results_by_topic_v3_and_below for p in t.results_by_partition] == [
            ("a", 0, CODE), ("a", 2, CODE), ("b", 1, CODE)]


def test_add_partitions_to_txn_broker_form_answers_top_level() -> None:
    """v4+: Kafka's getErrorResponse sets only the top-level code (no per-transaction results)."""
    request = {"transactions": [{"transactional_id": "tx", "producer_id": 5, "producer_epoch": 1,
                                 "verify_only": True, "topics": [{"name": "a", "partitions": [0]}]}]}
    for version in (4, 5):
        parsed = answer(K.ADD_PARTITIONS_TO_TXN, version, request)
        assert parsed.error_code == CODE and parsed.results_by_transaction == []


@pytest.mark.parametrize("version", range(5))
def test_add_offsets_to_txn_top_level(version: int) -> None:
    request = {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 1, "group_id": "g"}
    assert answer(K.ADD_OFFSETS_TO_TXN, version, request).error_code == CODE


@pytest.mark.parametrize("version", range(6))
def test_end_txn_top_level(version: int) -> None:
    parsed = answer(K.END_TXN, version, {"transactional_id": "tx", "producer_id": 5, "producer_epoch": 1,
                                         "committed": True})
    assert parsed.error_code == CODE
    assert (parsed.producer_id, parsed.producer_epoch) == (-1, -1)


@pytest.mark.parametrize("version", (1, 2))  # Kafka 4.0 removed v0
def test_write_txn_markers_names_every_producer_partition(version: int) -> None:
    request = {"markers": [
        {"producer_id": 5, "producer_epoch": 1, "transaction_result": True, "coordinator_epoch": 0,
         "topics": [{"name": "a", "partition_indexes": [0, 1]}]},
        {"producer_id": 6, "producer_epoch": 0, "transaction_result": False, "coordinator_epoch": 0,
         "topics": [{"name": "b", "partition_indexes": [3]}]},
    ]}
    parsed = answer(K.WRITE_TXN_MARKERS, version, request, throttle_time_ms=9)  # no throttle field to fill
    assert [(m.producer_id, t.name, p.partition_index, p.error_code)
            for m in parsed.markers for t in m.topics for p in t.partitions] == [
        (5, "a", 0, CODE), (5, "a", 1, CODE), (6, "b", 3, CODE)]


@pytest.mark.parametrize("version", range(6))
def test_txn_offset_commit_names_every_partition(version: int) -> None:
    request = {"transactional_id": "tx", "group_id": "g", "producer_id": 5, "producer_epoch": 1,
               "topics": [{"name": "a", "partitions": [
                   {"partition_index": 0, "committed_offset": 10, "committed_metadata": None},
                   {"partition_index": 4, "committed_offset": 11, "committed_metadata": "m"}]}]}
    parsed = answer(K.TXN_OFFSET_COMMIT, version, request)
    assert [(t.name, p.partition_index, p.error_code) for t in parsed.topics for p in t.partitions] == [
        ("a", 0, CODE), ("a", 4, CODE)]


def test_describe_producers_names_every_partition() -> None:
    request = {"topics": [{"name": "a", "partition_indexes": [0, 2]}]}
    parsed = answer(K.DESCRIBE_PRODUCERS, 0, request)
    assert [(t.name, p.partition_index, p.error_code, p.error_message, p.active_producers)
            for t in parsed.topics for p in t.partitions] == [("a", 0, CODE, None, []), ("a", 2, CODE, None, [])]


def test_describe_transactions_names_every_transactional_id() -> None:
    parsed = answer(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["t1", "t2"]})
    assert [(s.transactional_id, s.error_code, s.topics) for s in parsed.transaction_states] == [
        ("t1", CODE, []), ("t2", CODE, [])]


@pytest.mark.parametrize("version", range(2))
def test_list_transactions_top_level(version: int) -> None:
    parsed = answer(K.LIST_TRANSACTIONS, version, {"state_filters": ["Ongoing"], "producer_id_filters": [5]})
    assert parsed.error_code == CODE and parsed.transaction_states == []


def test_init_producer_id_top_level_at_every_version() -> None:
    for version in range(6):
        parsed = answer(K.INIT_PRODUCER_ID, version, {"transactional_id": "tx", "transaction_timeout_ms": 1000})
        assert (parsed.error_code, parsed.producer_id, parsed.producer_epoch) == (CODE, -1, -1)


# -- the KIP-848 and KIP-932 APIs, entity by entity ------------------------------------------------------

TOPIC_A = uuid.UUID("5b0f8a4e-0c1d-4f6e-9a3b-7d2c1e0f9a11")
TOPIC_B = uuid.UUID("0e6f2a1b-3c4d-4e5f-8a9b-0c1d2e3f4a5b")


@pytest.mark.parametrize("key,version", [(K.CONSUMER_GROUP_HEARTBEAT, 0), (K.CONSUMER_GROUP_HEARTBEAT, 1),
                                         (K.SHARE_GROUP_HEARTBEAT, 1)])
def test_group_heartbeats_answer_top_level_without_assignment(key: int, version: int) -> None:
    request = {"group_id": "g", "member_id": "m-1", "member_epoch": 4, "subscribed_topic_names": ["a"]}
    parsed = answer(key, version, request, throttle_time_ms=7)
    assert (parsed.error_code, parsed.throttle_time_ms, parsed.member_id, parsed.assignment) == (CODE, 7, None, None)


@pytest.mark.parametrize("key,version", [(K.CONSUMER_GROUP_DESCRIBE, 0), (K.CONSUMER_GROUP_DESCRIBE, 1),
                                         (K.SHARE_GROUP_DESCRIBE, 1)])
def test_group_describes_name_every_group(key: int, version: int) -> None:
    parsed = answer(key, version, {"group_ids": ["g1", "g2"], "include_authorized_operations": True})
    assert [(g.group_id, g.error_code, g.members) for g in parsed.groups] == [("g1", CODE, []), ("g2", CODE, [])]


@pytest.mark.parametrize("version", [1, 2])
def test_share_fetch_names_every_partition_and_its_acknowledgements(version: int) -> None:
    request = {"group_id": "sg", "member_id": "m", "share_session_epoch": 3, "max_wait_ms": 500, "min_bytes": 1,
               "max_records": 500, "batch_size": 500, "topics": [
                   {"topic_id": TOPIC_A, "partitions": [
                       {"partition_index": 0, "acknowledgement_batches": [
                           {"first_offset": 10, "last_offset": 12, "acknowledge_types": [1]}]},
                       {"partition_index": 1, "acknowledgement_batches": []}]},
                   {"topic_id": TOPIC_B, "partitions": [{"partition_index": 4, "acknowledgement_batches": []}]}],
               "forgotten_topics_data": []}
    parsed = answer(K.SHARE_FETCH, version, request)
    assert parsed.error_code == CODE
    assert [(t.topic_id, p.partition_index, p.error_code, p.acknowledge_error_code, p.records, p.acquired_records)
            for t in parsed.responses for p in t.partitions] == [
        (TOPIC_A, 0, CODE, CODE, None, []), (TOPIC_A, 1, CODE, 0, None, []), (TOPIC_B, 4, CODE, 0, None, [])]


@pytest.mark.parametrize("version", [1, 2])
def test_share_acknowledge_names_every_partition(version: int) -> None:
    request = {"group_id": "sg", "member_id": "m", "share_session_epoch": 4, "topics": [
        {"topic_id": TOPIC_A, "partitions": [
            {"partition_index": 2, "acknowledgement_batches": [
                {"first_offset": 0, "last_offset": 3, "acknowledge_types": [1, 2, 3, 1]}]}]}]}
    parsed = answer(K.SHARE_ACKNOWLEDGE, version, request)
    assert parsed.error_code == CODE
    assert [(t.topic_id, p.partition_index, p.error_code, p.current_leader.leader_id)
            for t in parsed.responses for p in t.partitions] == [(TOPIC_A, 2, CODE, -1)]


@pytest.mark.parametrize("version", [0, 1])
def test_describe_share_group_offsets_names_every_group_and_partition(version: int) -> None:
    request = {"groups": [{"group_id": "sg1", "topics": [{"topic_name": "a", "partitions": [0, 3]}]},
                          {"group_id": "sg2", "topics": None}]}
    parsed = answer(K.DESCRIBE_SHARE_GROUP_OFFSETS, version, request)
    assert [(g.group_id, g.error_code) for g in parsed.groups] == [("sg1", CODE), ("sg2", CODE)]
    assert [(t.topic_name, p.partition_index, p.error_code, p.start_offset)
            for t in parsed.groups[0].topics for p in t.partitions] == [("a", 0, CODE, -1), ("a", 3, CODE, -1)]
    assert parsed.groups[1].topics == []


def test_alter_share_group_offsets_names_every_partition() -> None:
    request = {"group_id": "sg", "topics": [{"topic_name": "a", "partitions": [
        {"partition_index": 0, "start_offset": 5}, {"partition_index": 1, "start_offset": 0}]}]}
    parsed = answer(K.ALTER_SHARE_GROUP_OFFSETS, 0, request)
    assert parsed.error_code == CODE
    assert [(t.topic_name, p.partition_index, p.error_code) for t in parsed.responses for p in t.partitions] == [
        ("a", 0, CODE), ("a", 1, CODE)]


def test_delete_share_group_offsets_names_every_topic() -> None:
    parsed = answer(K.DELETE_SHARE_GROUP_OFFSETS, 0, {"group_id": "sg", "topics": [{"topic_name": "a"},
                                                                                   {"topic_name": "b"}]})
    assert parsed.error_code == CODE
    assert [(t.topic_name, t.error_code) for t in parsed.responses] == [("a", CODE), ("b", CODE)]


def test_offset_commit_v10_answers_by_topic_id() -> None:
    request = {"group_id": "g", "generation_id_or_member_epoch": 3, "member_id": "m", "topics": [
        {"topic_id": TOPIC_A, "partitions": [{"partition_index": 1, "committed_offset": 9,
                                              "committed_metadata": None}]}]}
    parsed = answer(K.OFFSET_COMMIT, 10, request)
    assert [(t.topic_id, p.partition_index, p.error_code) for t in parsed.topics for p in t.partitions] == [
        (TOPIC_A, 1, CODE)]
