"""The Trio TCP front end (Kafka's ``SocketServer``: Acceptor + Processor).

One task per connection feeds the socket's bytes to a sans-I/O
:class:`~minikafka.protocol.framing.FrameDecoder`, hands each frame to
:class:`~minikafka.broker.apis.KafkaApis` and sends the
:class:`~minikafka.broker.request.Response` it returns before it reads the
next request, as Kafka does by muting a channel while a request is in flight;
pipelined requests wait in the decoder, so responses go out in request order.
The server knows nothing of capture, quotas or Produce: a quota that throttles
the request mutes the connection through its :class:`Channel` (the quota's
``ThrottleCallback``), and the server reads nothing more until it is unmuted.

Limits, as Kafka's: ``socket.request.max.bytes`` per frame; a frame's memory
grows as its bytes arrive and is charged to the broker's
``queued.max.request.bytes`` pool (when the pool is exhausted, connections that
need memory stop reading until a request completes); ``max.connections``
(new connections wait to be accepted), ``max.connections.per.ip`` (refused)
and ``connections.max.idle.ms`` (closed).  A frame that cannot be framed, an
unknown api key, an unsupported version or a body that does not parse closes
that connection with one log line; other connections carry on.
"""

from __future__ import annotations

import errno
import itertools
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import trio

from ..iovec import IOV_MAX, advance, byte_views
from ..protocol.framing import NEED_DATA, NEED_MEMORY, Frame, FrameDecoder, FrameError, MemoryPool
from .apis import CloseConnection, KafkaApis
from .config import BrokerConfig, StartupError
from .quota import ThrottledChannelReaper
from .request import Request

log = logging.getLogger(__name__)

_ids = itertools.count(1)
_COALESCE = 64 * 1024
# Kafka's Acceptor and trio's serve_listeners back off on these instead of failing.
ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
ACCEPT_BACKOFF_S = 0.1


async def send_frame(sock: trio.socket.SocketType, segments: list) -> None:
    """Send a size-prefixed frame made of ``segments`` (scatter-gather, no joining of large buffers)."""
    total = sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in segments)
    prefix = total.to_bytes(4, "big")
    if total <= _COALESCE:
        data = memoryview(prefix + b"".join(segments))
        while data:
            n = await sock.send(data)
            data = data[n:]
        return
    views = byte_views([prefix, *segments])
    i = 0
    while i < len(views):
        i = advance(views, i, await sock.sendmsg(views[i:i + IOV_MAX]))


@dataclass(slots=True)
class _Activity:
    """When a connection last received bytes, and whether it is waiting for more (idle closing)."""

    scope: trio.CancelScope
    last: float
    conn_id: str = ""
    peer: str = ""
    waiting: bool = False


class Channel:
    """One connection's mute state: the ``ThrottleCallback`` a quota uses (Kafka's channel muting)."""

    def __init__(self) -> None:
        self._mutes = 0
        self._unmuted = trio.Event()
        self._unmuted.set()

    def start_throttling(self) -> None:
        self._mutes += 1
        if self._mutes == 1:
            self._unmuted = trio.Event()

    def end_throttling(self) -> None:
        self._mutes = max(self._mutes - 1, 0)
        if self._mutes == 0:
            self._unmuted.set()

    @property
    def muted(self) -> bool:
        return self._mutes > 0

    async def wait_unmuted(self) -> None:
        if self._mutes:
            await self._unmuted.wait()


async def run_reaper(reaper: ThrottledChannelReaper) -> None:
    """Drive the quotas' delay queue: unmute each throttled channel when it is due."""
    wake = trio.Event()

    def schedule() -> None:
        wake.set()

    reaper.on_schedule = schedule
    try:
        while True:
            due = reaper.expire()
            wake = trio.Event()
            with trio.move_on_at(float("inf") if due is None else due):
                await wake.wait()
    finally:
        reaper.on_schedule = None


