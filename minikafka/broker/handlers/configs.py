"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Config changes (Kafka's ``ConfigAdminManager``): topic resources (type 2)
take any topic config minikafka accepts; broker resources (type 4, name = a
broker id or ``""`` for the cluster-wide default) go to the
:class:`~minikafka.broker.services.BrokerConfigs` service, where only the
dynamic replication quota rates can change (INVALID_CONFIG otherwise); group resources (type 32, name = a
group id) go to the :class:`~minikafka.broker.services.GroupConfigs` service (Kafka's group configs:
``consumer.session.timeout.ms``, ``share.record.lock.duration.ms``, ...); client metrics resources (type
16, name = a subscription) go to the :class:`~minikafka.broker.services.ClientMetricsSubscriptions` service
(KIP-714's ``metrics``, ``interval.ms`` and ``match``; describing one shows only the keys it sets, as Kafka).

With an authorizer (as Kafka): describing needs DESCRIBE_CONFIGS, altering ALTER_CONFIGS, on the topic for
a topic resource (else TOPIC_AUTHORIZATION_FAILED), on the group for a group resource (else
GROUP_AUTHORIZATION_FAILED) and on the cluster for a broker or client metrics resource (else
CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, cast

from ...protocol.errors import ErrorCode
from ..config import BrokerConfig
from ..config_ops import OP_SET, apply_config_ops
from ..metadata import MetadataError
from ..request import RequestContext
from ..services import (Authorizer, BrokerConfigs, ClientMetricsSubscriptions, GroupConfigs, MetadataCache,
                        TopicController)
from .authorization import AclOperation, ResourceType, authorize
from ..topic_config import LIST_TOPIC_CONFIGS, validate_topic_config

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
SOURCE_DYNAMIC_TOPIC = 1
SOURCE_DEFAULT = 5


def config_authorization_error(authorizer: Authorizer | None, ctx: RequestContext, operation: AclOperation,
                               resource_type: int, name: str) -> tuple[ErrorCode, str] | None:
    """The error for a config resource the principal may not describe or alter (Kafka's
    ``configsAuthorizationApiError``), or None."""
    if authorizer is None:
        return None
    if resource_type == RESOURCE_TOPIC:
        if not authorize(authorizer, ctx, operation, ResourceType.TOPIC, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
    elif resource_type in (RESOURCE_BROKER, RESOURCE_CLIENT_METRICS):
        if not authorize(authorizer, ctx, operation):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
    elif resource_type == RESOURCE_GROUP:
        if not authorize(authorizer, ctx, operation, ResourceType.GROUP, name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    return None


def _config_entry(name: str, value: str | None, source: int) -> B.DescribeConfigsResponseResultsConfigs:
    return {"name": name, "value": value, "read_only": False, "is_default": source == SOURCE_DEFAULT,
            "config_source": source, "is_sensitive": False, "synonyms": [], "config_type": 0,
            "documentation": None}


def _group_configs(groups: GroupConfigs | None, group_id: str, include_synonyms: bool, keys: set[str] | None
                   ) -> list[B.DescribeConfigsResponseResultsConfigs]:
    """A group resource's configs as Kafka's ``ConfigHelper.createGroupConfigEntry`` describes them."""
    if groups is None:
        return []
    return [{"name": name, "value": value, "read_only": False, "is_default": source == SOURCE_DEFAULT,
             "config_source": source, "is_sensitive": False, "config_type": config_type, "documentation": None,
             "synonyms": [{"name": n, "value": v, "source": src} for n, v, src in synonyms]}
            for name, value, source, config_type, synonyms in groups.describe(group_id, include_synonyms)
            if keys is None or name in keys]


class DescribeConfigsHandler:
    def __init__(self, metadata: MetadataCache, brokers: BrokerConfigs, config: BrokerConfig,
                 authorizer: Authorizer | None = None, groups: GroupConfigs | None = None,
                 client_metrics: ClientMetricsSubscriptions | None = None) -> None:
        self.metadata = metadata
        self.brokers = brokers
        self.config = config
        self.authorizer = authorizer
        self.groups = groups
        self.client_metrics = client_metrics

    async def handle(self, ctx: RequestContext, req: B.DescribeConfigsRequestBody) -> B.DescribeConfigsResponseBody:
        results: list[B.DescribeConfigsResponseResults] = []
        defaults = self.config.topic_defaults()
        for r in req["resources"]:
            rtype, rname = r["resource_type"], r["resource_name"]
            entry: B.DescribeConfigsResponseResults = {"error_code": 0, "error_message": None, "resource_type": rtype,
                                                       "resource_name": rname, "configs": []}
            keys = set(r["configuration_keys"]) if r["configuration_keys"] else None
            values: dict[str, tuple[str | None, int]] = {}
            denied = config_authorization_error(self.authorizer, ctx, AclOperation.DESCRIBE_CONFIGS, rtype, rname)
            if denied is not None:
                entry.update({"error_code": denied[0], "error_message": denied[1]})
            elif rtype == RESOURCE_TOPIC:
                topic = self.metadata.get_topic(rname)
                if topic is None:
                    entry.update({"error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                  "error_message": f"Topic {rname} does not exist"})
                else:
                    values = {name: (value, SOURCE_DYNAMIC_TOPIC if name in topic.configs else SOURCE_DEFAULT)
                              for name, value in {**defaults, **topic.configs}.items()}
            elif rtype == RESOURCE_BROKER:
                if not self.brokers.knows(rname):
                    entry.update({"error_code": ErrorCode.INVALID_REQUEST,
                                  "error_message": f"Unexpected broker id {rname}"})
                else:
                    values = dict(self.brokers.describe(rname))
            elif rtype == RESOURCE_GROUP and self.groups is not None:
                if not rname:
                    entry.update({"error_code": ErrorCode.INVALID_REQUEST,
                                  "error_message": "Group name must not be empty"})
                else:
                    entry["configs"] = _group_configs(self.groups, rname, bool(req.get("include_synonyms")), keys)
                results.append(entry)
                continue
            elif rtype == RESOURCE_CLIENT_METRICS and self.client_metrics is not None:
                try:
                    values = {name: (value, source) for name, value, source in self.client_metrics.describe(rname)}
                except MetadataError as exc:
                    entry.update({"error_code": exc.code, "error_message": exc.message})
            else:
                entry.update({"error_code": ErrorCode.INVALID_REQUEST,
                              "error_message": f"Unsupported resource type {rtype}"})
            entry["configs"] = [_config_entry(name, *values[name]) for name in sorted(values)
                                if keys is None or name in keys]
            results.append(entry)
        return {"throttle_time_ms": 0, "results": results}


class AlterConfigsHandler:
    """AlterConfigs (each resource's dynamic configs replaced by those given) and, with
    ``incremental``, IncrementalAlterConfigs (SET / DELETE / APPEND / SUBTRACT per config)."""

    def __init__(self, controller: TopicController, metadata: MetadataCache, brokers: BrokerConfigs,
                 *, incremental: bool, authorizer: Authorizer | None = None,
                 groups: GroupConfigs | None = None, client_metrics: ClientMetricsSubscriptions | None = None) -> None:
        self.controller = controller
        self.metadata = metadata
        self.brokers = brokers
        self.incremental = incremental
        self.authorizer = authorizer
        self.groups = groups
        self.client_metrics = client_metrics

    async def handle(self, ctx: RequestContext,
                     req: B.AlterConfigsRequestBody | B.IncrementalAlterConfigsRequestBody
                     ) -> B.AlterConfigsResponseBody | B.IncrementalAlterConfigsResponseBody:
        resources = req["resources"]
        seen: dict[tuple[int, str], int] = {}
        for r in resources:
            k = (r["resource_type"], r["resource_name"])
            seen[k] = seen.get(k, 0) + 1
        out: list[B.AlterConfigsResponseResponses] = []
        for r in resources:
            entry: B.AlterConfigsResponseResponses = {
                "error_code": 0, "error_message": None, "resource_type": r["resource_type"],
                "resource_name": r["resource_name"]}
            try:
                if seen[(r["resource_type"], r["resource_name"])] > 1:
                    raise MetadataError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
                denied = config_authorization_error(self.authorizer, ctx, AclOperation.ALTER_CONFIGS,
                                                    r["resource_type"], r["resource_name"])
                if denied is not None:
                    raise MetadataError(*denied)
                self._alter(r["resource_type"], r["resource_name"], self._changes(r), req["validate_only"])
            except MetadataError as exc:
                entry.update({"error_code": exc.code, "error_message": exc.message})
            out.append(entry)
        # The two responses share their layout.
        return {"throttle_time_ms": 0, "responses": out}

    def _changes(self, r: B.AlterConfigsRequestResources | B.IncrementalAlterConfigsRequestResources
                 ) -> list[tuple[str, int, str | None]]:
        """(name, operation, value) per config: IncrementalAlterConfigs names its operation, AlterConfigs
        sets every config it lists."""
        if self.incremental:
            configs = cast("list[B.IncrementalAlterConfigsRequestResourcesConfigs]", r["configs"])
            return [(c["name"], c["config_operation"], c["value"]) for c in configs]
        return [(c["name"], OP_SET, c["value"]) for c in r["configs"]]

    def _alter(self, resource_type: int, name: str, changes: list[tuple[str, int, str | None]],
               validate_only: bool) -> None:
        """Apply (or only validate) one resource's config changes; raise MetadataError on failure."""
        if resource_type == RESOURCE_TOPIC:
            topic = self.metadata.get_topic(name)
            if topic is None:
                raise MetadataError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
            new = apply_config_ops(topic.configs if self.incremental else {}, changes, validate_topic_config,
                                   LIST_TOPIC_CONFIGS, ErrorCode.INVALID_REQUEST)
            if not validate_only:
                self.controller.set_topic_configs(name, new, replace=True)
                log.info("topic %s configs now %s", name, new)
        elif resource_type == RESOURCE_BROKER:
            self.brokers.alter(name, changes, self.incremental, validate_only)
        elif resource_type == RESOURCE_GROUP and self.groups is not None:
            self.groups.alter(name, changes, self.incremental, validate_only)
        elif resource_type == RESOURCE_CLIENT_METRICS and self.client_metrics is not None:
            self.client_metrics.alter(name, changes, self.incremental, validate_only)
        else:
            raise MetadataError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}")
