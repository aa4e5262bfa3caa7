"""Network partitions between processes: each node's links go through a proxy that can cut them.

Every node of a :class:`~minikafka.supervisor.processes.ProcessCluster` gets a loopback address of its own
(``127.0.0.10`` + broker id, ``127.0.0.100`` for the controller) where a proxy listens and forwards to the
node's real listener; brokers advertise the proxy's address and connect to each other and to the controller
from their own address (``minikafka.source.address``), clients from anywhere else.  A proxy knows who is at the
other end of each connection by its source address, so a cut link between two nodes (or between a node and the
clients) stops the bytes of their connections in both directions, and a new connection across it gets nothing
through; when the link heals, what was held is delivered, as TCP retransmits dropped segments.

Why a proxy: it works as any user, touches no other process and no system setting (a kernel filter needs
root, ``iptables``/``nft`` or queueing disciplines that containers often lack, and network namespaces need a
bridge and routes), and kills and pauses of the nodes behind it stay real.  The proxies run on a Trio loop in a
thread of the supervisor.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import trio

log = logging.getLogger(__name__)

CLIENTS = "clients"
BUFFER = 65536


@dataclass
class _Proxy:
    name: str
    listen_host: str
    port: int = 0
    target: tuple[str, int] | None = None
    connections: set[trio.SocketStream] = field(default_factory=set)


class ProxyNetwork:
    """The proxies of one cluster and the links cut between its nodes (names: ``"controller"``, broker ids as
    text, ``"clients"``)."""

    def __init__(self) -> None:
        self._proxies: dict[str, _Proxy] = {}
        self._sources: dict[str, str] = {}  # source address -> node name
        self._cut: set[frozenset[str]] = set()
        self._changed: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- the loop ---------------------------------------------------------------------------------------------------
    def start(self) -> None:
        ready = threading.Event()

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            self._changed = trio.Event()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                ready.set()
                await trio.sleep_forever()

        self._thread = threading.Thread(target=trio.run, args=(main,), daemon=True, name="minikafka-proxies")
        self._thread.start()
        ready.wait(30)

    def _call(self, fn: Callable[..., object], *args: object) -> object:
        assert self._token is not None
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def close(self) -> None:
        if self._nursery is not None:
            self._call(self._nursery.cancel_scope.cancel)
        if self._thread is not None:
            self._thread.join(10)

    # -- nodes ------------------------------------------------------------------------------------------------------
    def add_node(self, name: str, address: str) -> int:
        """A proxy for node ``name`` on ``address`` (its connections to others come from there too); returns the
        proxy's port."""
        proxy = self._proxies[name] = _Proxy(name, address)
        self._sources[address] = name

        async def open_listener(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
            listeners = await trio.open_tcp_listeners(0, host=address)
            proxy.port = listeners[0].socket.getsockname()[1]
            task_status.started(proxy.port)
            await trio.serve_listeners(lambda stream: self._forward(proxy, cast(trio.SocketStream, stream)),
                                       listeners)

        async def start() -> int:
            assert self._nursery is not None
            return await self._nursery.start(open_listener)

        assert self._token is not None
        return trio.from_thread.run(start, trio_token=self._token)

    def set_target(self, name: str, host: str, port: int) -> None:
        """Where node ``name`` really listens (after each start)."""
        self._proxies[name].target = (host, port)

    def address(self, name: str) -> tuple[str, int]:
        proxy = self._proxies[name]
        return proxy.listen_host, proxy.port

    # -- links ------------------------------------------------------------------------------------------------------
    def partition(self, sides: list[list[str]]) -> None:
        """Cut every link between nodes of different ``sides``."""
        cut = {frozenset((a, b)) for i, side in enumerate(sides) for other in sides[i + 1:] for a in side
               for b in other}
        self._call(self._update, self._cut | cut)

    def heal(self) -> None:
        self._call(self._update, set())

    @property
    def cut_links(self) -> set[frozenset[str]]:
        return set(self._cut)

    def _update(self, cut: set[frozenset[str]]) -> None:
        self._cut = cut
        assert self._changed is not None
        self._changed.set()
        self._changed = trio.Event()

    def _open(self, a: str, b: str) -> bool:
        return frozenset((a, b)) not in self._cut

    async def _wait_open(self, a: str, b: str) -> None:
        while not self._open(a, b):
            assert self._changed is not None
            await self._changed.wait()

    # -- forwarding ---------------------------------------------------------------------------------------------------
    async def _forward(self, proxy: _Proxy, client: trio.SocketStream) -> None:
        source_host = client.socket.getpeername()[0]
        source = self._sources.get(source_host, CLIENTS)
        try:
            if proxy.target is None:
                return
            await self._wait_open(source, proxy.name)  # a connection across a cut link gets nowhere
            upstream = await trio.open_tcp_stream(*proxy.target)
        except OSError:
            await client.aclose()
            return
        async with client, upstream:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, client, upstream, source, proxy.name, nursery.cancel_scope)
                nursery.start_soon(self._pump, upstream, client, source, proxy.name, nursery.cancel_scope)

    async def _pump(self, src: trio.SocketStream, dst: trio.SocketStream, a: str, b: str,
                    scope: trio.CancelScope) -> None:
        try:
            while True:
                data = await src.receive_some(BUFFER)
                if not data:
                    break
                await self._wait_open(a, b)
                await dst.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        scope.cancel()
