"""Helpers for the web console's tests."""

from __future__ import annotations

from minikafka.testing import BrokerThread, ClusterThread


def console_url(broker: BrokerThread | ClusterThread, path: str = "/") -> str:
    """The console's address on ``broker`` (a BrokerThread or ClusterThread started with ``http_port``)."""
    assert broker.http_address is not None, "started without http_port"
    return f"http://{broker.http_address}{path}"
