"""The replay hub for synchronous code (the Spark driver): a :class:`~.server.HubServer` on its own Trio loop in
a background thread, started and stopped from any thread.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Self

import trio

from ....common import SYSTEM_CLOCK, Clock
from .outbox import DEFAULT_BATCH_INTERVAL_S
from .server import HubServer, HubStats

log = logging.getLogger(__name__)


class ReplayHub:
    """:class:`HubServer` on its own Trio loop in a background thread, for synchronous code (the Spark driver).

    ``host`` is the address tasks are told to connect to (the driver's ``spark.driver.host``); ``bind`` the
    address listened on (all interfaces by default: executors on other machines connect)."""

    def __init__(self, host: str | None = None, port: int = 0, bind: str = "0.0.0.0",
                 clock: Clock = SYSTEM_CLOCK, batch_interval_s: float = DEFAULT_BATCH_INTERVAL_S) -> None:
        self.bind = bind
        self.port = port
        self.host = host or (bind if bind not in ("0.0.0.0", "::", "") else _local_address())
        self.server = HubServer(clock, batch_interval_s)
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def stats(self) -> HubStats:
        return self.server.stats

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def now_ns(self) -> int:
        """The hub's clock (what tasks' clock offsets are relative to)."""
        return self.server.clock.time_ns()

    def start(self) -> tuple[str, int]:
        """Start listening; returns the (host, port) tasks connect to."""
        if self._thread is not None:
            raise RuntimeError("the replay hub is already started")
        self._thread = threading.Thread(target=self._run, name="replay-hub", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        log.info("replay hub listening on %s:%d (tasks connect to %s:%d)", self.bind, self.port, self.host, self.port)
        return self.address

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # the thread's end: handed to start() (failed to listen) or logged
            if not self._ready.is_set():
                self._error = exc
            else:
                log.exception("replay hub failed")
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                self.port = await nursery.start(self.server.serve, self.port, self.bind)
                self._ready.set()

    def stop(self) -> None:
        """Stop listening and drop the tasks' connections."""
        if self._thread is None:
            return
        if self._token is not None and self._scope is not None:
            try:
                self._token.run_sync_soon(self._scope.cancel)  # from any thread, even another Trio loop's
            except trio.RunFinishedError:
                pass
        self._thread.join()
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _local_address() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
