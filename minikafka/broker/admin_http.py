"""The broker's HTTP port (``serve --http-port``): Prometheus metrics, fault rules, cluster control.

Kafka has JMX for metrics and its controller for leadership; a test suite
wants one small HTTP API instead.  A Starlette app served by Hypercorn on the
brokers' own Trio loop (so handlers read broker state without locks):

* ``GET /metrics``: every running broker's metrics in the Prometheus text
  format (:mod:`.prometheus`);
* ``GET /v1/faults`` (rules with matched and remaining counts), ``POST /v1/faults``
  (a :class:`~minikafka.broker.faults.FaultRule` as JSON, or a list of them),
  ``DELETE /v1/faults`` (all), ``DELETE /v1/faults/{id}``;
* ``GET /v1/brokers``; for a cluster ``POST /v1/brokers/{id}/stop`` (a controlled shutdown),
  ``/crash`` (none: fenced when its session expires), ``/start``, ``/pause`` and ``/resume`` (SIGSTOP and
  SIGCONT), ``/isolate`` (cut off from everyone; optional ``{"heal_after_s": S}``) and ``/heal`` (every
  network partition naming it);
* ``GET /v1/network`` (paused brokers, network partitions), ``POST /v1/network/partitions`` with
  ``{"sides": [[0], [1, 2, "controller"], ...], "heal_after_s": S}`` (links cut between the sides: broker
  ids, ``"controller"``, ``"clients"``), ``DELETE /v1/network/partitions`` (heal all) and
  ``DELETE /v1/network/partitions/{id}``;
* ``GET /v1/partitions/{topic}`` and
  ``POST /v1/partitions/{topic}/{partition}/leader`` with ``{"broker": N}``
  (an operator's leader election: :meth:`ClusterMetadata.move_leader`);
* ``GET /v1/client-metrics`` (and ``/v1/client-metrics/{client_instance_id}``): the KIP-714 metrics each
  client last pushed, with who it is (:meth:`ClientTelemetryStore.as_json
  <minikafka.broker.client_metrics.receiver.ClientTelemetryStore.as_json>`).

Errors are JSON ``{"error": ..., "message": ...}`` with 400 (bad rule), 404
(unknown broker, rule or partition) or 409 (not a cluster, ineligible leader).

``/v1`` is guarded as the console's API is (:func:`.console.context.api`): with SASL or an authorizer
configured it needs a console session cookie or HTTP Basic credentials of a Kafka user (checked as the
console's login checks them), DESCRIBE on the CLUSTER to read and ALTER on the CLUSTER to change (faults,
broker stop/start, leader moves); every call must name one of
the port's hosts (DNS rebinding), come from no page or this port's own (``Origin``), and a change with a
body must be ``Content-Type: application/json`` (cross-site request forgery).  Bodies over
:data:`.console.context.MAX_BODY` get 413.  ``/metrics`` stays open for Prometheus scrapers.
"""

from __future__ import annotations

import logging
from functools import partial
from collections.abc import Awaitable, Callable
from typing import Any, cast

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..protocol.errors import ErrorCode
from .admin_target import AdminTarget
from .broker import Broker
from .cluster import Cluster
from .console import console_routes
from .console.api_cluster import heal_after_from, heal_from, partition_from
from .console.api_faults import parse_rules
from .console.auth import ConsoleAuth
from .console.context import ConsoleContext, ConsoleError, api, read_json
from .console.kafka import field
from .metadata import MetadataError
from .security.acl import CLUSTER_NAME, AclOperation, ResourceType
from .prometheus import CONTENT_TYPE, render

log = logging.getLogger(__name__)


def _metadata_error(exc: MetadataError) -> ConsoleError:
    status = 404 if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 409
    return ConsoleError(status, ErrorCode(exc.code).name, str(exc))


