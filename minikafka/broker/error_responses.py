"""The response Kafka gives when a handler fails: each request's ``getErrorResponse``.

When a handler raises, ``KafkaApis.handleError`` answers the request with its
error response rather than closing the connection: the error code on every
topic/partition/resource/group the request named (or at the top level where
the response has one).  :func:`error_response` builds that body for any api
key from the parsed request; :func:`error_code_for` maps an exception to the
code (Kafka's ``Errors.forException``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.records import CorruptRecordError
from .log import OffsetOutOfRangeError
from .metadata import MetadataError

ErrorBody = dict[str, Any]


class KafkaError(Exception):
    """An error a handler raises to answer with a given Kafka error code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name)
        self.code = code


def error_code_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code for an exception (UNKNOWN_SERVER_ERROR when nothing more specific fits)."""
    if isinstance(exc, (KafkaError, MetadataError)):
        return ErrorCode(exc.code)
    if isinstance(exc, CorruptRecordError):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(exc, OffsetOutOfRangeError):
        return ErrorCode.OFFSET_OUT_OF_RANGE
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _partitions(topics: Any, topic_key: str, parts_key: str, index_key: str, out_index: str,
                code: int, **extra: Any) -> list[dict]:
    """Per-topic partition lists with ``code`` on every partition the request named."""
    return [{topic_key: t[topic_key],
             "partitions": [{out_index: p[index_key] if isinstance(p, dict) else p, "error_code": code, **extra}
                            for p in t[parts_key]]}
            for t in topics or []]


def _produce(req: Any, v: int, code: int) -> ErrorBody:
    # v13 names topics by id (the name reads back empty), earlier versions by name.
    return {"responses": [{"name": t["name"], "topic_id": t["topic_id"],
                           "partition_responses": [{"index": p["index"], "error_code": code, "base_offset": -1}
                                                   for p in t["partition_data"]]}
                          for t in req["topic_data"]]}


def _fetch(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "session_id": 0,
            "responses": [{"topic": t["topic"], "topic_id": t["topic_id"],
                           "partitions": [{"partition_index": p["partition"], "error_code": code,
                                           "high_watermark": -1} for p in t["partitions"]]}
                          for t in req["topics"]]}


def _list_offsets(req: Any, v: int, code: int) -> ErrorBody:
    return {"topics": _partitions(req["topics"], "name", "partitions", "partition_index", "partition_index", code)}


def _metadata(req: Any, v: int, code: int) -> ErrorBody:
    # A request topic's name is nullable from v10, the response's only from v12; v13 also carries the code at
    # the top level (MetadataRequest.getErrorResponse, KIP-1102).
    return {"brokers": [], "error_code": code,
            "topics": [{"error_code": code, "name": t["name"] if v >= 12 else t["name"] or "",
                        "topic_id": t["topic_id"]} for t in req["topics"] or []]}


def _offset_commit(req: Any, v: int, code: int) -> ErrorBody:
    # v10 names topics by id (the name reads back empty), earlier versions by name.
    return {"topics": [{"name": t["name"], "topic_id": t["topic_id"],
                        "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                       for p in t["partitions"]]} for t in req["topics"]]}


def _offset_fetch(req: Any, v: int, code: int) -> ErrorBody:
    if v >= 8:
        return {"groups": [{"group_id": g["group_id"], "error_code": code, "topics": []} for g in req["groups"]]}
    topics = _partitions(req["topics"], "name", "partition_indexes", "", "partition_index", code,
                         committed_offset=-1)
    return {"error_code": code, "topics": topics if v < 2 else []}


def _find_coordinator(req: Any, v: int, code: int) -> ErrorBody:
    if v >= 4:
        return {"coordinators": [{"key": k, "error_code": code, "node_id": -1, "host": "", "port": -1}
                                 for k in req["coordinator_keys"]]}
    return {"error_code": code, "node_id": -1, "host": "", "port": -1}


def _join_group(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "generation_id": -1, "protocol_name": None if v >= 7 else "", "leader": "",
            "member_id": req["member_id"], "members": []}


def _top_level(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code}


def _create_delegation_token(req: Any, v: int, code: int) -> ErrorBody:
    # CreateDelegationTokenRequest.getErrorResponse: owner and requester ANONYMOUS, timestamps -1, no token.
    return {"error_code": code, "principal_type": "User", "principal_name": "ANONYMOUS",
            "token_requester_principal_type": "User", "token_requester_principal_name": "ANONYMOUS",
            "issue_timestamp_ms": -1, "expiry_timestamp_ms": -1, "max_timestamp_ms": -1, "token_id": "", "hmac": b""}


def _leave_group(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "members": []}


def _describe_groups(req: Any, v: int, code: int) -> ErrorBody:
    return {"groups": [{"group_id": g, "error_code": code, "group_state": "", "protocol_type": "",
                        "protocol_data": "", "members": []} for g in req["groups"]]}


def _list_groups(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "groups": []}


def _api_versions(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "api_keys": []}


def _create_topics(req: Any, v: int, code: int) -> ErrorBody:
    return {"topics": [{"name": t["name"], "error_code": code} for t in req["topics"]]}


def _delete_topics(req: Any, v: int, code: int) -> ErrorBody:
    if v >= 6:
        return {"responses": [{"name": t["name"], "topic_id": t["topic_id"], "error_code": code}
                              for t in req["topics"]]}
    return {"responses": [{"name": n, "error_code": code} for n in req["topic_names"]]}


def _delete_records(req: Any, v: int, code: int) -> ErrorBody:
    return {"topics": _partitions(req["topics"], "name", "partitions", "partition_index", "partition_index", code,
                                  low_watermark=-1)}


def _init_producer_id(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


def _offset_for_leader_epoch(req: Any, v: int, code: int) -> ErrorBody:
    return {"topics": _partitions(req["topics"], "topic", "partitions", "partition", "partition", code)}


def _add_partitions_to_txn(req: Any, v: int, code: int) -> ErrorBody:
    if v >= 4:  # the broker (batched) form answers with the top-level code only, as Kafka does
        return {"error_code": code, "results_by_transaction": []}
    return {"results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [{"partition_index": p, "partition_error_code": code}
                                                     for p in t["partitions"]]}
        for t in req["v3_and_below_topics"]]}


def _end_txn(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "producer_id": -1, "producer_epoch": -1}


def _write_txn_markers(req: Any, v: int, code: int) -> ErrorBody:
    return {"markers": [{"producer_id": m["producer_id"],
                         "topics": _partitions(m["topics"], "name", "partition_indexes", "", "partition_index", code)}
                        for m in req["markers"]]}


def _txn_offset_commit(req: Any, v: int, code: int) -> ErrorBody:
    return {"topics": _partitions(req["topics"], "name", "partitions", "partition_index", "partition_index", code)}


def _describe_producers(req: Any, v: int, code: int) -> ErrorBody:
    # Kafka's getErrorResponse builds these topics but never adds them (an empty list goes out);
    # naming every partition the request asked for is what its callers expect.
    return {"topics": _partitions(req["topics"], "name", "partition_indexes", "", "partition_index", code,
                                  error_message=None, active_producers=[])}


def _describe_transactions(req: Any, v: int, code: int) -> ErrorBody:
    return {"transaction_states": [{"error_code": code, "transactional_id": t, "transaction_state": "",
                                    "topics": []} for t in req["transactional_ids"]]}


def _list_transactions(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "unknown_state_filters": [], "transaction_states": []}


def _resources(req: Any, v: int, code: int, key: str) -> ErrorBody:
    return {key: [{"error_code": code, "error_message": code_name(code), "resource_type": r["resource_type"],
                   "resource_name": r["resource_name"]} for r in req["resources"]]}


def _create_partitions(req: Any, v: int, code: int) -> ErrorBody:
    return {"results": [{"name": t["name"], "error_code": code} for t in req["topics"]]}


def _delete_groups(req: Any, v: int, code: int) -> ErrorBody:
    return {"results": [{"group_id": g, "error_code": code} for g in req["groups_names"]]}


def _describe_client_quotas(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": code_name(code), "entries": None}


def _alter_client_quotas(req: Any, v: int, code: int) -> ErrorBody:
    return {"entries": [{"error_code": code, "error_message": code_name(code),
                         "entity": [{"entity_type": e["entity_type"], "entity_name": e["entity_name"]}
                                    for e in entry["entity"]]} for entry in req["entries"]]}


def _alter_partition_reassignments(req: Any, v: int, code: int) -> ErrorBody:
    # AlterPartitionReassignmentsRequest.getErrorResponse: the code at the top level and on every partition.
    return {"error_code": code, "allow_replication_factor_change": req["allow_replication_factor_change"],
            "responses": [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"],
                                                              "error_code": code} for p in t["partitions"]]}
                          for t in req["topics"]]}


def _list_partition_reassignments(req: Any, v: int, code: int) -> ErrorBody:
    # ListPartitionReassignmentsRequest.getErrorResponse: the top-level code, each partition named, empty.
    return {"error_code": code, "topics": [
        {"name": t["name"], "partitions": [{"partition_index": i, "replicas": [], "adding_replicas": [],
                                            "removing_replicas": []} for i in t["partition_indexes"]]}
        for t in req["topics"] or []]}


def _alter_replica_log_dirs(req: Any, v: int, code: int) -> ErrorBody:
    # AlterReplicaLogDirsRequest.getErrorResponse: every partition named, by topic (a partition named under
    # two directories once).
    topics: dict[str, dict[int, None]] = {}
    for d in req["dirs"]:
        for t in d["topics"]:
            topics.setdefault(t["name"], {}).update(dict.fromkeys(t["partitions"]))
    return {"results": [{"topic_name": name, "partitions": [{"partition_index": p, "error_code": code}
                                                            for p in parts]} for name, parts in topics.items()]}


def _describe_cluster(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": code_name(code), "brokers": []}


def _sasl_handshake(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "mechanisms": []}


def _sasl_authenticate(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": code_name(code), "auth_bytes": b""}


def _describe_user_scram_credentials(req: Any, v: int, code: int) -> ErrorBody:
    # Kafka leaves each result's user empty; naming the users asked for is what callers expect.
    return {"error_code": code, "error_message": code_name(code),
            "results": [{"user": u["name"], "error_code": code, "error_message": code_name(code),
                         "credential_infos": []} for u in req["users"] or []]}


def _alter_user_scram_credentials(req: Any, v: int, code: int) -> ErrorBody:
    users = dict.fromkeys([d["name"] for d in req["deletions"]] + [u["name"] for u in req["upsertions"]])
    return {"results": [{"user": user, "error_code": code, "error_message": code_name(code)} for user in users]}


def _describe_acls(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": code_name(code), "resources": []}


def _create_acls(req: Any, v: int, code: int) -> ErrorBody:
    return {"results": [{"error_code": code, "error_message": code_name(code)} for _ in req["creations"]]}


def _delete_acls(req: Any, v: int, code: int) -> ErrorBody:
    return {"filter_results": [{"error_code": code, "error_message": code_name(code), "matching_acls": []}
                               for _ in req["filters"]]}


def _consumer_group_describe(req: Any, v: int, code: int) -> ErrorBody:
    """ConsumerGroupDescribe and ShareGroupDescribe: each group asked for, with the error."""
    return {"groups": [{"group_id": g, "error_code": code, "error_message": None, "group_state": "",
                        "group_epoch": -1, "assignment_epoch": -1, "assignor_name": "", "members": []}
                       for g in req["group_ids"]]}


def _no_leader() -> dict:
    return {"leader_id": -1, "leader_epoch": -1}


def _share_fetch(req: Any, v: int, code: int) -> ErrorBody:
    # Kafka's getErrorResponse sets the top-level code only; every partition named gets it too, and
    # the acknowledge error code as well where the partition carried acknowledgements.
    return {"error_code": code, "error_message": None, "acquisition_lock_timeout_ms": 0, "node_endpoints": [],
            "responses": [{"topic_id": t["topic_id"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": code,
                 "acknowledge_error_code": code if p["acknowledgement_batches"] else 0,
                 "current_leader": _no_leader(), "records": None, "acquired_records": []}
                for p in t["partitions"]]} for t in req["topics"]]}


def _share_acknowledge(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": None, "node_endpoints": [],
            "responses": [{"topic_id": t["topic_id"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": code, "current_leader": _no_leader()}
                for p in t["partitions"]]} for t in req["topics"]]}


def _describe_share_group_offsets(req: Any, v: int, code: int) -> ErrorBody:
    # Topics are named, not identified, in the request: the response's topic id stays zero.
    return {"groups": [{"group_id": g["group_id"], "error_code": code, "error_message": None, "topics": [
        {"topic_name": t["topic_name"], "partitions": [
            {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1, "error_code": code}
            for p in t["partitions"]]} for t in g["topics"] or []]} for g in req["groups"]]}


def _alter_share_group_offsets(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": None, "responses": [
        {"topic_name": t["topic_name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                                       for p in t["partitions"]]} for t in req["topics"]]}


def _delete_share_group_offsets(req: Any, v: int, code: int) -> ErrorBody:
    return {"error_code": code, "error_message": None,
            "responses": [{"topic_name": t["topic_name"], "error_code": code} for t in req["topics"]]}


def _elect_leaders(req: Any, v: int, code: int) -> ErrorBody:
    # ElectLeadersRequest.getErrorResponse: the top-level code (v1+) and on every partition named.
    return {"error_code": code, "replica_election_results": [
        {"topic": t["topic"], "partition_result": [{"partition_id": p, "error_code": code, "error_message": None}
                                                   for p in t["partitions"]]}
        for t in req["topic_partitions"] or []]}


def _describe_topic_partitions(req: Any, v: int, code: int) -> ErrorBody:
    # DescribeTopicPartitionsRequest.getErrorResponse: every topic named, without partitions.
    return {"topics": [{"error_code": code, "name": t["name"], "is_internal": False, "partitions": []}
                       for t in req["topics"]], "next_cursor": None}


def _update_features(req: Any, v: int, code: int) -> ErrorBody:
    # UpdateFeaturesRequest.getErrorResponse: the top-level error only, no per-feature results.
    return {"error_code": code, "error_message": code_name(code), "results": []}


def code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


_BUILDERS: dict[int, Callable[[Any, int, int], ErrorBody]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.METADATA: _metadata,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _join_group,
    ApiKey.HEARTBEAT: _top_level,
    ApiKey.LEAVE_GROUP: _leave_group,
    ApiKey.SYNC_GROUP: _top_level,
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.API_VERSIONS: _api_versions,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.DELETE_RECORDS: _delete_records,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _top_level,
    ApiKey.END_TXN: _end_txn,
    ApiKey.WRITE_TXN_MARKERS: _write_txn_markers,
    ApiKey.UPDATE_FEATURES: _update_features,
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_CONFIGS: lambda req, v, code: _resources(req, v, code, "results"),
    ApiKey.ALTER_CONFIGS: lambda req, v, code: _resources(req, v, code, "responses"),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: lambda req, v, code: _resources(req, v, code, "responses"),
    ApiKey.CREATE_PARTITIONS: _create_partitions,
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _alter_user_scram_credentials,
    ApiKey.CREATE_DELEGATION_TOKEN: _create_delegation_token,
    ApiKey.RENEW_DELEGATION_TOKEN: _top_level,
    ApiKey.EXPIRE_DELEGATION_TOKEN: _top_level,
    ApiKey.DESCRIBE_DELEGATION_TOKEN: _top_level,  # no tokens
    ApiKey.SASL_HANDSHAKE: _sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: _sasl_authenticate,
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.ALTER_REPLICA_LOG_DIRS: _alter_replica_log_dirs,
    ApiKey.DESCRIBE_LOG_DIRS: lambda req, v, code: {"error_code": code, "results": []},  # the top-level code (v3+)
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _alter_partition_reassignments,
    ApiKey.ELECT_LEADERS: _elect_leaders,
    ApiKey.OFFSET_DELETE: _top_level,
    ApiKey.DESCRIBE_QUORUM: lambda req, v, code: {"error_code": code, "error_message": None, "topics": []},
    ApiKey.UNREGISTER_BROKER: _top_level,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _list_partition_reassignments,
    ApiKey.DESCRIBE_PRODUCERS: _describe_producers,
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_ACLS: _describe_acls,
    ApiKey.CREATE_ACLS: _create_acls,
    ApiKey.DELETE_ACLS: _delete_acls,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _top_level,  # as Kafka: no member id, epoch 0, no assignment
    ApiKey.CONSUMER_GROUP_DESCRIBE: _consumer_group_describe,
    # Get/PushTelemetry and ListConfigResources getErrorResponse: the top-level code only.
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: _top_level,
    ApiKey.PUSH_TELEMETRY: _top_level,
    ApiKey.LIST_CONFIG_RESOURCES: _top_level,
    ApiKey.SHARE_GROUP_HEARTBEAT: _top_level,
    ApiKey.SHARE_GROUP_DESCRIBE: _consumer_group_describe,
    ApiKey.SHARE_FETCH: _share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: _share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _delete_share_group_offsets,
    # The controller's APIs (a controller process's handlers): Kafka answers each with a top-level code.
    ApiKey.ALTER_PARTITION: _top_level,
    ApiKey.ENVELOPE: _top_level,
    ApiKey.BROKER_REGISTRATION: _top_level,
    ApiKey.BROKER_HEARTBEAT: _top_level,
    ApiKey.ALLOCATE_PRODUCER_IDS: _top_level,
    ApiKey.FETCH_SNAPSHOT: _top_level,
}

_NO_THROTTLE_TIME = frozenset({ApiKey.WRITE_TXN_MARKERS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                               ApiKey.DESCRIBE_QUORUM, ApiKey.ENVELOPE})
"""Api keys whose response has no ``throttle_time_ms`` (inter-broker WriteTxnMarkers, the SASL exchange, the
raft API DescribeQuorum, the controller's Envelope)."""


def error_response(api_key: int, version: int, request: Any, code: int, throttle_time_ms: int = 0) -> ErrorBody:
    """The error response body for a parsed ``request`` of ``api_key``/``version``."""
    builder = _BUILDERS.get(api_key, _top_level)
    body = builder(request, version, code)
    if api_key not in _NO_THROTTLE_TIME:
        body["throttle_time_ms"] = throttle_time_ms
    return body
