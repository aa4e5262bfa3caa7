"""Run a broker from synchronous code, e.g. a pytest fixture for tests with real clients.

``BrokerThread`` runs a :class:`~minikafka.broker.broker.Broker` on its own
Trio event loop in a daemon thread::

    with BrokerThread() as broker:
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})

``ClusterThread`` does the same for a :class:`~minikafka.broker.cluster.Cluster`
of N brokers, with ``stop_broker``/``start_broker`` callable from the test thread.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, TypeVar

import trio

from .broker.broker import Broker
from .broker.cluster import Cluster
from .broker.config import BrokerConfig

T = TypeVar("T")


class BrokerThread:
    """A broker on a background thread; ``bootstrap`` is its "host:port"."""

    def __init__(self, config: BrokerConfig | None = None, **settings: Any) -> None:
        self.config = config or BrokerConfig(**{"port": 0, **settings})
        self.broker: Broker | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.config.port

    @property
    def bootstrap(self) -> str:
        return f"{self.config.advertised}:{self.config.port}"

    def start(self, timeout: float = 10) -> "BrokerThread":
        self._thread = threading.Thread(target=self._main, name="minikafka-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("broker did not start")
        if self._error is not None:
            raise RuntimeError("broker failed to start") from self._error
        return self

    def _main(self) -> None:
        async def amain() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._cancel = scope
                self.broker = Broker(self.config)
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.broker.run)
                    self._ready.set()

        try:
            trio.run(amain)
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the broker's event loop (thread-safe access to broker state)."""
        assert self._token is not None
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def stop(self, timeout: float = 10) -> None:
        if self._token is not None and self._cancel is not None and self._thread and self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def restart(self) -> "BrokerThread":
        """Stop and start again on the same port and data dir (for persistence tests)."""
        self.stop()
        self._ready = threading.Event()
        self._error = None
        return self.start()

    def __enter__(self) -> "BrokerThread":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def broker_thread(tmp_path: Path | None = None, **settings: Any) -> BrokerThread:
    """A started BrokerThread, in memory unless ``tmp_path`` is given."""
    if tmp_path is not None:
        settings.setdefault("data_dir", tmp_path)
    return BrokerThread(**settings).start()


class ClusterThread:
    """A :class:`Cluster` of ``num_brokers`` brokers on a background thread."""

    def __init__(self, num_brokers: int = 3, config: BrokerConfig | None = None, **settings: Any) -> None:
        self.cluster = Cluster(num_brokers, config, **settings)
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None

    @property
    def bootstrap(self) -> str:
        """``host:port`` of every running broker."""
        return self.cluster.bootstrap

    def start(self, timeout: float = 20) -> "ClusterThread":
        self._thread = threading.Thread(target=self._main, name="minikafka-cluster", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise TimeoutError("cluster did not start")
        if self._error is not None:
            raise RuntimeError("cluster failed to start") from self._error
        return self

    def _main(self) -> None:
        async def amain() -> None:
            self._token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                self._cancel = scope
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.cluster.run)
                    self._ready.set()

        try:
            trio.run(amain)
        except BaseException as exc:  # reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the cluster's event loop."""
        assert self._token is not None
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def run(self, afn: Callable[..., Any], *args: Any) -> Any:
        """Run the async ``afn(*args)`` on the cluster's event loop and return its result."""
        assert self._token is not None
        return trio.from_thread.run(afn, *args, trio_token=self._token)

    def stop_broker(self, broker_id: int) -> None:
        self.run(self.cluster.stop_broker, broker_id)

    def start_broker(self, broker_id: int) -> None:
        self.run(self.cluster.start_broker, broker_id)

    def stop(self, timeout: float = 10) -> None:
        if self._token is not None and self._cancel is not None and self._thread and self._thread.is_alive():
            try:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> "ClusterThread":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
