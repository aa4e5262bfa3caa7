"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): the controller's topic operations."""

from __future__ import annotations

from ...protocol import bodies as B
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..metadata import MetadataError
from ..request import RequestContext
from ..services import MetadataCache, TopicController
from .configs import SOURCE_DYNAMIC_TOPIC, validate_topic_config


def _configs_of(entries: list[B.CreateTopicsRequestTopicsConfigs] | None) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for c in entries or []:
        validate_topic_config(c["name"], c["value"])
        out[c["name"]] = c["value"]
    return out


class CreateTopicsHandler:
    def __init__(self, controller: TopicController, config: BrokerConfig) -> None:
        self.controller = controller
        self.config = config

    async def handle(self, ctx: RequestContext, req: B.CreateTopicsRequestBody) -> B.CreateTopicsResponseBody:
        results: list[B.CreateTopicsResponseTopics] = []
        seen: set[str] = set()
        for t in req["topics"]:
            entry: B.CreateTopicsResponseTopics = {"name": t["name"], "error_code": 0, "error_message": None}
            try:
                entry.update(self._create(t, seen, req["validate_only"]))
            except MetadataError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            results.append(entry)
        return {"throttle_time_ms": 0, "topics": results}

    def _create(self, t: B.CreateTopicsRequestTopics, seen: set[str], validate_only: bool
                ) -> B.CreateTopicsResponseTopics:
        name = t["name"]
        if name in seen:
            raise MetadataError(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic.")
        seen.add(name)
        configs = _configs_of(t["configs"])
        assignments = {a["partition_index"]: list(a["broker_ids"]) for a in t["assignments"]} or None
        nparts = t["num_partitions"] if t["num_partitions"] != -1 else self.config.num_partitions
        rf = t["replication_factor"] if t["replication_factor"] != -1 else self.config.default_replication_factor
        if assignments and (t["num_partitions"] != -1 or t["replication_factor"] != -1):
            raise MetadataError(ErrorCode.INVALID_REQUEST,
                                "Both numPartitions or replicationFactor and replicasAssignments were set.")
        if validate_only:
            self.controller.check_new_topic(name, nparts, rf, assignments)
            topic = None
        else:
            topic = self.controller.create_topic(name, nparts, rf, configs, assignments)  # type: ignore[arg-type]
        return {
            "topic_id": topic.topic_id if topic else None,
            "num_partitions": len(assignments) if assignments else nparts,
            "replication_factor": len(next(iter(assignments.values()))) if assignments else rf,
            "configs": [{"name": k, "value": v, "read_only": False, "config_source": SOURCE_DYNAMIC_TOPIC,
                         "is_sensitive": False} for k, v in configs.items()],
        }


class DeleteTopicsHandler:
    def __init__(self, controller: TopicController, metadata: MetadataCache, config: BrokerConfig) -> None:
        self.controller = controller
        self.metadata = metadata
        self.config = config

    async def handle(self, ctx: RequestContext, req: B.DeleteTopicsRequestBody) -> B.DeleteTopicsResponseBody:
        if ctx.api_version >= 6:
            wanted = [(t["name"], t["topic_id"]) for t in req["topics"]]
        else:
            wanted = [(n, None) for n in req["topic_names"]]
        responses: list[B.DeleteTopicsResponseResponses] = []
        for name, topic_id in wanted:
            topic = self.metadata.get_topic(name) if name else self.metadata.get_topic_by_id(topic_id)
            entry: B.DeleteTopicsResponseResponses = {"name": name, "topic_id": topic_id, "error_code": 0}
            if topic is None:
                entry["error_code"] = (ErrorCode.UNKNOWN_TOPIC_ID if name is None
                                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif not self.config.delete_topic_enable:
                entry["error_code"] = ErrorCode.TOPIC_DELETION_DISABLED
            else:
                entry.update(name=topic.name, topic_id=topic.topic_id)
                self.controller.delete_topic(topic.name)
            responses.append(entry)
        return {"throttle_time_ms": 0, "responses": responses}


class CreatePartitionsHandler:
    def __init__(self, controller: TopicController, metadata: MetadataCache) -> None:
        self.controller = controller
        self.metadata = metadata

    async def handle(self, ctx: RequestContext, req: B.CreatePartitionsRequestBody
                     ) -> B.CreatePartitionsResponseBody:
        results: list[B.CreatePartitionsResponseResults] = []
        for t in req["topics"]:
            entry: B.CreatePartitionsResponseResults = {"name": t["name"], "error_code": 0, "error_message": None}
            try:
                assignments = [list(a["broker_ids"]) for a in t["assignments"]] if t["assignments"] else None
                topic = self.metadata.get_topic(t["name"])
                if topic is None:
                    raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic does not exist.")
                if t["count"] <= topic.num_partitions:
                    raise MetadataError(
                        ErrorCode.INVALID_PARTITIONS,
                        f"Topic currently has {topic.num_partitions} partitions, which is higher than or equal to "
                        f"the requested {t['count']}.")
                if not req["validate_only"]:
                    self.controller.add_partitions(t["name"], t["count"], assignments)
            except MetadataError as exc:
                entry.update(error_code=exc.code, error_message=exc.message)
            results.append(entry)
        return {"throttle_time_ms": 0, "results": results}
