"""Helpers for the web console's tests: its address, one HTTP helper, and waiting for a state."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import waiting

from minikafka.testing import BrokerThread, ClusterThread

TIMEOUT = 30.0


def console_url(broker: BrokerThread | ClusterThread, path: str = "/") -> str:
    """The console's address on ``broker`` (a BrokerThread or ClusterThread started with ``http_port``)."""
    assert broker.http_address is not None, "started without http_port"
    return f"http://{broker.http_address}{path}"


def http(target: BrokerThread | ClusterThread, method: str, path: str, body: Any = None, *,
         headers: dict[str, str] | None = None, opener: urllib.request.OpenerDirector | None = None,
         timeout: float = TIMEOUT) -> tuple[int, Any]:
    """One call of the HTTP port (``path`` from ``/``): (status, JSON answer, or the raw bytes when it is not
    JSON).  ``body``: JSON-able or bytes (as given), sent as application/json unless ``headers`` say; a POST without a body
    sends an empty one."""
    sent_headers = dict(headers or {})
    if body is None:
        data = b"" if method in ("POST", "PUT") else None
    else:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        sent_headers.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(console_url(target, path), data=data, method=method, headers=sent_headers)
    try:
        with (opener.open(req, timeout=timeout) if opener is not None
              else urllib.request.urlopen(req, timeout=timeout)) as resp:
            return resp.status, _decode(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, _decode(exc.read())


def call(target: BrokerThread | ClusterThread, path: str, method: str = "GET", body: Any = None,
         **kwargs: Any) -> tuple[int, Any]:
    """A console API call (``path`` under ``/console/api/``): (status, JSON)."""
    return http(target, method, "/console/api/" + path, body, **kwargs)


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def wait_until(check: Callable[[], Any], what: str, timeout: float = 20) -> Any:
    """Poll ``check`` until it returns something true (returned), failing after ``timeout`` seconds."""
    return waiting.wait_for(check, timeout, what)
