"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37): the controller's topic operations.

With an authorizer (as Kafka): CreateTopics needs CREATE on the cluster or on each topic, and answers a
created topic's configs only with DESCRIBE_CONFIGS on it (else ``topic_config_error_code``
TOPIC_AUTHORIZATION_FAILED, v5+); DeleteTopics needs DELETE on each topic (and DESCRIBE to learn the name
of a topic named by id); CreatePartitions ALTER on each topic.  A topic that is not authorized gets
TOPIC_AUTHORIZATION_FAILED whether it exists or not.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...protocol.types import ZERO_UUID
from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..metadata import (EXCESSIVE_BATCH, EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_BATCH, MAX_RECORDS_PER_USER_OP,
                        MetadataError)
from ..request import RequestContext
from ..services import Authorizer, MetadataCache, TopicController
from .authorization import AclOperation, ResourceType, authorize, creatable_topics, filter_authorized
from ..topic_config import validate_topic_config
from .configs import SOURCE_DYNAMIC_TOPIC

if TYPE_CHECKING:
    from ...protocol import bodies as B


def _configs_of(entries: list[B.CreateTopicsRequestTopicsConfigs] | None) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for c in entries or []:
        validate_topic_config(c["name"], c["value"])
        out[c["name"]] = c["value"]
    return out


