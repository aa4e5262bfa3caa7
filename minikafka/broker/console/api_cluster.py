"""Console API: the cluster (Kafka's DescribeCluster and Metadata views) and broker controls.

``GET /console/api/cluster``: cluster id, controller, brokers (address, state, fenced, rack, leader and
replica counts), the partitions the caller may describe (leader, epoch, replicas, ISR, under-replicated),
the network partitions, and which broker controls the target offers.
``POST /console/api/cluster/brokers/{id}/{action}`` runs one (ALTER on the cluster): ``stop`` and ``start``
on a :class:`~minikafka.broker.cluster.Cluster`, and any other ``<action>_broker`` method the cluster has
among :data:`OPTIONAL_ACTIONS` (failures it can play).  ``POST /console/api/cluster/network`` with
``{"sides": [[0], [1, 2, "controller"]], "heal_after_s": S}`` cuts links, ``DELETE
/console/api/cluster/network/{id}`` heals them (the HTTP port's ``/v1/network/partitions`` likewise).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import trio
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ..cluster import Cluster
from ..network_links import NetworkPartition, parse_node
from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from .context import ConsoleContext, ConsoleError, api
from .httpio import read_json

log = logging.getLogger(__name__)

#: Broker controls shown when the cluster has a ``<name>_broker(broker_id)`` method for them (the failures
#: issue 25 adds: crash, pause and resume, a network partition cut off and healed).
OPTIONAL_ACTIONS = ("crash", "pause", "resume", "partition", "isolate", "heal")


def broker_actions(cluster: Cluster | None) -> list[str]:
    """The controls the target offers: none for a lone broker; stop/start and the optional ones a cluster has."""
    if cluster is None:
        return []
    return ["stop", "start"] + [a for a in OPTIONAL_ACTIONS if callable(getattr(cluster, f"{a}_broker", None))]


def heal_after_from(data: dict[str, Any]) -> float | None:
    """A body's ``heal_after_s``: None, or a positive number of seconds (400 otherwise)."""
    value = data.get("heal_after_s")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConsoleError(400, "INVALID_REQUEST", "heal_after_s must be a positive number of seconds")
    return float(value)


def partition_from(cluster: Cluster, data: dict[str, Any]) -> NetworkPartition:
    """Cut the links a body asks for: ``{"sides": [[nodes], ...], "heal_after_s": S}`` (400 when it is not
    valid)."""
    sides = data.get("sides")
    if not isinstance(sides, list) or not all(isinstance(side, list) for side in sides):
        raise ConsoleError(400, "INVALID_REQUEST",
                           'sides must be a list of lists of nodes (broker ids, "controller", "clients")')
    try:
        return cluster.partition_network([[parse_node(n) for n in side] for side in sides], heal_after_from(data))
    except ValueError as exc:
        raise ConsoleError(400, "INVALID_REQUEST", str(exc)) from None


