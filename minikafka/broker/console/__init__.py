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

from starlette.routing import BaseRoute

from ..admin_target import AdminTarget
from .auth import ConsoleAuth
from .context import AREAS, ConsoleContext
from .static import static_routes


def console_routes(target: AdminTarget) -> list[BaseRoute]:
    """The console's routes (pages, static files, JSON API) for one broker or cluster."""
    ctx = ConsoleContext(target, ConsoleAuth.for_target(target))
    routes: list[BaseRoute] = [*static_routes(), *ctx.auth.routes()]
    for area in AREAS:
        routes += importlib.import_module(f".api_{area}", __name__).routes(ctx)
    return routes
