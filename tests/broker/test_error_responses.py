"""Each request's error response (Kafka's ``getErrorResponse``): every api key, every version.

A handler that raises gets its request answered with :func:`error_response`: the
body must encode at the request's version (strict mode: no undeclared key) and
carry the error code wherever it has one; the transaction APIs are checked
entity by entity.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("version", range(2))
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
