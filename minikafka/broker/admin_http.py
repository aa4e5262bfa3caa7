"""The broker's HTTP port (``serve --http-port``): Prometheus metrics, fault rules, cluster control.

Kafka has JMX for metrics and its controller for leadership; a test suite
wants one small HTTP API instead.  A Starlette app served by Hypercorn on the
brokers' own Trio loop (so handlers read broker state without locks):

* ``GET /metrics``: every running broker's metrics in the Prometheus text
  format (:mod:`.prometheus`);
* ``GET /v1/faults`` (rules with matched and remaining counts), ``POST /v1/faults``
  (a :class:`~minikafka.broker.faults.FaultRule` as JSON, or a list of them),
  ``DELETE /v1/faults`` (all), ``DELETE /v1/faults/{id}``;
* ``GET /v1/brokers``; for a cluster ``POST /v1/brokers/{id}/stop`` and
  ``/start``; ``GET /v1/partitions/{topic}`` and
  ``POST /v1/partitions/{topic}/{partition}/leader`` with ``{"broker": N}``
  (an operator's leader election: :meth:`ClusterMetadata.move_leader`);
* ``GET /v1/client-metrics`` (and ``/v1/client-metrics/{client_instance_id}``): the KIP-714 metrics each
  client last pushed, with who it is (:meth:`ClientTelemetryStore.as_json
  <minikafka.broker.client_metrics.receiver.ClientTelemetryStore.as_json>`).

Errors are JSON ``{"error": ..., "message": ...}`` with 400 (bad rule), 404
(unknown broker, rule or partition) or 409 (not a cluster, ineligible leader).
"""

from __future__ import annotations

import json
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
from .faults import FaultInjector, FaultRule
from .metadata import MetadataError
from .prometheus import CONTENT_TYPE, render

log = logging.getLogger(__name__)


def _error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


def _metadata_error(exc: MetadataError) -> JSONResponse:
    status = 404 if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else 409
    return _error(status, ErrorCode(exc.code).name, str(exc))


async def _json_body(request: Request) -> Any:
    try:
        return json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise ValueError(f"the body is not JSON: {exc}") from None


