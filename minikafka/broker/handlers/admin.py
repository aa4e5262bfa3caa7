"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DescribeCluster (60)
and DeleteRecords (21).

Config changes (Kafka's ``ConfigAdminManager``/``ZkAdminManager``): topic resources (type 2)
take any topic config minikafka accepts; broker resources (type 4, name = a broker id or ``""``
for the cluster-wide default) take the dynamic replication quota rates
``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``.
Deliberate difference: no other broker config is dynamic here (INVALID_CONFIG).
"""

from __future__ import annotations

import logging
from typing import Callable

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from ..log import OffsetOutOfRangeError
from ..metadata import MetadataError
from ..quota.replication_quota_manager import (FOLLOWER_THROTTLED_RATE, FOLLOWER_THROTTLED_REPLICAS,
                                               LEADER_THROTTLED_RATE, LEADER_THROTTLED_REPLICAS,
                                               validate_throttled_replicas)
from .common import ALL_CLUSTER_OPERATIONS, UNREQUESTED_OPERATIONS, leader_partition

log = logging.getLogger(__name__)

# Topic configs minikafka accepts (Kafka's names); others get INVALID_CONFIG.
TOPIC_CONFIGS = {
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms",
    "flush.messages", "flush.ms", "index.interval.bytes", "max.compaction.lag.ms",
    "max.message.bytes", "message.timestamp.type", "message.timestamp.difference.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
    "segment.ms", "unclean.leader.election.enable", "message.downconversion.enable",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
}
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
# Broker configs that can change at run time, and the list-typed topic configs (APPEND/SUBTRACT).
DYNAMIC_BROKER_CONFIGS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
LIST_TOPIC_CONFIGS = {"cleanup.policy", LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS}
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


def _validate_topic_config(name: str, value: str | None) -> None:
    if name not in TOPIC_CONFIGS:
        raise MetadataError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
    if value is not None and name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS):
        try:
            validate_throttled_replicas(value)
        except ValueError as exc:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                          f"{exc}") from None


def _configs_of(entries) -> dict[str, str]:
    out = {}
    for c in entries or []:
        _validate_topic_config(c.name, c.value)
        out[c.name] = c.value
    return out


@handles(ApiKey.CREATE_TOPICS)
async def handle_create_topics(broker, ctx, req) -> dict:
    results = []
    seen: set[str] = set()
    for t in req.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            if t.name in seen:
                raise MetadataError(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic.")
            seen.add(t.name)
            configs = _configs_of(t.configs)
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
            nparts = t.num_partitions if t.num_partitions != -1 else broker.config.num_partitions
            rf = t.replication_factor if t.replication_factor != -1 else broker.config.default_replication_factor
            if assignments and (t.num_partitions != -1 or t.replication_factor != -1):
                raise MetadataError(
                    ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set.",
                )
            if req.validate_only:
                broker.metadata.check_new_topic(t.name, nparts, rf, assignments)
                topic = None
            else:
                topic = broker.create_topic(t.name, nparts, rf, configs, assignments)
            entry.update(
                topic_id=topic.topic_id if topic else None,
                num_partitions=len(assignments) if assignments else nparts,
                replication_factor=len(next(iter(assignments.values()))) if assignments else rf,
                configs=[
                    {"name": k, "value": v, "read_only": False, "config_source": SOURCE_DYNAMIC_TOPIC,
                     "is_sensitive": False}
                    for k, v in configs.items()
                ],
            )
        except MetadataError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"throttle_time_ms": 0, "topics": results}


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(broker, ctx, req) -> dict:
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(n, None) for n in req.topic_names]
    responses = []
    for name, topic_id in wanted:
        topic = broker.metadata.get_topic(name) if name else broker.metadata.get_topic_by_id(topic_id)
        entry = {"name": name, "topic_id": topic_id, "error_code": 0}
        if topic is None:
            entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID if name is None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif not broker.config.delete_topic_enable:
            entry["error_code"] = ErrorCode.TOPIC_DELETION_DISABLED
        else:
            entry.update(name=topic.name, topic_id=topic.topic_id)
            broker.delete_topic(topic.name)
        responses.append(entry)
    return {"throttle_time_ms": 0, "responses": responses}


@handles(ApiKey.CREATE_PARTITIONS)
async def handle_create_partitions(broker, ctx, req) -> dict:
    results = []
    for t in req.topics:
        entry = {"name": t.name, "error_code": 0, "error_message": None}
        try:
            assignments = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            topic = broker.metadata.get_topic(t.name)
            if topic is None:
                raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic does not exist.")
            if t.count <= topic.num_partitions:
                raise MetadataError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"Topic currently has {topic.num_partitions} partitions, which is higher than or equal to "
                    f"the requested {t.count}.",
                )
            if not req.validate_only:
                broker.add_partitions(t.name, t.count, assignments)
        except MetadataError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def _config_entry(name: str, value: str | None, source: int, version: int) -> dict:
    return {
        "name": name,
        "value": value,
        "read_only": False,
        "is_default": source == SOURCE_DEFAULT,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": 0,
        "documentation": None,
    }


@handles(ApiKey.DESCRIBE_CONFIGS)
async def handle_describe_configs(broker, ctx, req) -> dict:
    results = []
    defaults = broker.config.topic_defaults()
    for r in req.resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name, "configs": []}
        keys = set(r.configuration_keys) if r.configuration_keys else None
        if r.resource_type == RESOURCE_TOPIC:
            topic = broker.metadata.get_topic(r.resource_name)
            if topic is None:
                entry.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             error_message=f"Topic {r.resource_name} does not exist")
            else:
                merged = {**defaults, **topic.configs}
                for name in sorted(merged):
                    if keys is None or name in keys:
                        source = SOURCE_DYNAMIC_TOPIC if name in topic.configs else SOURCE_DEFAULT
                        entry["configs"].append(_config_entry(name, merged[name], source, ctx.api_version))
        elif r.resource_type == RESOURCE_BROKER:
            if r.resource_name not in ("", str(broker.node_id)) and _target_broker(broker, r.resource_name) is None:
                entry.update(error_code=ErrorCode.INVALID_REQUEST,
                             error_message=f"Unexpected broker id {r.resource_name}")
            else:
                if r.resource_name:
                    broker = _target_broker(broker, r.resource_name) or broker
                cfg = broker.config
                values = {
                    "broker.id": str(broker.node_id),
                    "num.partitions": str(cfg.num_partitions),
                    "auto.create.topics.enable": str(cfg.auto_create_topics_enable).lower(),
                    "default.replication.factor": str(cfg.default_replication_factor),
                    "message.max.bytes": str(cfg.message_max_bytes),
                    "socket.request.max.bytes": str(cfg.socket_request_max_bytes),
                    "log.segment.bytes": str(cfg.log_segment_bytes),
                    "log.retention.ms": str(cfg.log_retention_ms),
                    "log.retention.bytes": str(cfg.log_retention_bytes),
                    "delete.topic.enable": str(cfg.delete_topic_enable).lower(),
                    "min.insync.replicas": str(cfg.min_insync_replicas),
                }
                sources = dict.fromkeys(values, SOURCE_STATIC_BROKER)
                for name in DYNAMIC_BROKER_CONFIGS:
                    values[name], sources[name] = broker.broker_config_value(name)
                values["replication.quota.window.num"] = str(cfg.replication_quota_window_num)
                values["replication.quota.window.size.seconds"] = str(cfg.replication_quota_window_size_seconds)
                for name in sorted(values):
                    if keys is None or name in keys:
                        entry["configs"].append(_config_entry(name, values[name],
                                                              sources.get(name, SOURCE_STATIC_BROKER),
                                                              ctx.api_version))
        else:
            entry.update(error_code=ErrorCode.INVALID_REQUEST,
                         error_message=f"Unsupported resource type {r.resource_type}")
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def _target_broker(broker, name: str):
    """The broker a broker resource names: this one, or another running broker of the cluster."""
    if name == str(broker.node_id):
        return broker
    if broker.cluster is not None and name.isdigit():
        return broker.cluster.brokers.get(int(name))
    return None


def _brokers_of(broker, name: str) -> list:
    """The running brokers a broker-resource change applies to ("" = all of the cluster)."""
    if name == "":
        return list(broker.cluster.brokers.values()) if broker.cluster is not None else [broker]
    target = _target_broker(broker, name)
    if target is None:
        raise MetadataError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id {name}")
    return [target]


def _check_rate(name: str, value: str | None) -> None:
    if name not in DYNAMIC_BROKER_CONFIGS:
        raise MetadataError(ErrorCode.INVALID_CONFIG,
                            f"Cannot update these configs dynamically: Set({name})")
    if value is not None:
        try:
            ok = int(value) >= 0
        except ValueError:
            ok = False
        if not ok:
            raise MetadataError(ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: "
                                                          "Expected a non-negative long")


def _apply_list_op(current: str | None, op: int, value: str | None) -> str | None:
    items = [x.strip() for x in (current or "").split(",") if x.strip()]
    given = [x.strip() for x in (value or "").split(",") if x.strip()]
    if op == OP_APPEND:
        items += [x for x in given if x not in items]
    else:
        items = [x for x in items if x not in given]
    return ",".join(items) if items else None


def _apply_config_ops(current: dict[str, str], changes: list[tuple[str, int, str | None]],
                      validate: Callable[[str, str | None], None], list_keys: frozenset[str] | set[str],
                      unknown_op_code: ErrorCode) -> dict[str, str]:
    """The configs after applying (key, op, value) changes to a copy of ``current``.

    SET and DELETE for any key; APPEND/SUBTRACT only for ``list_keys`` (else
    INVALID_CONFIG); any other operation fails with ``unknown_op_code``.
    ``validate(key, value)`` checks each value set (None for a deletion).
    """
    new = dict(current)
    for key, op, value in changes:
        validate(key, value if op != OP_DELETE else None)
        if op == OP_SET:
            if value is None:
                raise MetadataError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}")
            new[key] = value
        elif op == OP_DELETE:
            new.pop(key, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if key not in list_keys:
                raise MetadataError(ErrorCode.INVALID_CONFIG,
                                    f"Config value append is not allowed for config key: {key}")
            merged = _apply_list_op(new.get(key), op, value)
            if merged is None:
                new.pop(key, None)
            else:
                validate(key, merged)
                new[key] = merged
        else:
            raise MetadataError(unknown_op_code, f"Unknown config operation {op}")
    return new


def _alter_resource(broker, resource_type: int, name: str, changes: list[tuple[str, int, str | None]],
                    incremental: bool, validate_only: bool) -> None:
    """Apply (or only validate) one resource's config changes; raise MetadataError on failure."""
    if resource_type == RESOURCE_TOPIC:
        topic = broker.metadata.get_topic(name)
        if topic is None:
            raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        new = _apply_config_ops(topic.configs if incremental else {}, changes, _validate_topic_config,
                                LIST_TOPIC_CONFIGS, ErrorCode.INVALID_REQUEST)
        if not validate_only:
            broker.metadata.set_topic_configs(name, new, replace=True)
            log.info("topic %s configs now %s", name, new)
    elif resource_type == RESOURCE_BROKER:
        targets = _brokers_of(broker, name)
        store = broker.dynamic_defaults if name == "" else targets[0].dynamic_configs
        # Broker configs have no list values; an unknown operation stays INVALID_CONFIG here.
        new = _apply_config_ops(store if incremental else {}, changes, _check_rate, frozenset(),
                                ErrorCode.INVALID_CONFIG)
        if not validate_only:
            store.clear()
            store.update(new)
            for b in targets:
                b.refresh_replication_rates()
            log.info("broker %s dynamic configs now %s", name or "<default>", new)
    else:
        raise MetadataError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")


def _alter_response(resources, apply) -> list[dict]:
    out = []
    seen: dict[tuple[int, str], int] = {}
    for r in resources:
        seen[(r.resource_type, r.resource_name)] = seen.get((r.resource_type, r.resource_name), 0) + 1
    for r in resources:
        entry = {"error_code": 0, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name}
        try:
            if seen[(r.resource_type, r.resource_name)] > 1:
                raise MetadataError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            apply(r)
        except MetadataError as exc:
            entry.update(error_code=exc.code, error_message=exc.message)
        out.append(entry)
    return out


@handles(ApiKey.ALTER_CONFIGS)
async def handle_alter_configs(broker, ctx, req) -> dict:
    """AlterConfigs: each resource's dynamic configs replaced by those given."""
    def apply(r) -> None:
        _alter_resource(broker, r.resource_type, r.resource_name,
                        [(c.name, OP_SET, c.value) for c in r.configs], False, req.validate_only)
    return {"throttle_time_ms": 0, "responses": _alter_response(req.resources, apply)}


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle_incremental_alter_configs(broker, ctx, req) -> dict:
    """IncrementalAlterConfigs: SET / DELETE / APPEND / SUBTRACT per config."""
    def apply(r) -> None:
        _alter_resource(broker, r.resource_type, r.resource_name,
                        [(c.name, c.config_operation, c.value) for c in r.configs], True, req.validate_only)
    return {"throttle_time_ms": 0, "responses": _alter_response(req.resources, apply)}


@handles(ApiKey.DESCRIBE_CLUSTER)
async def handle_describe_cluster(broker, ctx, req) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": 0,
        "endpoint_type": req.endpoint_type if ctx.api_version >= 1 else 1,
        "cluster_id": broker.config.cluster_id,
        "controller_id": broker.controller_id(),
        "brokers": [
            {"broker_id": nid, "host": host, "port": port, "rack": rack}
            for nid, host, port, rack in broker.brokers()
        ],
        "cluster_authorized_operations": (
            ALL_CLUSTER_OPERATIONS if req.include_cluster_authorized_operations else UNREQUESTED_OPERATIONS
        ),
    }


@handles(ApiKey.DELETE_RECORDS)
async def handle_delete_records(broker, ctx, req) -> dict:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            part, err = leader_partition(broker, t.name, p.partition_index)
            entry = {"partition_index": p.partition_index, "low_watermark": -1, "error_code": err}
            if not err:
                offset = part.log.high_watermark if p.offset == -1 else p.offset
                try:
                    entry["low_watermark"] = part.log.delete_records_before(offset)
                    broker.replica_manager.notify_append()  # waiting fetches see the new log start
                except OffsetOutOfRangeError:
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
