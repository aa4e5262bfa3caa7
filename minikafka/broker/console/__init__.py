"""The web console on the broker's HTTP port (``serve --http-port``): ``/`` in a browser.

What Redpanda Console, kafka-ui or AKHQ show for a Kafka cluster (brokers, topics, messages, groups,
transactions, fault rules, captures), plus live views of the flow control minikafka models (client
quotas and throttling, fetch sessions, replication throttling, request rates and latency, KIP-714
client metrics).  The pages are static files of this package (no CDN, no build step; charts are the
vendored uPlot of :mod:`minikafka.web`) over a JSON API under ``/console/api/``, one module per area
(``api_<area>.py``, each with ``routes(ctx)``).  With SASL or an authorizer configured, the console
asks for a Kafka user and password and checks every call against that principal's ACLs
(:mod:`.auth`).
"""

from __future__ import annotations

import importlib

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from .context import AREAS, ConsoleContext, json_error
from .static import static_routes


def console_routes(ctx: ConsoleContext) -> list[BaseRoute]:
    """The console's routes (pages, static files, JSON API) for one broker or cluster."""
    routes: list[BaseRoute] = [*static_routes(), *ctx.auth.routes()]
    for area in AREAS:
        routes += importlib.import_module(f".api_{area}", __name__).routes(ctx)
    return [*routes, Route("/console/api/{path:path}", _unknown_api,
                           methods=["GET", "POST", "PUT", "PATCH", "DELETE"])]


async def _unknown_api(request: Request) -> JSONResponse:
    """Any other ``/console/api/`` path: a JSON 404, as every console API error is JSON."""
    return json_error(404, "NOT_FOUND", f"no console API {request.method} {request.url.path}")
