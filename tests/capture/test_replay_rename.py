"""``--scale K`` renaming: request bodies renamed per copy, responses un-renamed, over real frames and bodies."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from minikafka.capture.frames import parse_request_frame
from minikafka.capture.replay.rename import (
    COORDINATOR_PARTITIONS,
    CopyNames,
    copy_names,
    rename_client_id,
    rename_request,
    rename_request_frame,
    unrename_response,
)
from minikafka.common.hashing import partition_for_key
from minikafka.protocol.api import APIS
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.headers import RequestHeader, request_header_version
from minikafka.protocol.records import Record, build_batch, decode_records
from minikafka.common.clock import SYSTEM_CLOCK

S3 = CopyNames(3, 10)


def _frame(api_key: int, version: int, body: dict, client_id: str | None = "app") -> bytes:
    """A request frame (no size prefix) as a client sends it."""
    api = APIS[api_key]
    header = RequestHeader.build({"request_api_key": api_key, "request_api_version": version, "correlation_id": 7,
                                  "client_id": client_id}, request_header_version(api_key, api.is_flexible(version)))
    return header + api.request.build(body, version)


def _renamed(api_key: int, version: int, body: dict, names: CopyNames = S3) -> Any:
    """The body of the request frame renamed for ``names``' copy, parsed back (checks it re-encodes)."""
    hdr, out = parse_request_frame(rename_request_frame(_frame(api_key, version, body), names))
    assert hdr.client_id == names.client_id("app")
    return out


def _response(api_key: int, version: int, body: dict) -> Any:
    """A response body as the replay has it: built and parsed back."""
    msg = APIS[api_key].response
    return msg.parse(msg.build(body, version), version)


# -- names -------------------------------------------------------------------------------------------

def test_one_copy_renames_nothing() -> None:
    assert copy_names(0, 1) is None
    assert copy_names(0, 2) is not None and copy_names(0, 2).prefix == "s0."


def test_topic_and_client_prefix_internal_names_kept() -> None:
    assert S3.topic("orders") == "s3.orders"
    assert S3.client_id("rdkafka") == "s3.rdkafka"
    for kept in ("__consumer_offsets", "__transaction_state", "__anything", "", None):
        assert S3.topic(kept) == kept
        assert S3.group(kept) == kept
    assert S3.original("s3.orders") == "orders"
    assert S3.original("__consumer_offsets") == "__consumer_offsets"
    assert S3.original("s3.s1.x") == "s1.x"


@pytest.mark.parametrize("name", [f"group-{i}" for i in range(40)] + ["tx", "a", "spark-bench", "s3.g~2"])
def test_group_keeps_its_coordinator_partition(name: str) -> None:
    for i in (0, 3, 9):
        names = CopyNames(i, 10)
        renamed = names.group(name)
        assert renamed.startswith(f"s{i}.{name}")
        assert partition_for_key(renamed, COORDINATOR_PARTITIONS) == partition_for_key(name, COORDINATOR_PARTITIONS)
        fresh = CopyNames(i, 10)  # another task's names: no memory of the renaming
        assert fresh.original(renamed) == name
        assert names.original(renamed) == name


def test_foreign_names() -> None:
    assert S3.foreign("s0.orders") and S3.foreign("s9.g~4")
    assert not S3.foreign("s3.orders") and not S3.foreign("orders") and not S3.foreign("s10.x")
    assert not S3.foreign("__consumer_offsets") and not S3.foreign(None)


@pytest.mark.parametrize("regex, renamed", [
    ("^orders-.*", r"^s3\.(?:orders-.*)"),
    ("orders|payments", r"s3\.(?:orders|payments)"),
    (".*", r"s3\.(?:.*)"),
])
def test_topic_regex(regex: str, renamed: str) -> None:
    import re

    assert S3.topic_regex(regex) == renamed
    assert S3.original_regex(renamed) == regex
    assert re.fullmatch(renamed, S3.topic("orders-1")) or regex.startswith("orders|")
    assert not re.fullmatch(renamed, "s4.orders-1")