class SocketServer:
    """Accepts connections and runs one request loop per connection."""

    def __init__(self, config: BrokerConfig, apis: KafkaApis, pool: MemoryPool,
                 on_closed: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.apis = apis
        self.pool = pool
        self.on_closed = on_closed
        self.listeners: list[trio.SocketListener] = []
        self.open_connections = 0
        self.per_ip: Counter[str] = Counter()
        self.refused = 0
        self._slots = trio.CapacityLimiter(config.max_connections)
        self._memory_freed: trio.Event | None = None  # exists while a connection waits for memory
        pool.on_release = self._on_memory_released
        self._activity: dict[str, _Activity] = {}

    def _on_memory_released(self) -> None:
        if self._memory_freed is not None:
            self._memory_freed.set()
            self._memory_freed = None

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.config
        try:
            self.listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
        except OSError as exc:
            raise StartupError(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}") from exc
        bound = self.listeners[0].socket.getsockname()[1]
        if cfg.port == 0:
            cfg.port = bound
        log.info("broker %d listening on %s:%d", cfg.node_id, cfg.host, bound)
        async with trio.open_nursery() as nursery:
            for listener in self.listeners:
                nursery.start_soon(self._accept_loop, listener, nursery)
            nursery.start_soon(self._close_idle_connections)
            task_status.started(bound)

    async def _accept_loop(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        """Kafka's Acceptor: wait for a connection slot (``max.connections``), then accept."""
        async with listener:
            while True:
                token = object()  # holds one of the max.connections slots for the connection's life
                await self._slots.acquire_on_behalf_of(token)
                try:
                    stream = await listener.accept()
                except OSError as exc:
                    self._slots.release_on_behalf_of(token)
                    if exc.errno not in ACCEPT_CAPACITY_ERRNOS:
                        raise
                    log.error("accept returned %s (%s); retrying in %s seconds", errno.errorcode[exc.errno],
                              exc.strerror, ACCEPT_BACKOFF_S)
                    await trio.sleep(ACCEPT_BACKOFF_S)
                    continue
                except BaseException:
                    self._slots.release_on_behalf_of(token)
                    raise
                nursery.start_soon(self._run_connection, stream, token)

    async def _run_connection(self, stream: trio.SocketStream, token: object) -> None:
        try:
            await self.handle_connection(stream)
        finally:
            self._slots.release_on_behalf_of(token)

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        sock = stream.socket
        try:
            sock.setsockopt(trio.socket.IPPROTO_TCP, trio.socket.TCP_NODELAY, 1)
            peername = sock.getpeername()
            ip, peer = peername[0], f"{peername[0]}:{peername[1]}"
        except OSError:
            ip = peer = "?"
        conn_id = f"{self.config.node_id}-{next(_ids)}"
        if self.per_ip[ip] >= self.config.max_connections_per_ip:
            self.refused += 1
            log.warning("rejected connection from %s: it already has the configured maximum of %d connections "
                        "(max.connections.per.ip)", ip, self.config.max_connections_per_ip)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            return
        self.per_ip[ip] += 1
        self.open_connections += 1
        decoder = FrameDecoder(self.config.socket_request_max_bytes, pool=self.pool)
        activity = self._activity[conn_id] = _Activity(trio.CancelScope(), trio.current_time(), conn_id, peer)
        try:
            with activity.scope:
                await self._request_loop(sock, decoder, activity)
            if activity.scope.cancelled_caught:
                log.info("closing connection %s from %s: idle for more than %d ms (connections.max.idle.ms)",
                         conn_id, peer, self.config.connections_max_idle_ms)
        except (CloseConnection, FrameError) as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
            log.info("connection %s from %s dropped: %s", conn_id, peer, exc)
        except OSError as exc:
            log.info("connection %s from %s failed: %s", conn_id, peer, exc)
        except Exception:  # a bug must cost one connection, never the broker
            log.exception("closing connection %s from %s after an internal error", conn_id, peer)
        finally:
            del self._activity[conn_id]
            decoder.close()
            self.open_connections -= 1
            self.per_ip[ip] -= 1
            if not self.per_ip[ip]:
                del self.per_ip[ip]
            if self.on_closed is not None:
                self.on_closed(conn_id)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)

    async def _request_loop(self, sock: trio.socket.SocketType, decoder: FrameDecoder, activity: _Activity) -> None:
        channel = Channel()
        conn_id, peer = activity.conn_id, activity.peer
        while True:
            event = decoder.next_event()
            if event is NEED_DATA:
                activity.waiting = True
                view = decoder.frame_buffer()  # straight into the frame being filled, else read ahead
                if view is not None:
                    decoder.buffer_updated(await sock.recv_into(view))
                else:
                    decoder.receive_data(await sock.recv(decoder.read_size))
                activity.waiting = False
                activity.last = trio.current_time()
                continue
            if event is NEED_MEMORY:
                await self._wait_for_memory()
                continue
            if not isinstance(event, Frame):  # CLOSED
                return
            try:
                await self._serve_request(sock, channel, self.apis.parse(event.payload, conn_id, peer))
            finally:
                self.pool.release(event.pooled)

    async def _wait_for_memory(self) -> None:
        """Kafka mutes channels while the memory pool is exhausted; here the task waits for a release."""
        if self.pool.is_out_of_memory:
            if self._memory_freed is None:
                self._memory_freed = trio.Event()
            await self._memory_freed.wait()

    async def _serve_request(self, sock: trio.socket.SocketType, channel: Channel, request: Request) -> None:
        response = await self.apis.handle(request, channel)
        if response.hold_until_unmuted:  # pre-KIP-219 clients: the response waits out the throttle
            await channel.wait_unmuted()
        if response.segments is not None:
            await send_frame(sock, response.segments)
        response.sent_ns = self.apis.clock.monotonic_ns()
        self.apis.response_sent(response)
        if response.close_connection:
            raise CloseConnection(f"fault injection {response.injected}")
        await channel.wait_unmuted()  # muted: nothing more is read from this connection meanwhile

    async def _close_idle_connections(self) -> None:
        """``connections.max.idle.ms``: close connections that have been waiting for bytes that long
        (Kafka's ``Selector`` closes the oldest idle channel on each poll; here a sweep)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        while True:
            await trio.sleep(min(max(idle_s / 4, 0.01), 30))
            now = trio.current_time()
            for activity in list(self._activity.values()):
                if activity.waiting and now - activity.last > idle_s:
                    activity.scope.cancel()