def heal_from(cluster: Cluster, partition_id: int | None) -> list[int]:
    """Heal one network partition (all without an id); 404 when there is no such partition."""
    try:
        return [p.id for p in cluster.heal_network(partition_id)]
    except KeyError:
        raise ConsoleError(404, "UNKNOWN_PARTITION", f"no network partition {partition_id}") from None


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    target = ctx.target

    async def overview(request: Request) -> dict[str, Any]:
        running = target.brokers()
        cluster = target.cluster
        configs = cluster.configs if cluster is not None else {b.node_id: b.config for b in running.values()}
        md = target.metadata
        fenced = {n.node_id for n in md.fenced_brokers()}
        leaders: dict[int, int] = {}
        replicas: dict[int, int] = {}
        partitions = []
        for topic in sorted(md.all_topics(), key=lambda t: t.name):
            visible = ctx.allowed(request, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
            if not visible:  # nothing of a topic the caller may not describe, counts included
                continue
            for p in topic.partitions:
                leaders[p.leader] = leaders.get(p.leader, 0) + 1
                for r in p.replicas:
                    replicas[r] = replicas.get(r, 0) + 1
                partitions.append({"topic": topic.name, "partition": p.partition, "leader": p.leader,
                                   "leader_epoch": p.leader_epoch, "replicas": list(p.replicas),
                                   "isr": list(p.isr), "under_replicated": len(p.isr) < len(p.replicas),
                                   "offline": p.leader < 0 or p.leader not in running})
        brokers = []
        for i, c in sorted(configs.items()):
            node = md.live.get(i) or (md.registrations.get(i, (None, None))[0])
            brokers.append({"id": i, "host": c.advertised, "port": c.port, "running": i in running,
                            "state": cluster.broker_state(i) if cluster is not None else "running",
                            "fenced": i in fenced, "rack": node.rack if node is not None else None,
                            "leaders": leaders.get(i, 0), "replicas": replicas.get(i, 0)})
        now = trio.current_time()
        network = [p.describe(now) for p in cluster.links.partitions.values()] if cluster is not None else []
        any_config = next(iter(configs.values()), None)
        return {"cluster_id": any_config.cluster_id if any_config is not None else None,
                "controller": md.controller_id(), "is_cluster": cluster is not None,
                "actions": broker_actions(cluster) if ctx.allowed(request, AclOperation.ALTER, ResourceType.CLUSTER,
                                                                  CLUSTER_NAME) else [],
                "brokers": brokers, "partitions": partitions, "network": network}

    async def broker_action(request: Request) -> dict[str, Any]:
        cluster = target.cluster
        broker_id: int = request.path_params["broker_id"]
        action: str = request.path_params["action"]
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        if cluster is None:
            raise ConsoleError(409, "NOT_A_CLUSTER", "a lone broker cannot be stopped or started from the console")
        if action not in broker_actions(cluster):
            raise ConsoleError(404, "UNKNOWN_ACTION",
                               f"no broker action {action!r} (this cluster offers {broker_actions(cluster)})")
        if broker_id not in cluster.configs:
            raise ConsoleError(404, "UNKNOWN_BROKER", f"no broker {broker_id} (brokers: {sorted(cluster.configs)})")
        try:
            result = getattr(cluster, f"{action}_broker")(broker_id)
            if inspect.isawaitable(result):
                await result
        except KeyError:  # pausing a broker that is not running
            raise ConsoleError(409, "BROKER_NOT_RUNNING", f"broker {broker_id} is not running") from None
        log.info("console: %s broker %d (%s)", action, broker_id, ctx.principal(request) or "no login")
        return {"id": broker_id, "action": action, "running": broker_id in cluster.brokers,
                "state": cluster.broker_state(broker_id)}

    def _cluster_to_alter(request: Request) -> Cluster:
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
        if target.cluster is None:
            raise ConsoleError(409, "NOT_A_CLUSTER", "a lone broker has no network to partition")
        return target.cluster

    async def cut(request: Request) -> dict[str, Any]:
        cluster = _cluster_to_alter(request)
        part = partition_from(cluster, await read_json(request))
        log.info("console: network partition %d cut (%s)", part.id, ctx.principal(request) or "no login")
        return part.describe(trio.current_time())

    async def heal(request: Request) -> dict[str, Any]:
        return {"healed": heal_from(_cluster_to_alter(request), request.path_params.get("partition_id"))}

    return [Route("/console/api/cluster", api(ctx, overview), methods=["GET"]),
            Route("/console/api/cluster/brokers/{broker_id:int}/{action}", api(ctx, broker_action),
                  methods=["POST"]),
            Route("/console/api/cluster/network", api(ctx, cut), methods=["POST"]),
            Route("/console/api/cluster/network", api(ctx, heal), methods=["DELETE"]),
            Route("/console/api/cluster/network/{partition_id:int}", api(ctx, heal), methods=["DELETE"])]
