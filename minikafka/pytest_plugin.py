"""pytest fixtures for tests against a real-protocol Kafka broker; registered through ``pytest11``.

Installing minikafka is all it takes (the plugin is found through the
``pytest11`` entry point)::

    def test_orders(minikafka_broker, minikafka_topic):
        producer = confluent_kafka.Producer({"bootstrap.servers": minikafka_broker.bootstrap})
        producer.produce(minikafka_topic, b"42 widgets")

Fixtures:

* ``minikafka_broker``: a running broker (:class:`~minikafka.testing.BrokerThread`):
  ``.bootstrap`` ("host:port"), ``.faults`` (fault rules, see
  :mod:`minikafka.broker.faults`), ``.capture_dir`` (with ``--minikafka-capture``),
  ``.create_topic()``, ``.broker``.  In memory, started once per session by
  default (``--minikafka-scope`` / ``minikafka_scope``); fault rules are cleared
  after every test.
* ``minikafka_cluster``: ``--minikafka-brokers`` brokers (default 3,
  :class:`~minikafka.testing.ClusterThread`): ``.bootstrap``, ``.stop_broker(id)``,
  ``.start_broker(id)``, ``.move_leader(topic, partition, id)``, ``.faults``,
  ``.capture_dir``; after every test the rules are cleared and stopped brokers
  started again.
* ``minikafka_processes``: a controller process and ``--minikafka-brokers`` broker processes
  (:class:`~minikafka.supervisor.processes.ProcessCluster`, KRaft over the wire): ``.bootstrap``,
  ``.kill(id)`` (SIGKILL), ``.stop(id)``, ``.start(id)``, ``.pause(id)`` (SIGSTOP), ``.resume(id)``,
  ``.restart(id, hard=True)``, with ``"controller"`` for the controller; after every test every process runs
  again.  Settings from ``minikafka_broker_config``.
* ``minikafka_topic``: a fresh topic name for each test, created on the
  cluster if the test uses ``minikafka_cluster``, else on ``minikafka_broker``;
  ``@pytest.mark.minikafka_topic(partitions=3, replication_factor=2,
  config={...})`` shapes it.

Options (command line, or the ini keys ``minikafka_brokers``,
``minikafka_capture``, ``minikafka_scope``, ``minikafka_broker_config``):
``--minikafka-brokers N``, ``--minikafka-capture DIR`` (each broker or cluster
captures into a subdirectory of DIR, see ``minikafka capture``),
``--minikafka-scope session|package|module|class|function``, and broker
settings as ``server.properties`` lines in ``minikafka_broker_config``.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import pytest

if TYPE_CHECKING:
    from .supervisor.processes import ProcessCluster
    from .testing import BrokerThread, ClusterThread

SCOPES = ("session", "package", "module", "class", "function")
_counter = itertools.count(1)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("minikafka", "minikafka: a real-protocol Kafka broker for tests")
    group.addoption("--minikafka-brokers", type=int, default=None, metavar="N",
                    help="brokers in the minikafka_cluster fixture (default 3)")
    group.addoption("--minikafka-capture", default=None, metavar="DIR",
                    help="capture the fixtures' broker traffic into DIR (one subdirectory per broker/cluster)")
    group.addoption("--minikafka-scope", default=None, choices=SCOPES,
                    help="how long a minikafka_broker/minikafka_cluster lives (default session)")
    parser.addini("minikafka_brokers", "brokers in the minikafka_cluster fixture (default 3)", default="3")
    parser.addini("minikafka_capture", "capture the fixtures' broker traffic into this directory", default="")
    parser.addini("minikafka_scope", "how long a minikafka_broker/minikafka_cluster lives (default session)",
                  default="session")
    parser.addini("minikafka_broker_config", "broker settings as server.properties lines (key=value)",
                  type="linelist", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "minikafka_topic(partitions=1, replication_factor=None, config=None): "
                   "shape the topic the minikafka_topic fixture creates")


def _option(config: pytest.Config, name: str) -> Any:
    value = config.getoption(f"--minikafka-{name}")
    return value if value not in (None, "") else config.getini(f"minikafka_{name}")


Scope = Literal["session", "package", "module", "class", "function"]


def _scope(fixture_name: str, config: pytest.Config) -> Scope:
    scope = str(_option(config, "scope"))
    if scope not in SCOPES:
        raise pytest.UsageError(f"minikafka_scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    return cast(Scope, scope)


def _settings(config: pytest.Config, kind: str) -> dict[str, Any]:
    """Broker settings: ``minikafka_broker_config`` lines, then a capture directory if asked for."""
    from .broker.config import BrokerConfig

    cfg = BrokerConfig(port=0, group_initial_rebalance_delay_ms=0)
    for line in config.getini("minikafka_broker_config"):
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"minikafka_broker_config expects key=value lines, got {line!r}")
        cfg.set(key.strip(), value.strip())
    capture = _option(config, "capture")
    if capture:
        cfg.capture_dir = Path(capture).resolve() / f"{kind}-{next(_counter)}"
        cfg.capture_dir.mkdir(parents=True, exist_ok=True)
    return {"config": cfg}


@pytest.fixture(scope=_scope)
def _minikafka_broker_service(pytestconfig: pytest.Config) -> Iterator[BrokerThread]:
    from .testing import BrokerThread

    with BrokerThread(**_settings(pytestconfig, "broker")) as broker:
        yield broker


@pytest.fixture(scope=_scope)
def _minikafka_cluster_service(pytestconfig: pytest.Config) -> Iterator[ClusterThread]:
    from .testing import ClusterThread

    n = int(_option(pytestconfig, "brokers"))
    with ClusterThread(n, **_settings(pytestconfig, "cluster")) as cluster:
        yield cluster


@pytest.fixture
def minikafka_broker(_minikafka_broker_service: BrokerThread) -> Iterator[BrokerThread]:
    """A running minikafka broker: ``.bootstrap``, ``.faults``, ``.capture_dir``, ``.create_topic()``."""
    broker = _minikafka_broker_service
    try:
        yield broker
    finally:
        broker.faults.clear()


@pytest.fixture
def minikafka_cluster(_minikafka_cluster_service: ClusterThread) -> Iterator[ClusterThread]:
    """A running minikafka cluster: ``.bootstrap``, ``.stop_broker(id)``, ``.crash_broker(id)``, ``.start_broker(id)``,
    ``.pause_broker(id)``, ``.resume_broker(id)``, ``.partition_network(sides..)``, ``.isolate_broker(id)``,
    ``.heal_network()``, ``.move_leader(topic, partition, id)``, ``.faults``, ``.capture_dir``; after each test
    the network is healed, paused brokers resumed and stopped ones started."""
    cluster = _minikafka_cluster_service
    try:
        yield cluster
    finally:
        cluster.faults.clear()
        cluster.heal_network()
        for broker_id in cluster.broker_ids:
            cluster.resume_broker(broker_id)
        for broker_id in cluster.broker_ids:
            if broker_id not in cluster.running_brokers:
                cluster.start_broker(broker_id)


@pytest.fixture(scope=_scope)
def _minikafka_processes_service(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
                                 ) -> Iterator[ProcessCluster]:
    from .supervisor.processes import ProcessCluster

    overrides = {}
    for line in pytestconfig.getini("minikafka_broker_config"):
        key, sep, value = line.partition("=")
        if sep:
            overrides[key.strip()] = value.strip()
    n = int(_option(pytestconfig, "brokers"))
    with ProcessCluster(n, tmp_path_factory.mktemp("minikafka-processes"), overrides=overrides) as cluster:
        yield cluster


@pytest.fixture
def minikafka_processes(_minikafka_processes_service: ProcessCluster) -> Iterator[ProcessCluster]:
    """A controller process and broker processes (see the module docstring); every process running again after
    each test."""
    cluster = _minikafka_processes_service
    try:
        yield cluster
    finally:
        names: list[str | int] = ["controller", *cluster.brokers]
        for name in names:
            if cluster.state(name) == "paused":
                cluster.resume(name)
            elif cluster.state(name) == "stopped":
                cluster.start(name)


@pytest.fixture
def minikafka_topic(request: pytest.FixtureRequest) -> Iterator[str]:
    """A topic of its own for each test (created; deleted afterwards)."""
    marker = request.node.get_closest_marker("minikafka_topic")
    kw: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    unknown = set(kw) - {"partitions", "replication_factor", "config"}
    if unknown:
        raise pytest.UsageError(f"minikafka_topic marker: unknown argument(s) {', '.join(sorted(unknown))}")
    on_cluster = "minikafka_cluster" in request.fixturenames
    target = request.getfixturevalue("minikafka_cluster" if on_cluster else "minikafka_broker")
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:160].strip("-.") or "test"
    name = f"{base}-{uuid.uuid4().hex[:8]}"
    rf = kw.get("replication_factor")
    target.create_topic(name, kw.get("partitions", 1), rf if rf is not None or on_cluster else 1, kw.get("config"))
    try:
        yield name
    finally:
        target.delete_topic(name)