class CreateTopicsHandler:
    """Kafka's controller ``createTopics``: request-wide limits first (KRaft refuses more than 10,000
    partitions, or 10,000 metadata records, in one request: every topic gets POLICY_VIOLATION and none is
    created), then each topic on its own."""

    def __init__(self, controller: TopicController, config: BrokerConfig,
                 authorizer: Authorizer | None = None) -> None:
        self.controller = controller
        self.config = config
        self.authorizer = authorizer

    def _partitions(self, t: B.CreateTopicsRequestTopics) -> int:
        if t["assignments"]:
            return len(t["assignments"])
        n = t["num_partitions"]
        return self.config.num_partitions if n == -1 else max(n, 0)

    async def handle(self, ctx: RequestContext, req: B.CreateTopicsRequestBody) -> B.CreateTopicsResponseBody:
        topics = req["topics"]
        if sum(self._partitions(t) for t in topics) > MAX_PARTITIONS_PER_BATCH:
            return _refuse_all(topics, EXCESSIVE_PARTITIONS)
        results: dict[int, B.CreateTopicsResponseTopics] = {}
        plans: list[tuple[int, _TopicPlan]] = []
        seen: set[str] = set()
        allowed = describable = None
        if self.authorizer is not None:
            names = {t["name"] for t in topics}
            allowed = creatable_topics(self.authorizer, ctx, names)
            describable = filter_authorized(self.authorizer, ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                            allowed, log_if_denied=False)
        for i, t in enumerate(topics):
            if allowed is not None and t["name"] not in allowed:
                results[i] = {"name": t["name"], "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              "error_message": "Authorization failed."}
                continue
            try:
                plans.append((i, self._plan(t, seen)))
            except MetadataError as exc:
                results[i] = {"name": t["name"], "error_code": exc.code, "error_message": exc.message}
        # The TopicRecord, PartitionRecords and ConfigRecords KRaft would write for the valid topics.
        records = sum(1 + p.partitions + len(p.configs) for _, p in plans)
        if records > MAX_RECORDS_PER_USER_OP:
            return _refuse_all(topics, EXCESSIVE_BATCH)
        for i, plan in plans:
            entry: B.CreateTopicsResponseTopics = {"name": plan.name, "error_code": 0, "error_message": None}
            try:
                entry.update(self._create(plan, req["validate_only"]))
            except MetadataError as exc:
                entry.update({"error_code": exc.code, "error_message": exc.message})
            else:
                if describable is not None and plan.name not in describable:
                    # Kafka hides the configs of a topic the principal may not describe the configs of.
                    entry.update({"configs": [], "topic_config_error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED})
            results[i] = entry
        return {"throttle_time_ms": 0, "topics": [results[i] for i in range(len(topics))]}

    def _plan(self, t: B.CreateTopicsRequestTopics, seen: set[str]) -> _TopicPlan:
        name = t["name"]
        if name in seen:
            raise MetadataError(ErrorCode.INVALID_REQUEST, "Found multiple entries for this topic.")
        seen.add(name)
        configs = _configs_of(t["configs"])
        assignments = {a["partition_index"]: list(a["broker_ids"]) for a in t["assignments"]} or None
        if assignments and (t["num_partitions"] != -1 or t["replication_factor"] != -1):
            raise MetadataError(ErrorCode.INVALID_REQUEST,
                                "Both numPartitions or replicationFactor and replicasAssignments were set.")
        nparts = t["num_partitions"] if t["num_partitions"] != -1 else self.config.num_partitions
        rf = t["replication_factor"] if t["replication_factor"] != -1 else self.config.default_replication_factor
        self.controller.check_new_topic(name, nparts, rf, assignments)
        return _TopicPlan(name, len(assignments) if assignments else nparts,
                          len(next(iter(assignments.values()))) if assignments else rf, configs, assignments)

    def _create(self, plan: _TopicPlan, validate_only: bool) -> B.CreateTopicsResponseTopics:
        topic = None
        if not validate_only:
            topic = self.controller.create_topic(plan.name, plan.partitions, plan.replication_factor,
                                                 plan.configs, plan.assignments)  # type: ignore[arg-type]
        return {
            "topic_id": topic.topic_id if topic else ZERO_UUID,
            "num_partitions": plan.partitions,
            "replication_factor": plan.replication_factor,
            "configs": [{"name": k, "value": v, "read_only": False, "config_source": SOURCE_DYNAMIC_TOPIC,
                         "is_sensitive": False} for k, v in plan.configs.items()],
        }


@dataclass
class _TopicPlan:
    """A topic of a CreateTopics request that passed validation."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str | None]
    assignments: dict[int, list[int]] | None


def _refuse_all(topics: list[B.CreateTopicsRequestTopics], message: str) -> B.CreateTopicsResponseBody:
    """Every topic answered POLICY_VIOLATION, as Kafka's controller answers a request it refuses whole."""
    return {"throttle_time_ms": 0, "topics": [{"name": t["name"], "error_code": ErrorCode.POLICY_VIOLATION,
                                               "error_message": message} for t in topics]}


class DeleteTopicsHandler:
    def __init__(self, controller: TopicController, metadata: MetadataCache, config: BrokerConfig,
                 authorizer: Authorizer | None = None) -> None:
        self.controller = controller
        self.metadata = metadata
        self.config = config
        self.authorizer = authorizer

    def _authorization_error(self, ctx: RequestContext, name: str | None, topic_name: str | None
                             ) -> B.DeleteTopicsResponseResponses | None:
        """TOPIC_AUTHORIZATION_FAILED (Kafka's order): a topic named by id without DESCRIBE on it is not
        named back; any topic without DELETE is refused, whether it exists or not."""
        if name is None:
            if topic_name is None:
                return None  # UNKNOWN_TOPIC_ID follows
            if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic_name):
                return {"name": None, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            name = topic_name
        if not authorize(self.authorizer, ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
            return {"name": name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        return None

    async def handle(self, ctx: RequestContext, req: B.DeleteTopicsRequestBody) -> B.DeleteTopicsResponseBody:
        wanted: list[tuple[str | None, uuid.UUID]]
        if ctx.api_version >= 6:
            wanted = [(t["name"], t["topic_id"]) for t in req["topics"]]
        else:
            wanted = [(n, ZERO_UUID) for n in req["topic_names"]]
        responses: list[B.DeleteTopicsResponseResponses] = []
        for name, topic_id in wanted:
            topic = self.metadata.get_topic(name) if name else self.metadata.get_topic_by_id(topic_id)
            entry: B.DeleteTopicsResponseResponses = {"name": name, "topic_id": topic_id, "error_code": 0}
            if self.authorizer is not None and (
                    denied := self._authorization_error(ctx, name, topic.name if topic is not None else None)):
                entry.update(denied)
            elif topic is None:
                entry["error_code"] = (ErrorCode.UNKNOWN_TOPIC_ID if name is None
                                       else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif not self.config.delete_topic_enable:
                entry["error_code"] = ErrorCode.TOPIC_DELETION_DISABLED
            else:
                entry.update({"name": topic.name, "topic_id": topic.topic_id})
                self.controller.delete_topic(topic.name)
            responses.append(entry)
        return {"throttle_time_ms": 0, "responses": responses}


class CreatePartitionsHandler:
    """Kafka's controller ``createPartitions``: at most 10,000 new partitions per request (its records
    limit); a topic that would go beyond it gets POLICY_VIOLATION and nothing is added to it."""

    def __init__(self, controller: TopicController, metadata: MetadataCache,
                 authorizer: Authorizer | None = None) -> None:
        self.controller = controller
        self.metadata = metadata
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.CreatePartitionsRequestBody
                     ) -> B.CreatePartitionsResponseBody:
        results: list[B.CreatePartitionsResponseResults] = []
        budget = MAX_RECORDS_PER_USER_OP
        allowed = None if self.authorizer is None else filter_authorized(
            self.authorizer, ctx, AclOperation.ALTER, ResourceType.TOPIC, (t["name"] for t in req["topics"]))
        for t in req["topics"]:
            entry: B.CreatePartitionsResponseResults = {"name": t["name"], "error_code": 0, "error_message": None}
            if allowed is not None and t["name"] not in allowed:
                entry.update({"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              "error_message": "The topic authorization is failed."})
                results.append(entry)
                continue
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
                additional = t["count"] - topic.num_partitions
                if additional > budget:
                    raise MetadataError(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH)
                budget -= additional
                if not req["validate_only"]:
                    self.controller.add_partitions(t["name"], t["count"], assignments)
            except MetadataError as exc:
                entry.update({"error_code": exc.code, "error_message": exc.message})
            results.append(entry)
        return {"throttle_time_ms": 0, "results": results}