def build_app(target: AdminTarget) -> Starlette:
    """The ASGI app for one broker or cluster."""

    async def metrics(request: Request) -> Response:
        return Response(render(target.brokers), media_type=None, headers={"Content-Type": CONTENT_TYPE})

    async def list_faults(request: Request) -> JSONResponse:
        return JSONResponse({"rules": target.faults.as_json()})

    async def add_faults(request: Request) -> JSONResponse:
        try:
            data = await _json_body(request)
            specs = data if isinstance(data, list) else [data]
            if not all(isinstance(s, dict) for s in specs):
                raise ValueError("expected a JSON object (a rule) or a list of them")
            rules = [FaultRule.from_json(s) for s in specs]
            for rule in rules:
                rule.validate()  # all or nothing
        except (TypeError, ValueError) as exc:
            return _error(400, "INVALID_RULE", str(exc))
        added = [target.faults.add(rule).to_json() for rule in rules]
        return JSONResponse({"rules": added} if isinstance(data, list) else {"rule": added[0]}, status_code=201)

    async def clear_faults(request: Request) -> JSONResponse:
        return JSONResponse({"removed": target.faults.clear()})

    async def delete_fault(request: Request) -> JSONResponse:
        rule_id = request.path_params["rule_id"]
        if not target.faults.remove(rule_id):
            return _error(404, "UNKNOWN_RULE", f"no fault rule {rule_id}")
        return JSONResponse({"removed": 1})

    async def brokers(request: Request) -> JSONResponse:
        running = target.brokers()
        cluster = target.cluster
        configs = cluster.configs if cluster is not None else {b.node_id: b.config for b in running.values()}
        return JSONResponse({
            "cluster": cluster is not None,
            "controller": target.metadata.controller_id(),
            "brokers": [{"id": i, "host": c.advertised, "port": c.port, "running": i in running}
                        for i, c in sorted(configs.items())]})

    def _cluster_broker(request: Request) -> tuple[Cluster, int] | JSONResponse:
        cluster = target.cluster
        if cluster is None:
            return _error(409, "NOT_A_CLUSTER", "a lone broker cannot be stopped or started over HTTP")
        broker_id = request.path_params["broker_id"]
        if broker_id not in cluster.configs:
            return _error(404, "UNKNOWN_BROKER", f"no broker {broker_id} (brokers: {sorted(cluster.configs)})")
        return cluster, broker_id

    async def stop_broker(request: Request) -> JSONResponse:
        found = _cluster_broker(request)
        if isinstance(found, JSONResponse):
            return found
        cluster, broker_id = found
        await cluster.stop_broker(broker_id)
        return JSONResponse({"id": broker_id, "running": False})

    async def start_broker(request: Request) -> JSONResponse:
        found = _cluster_broker(request)
        if isinstance(found, JSONResponse):
            return found
        cluster, broker_id = found
        broker = await cluster.start_broker(broker_id)
        return JSONResponse({"id": broker_id, "running": True, "port": broker.port})

    async def partitions(request: Request) -> JSONResponse:
        topic = target.metadata.get_topic(request.path_params["topic"])
        if topic is None:
            return _error(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no topic {request.path_params['topic']}")
        return JSONResponse({"topic": topic.name, "partitions": [
            {"partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
             "replicas": list(p.replicas), "isr": list(p.isr)} for p in topic.partitions]})

    async def move_leader(request: Request) -> JSONResponse:
        try:
            data = await _json_body(request)
            broker_id = int(data["broker"])
        except (TypeError, KeyError, ValueError) as exc:
            return _error(400, "INVALID_REQUEST", f'expected {{"broker": <id>}} ({exc})')
        topic, partition = request.path_params["topic"], request.path_params["partition"]
        try:
            epoch = target.metadata.move_leader(topic, partition, broker_id)
        except MetadataError as exc:
            return _metadata_error(exc)
        return JSONResponse({"topic": topic, "partition": partition, "leader": broker_id, "leader_epoch": epoch})

    async def client_metrics(request: Request) -> JSONResponse:
        store = target.client_telemetry
        wanted = request.path_params.get("client_instance_id")
        clients = store.as_json(wanted) if store is not None else []
        if wanted is not None and not clients:
            return _error(404, "UNKNOWN_CLIENT_INSTANCE", f"no metrics pushed by client instance {wanted}")
        return JSONResponse({"clients": clients} if wanted is None else clients[0])

    return Starlette(routes=[
        Route("/metrics", metrics, methods=["GET"]),
        Route("/v1/faults", list_faults, methods=["GET"]),
        Route("/v1/faults", add_faults, methods=["POST"]),
        Route("/v1/faults", clear_faults, methods=["DELETE"]),
        Route("/v1/faults/{rule_id:int}", delete_fault, methods=["DELETE"]),
        Route("/v1/brokers", brokers, methods=["GET"]),
        Route("/v1/brokers/{broker_id:int}/stop", stop_broker, methods=["POST"]),
        Route("/v1/brokers/{broker_id:int}/start", start_broker, methods=["POST"]),
        Route("/v1/partitions/{topic}", partitions, methods=["GET"]),
        Route("/v1/partitions/{topic}/{partition:int}/leader", move_leader, methods=["POST"]),
        Route("/v1/client-metrics", client_metrics, methods=["GET"]),
        Route("/v1/client-metrics/{client_instance_id}", client_metrics, methods=["GET"]),
        *console_routes(target),
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
    app = build_app(AdminTarget.of(target))

    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            partial(hypercorn_serve, cast(Any, app), config,  # Starlette is an ASGI app; the types differ
                    shutdown_trigger=shutdown_trigger or trio.sleep_forever))
        bound = int(binds[0].rsplit(":", 1)[1])
        log.info("HTTP (metrics, faults%s) on %s", ", cluster control" if isinstance(target, Cluster) else "",
                 binds[0])
        task_status.started(bound)
