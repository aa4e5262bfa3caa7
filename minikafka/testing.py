"""Run a broker from synchronous code, e.g. a pytest fixture for tests with real clients.

``BrokerThread`` runs a :class:`~minikafka.broker.broker.Broker` on its own
Trio event loop in a daemon thread::

    with BrokerThread() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

``ClusterThread`` does the same for a :class:`~minikafka.broker.cluster.Cluster`
of N brokers, with ``stop_broker``/``start_broker`` callable from the test thread.
Both capture their traffic (:data:`minikafka.capture.recorder.CAPTURE`) when ``capture_dir`` is set or
the console starts a capture.

Both take ``properties``: ``server.properties`` keys applied on top of the settings,
e.g. several listeners with TLS and SASL::

    BrokerThread(properties={
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "server.pem",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                         'required user_alice="alice-secret";',
    })

and ``bootstrap_for("SASL_SSL")`` is then that listener's address.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, TypeVar

import trio

from .broker.broker import Broker
from .broker.cluster import Cluster
from .broker.config import BrokerConfig
from .broker.faults import FaultInjector
from .capture.recorder import CAPTURE

T = TypeVar("T")


def _configured(config: BrokerConfig | None, properties: Mapping[str, str] | None, settings: dict[str, Any]
                ) -> BrokerConfig:
    """``config`` (default: the settings, on a free port), then the ``server.properties`` keys."""
    cfg = config or BrokerConfig(**{"port": 0, **settings})
    for key, value in (properties or {}).items():
        cfg.set(key, str(value))
    return cfg


class _LoopThread:
    """A Trio event loop on a daemon thread running one long-lived service until stopped."""

    name = "minikafka"

    def __init__(self, http_port: int | None = None) -> None:
        self.http_port = http_port
        self.http_address: str | None = None  # "host:port" of the HTTP API once started (with http_port)
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    async def _serve(self, nursery: trio.Nursery) -> None:
        """Start the service in ``nursery`` and return once it accepts connections."""
        raise NotImplementedError

    async def _serve_http(self, nursery: trio.Nursery, target: Broker | Cluster, host: str) -> None:
        if self.http_port is not None:
            from .broker.admin_http import serve_admin_http

            port = await nursery.start(serve_admin_http, target, host, self.http_port)
            self.http_address = f"{host}:{port}"

    def start(self, timeout: float = 20):
        self._ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError(f"{self.name} did not start")
        if self._error is not None:
            raise RuntimeError(f"{self.name} failed to start") from self._error
        return self

    def _main(self) -> None:
        async def amain() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._cancel = scope
                async with trio.open_nursery() as nursery:
                    await self._serve(nursery)
                    self._ready.set()

        try:
            trio.run(amain)
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the service's event loop (thread-safe access to its state)."""
        assert self._token is not None
        try:
            return trio.from_thread.run_sync(fn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise self._stopped() from self._error

    def run(self, afn: Callable[..., Any], *args: Any) -> Any:
        """Run the async ``afn(*args)`` on the service's event loop and return its result."""
        assert self._token is not None
        try:
            return trio.from_thread.run(afn, *args, trio_token=self._token)
        except trio.RunFinishedError:
            raise self._stopped() from self._error

    def _stopped(self) -> RuntimeError:
        """Its event loop ended (stopped, or by the exception it raised: the cause)."""
        return RuntimeError(f"{self.name} is not running: its event loop ended ({self._error!r})")

    def stop(self, timeout: float = 10) -> None:
        if self._token is not None and self._cancel is not None and self._thread and self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class BrokerThread(_LoopThread):
    """A broker on a background thread; ``bootstrap`` is its "host:port"."""

    name = "minikafka-broker"

    def __init__(self, config: BrokerConfig | None = None, *, http_port: int | None = None,
                 properties: Mapping[str, str] | None = None, **settings: Any) -> None:
        super().__init__(http_port)
        self.config = _configured(config, properties, settings)
        self.broker: Broker | None = None
        self.faults = FaultInjector()  # kept across restarts

    @property
    def port(self) -> int:
        return self.config.port

    @property
    def bootstrap(self) -> str:
        """The first listener's ``host:port``."""
        return f"{self.config.advertised}:{self.config.port}"

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of the listener named ``listener`` (e.g. "SASL_SSL")."""
        assert self.broker is not None, "the broker is not running"
        return self.call(self.broker.bootstrap_for, listener)

    @property
    def capture_dir(self) -> Path | None:
        """Where the broker captures its traffic (``capture_dir`` setting), if it does."""
        return None if self.config.capture_dir is None else Path(self.config.capture_dir)

    async def _serve(self, nursery: trio.Nursery) -> None:
        self.broker = Broker(self.config, faults=self.faults, captures=CAPTURE)
        await nursery.start(self.broker.run)
        await self._serve_http(nursery, self.broker, self.config.host)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, str] | None = None) -> str:
        """Create a topic (from the test thread); returns its name."""
        assert self.broker is not None, "the broker is not running"
        broker = self.broker
        self.call(lambda: broker.create_topic(name, partitions, replication_factor, configs or {}))
        return name

    def delete_topic(self, name: str) -> None:
        assert self.broker is not None, "the broker is not running"
        self.call(self.broker.delete_topic, name)

    def restart(self) -> "BrokerThread":
        """Stop and start again on the same port and data dir (for persistence tests)."""
        self.stop()
        return self.start()


def broker_thread(tmp_path: Path | None = None, **settings: Any) -> BrokerThread:
    """A started BrokerThread, in memory unless ``tmp_path`` is given."""
    if tmp_path is not None:
        settings.setdefault("data_dir", tmp_path)
    return BrokerThread(**settings).start()


class ClusterThread(_LoopThread):
    """A :class:`Cluster` of ``num_brokers`` brokers on a background thread."""

    name = "minikafka-cluster"

    def __init__(self, num_brokers: int = 3, config: BrokerConfig | None = None, *, http_port: int | None = None,
                 properties: Mapping[str, str] | None = None, **settings: Any) -> None:
        super().__init__(http_port)
        self.cluster = Cluster(num_brokers, _configured(config, properties, settings) if properties else config,
                               captures=CAPTURE, **({} if properties else settings))

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every running broker."""
        return self.cluster.bootstrap

    def bootstrap_for(self, listener: str) -> str:
        """``host:port`` of every running broker on the listener named ``listener``."""
        return self.call(self.cluster.bootstrap_for, listener)

    @property
    def faults(self) -> FaultInjector:
        """The rules of every broker of the cluster (``broker=ID`` in a rule picks one)."""
        return self.cluster.faults

    @property
    def capture_dir(self) -> Path | None:
        """Where the brokers capture their traffic (``capture_dir`` setting), if they do."""
        cfg = self.cluster.base_config
        return None if cfg.capture_dir is None else Path(cfg.capture_dir)

    @property
    def broker_ids(self) -> list[int]:
        return self.cluster.broker_ids

    @property
    def running_brokers(self) -> list[int]:
        return self.call(lambda: sorted(self.cluster.brokers))

    async def _serve(self, nursery: trio.Nursery) -> None:
        await nursery.start(self.cluster.run)
        await self._serve_http(nursery, self.cluster, self.cluster.base_config.host)

    def stop_broker(self, broker_id: int) -> None:
        self.run(self.cluster.stop_broker, broker_id)

    def crash_broker(self, broker_id: int) -> None:
        """Crash a broker (no controlled shutdown): fenced, and its leadership moved, when its session expires
        (``broker_session_timeout_ms``)."""
        self.run(self.cluster.crash_broker, broker_id)

    def start_broker(self, broker_id: int) -> None:
        self.run(self.cluster.start_broker, broker_id)

    def pause_broker(self, broker_id: int) -> None:
        """Pause a broker, as SIGSTOP does: it answers nothing and heartbeats no more (fenced when its session
        expires) until :meth:`resume_broker`."""
        self.call(self.cluster.pause_broker, broker_id)

    def resume_broker(self, broker_id: int) -> None:
        """Resume a paused broker: it catches up with the metadata it missed before answering."""
        self.call(self.cluster.resume_broker, broker_id)

    def partition_network(self, *sides: list[int | str], heal_after_s: float | None = None) -> int:
        """Cut the links between ``sides`` (broker ids, ``"controller"``, ``"clients"``), e.g.
        ``partition_network([0], [1, 2, "controller"])``; returns the partition's id for :meth:`heal_network`."""
        return self.call(lambda: self.cluster.partition_network(list(sides), heal_after_s).id)

    def isolate_broker(self, broker_id: int, heal_after_s: float | None = None) -> int:
        """Cut a broker off from the other brokers, the controller and the clients; returns the partition's id."""
        return self.call(lambda: self.cluster.isolate_broker(broker_id, heal_after_s).id)

    def heal_network(self, partition_id: int | None = None) -> None:
        """Heal one network partition (all without an id)."""
        self.call(self.cluster.heal_network, partition_id)

    def broker_state(self, broker_id: int) -> str:
        """``running``, ``paused``, ``partitioned``, ``crashed`` (not yet fenced) or ``stopped``."""
        return self.call(self.cluster.broker_state, broker_id)

    def leader(self, topic: str, partition: int) -> int:
        return self.call(self.cluster.leader, topic, partition)

    def move_leader(self, topic: str, partition: int, broker_id: int) -> int:
        """Make ``broker_id`` (an in-sync replica) the partition's leader; returns the new leader epoch."""
        return self.call(self.cluster.metadata.move_leader, topic, partition, broker_id)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: dict[str, str] | None = None) -> str:
        """Create a topic (replication factor default: min(3, brokers)); returns its name."""
        rf = replication_factor or min(3, len(self.cluster.broker_ids))

        def create() -> None:
            broker = next(iter(self.cluster.brokers.values()))
            broker.create_topic(name, partitions, rf, configs or {})

        self.call(create)
        return name

    def delete_topic(self, name: str) -> None:
        self.call(lambda: next(iter(self.cluster.brokers.values())).delete_topic(name))
