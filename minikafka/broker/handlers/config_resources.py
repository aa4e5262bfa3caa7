"""ListConfigResources (74): the config resources a client may describe or alter.

Version 0 is KIP-714's ListClientMetricsResources: the client metrics subscriptions.  Version 1 (KIP-1142)
lists, as Kafka 4.2's ``KafkaApis.handleListConfigResources``, the resource types asked for (none: all of
TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS and GROUP; any other type fails the whole request with
UNSUPPORTED_VERSION), in Kafka's order: the groups that have configs of their own, the client metrics
subscriptions, every live broker id on the request's listener (as BROKER_LOGGER, then as BROKER), then every
topic, internal ones included.  Needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).
Deliberate difference: minikafka lists BROKER_LOGGER resources as Kafka does but cannot describe them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..services import Authorizer, ClientMetricsSubscriptions, GroupConfigs, MetadataCache
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
RESOURCE_CLIENT_METRICS = 16
RESOURCE_GROUP = 32
SUPPORTED_RESOURCE_TYPES = frozenset({RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_BROKER_LOGGER,
                                      RESOURCE_CLIENT_METRICS, RESOURCE_GROUP})


def _error(code: ErrorCode) -> B.ListConfigResourcesResponseBody:
    return {"throttle_time_ms": 0, "error_code": code, "config_resources": []}


class ListConfigResourcesHandler:
    def __init__(self, metadata: MetadataCache, client_metrics: ClientMetricsSubscriptions, groups: GroupConfigs,
                 authorizer: Authorizer | None = None) -> None:
        self.metadata = metadata
        self.client_metrics = client_metrics
        self.groups = groups
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.ListConfigResourcesRequestBody
                     ) -> B.ListConfigResourcesResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE_CONFIGS):
            return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if ctx.api_version == 0:
            wanted: set[int] = {RESOURCE_CLIENT_METRICS}
        else:
            wanted = set(req["resource_types"]) or set(SUPPORTED_RESOURCE_TYPES)
            if not wanted <= SUPPORTED_RESOURCE_TYPES:
                return _error(ErrorCode.UNSUPPORTED_VERSION)
        out: list[B.ListConfigResourcesResponseConfigResources] = []

        def add(resource_type: int, names: list[str]) -> None:
            if resource_type in wanted:
                out.extend({"resource_name": n, "resource_type": resource_type} for n in names)

        add(RESOURCE_GROUP, self.groups.group_ids())
        add(RESOURCE_CLIENT_METRICS, self.client_metrics.names())
        brokers = [str(b.node_id) for b in sorted(self.metadata.alive_brokers(ctx.listener), key=lambda b: b.node_id)]
        add(RESOURCE_BROKER_LOGGER, brokers)
        add(RESOURCE_BROKER, brokers)
        add(RESOURCE_TOPIC, sorted(t.name for t in self.metadata.all_topics()))
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "config_resources": out}
