"""Console API: topics (what ``kafka-topics`` and ``kafka-configs`` show and do).

* ``GET /console/api/topics``: the topics the caller may DESCRIBE: partitions, replication factor,
  internal, messages (high watermark - log start, summed over the leaders' logs) and bytes;
* ``POST /console/api/topics`` ``{"name", "partitions", "replication_factor", "configs": {k: v}}``: a
  CreateTopics request to the broker's handler (its validation, its CREATE check);
* ``DELETE /console/api/topics/{name}``: DeleteTopics (DELETE on the topic);
* ``GET /console/api/topics/{name}``: partitions (log start, high watermark, last stable offset, log end,
  size, leader, replicas, ISR) and configs as DescribeConfigs answers them (value, source);
* ``POST /console/api/topics/{name}/configs`` ``{"set": {k: v}, "delete": [k]}``: IncrementalAlterConfigs.

Kafka errors answer 400 (invalid), 403 (not authorized), 404 (unknown topic) or 409 (exists) with the
broker's error name and message.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ...common import TopicMetadata
from ...protocol.api import ApiKey
from ..config_ops import OP_DELETE, OP_SET
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from .context import ConsoleContext, ConsoleError, api, read_json
from .kafka import call, check, field
from .state import leader_partition

RESOURCE_TOPIC = 2
#: Kafka's ``ConfigSource`` names, by DescribeConfigs ``config_source``.
CONFIG_SOURCES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                  3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
                  6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
MAX_NEW_PARTITIONS = 10_000


def partition_stats(ctx: ConsoleContext, topic: TopicMetadata) -> list[dict[str, Any]]:
    """Each partition's leadership and, from its leader's log (when the leader runs), offsets and size."""
    out = []
    for p in topic.partitions:
        entry: dict[str, Any] = {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
                                 "replicas": list(p.replicas), "isr": list(p.isr),
                                 "under_replicated": len(p.isr) < len(p.replicas), "log_start_offset": None,
                                 "high_watermark": None, "last_stable_offset": None, "log_end_offset": None,
                                 "size": None, "segments": None}
        part = leader_partition(ctx.target, topic.name, p.partition)
        if part is not None:
            lg = part.log
            entry.update({"log_start_offset": lg.log_start_offset, "high_watermark": lg.high_watermark,
                          "last_stable_offset": part.last_stable_offset, "log_end_offset": lg.log_end_offset,
                          "size": lg.size_in_bytes, "segments": lg.num_segments})
        out.append(entry)
    return out


def summary(ctx: ConsoleContext, request: Request, topic: TopicMetadata) -> dict[str, Any]:
    parts = partition_stats(ctx, topic)
    known = [p for p in parts if p["high_watermark"] is not None]
    return {"name": topic.name, "topic_id": str(topic.topic_id), "partitions": topic.num_partitions,
            "replication_factor": topic.replication_factor, "internal": topic.is_internal,
            "messages": sum(p["high_watermark"] - p["log_start_offset"] for p in known),
            "size": sum(p["size"] for p in known), "offline_partitions": len(parts) - len(known),
            "under_replicated": sum(1 for p in parts if p["under_replicated"]),
            "can_delete": ctx.allowed(request, AclOperation.DELETE, ResourceType.TOPIC, topic.name)}


def visible_topic(ctx: ConsoleContext, request: Request, name: str) -> TopicMetadata:
    """The topic, if the caller may describe it (404 for an unknown topic, 403 for one it may not see)."""
    ctx.require(request, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
    topic = ctx.target.metadata.get_topic(name)
    if topic is None:
        raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name!r}")
    return topic


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    md = ctx.target.metadata

    async def list_topics(request: Request) -> dict[str, Any]:
        topics = [summary(ctx, request, t) for t in sorted(md.all_topics(), key=lambda t: t.name)
                  if ctx.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)]
        return {"topics": topics,
                "can_create": ctx.allowed(request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)}

    async def create_topic(request: Request) -> dict[str, Any]:
        data = await read_json(request)
        name = field(data, "name", str)  # as given: Kafka refuses an invalid name, the console renames nothing
        partitions = field(data, "partitions", int, -1, low=-1, high=MAX_NEW_PARTITIONS)
        rf = field(data, "replication_factor", int, -1, low=-1, high=32767)
        configs = data.get("configs") or {}
        if not isinstance(configs, dict) or not all(isinstance(k, str) and isinstance(v, (str, int, float))
                                                    for k, v in configs.items()):
            raise ConsoleError(400, "INVALID_REQUEST", 'configs must be an object {"name": "value"}')
        # CreateTopics checks CREATE on the cluster or the topic itself; refuse early with 403 all the same.
        if not (ctx.allowed(request, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                or ctx.allowed(request, AclOperation.CREATE, ResourceType.TOPIC, name)):
            ctx.require(request, AclOperation.CREATE, ResourceType.TOPIC, name)
        resp = await call(ctx, request, ApiKey.CREATE_TOPICS, 7, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": rf, "assignments": [],
                        "configs": [{"name": k, "value": str(v)} for k, v in configs.items()]}],
            "timeout_ms": 30_000, "validate_only": False})
        result = resp["topics"][0]
        check(result["error_code"], result.get("error_message"), f"create topic {name!r}")
        return {"name": name, "topic_id": str(result.get("topic_id")), "partitions": result.get("num_partitions"),
                "replication_factor": result.get("replication_factor")}

    async def delete_topic(request: Request) -> dict[str, Any]:
        name = request.path_params["name"]
        ctx.require(request, AclOperation.DELETE, ResourceType.TOPIC, name)
        resp = await call(ctx, request, ApiKey.DELETE_TOPICS, 5, {"topic_names": [name], "timeout_ms": 30_000})
        result = resp["responses"][0]
        check(result["error_code"], result.get("error_message"), f"delete topic {name!r}")
        return {"deleted": name}

    async def describe_topic(request: Request) -> dict[str, Any]:
        topic = visible_topic(ctx, request, request.path_params["name"])
        out = summary(ctx, request, topic)
        out["partition_details"] = partition_stats(ctx, topic)
        out["configs"], out["configs_error"] = [], None
        resp = await call(ctx, request, ApiKey.DESCRIBE_CONFIGS, 4, {
            "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": topic.name,
                           "configuration_keys": None}], "include_synonyms": False, "include_documentation": False})
        result = resp["results"][0]
        if result["error_code"]:
            out["configs_error"] = result.get("error_message") or str(result["error_code"])
        else:
            out["configs"] = [{"name": c["name"], "value": c["value"], "is_default": c["is_default"],
                               "source": CONFIG_SOURCES.get(c["config_source"], str(c["config_source"])),
                               "read_only": c["read_only"], "sensitive": c["is_sensitive"]}
                              for c in sorted(result["configs"], key=lambda c: (c["is_default"], c["name"]))]
        out["can_alter_configs"] = ctx.allowed(request, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, topic.name)
        return out

    async def alter_configs(request: Request) -> dict[str, Any]:
        name = request.path_params["name"]
        data = await read_json(request)
        to_set, to_delete = data.get("set") or {}, data.get("delete") or []
        if not isinstance(to_set, dict) or not isinstance(to_delete, list) \
                or not all(isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in to_set.items()) \
                or not all(isinstance(k, str) for k in to_delete):
            raise ConsoleError(400, "INVALID_REQUEST", 'expected {"set": {"name": "value"}, "delete": ["name"]}')
        if not to_set and not to_delete:
            raise ConsoleError(400, "INVALID_REQUEST", "nothing to change")
        ctx.require(request, AclOperation.ALTER_CONFIGS, ResourceType.TOPIC, name)
        changes = [{"name": k, "config_operation": OP_SET, "value": str(v)} for k, v in to_set.items()]
        changes += [{"name": k, "config_operation": OP_DELETE, "value": None} for k in to_delete]
        resp = await call(ctx, request, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {
            "resources": [{"resource_type": RESOURCE_TOPIC, "resource_name": name, "configs": changes}],
            "validate_only": field(data, "validate_only", bool, False)})
        result = resp["responses"][0]
        check(result["error_code"], result.get("error_message"), f"alter configs of topic {name!r}")
        return {"topic": name, "set": to_set, "deleted": to_delete}

    return [Route("/console/api/topics", api(ctx, list_topics), methods=["GET"]),
            Route("/console/api/topics", api(ctx, create_topic), methods=["POST"]),
            Route("/console/api/topics/{name}", api(ctx, describe_topic), methods=["GET"]),
            Route("/console/api/topics/{name}", api(ctx, delete_topic), methods=["DELETE"]),
            Route("/console/api/topics/{name}/configs", api(ctx, alter_configs), methods=["POST"])]
