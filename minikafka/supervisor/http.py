"""The supervisor's HTTP port: the processes' state, and failures on request (``minikafka cluster``).

* ``GET /v1/brokers``: every process (``controller`` and the brokers) with its state, address and pid;
* ``POST /v1/brokers/{id}/{action}`` and ``POST /v1/controller/{action}``, ``action`` one of ``kill``
  (SIGKILL), ``stop`` (SIGTERM: a controlled shutdown), ``start``, ``pause`` (SIGSTOP) and ``resume``
  (SIGCONT), ``isolate`` (its links cut); the answer is the process's state after it;
* ``POST /v1/network/partitions`` with ``{"sides": [[0], [1, 2, "controller", "clients"]]}`` cuts the links
  between the sides, ``DELETE /v1/network/partitions`` heals them all, ``GET /v1/network`` lists the cut links.

Served by the standard library's threading HTTP server on the supervisor's host: the supervisor is a plain
process with no event loop of its own.
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .processes import CONTROLLER, ProcessCluster, ProcessError

log = logging.getLogger(__name__)

ACTIONS = ("kill", "stop", "start", "pause", "resume", "isolate")


def describe(cluster: ProcessCluster) -> list[dict[str, Any]]:
    return [{"node": n.name, "node_id": n.node_id, "state": cluster.state(n.name), "host": n.host, "port": n.port,
             "pid": n.pid} for n in (cluster.controller, *cluster.brokers.values())]


def act(cluster: ProcessCluster, node: str, action: str) -> dict[str, Any]:
    """Do ``action`` to ``node``; ProcessError for an unknown node, ValueError for an unknown action."""
    if action not in ACTIONS:
        raise ValueError(f"no action {action!r} (actions: {', '.join(ACTIONS)})")
    getattr(cluster, action)(node)
    return {"node": node, "state": cluster.state(node)}


class _Handler(BaseHTTPRequestHandler):
    cluster: ProcessCluster

    def _answer(self, status: HTTPStatus, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        if self.path.rstrip("/") == "/v1/brokers":
            self._answer(HTTPStatus.OK, describe(self.cluster))
        elif self.path.rstrip("/") == "/v1/network":
            network = self.cluster.network
            cut = sorted(sorted(link) for link in network.cut_links) if network is not None else []
            self._answer(HTTPStatus.OK, {"cut_links": cut})
        else:
            self._answer(HTTPStatus.NOT_FOUND, {"error": "NOT_FOUND", "message": self.path})

    def do_DELETE(self) -> None:  # noqa: N802
        if self.path.rstrip("/") == "/v1/network/partitions":
            self.cluster.heal()
            self._answer(HTTPStatus.OK, {"cut_links": []})
        else:
            self._answer(HTTPStatus.NOT_FOUND, {"error": "NOT_FOUND", "message": self.path})

    def do_POST(self) -> None:  # noqa: N802
        parts = self.path.strip("/").split("/")
        if self.path.rstrip("/") == "/v1/network/partitions":
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                self.cluster.partition(body["sides"])
            except (ValueError, KeyError, TypeError, ProcessError) as exc:
                self._answer(HTTPStatus.BAD_REQUEST, {"error": "BAD_REQUEST", "message": str(exc)})
                return
            self._answer(HTTPStatus.OK, {"sides": body["sides"]})
            return
        if parts[:2] == ["v1", "brokers"] and len(parts) == 4:
            node, action = parts[2], parts[3]
        elif parts[:2] == ["v1", CONTROLLER] and len(parts) == 3:
            node, action = CONTROLLER, parts[2]
        else:
            self._answer(HTTPStatus.NOT_FOUND, {"error": "NOT_FOUND", "message": self.path})
            return
        try:
            self._answer(HTTPStatus.OK, act(self.cluster, node, action))
        except (ProcessError, ValueError) as exc:
            self._answer(HTTPStatus.BAD_REQUEST, {"error": "BAD_REQUEST", "message": str(exc)})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the standard library's signature
        log.debug("http: " + format, *args)


def serve_http(cluster: ProcessCluster, host: str, port: int) -> ThreadingHTTPServer:
    """Serve the HTTP port in a daemon thread; returns the server (``server_address`` has the bound port)."""
    handler = type("Handler", (_Handler,), {"cluster": cluster})
    server = ThreadingHTTPServer((host, port), handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="minikafka-supervisor-http").start()
    return server