def test_error_messages() -> None:
    g = S3.group("g1")
    assert S3.original_message("Topic 's3.orders' already exists.") == "Topic 'orders' already exists."
    assert S3.original_message(f"Group {g} is not empty") == "Group g1 is not empty"
    assert S3.original_message("Topic 's4.orders' is s4's") == "Topic 's4.orders' is s4's"


# -- frames ------------------------------------------------------------------------------------------

def test_client_id_in_the_header() -> None:
    frame = _frame(K.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False})
    out = rename_client_id(frame, S3)
    hdr, body = parse_request_frame(out)
    assert hdr.client_id == "s3.app" and hdr.correlation_id == 7 and body.topics is None
    null = _frame(K.METADATA, 1, {"topics": None}, client_id=None)
    assert rename_client_id(null, S3) == null


def test_produce_topics_transactional_id_and_records_kept() -> None:
    batch = build_batch([Record(value=b"v1"), Record(key=b"k", value=b"v2")], base_timestamp=SYSTEM_CLOCK.time_ms())
    body = {"transactional_id": "txn-1", "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"name": "orders", "partition_data": [{"index": 0, "records": batch}, {"index": 1, "records": batch}]},
        {"name": "__consumer_offsets", "partition_data": [{"index": 3, "records": batch}]}]}
    out = _renamed(K.PRODUCE, 9, body)
    assert [t.name for t in out.topic_data] == ["s3.orders", "__consumer_offsets"]
    assert out.transactional_id == S3.transactional_id("txn-1")
    assert [r.value for r in decode_records(bytes(out.topic_data[0].partition_data[1].records))] == [b"v1", b"v2"]
    resp = _response(K.PRODUCE, 9, {"responses": [
        {"name": "s3.orders", "partition_responses": [{"index": 0, "base_offset": 5}]}]})
    unrename_response(K.PRODUCE, resp, S3)
    assert resp.responses[0].name == "orders"


def test_fetch_by_name_and_by_topic_id() -> None:
    body = {"replica_id": -1, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0,
            "session_epoch": -1, "topics": [{"topic": "orders", "topic_id": uuid.UUID(int=5),
                                             "partitions": [{"partition": 0, "fetch_offset": 3}]}],
            "forgotten_topics_data": [{"topic": "old", "topic_id": uuid.UUID(int=6), "partitions": [1]}],
            "rack_id": ""}
    out = _renamed(K.FETCH, 12, body)
    assert out.topics[0].topic == "s3.orders" and out.forgotten_topics_data[0].topic == "s3.old"
    by_id = APIS[K.FETCH].request.parse(APIS[K.FETCH].request.build(body, 13), 13)
    assert not rename_request(K.FETCH, by_id, S3)  # names are not on the wire from v13: nothing to rebuild
    resp = _response(K.FETCH, 12, {"responses": [{"topic": "s3.orders", "partitions": [{"partition_index": 0}]}]})
    unrename_response(K.FETCH, resp, S3)
    assert resp.responses[0].topic == "orders"


def test_metadata_all_topics_lists_this_copy_only() -> None:
    out = _renamed(K.METADATA, 12, {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}],
                                    "allow_auto_topic_creation": True})
    assert out.topics[0].name == "s3.orders"
    resp = _response(K.METADATA, 12, {"brokers": [], "controller_id": 0, "topics": [
        {"name": n, "topic_id": uuid.UUID(int=i + 1), "partitions": []}
        for i, n in enumerate(["s0.orders", "s3.orders", "__consumer_offsets", "s9.payments", "s3.payments"])]})
    unrename_response(K.METADATA, resp, S3)
    assert [t.name for t in resp.topics] == ["orders", "__consumer_offsets", "payments"]


