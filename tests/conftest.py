"""Shared fixtures: brokers started by the tests themselves."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import AsyncIterator, Iterator

import pytest

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.schema import STRICT_ENV, set_strict
from minikafka.testing import BrokerThread

STRICT_MESSAGES = True  # builds reject undeclared body keys (UnknownFieldError), in this process and children
if STRICT_MESSAGES:
    os.environ[STRICT_ENV] = "1"  # for the subprocesses the tests start
    set_strict(True)
# Analyses the tests run (CLI subprocesses included) do not leave a Spark class-data-sharing archive (~170 MB) in
# the user's ~/.cache; the tests of the archive name a directory of their own.
os.environ.setdefault("MINIKAFKA_SPARK_CDS", "off")


@pytest.fixture
async def broker() -> AsyncIterator[Broker]:
    """An in-memory broker on the test's own Trio loop (port chosen by the OS)."""
    async with serve_broker(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0)) as b:
        yield b


@pytest.fixture
async def conn(broker: Broker) -> AsyncIterator[KafkaConnection]:
    """A raw protocol connection to ``broker``."""
    c = await KafkaConnection.connect("127.0.0.1", broker.port, client_id="raw-test")
    try:
        yield c
    finally:
        await c.aclose()


@pytest.fixture
def broker_thread() -> Iterator[BrokerThread]:
    """An in-memory broker on a background thread, for synchronous real clients."""
    with BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0)) as b:
        yield b


@pytest.fixture
def persistent_broker_thread(tmp_path: Path) -> Iterator[BrokerThread]:
    """A broker with a data dir, on a background thread."""
    with BrokerThread(BrokerConfig(port=0, data_dir=tmp_path / "data", group_initial_rebalance_delay_ms=0)) as b:
        yield b


def pytest_configure(config: pytest.Config) -> None:
    logging.getLogger("kafka").setLevel(logging.WARNING)
    config.pluginmanager.import_plugin("hang_watchdog")  # a hung test fails instead of stalling the run


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the tests marked ``slow`` come first (in their order, the rest after them in theirs):
    the workers start on the long ones while the many short ones fill the gaps, instead of a long test starting
    last and keeping one worker busy alone at the end of the run."""
    if getattr(config.option, "numprocesses", None):
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)
