"""Fixtures for the web console's tests: a broker with its HTTP port on a thread, and Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from browser import chromium, page  # noqa: F401  (fixtures)
from minikafka.testing import BrokerThread


@pytest.fixture
def console_broker() -> Iterator[BrokerThread]:
    """An in-memory broker with its HTTP port (console at ``console_helpers.console_url(broker)``)."""
    with BrokerThread(http_port=0) as broker:
        yield broker