def test_offset_commit_and_fetch() -> None:
    out = _renamed(K.OFFSET_COMMIT, 8, {"group_id": "g1", "generation_id_or_member_epoch": 1, "member_id": "m",
                                        "topics": [{"name": "orders", "partitions": [{"partition_index": 0}]}]})
    assert out.group_id == S3.group("g1") and out.topics[0].name == "s3.orders"
    out = _renamed(K.OFFSET_FETCH, 8, {"groups": [{"group_id": "g1", "topics": [{"name": "orders",
                                                                                 "partition_indexes": [0]}]},
                                                  {"group_id": "g2", "topics": None}]})
    assert [g.group_id for g in out.groups] == [S3.group("g1"), S3.group("g2")]
    assert out.groups[0].topics[0].name == "s3.orders"
    out = _renamed(K.OFFSET_FETCH, 5, {"group_id": "g1", "topics": [{"name": "orders", "partition_indexes": [0]}]})
    assert out.group_id == S3.group("g1") and out.topics[0].name == "s3.orders"
    resp = _response(K.OFFSET_FETCH, 8, {"groups": [{"group_id": S3.group("g1"), "topics": [
        {"name": "s3.orders", "partitions": [{"partition_index": 0, "committed_offset": 4}]}]}]})
    unrename_response(K.OFFSET_FETCH, resp, CopyNames(3, 10))
    assert resp.groups[0].group_id == "g1" and resp.groups[0].topics[0].name == "orders"