def build_app(target: AdminTarget, host: str | None = None) -> Starlette:
    """The ASGI app for one broker or cluster (``host``: the address it is bound to, one of the host
    names it answers to)."""
    ctx = ConsoleContext(target, ConsoleAuth.for_target(target))
    if host:
        ctx.auth.hostnames.add(host.lower())

    def describe(request: Request) -> None:
        ctx.require(request, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME)

    def alter(request: Request) -> None:
        ctx.require(request, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)

    async def metrics(request: Request) -> Response:
        return Response(render(target.brokers), media_type=None, headers={"Content-Type": CONTENT_TYPE})

    async def list_faults(request: Request) -> Any:
        describe(request)
        return {"rules": target.faults.as_json()}

    async def add_faults(request: Request) -> Any:
        alter(request)
        data = await read_json(request, object_only=False)
        rules = parse_rules(data)
        added = [target.faults.add(rule).to_json() for rule in rules]
        return JSONResponse({"rules": added} if isinstance(data, list) else {"rule": added[0]}, status_code=201)

    async def clear_faults(request: Request) -> Any:
        alter(request)
        return {"removed": target.faults.clear()}

    async def delete_fault(request: Request) -> Any:
        alter(request)
        rule_id = request.path_params["rule_id"]
        if not target.faults.remove(rule_id):
            raise ConsoleError(404, "UNKNOWN_RULE", f"no fault rule {rule_id}")
        return {"removed": 1}

    async def brokers(request: Request) -> Any:
        describe(request)
        running = target.brokers()
        cluster = target.cluster
        configs = cluster.configs if cluster is not None else {b.node_id: b.config for b in running.values()}
        return {"cluster": cluster is not None, "controller": target.metadata.controller_id(),
                "brokers": [{"id": i, "host": c.advertised, "port": c.port, "running": i in running,
                             **({"state": cluster.broker_state(i)} if cluster is not None else {})}
                            for i, c in sorted(configs.items())]}

    def _cluster_broker(request: Request) -> tuple[Cluster, int]:
        alter(request)
        cluster = target.cluster
        if cluster is None:
            raise ConsoleError(409, "NOT_A_CLUSTER", "a lone broker cannot be stopped or started over HTTP")
        broker_id = request.path_params["broker_id"]
        if broker_id not in cluster.configs:
            raise ConsoleError(404, "UNKNOWN_BROKER", f"no broker {broker_id} (brokers: {sorted(cluster.configs)})")
        return cluster, broker_id

    async def stop_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        await cluster.stop_broker(broker_id)
        return {"id": broker_id, "running": False}

    async def crash_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        await cluster.crash_broker(broker_id)
        return {"id": broker_id, "running": False, "crashed": True}

    async def start_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        broker = await cluster.start_broker(broker_id)
        return {"id": broker_id, "running": True, "port": broker.port}

    async def pause_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        try:
            cluster.pause_broker(broker_id)
        except KeyError:
            raise ConsoleError(409, "BROKER_NOT_RUNNING", f"broker {broker_id} is not running") from None
        return {"id": broker_id, "state": cluster.broker_state(broker_id)}

    async def resume_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        cluster.resume_broker(broker_id)
        return {"id": broker_id, "state": cluster.broker_state(broker_id)}

    async def isolate_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        part = cluster.isolate_broker(broker_id, heal_after_from(await read_json(request)))
        return JSONResponse(part.describe(trio.current_time()), status_code=201)

    async def heal_broker(request: Request) -> Any:
        cluster, broker_id = _cluster_broker(request)
        return {"healed": [p.id for p in cluster.heal_broker(broker_id)]}

    def _network_cluster(request: Request) -> Cluster:
        cluster = target.cluster
        if cluster is None:
            raise ConsoleError(409, "NOT_A_CLUSTER", "a lone broker has no network to partition")
        return cluster

    async def network(request: Request) -> Any:
        describe(request)
        cluster = _network_cluster(request)
        return {"paused": sorted(cluster.links.paused),
                "partitions": [p.describe(trio.current_time()) for p in cluster.links.partitions.values()]}

    async def add_network_partition(request: Request) -> Any:
        alter(request)
        cluster = _network_cluster(request)
        part = partition_from(cluster, await read_json(request))
        return JSONResponse(part.describe(trio.current_time()), status_code=201)

    async def heal_network(request: Request) -> Any:
        alter(request)
        return {"healed": heal_from(_network_cluster(request), request.path_params.get("partition_id"))}

    async def partitions(request: Request) -> Any:
        name = request.path_params["topic"]
        describe(request)
        topic = target.metadata.get_topic(name)
        if topic is None:
            raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name}")
        return {"topic": topic.name, "partitions": [
            {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
             "replicas": list(p.replicas), "isr": list(p.isr)} for p in topic.partitions]}

    async def move_leader(request: Request) -> Any:
        alter(request)
        data = await read_json(request)
        broker_id = field(data, "broker", int)
        topic, partition = request.path_params["topic"], request.path_params["partition"]
        try:
            epoch = target.metadata.move_leader(topic, partition, broker_id)
        except MetadataError as exc:
            raise _metadata_error(exc) from None
        return {"topic": topic, "partition": partition, "leader": broker_id, "leader_epoch": epoch}

    async def client_metrics(request: Request) -> Any:
        describe(request)
        store = target.client_telemetry
        wanted = request.path_params.get("client_instance_id")
        clients = store.as_json(wanted) if store is not None else []
        if wanted is not None and not clients:
            raise ConsoleError(404, "UNKNOWN_CLIENT_INSTANCE", f"no metrics pushed by client instance {wanted}")
        return {"clients": clients} if wanted is None else clients[0]

    def v1(path: str, fn: Callable[[Request], Awaitable[Any]], method: str) -> Route:
        return Route(path, api(ctx, fn), methods=[method])

    return Starlette(routes=[
        Route("/metrics", metrics, methods=["GET"]),  # open, for Prometheus scrapers
        v1("/v1/faults", list_faults, "GET"),
        v1("/v1/faults", add_faults, "POST"),
        v1("/v1/faults", clear_faults, "DELETE"),
        v1("/v1/faults/{rule_id:int}", delete_fault, "DELETE"),
        v1("/v1/brokers", brokers, "GET"),
        v1("/v1/brokers/{broker_id:int}/stop", stop_broker, "POST"),
        v1("/v1/brokers/{broker_id:int}/crash", crash_broker, "POST"),
        v1("/v1/brokers/{broker_id:int}/start", start_broker, "POST"),
        v1("/v1/brokers/{broker_id:int}/pause", pause_broker, "POST"),
        v1("/v1/brokers/{broker_id:int}/resume", resume_broker, "POST"),
        v1("/v1/brokers/{broker_id:int}/isolate", isolate_broker, "POST"),
        v1("/v1/brokers/{broker_id:int}/heal", heal_broker, "POST"),
        v1("/v1/network", network, "GET"),
        v1("/v1/network/partitions", add_network_partition, "POST"),
        v1("/v1/network/partitions", heal_network, "DELETE"),
        v1("/v1/network/partitions/{partition_id:int}", heal_network, "DELETE"),
        v1("/v1/partitions/{topic}", partitions, "GET"),
        v1("/v1/partitions/{topic}/{partition:int}/leader", move_leader, "POST"),
        v1("/v1/client-metrics", client_metrics, "GET"),
        v1("/v1/client-metrics/{client_instance_id}", client_metrics, "GET"),
        *console_routes(ctx),
    ])


async def serve_admin_http(target: Broker | Cluster, host: str, port: int, *,
                           shutdown_trigger: Callable[[], Awaitable[None]] | None = None,
                           task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve :func:`build_app` on ``host:port`` (0: a free port) until cancelled; reports the bound port."""
    config = HypercornConfig()
    config.bind = [f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = log
    config.graceful_timeout = 0
    app = build_app(AdminTarget.of(target), host)

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            partial(hypercorn_serve, cast(Any, app), config,  # Starlette is an ASGI app; the types differ
                    shutdown_trigger=shutdown_trigger or trio.sleep_forever))
        bound = int(binds[0].rsplit(":", 1)[1])
        log.info("HTTP (metrics, faults%s) on %s", ", cluster control" if isinstance(target, Cluster) else "",
                 binds[0])
        task_status.started(bound)