def test_find_coordinator_keys_by_type() -> None:
    out = _renamed(K.FIND_COORDINATOR, 3, {"key": "g1", "key_type": 0})
    assert out.key == S3.group("g1")
    out = _renamed(K.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx-1", "tx-2"]})
    assert out.coordinator_keys == [S3.transactional_id("tx-1"), S3.transactional_id("tx-2")]
    out = _renamed(K.FIND_COORDINATOR, 4, {"key_type": 2, "coordinator_keys": ["sg:AAAA:0"]})
    assert out.coordinator_keys == [f"{S3.group('sg')}:AAAA:0"]
    resp = _response(K.FIND_COORDINATOR, 4, {"coordinators": [
        {"key": S3.transactional_id("tx-1"), "node_id": 1, "host": "h", "port": 1}]})
    unrename_response(K.FIND_COORDINATOR, resp, S3)
    assert resp.coordinators[0].key == "tx-1"


def test_classic_group_requests() -> None:
    for key, version, body in [
        (K.JOIN_GROUP, 9, {"group_id": "g1", "session_timeout_ms": 10000, "member_id": "", "protocol_type": "consumer",
                           "protocols": [{"name": "range", "metadata": b"\x00"}]}),
        (K.HEARTBEAT, 4, {"group_id": "g1", "generation_id": 1, "member_id": "m"}),
        (K.SYNC_GROUP, 5, {"group_id": "g1", "generation_id": 1, "member_id": "m", "assignments": []}),
        (K.LEAVE_GROUP, 5, {"group_id": "g1", "members": [{"member_id": "m"}]}),
    ]:
        out = _renamed(key, version, body)
        assert out.group_id == S3.group("g1")
    out = _renamed(K.DESCRIBE_GROUPS, 5, {"groups": ["g1", "g2"]})
    assert out.groups == [S3.group("g1"), S3.group("g2")]
    out = _renamed(K.DELETE_GROUPS, 2, {"groups_names": ["g1"]})
    assert out.groups_names == [S3.group("g1")]
    resp = _response(K.DESCRIBE_GROUPS, 5, {"groups": [{"group_id": S3.group("g1"), "group_state": "Stable",
                                                        "members": [{"member_id": "s3.app-1", "client_id": "s3.app"}]}]})
    unrename_response(K.DESCRIBE_GROUPS, resp, S3)
    assert resp.groups[0].group_id == "g1" and resp.groups[0].members[0].client_id == "app"
    resp = _response(K.LIST_GROUPS, 4, {"groups": [{"group_id": g, "protocol_type": "consumer"} for g in
                                                    (S3.group("g1"), CopyNames(4, 10).group("g1"), "other")]})
    unrename_response(K.LIST_GROUPS, resp, S3)
    assert [g.group_id for g in resp.groups] == ["g1", "other"]


def test_topic_admin_requests() -> None:
    out = _renamed(K.CREATE_TOPICS, 7, {"topics": [{"name": "orders", "num_partitions": 3, "replication_factor": 1,
                                                    "assignments": [], "configs": [{"name": "retention.ms",
                                                                                    "value": "1000"}]}],
                                        "timeout_ms": 1000})
    assert out.topics[0].name == "s3.orders" and out.topics[0].configs[0].name == "retention.ms"
    out = _renamed(K.DELETE_TOPICS, 5, {"topic_names": ["orders", "__consumer_offsets"], "timeout_ms": 1000})
    assert out.topic_names == ["s3.orders", "__consumer_offsets"]
    out = _renamed(K.DELETE_TOPICS, 6, {"topics": [{"name": "orders", "topic_id": uuid.UUID(int=0)}],
                                        "timeout_ms": 1000})
    assert out.topics[0].name == "s3.orders"
    out = _renamed(K.CREATE_PARTITIONS, 3, {"topics": [{"name": "orders", "count": 6, "assignments": None}],
                                            "timeout_ms": 1000})
    assert out.topics[0].name == "s3.orders"
    out = _renamed(K.DELETE_RECORDS, 2, {"topics": [{"name": "orders", "partitions": [{"partition_index": 0,
                                                                                       "offset": 5}]}],
                                         "timeout_ms": 1000})
    assert out.topics[0].name == "s3.orders"
    out = _renamed(K.LIST_OFFSETS, 7, {"replica_id": -1, "topics": [{"name": "orders", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]})
    assert out.topics[0].name == "s3.orders"
    out = _renamed(K.OFFSET_FOR_LEADER_EPOCH, 4, {"topics": [{"topic": "orders", "partitions": [
        {"partition": 0, "leader_epoch": 0}]}]})
    assert out.topics[0].topic == "s3.orders"
    resp = _response(K.CREATE_TOPICS, 7, {"topics": [{"name": "s3.orders", "error_code": 36,
                                                      "error_message": "Topic 's3.orders' already exists."}]})
    unrename_response(K.CREATE_TOPICS, resp, S3)
    assert resp.topics[0].name == "orders" and resp.topics[0].error_message == "Topic 'orders' already exists."


def test_transactions() -> None:
    tx = S3.transactional_id("tx-1")
    assert _renamed(K.INIT_PRODUCER_ID, 4, {"transactional_id": "tx-1", "transaction_timeout_ms": 1000}
                    ).transactional_id == tx
    assert _renamed(K.INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 1000}
                    ).transactional_id is None
    out = _renamed(K.ADD_PARTITIONS_TO_TXN, 3, {"v3_and_below_transactional_id": "tx-1",
                                                "v3_and_below_topics": [{"name": "orders", "partitions": [0]}]})
    assert out.v3_and_below_transactional_id == tx and out.v3_and_below_topics[0].name == "s3.orders"
    out = _renamed(K.ADD_PARTITIONS_TO_TXN, 4, {"transactions": [{"transactional_id": "tx-1", "topics": [
        {"name": "orders", "partitions": [0]}]}]})
    assert out.transactions[0].transactional_id == tx and out.transactions[0].topics[0].name == "s3.orders"
    out = _renamed(K.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": "tx-1", "group_id": "g1"})
    assert out.transactional_id == tx and out.group_id == S3.group("g1")
    assert _renamed(K.END_TXN, 3, {"transactional_id": "tx-1", "committed": True}).transactional_id == tx
    out = _renamed(K.TXN_OFFSET_COMMIT, 3, {"transactional_id": "tx-1", "group_id": "g1", "topics": [
        {"name": "orders", "partitions": [{"partition_index": 0, "committed_offset": 3}]}]})
    assert out.transactional_id == tx and out.group_id == S3.group("g1") and out.topics[0].name == "s3.orders"
    resp = _response(K.ADD_PARTITIONS_TO_TXN, 3, {"results_by_topic_v3_and_below": [
        {"name": "s3.orders", "results_by_partition": [{"partition_index": 0}]}]})
    unrename_response(K.ADD_PARTITIONS_TO_TXN, resp, S3)
    assert resp.results_by_topic_v3_and_below[0].name == "orders"
    resp = _response(K.LIST_TRANSACTIONS, 1, {"transaction_states": [
        {"transactional_id": t, "producer_id": 1, "transaction_state": "Ongoing"}
        for t in (tx, CopyNames(0, 10).transactional_id("tx-1"))]})
    unrename_response(K.LIST_TRANSACTIONS, resp, S3)
    assert [t.transactional_id for t in resp.transaction_states] == ["tx-1"]


def test_config_resources_topic_and_group_only() -> None:
    resources = [{"resource_type": 2, "resource_name": "orders"}, {"resource_type": 32, "resource_name": "g1"},
                 {"resource_type": 4, "resource_name": "0"}]
    out = _renamed(K.DESCRIBE_CONFIGS, 4, {"resources": [dict(r, configuration_keys=None) for r in resources]})
    assert [r.resource_name for r in out.resources] == ["s3.orders", S3.group("g1"), "0"]
    out = _renamed(K.ALTER_CONFIGS, 2, {"resources": [dict(r, configs=[{"name": "retention.ms", "value": "1"}])
                                                      for r in resources]})
    assert [r.resource_name for r in out.resources] == ["s3.orders", S3.group("g1"), "0"]
    assert out.resources[0].configs[0].name == "retention.ms"
    out = _renamed(K.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [dict(r, configs=[]) for r in resources]})
    assert [r.resource_name for r in out.resources] == ["s3.orders", S3.group("g1"), "0"]
    resp = _response(K.DESCRIBE_CONFIGS, 4, {"results": [
        {"resource_type": 2, "resource_name": "s3.orders", "configs": []},
        {"resource_type": 32, "resource_name": S3.group("g1"), "configs": []}]})
    unrename_response(K.DESCRIBE_CONFIGS, resp, S3)
    assert [r.resource_name for r in resp.results] == ["orders", "g1"]
    resp = _response(K.INCREMENTAL_ALTER_CONFIGS, 1, {"responses": [
        {"resource_type": 2, "resource_name": "s3.orders"}, {"resource_type": 4, "resource_name": "0"}]})
    unrename_response(K.INCREMENTAL_ALTER_CONFIGS, resp, S3)
    assert [r.resource_name for r in resp.responses] == ["orders", "0"]


def test_acls() -> None:
    acl = {"resource_pattern_type": 3, "principal": "User:alice", "host": "*", "operation": 3, "permission_type": 3}
    out = _renamed(K.CREATE_ACLS, 3, {"creations": [
        dict(acl, resource_type=2, resource_name="orders"), dict(acl, resource_type=3, resource_name="g1"),
        dict(acl, resource_type=5, resource_name="tx-1"), dict(acl, resource_type=4, resource_name="kafka-cluster"),
        dict(acl, resource_type=2, resource_name="*"),
        dict(acl, resource_type=2, resource_name="ord", resource_pattern_type=4)]})
    assert [c.resource_name for c in out.creations] == [
        "s3.orders", S3.group("g1"), S3.transactional_id("tx-1"), "kafka-cluster", "*", "s3.ord"]
    assert out.creations[0].principal == "User:alice"
    out = _renamed(K.DESCRIBE_ACLS, 3, {"resource_type_filter": 2, "resource_name_filter": "orders",
                                        "pattern_type_filter": 1, "principal_filter": None, "host_filter": None,
                                        "operation": 1, "permission_type": 1})
    assert out.resource_name_filter == "s3.orders"
    out = _renamed(K.DELETE_ACLS, 3, {"filters": [{"resource_type_filter": 3, "resource_name_filter": "g1",
                                                   "pattern_type_filter": 3, "operation": 1, "permission_type": 1}]})
    assert out.filters[0].resource_name_filter == S3.group("g1")
    resp = _response(K.DESCRIBE_ACLS, 3, {"resources": [
        {"resource_type": 2, "resource_name": n, "pattern_type": 3, "acls": []}
        for n in ("s3.orders", "s5.orders", "*")]})
    unrename_response(K.DESCRIBE_ACLS, resp, S3)
    assert [r.resource_name for r in resp.resources] == ["orders", "*"]


def test_kip848_and_share_groups() -> None:
    out = _renamed(K.CONSUMER_GROUP_HEARTBEAT, 1, {"group_id": "g1", "member_id": "m", "member_epoch": 0,
                                                   "rebalance_timeout_ms": 1000,
                                                   "subscribed_topic_names": ["orders", "payments"],
                                                   "subscribed_topic_regex": "^ord.*", "topic_partitions": []})
    assert out.group_id == S3.group("g1") and out.subscribed_topic_names == ["s3.orders", "s3.payments"]
    assert out.subscribed_topic_regex == r"^s3\.(?:ord.*)"
    out = _renamed(K.SHARE_GROUP_HEARTBEAT, 1, {"group_id": "sg", "member_id": "m", "member_epoch": 0,
                                                "subscribed_topic_names": ["orders"]})
    assert out.group_id == S3.group("sg") and out.subscribed_topic_names == ["s3.orders"]
    out = _renamed(K.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g1"], "include_authorized_operations": False})
    assert out.group_ids == [S3.group("g1")]
    resp = _response(K.CONSUMER_GROUP_DESCRIBE, 0, {"groups": [{
        "group_id": S3.group("g1"), "group_state": "Stable", "assignor_name": "uniform", "members": [{
            "member_id": "m", "client_id": "s3.app", "client_host": "/h", "subscribed_topic_names": ["s3.orders"],
            "subscribed_topic_regex": r"^s3\.(?:ord.*)",
            "assignment": {"topic_partitions": [{"topic_id": uuid.UUID(int=1), "topic_name": "s3.orders",
                                                 "partitions": [0]}]},
            "target_assignment": {"topic_partitions": []}}]}]})
    unrename_response(K.CONSUMER_GROUP_DESCRIBE, resp, S3)
    m = resp.groups[0].members[0]
    assert resp.groups[0].group_id == "g1" and m.client_id == "app" and m.subscribed_topic_names == ["orders"]
    assert m.subscribed_topic_regex == "^ord.*" and m.assignment.topic_partitions[0].topic_name == "orders"


def test_client_quotas() -> None:
    out = _renamed(K.ALTER_CLIENT_QUOTAS, 1, {"entries": [{"entity": [
        {"entity_type": "client-id", "entity_name": "app"}, {"entity_type": "user", "entity_name": "alice"}],
        "ops": [{"key": "producer_byte_rate", "value": 1e6, "remove": False}]},
        {"entity": [{"entity_type": "client-id", "entity_name": None}], "ops": []}], "validate_only": False})
    assert [e.entity_name for e in out.entries[0].entity] == ["s3.app", "alice"]
    assert out.entries[1].entity[0].entity_name is None
    out = _renamed(K.DESCRIBE_CLIENT_QUOTAS, 1, {"components": [
        {"entity_type": "client-id", "match_type": 0, "match": "app"}], "strict": False})
    assert out.components[0].match == "s3.app"
    resp = _response(K.DESCRIBE_CLIENT_QUOTAS, 1, {"entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": n}], "values": []} for n in ("s3.app", "s1.app")]})
    unrename_response(K.DESCRIBE_CLIENT_QUOTAS, resp, S3)
    assert [e.entity[0].entity_name for e in resp.entries] == ["app"]
