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

Listeners (Kafka's ``listeners``): every configured endpoint is bound; each
connection knows its listener and security protocol, and every request's
:class:`~minikafka.broker.request.RequestContext` carries the listener name and
the connection's principal.  PLAINTEXT and SASL_PLAINTEXT connections read the
socket directly (``recv_into`` the frame being filled, scatter-gather
``sendmsg``); SSL and SASL_SSL connections go through a ``trio.SSLStream``
(:class:`TlsTransport`) after the TLS handshake, where a client certificate's
subject, mapped by ``ssl.principal.mapping.rules``, is the principal of an SSL
listener.  On SASL listeners a connection authenticates first
(:class:`~minikafka.broker.security.authenticator.SaslServerAuthenticator`: only
ApiVersions reaches KafkaApis before that), may re-authenticate with a
SaslHandshake, and is closed when a request arrives after its session expired
(``connections.max.reauth.ms``, KIP-368).

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
import functools
import itertools
import logging
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from ..common import Clock
from ..iovec import IOV_MAX, advance, byte_views
from ..protocol.api import ApiKey
from ..protocol.framing import NEED_DATA, NEED_MEMORY, Frame, FrameDecoder, FrameError, MemoryPool
from .apis import CloseConnection, KafkaApis
from .config import BrokerConfig, StartupError
from .quota import ThrottledChannelReaper
from .request import ClientInformation, Request
from .security.authenticator import AuthAction, SaslServerAuthenticator, SaslServerMechanism
from .security.listeners import EndPoint
from .security.ssl import ANONYMOUS, NoMatchingRule, SslPrincipalMapper, principal_mapper, server_context, ssl_principal

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


class SocketTransport:
    """A plaintext connection's socket: reads straight into the frame being filled, sends scatter-gather
    (the socket's own methods and :func:`send_frame`, bound once: no extra call per request)."""

    __slots__ = ("sock", "recv_into", "recv", "send_frame")

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.recv_into = sock.recv_into
        self.recv = sock.recv
        self.send_frame: Callable[[list], Awaitable[None]] = functools.partial(send_frame, sock)


class TlsTransport:
    """A TLS connection (SSL, SASL_SSL listeners): the same reads and sends through a ``trio.SSLStream``."""

    __slots__ = ("stream",)

    def __init__(self, stream: trio.SSLStream[trio.SocketStream]) -> None:
        self.stream = stream

    async def recv_into(self, view: memoryview) -> int:
        data = await self.stream.receive_some(len(view))
        n = len(data)
        view[:n] = data
        return n

    async def recv(self, max_bytes: int) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    async def send_frame(self, segments: list) -> None:
        """Size prefix and small segments coalesced into TLS records of up to 64 KiB; large ones as they are."""
        total = sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in segments)
        pending = [total.to_bytes(4, "big")]
        size = 4
        for seg in segments:
            n = seg.nbytes if isinstance(seg, memoryview) else len(seg)
            if n >= _COALESCE:
                if pending:
                    await self.stream.send_all(b"".join(pending))
                    pending, size = [], 0
                await self.stream.send_all(seg)
                continue
            if size + n > _COALESCE:
                await self.stream.send_all(b"".join(pending))
                pending, size = [], 0
            pending.append(seg)
            size += n
        if pending:
            await self.stream.send_all(b"".join(pending))


Transport = SocketTransport | TlsTransport


class SaslMechanisms(Protocol):
    """The SASL mechanisms a SASL listener offers and the server side of each (the broker wires
    :mod:`minikafka.broker.security.sasl` with its SCRAM credentials)."""

    authentication_error: type[Exception]

    def enabled(self, listener: str) -> list[str]: ...

    def create(self, listener: str, mechanism: str) -> SaslServerMechanism: ...


class Listener:
    """One bound endpoint and what its connections need: the TLS context (SSL, SASL_SSL), the principal
    mapping of client certificates (SSL) and the SASL mechanisms (SASL_*)."""

    def __init__(self, config: BrokerConfig, endpoint: EndPoint, sasl: SaslMechanisms | None) -> None:
        self.endpoint = endpoint
        self.name = endpoint.listener
        self.config = config
        self.ssl_context: ssl.SSLContext | None = server_context(config, endpoint) if endpoint.tls else None
        self.mapper: SslPrincipalMapper | None = (principal_mapper(config, endpoint.listener)
                                                  if endpoint.security_protocol == "SSL" else None)
        self.sasl = sasl
        self.mechanisms: list[str] = []
        if endpoint.sasl:
            if sasl is None:
                raise StartupError(f"listener {endpoint.listener} uses {endpoint.security_protocol} but this broker "
                                   "has no SASL mechanisms")
            self.mechanisms = sasl.enabled(endpoint.listener)
        self.bound_port = endpoint.port
        self.sockets: list[trio.SocketListener] = []

    def authenticator(self, clock: Clock) -> SaslServerAuthenticator | None:
        """A new connection's SASL state (None on listeners without SASL)."""
        if not self.endpoint.sasl:
            return None
        sasl = self.sasl
        assert sasl is not None
        name, config = self.name, self.config
        return SaslServerAuthenticator(name, self.mechanisms, lambda mech: sasl.create(name, mech),
                                       lambda mech: config.connections_max_reauth_ms_for(name, mech),
                                       clock, sasl.authentication_error)


@dataclass(slots=True)
class _Activity:
    """When a connection last received bytes, whether it is waiting for more (idle closing), and the client
    software its ApiVersions named."""

    scope: trio.CancelScope
    last: float
    conn_id: str = ""
    peer: str = ""
    waiting: bool = False
    client_information: ClientInformation = field(default_factory=ClientInformation)  # from its ApiVersions


class _AuthenticationFailed(Exception):
    """The connection failed to authenticate (SASL, or a client certificate no mapping rule fits): closed."""


class _TlsHandshakeFailed(_AuthenticationFailed):
    """The TLS handshake failed (a plaintext client on a TLS port, an untrusted certificate ...)."""


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
                 on_closed: Callable[[str], None] | None = None, *, sasl: SaslMechanisms | None = None,
                 on_authenticated: Callable[[str, SaslServerAuthenticator], None] | None = None) -> None:
        """``sasl``: the mechanisms of SASL listeners; ``on_authenticated(connection_id, authenticator)`` is
        told of every completed SASL authentication and re-authentication (metrics, tests)."""
        self.config = config
        self.apis = apis
        self.pool = pool
        self.on_closed = on_closed
        self.on_authenticated = on_authenticated
        self.endpoints: list[Listener] = [Listener(config, e, sasl) for e in config.listener_endpoints()]
        self.listeners: list[trio.SocketListener] = []
        self.failed_authentications = 0
        self.expired_connections_killed = 0  # Kafka's expired-connections-killed-count
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

    @property
    def bound_ports(self) -> dict[str, int]:
        """Listener name -> the port it is bound to (a configured port of 0 replaced once bound)."""
        return {lst.name: lst.bound_port for lst in self.endpoints}

    async def serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Bind every listener, then accept on all of them; started with the first listener's port."""
        cfg = self.config
        for lst in self.endpoints:
            e = lst.endpoint
            try:
                lst.sockets = await trio.open_tcp_listeners(e.port, host=e.host or None)
            except OSError as exc:
                for bound in self.listeners:
                    await bound.aclose()
                raise StartupError(f"cannot listen on {e.host}:{e.port} (listener {e.listener}): "
                                   f"{exc.strerror or exc}") from exc
            lst.bound_port = lst.sockets[0].socket.getsockname()[1]
            self.listeners.extend(lst.sockets)
            log.info("broker %d listening on %s://%s:%d (%s)", cfg.node_id, e.listener, e.host, lst.bound_port,
                     e.security_protocol)
        first = self.endpoints[0].bound_port
        if cfg.port == 0:
            cfg.port = first
        if cfg.listeners and any(lst.endpoint.port == 0 for lst in self.endpoints[1:]):
            # a restart (BrokerThread.restart, Cluster.start_broker) binds the same ports again
            cfg.listeners = ",".join(lst.endpoint.with_port(lst.bound_port).connection_string
                                     for lst in self.endpoints)
        async with trio.open_nursery() as nursery:
            for lst in self.endpoints:
                for sock_listener in lst.sockets:
                    nursery.start_soon(self._accept_loop, sock_listener, lst, nursery)
            nursery.start_soon(self._close_idle_connections)
            task_status.started(first)

    async def _accept_loop(self, listener: trio.SocketListener, endpoint: Listener, nursery: trio.Nursery) -> None:
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
                nursery.start_soon(self._run_connection, stream, endpoint, token)

    async def _run_connection(self, stream: trio.SocketStream, endpoint: Listener, token: object) -> None:
        try:
            await self.handle_connection(stream, endpoint)
        finally:
            self._slots.release_on_behalf_of(token)

    async def handle_connection(self, stream: trio.SocketStream, endpoint: Listener | None = None) -> None:
        endpoint = endpoint or self.endpoints[0]
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
        closing: trio.abc.AsyncResource = stream
        try:
            with activity.scope:
                transport: Transport
                principal = ANONYMOUS
                if endpoint.ssl_context is not None:
                    tls = trio.SSLStream(stream, endpoint.ssl_context, server_side=True, https_compatible=True)
                    closing = tls
                    activity.waiting = True
                    principal = await self._tls_handshake(tls, endpoint)
                    activity.waiting = False
                    transport = TlsTransport(tls)
                else:
                    transport = SocketTransport(sock)
                await self._request_loop(transport, decoder, activity, endpoint, principal)
            if activity.scope.cancelled_caught:
                log.info("closing connection %s from %s: idle for more than %d ms (connections.max.idle.ms)",
                         conn_id, peer, self.config.connections_max_idle_ms)
        except _AuthenticationFailed as exc:
            self.failed_authentications += 1
            log.info("Failed authentication with %s (channelId=%s) (%s)", peer, conn_id, exc)
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
                await trio.aclose_forcefully(closing)

    async def _tls_handshake(self, tls: trio.SSLStream[trio.SocketStream], endpoint: Listener) -> str:
        """The TLS handshake (Kafka's ``SslTransportLayer.handshake``); returns the connection's principal on an
        SSL listener: the client certificate's mapped subject, else ``User:ANONYMOUS``."""
        try:
            await tls.do_handshake()
        except trio.BrokenResourceError as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            raise _TlsHandshakeFailed(f"SSL handshake failed: {cause}") from None
        if endpoint.mapper is None:
            return ANONYMOUS
        try:
            return ssl_principal(tls.getpeercert(binary_form=True), endpoint.mapper)
        except NoMatchingRule as exc:
            raise _AuthenticationFailed(str(exc)) from None
        except (ValueError, IndexError) as exc:
            raise _AuthenticationFailed(f"cannot read the client certificate's subject: {exc}") from None

    async def _request_loop(self, transport: Transport, decoder: FrameDecoder, activity: _Activity,
                            endpoint: Listener, principal: str) -> None:
        channel = Channel()
        conn_id, peer = activity.conn_id, activity.peer
        listener = endpoint.name
        auth = endpoint.authenticator(self.apis.clock)
        if auth is not None:
            decoder.max_frame_size = min(self.config.socket_request_max_bytes, self.config.sasl_server_max_receive_size)
        recv_into, recv = transport.recv_into, transport.recv
        while True:
            event = decoder.next_event()
            if event is NEED_DATA:
                activity.waiting = True
                view = decoder.frame_buffer()  # straight into the frame being filled, else read ahead
                if view is not None:
                    decoder.buffer_updated(await recv_into(view))
                else:
                    decoder.receive_data(await recv(decoder.read_size))
                activity.waiting = False
                activity.last = trio.current_time()
                continue
            if event is NEED_MEMORY:
                await self._wait_for_memory()
                continue
            if not isinstance(event, Frame):  # CLOSED
                return
            try:
                if auth is not None and await self._sasl_frame(auth, transport, channel, decoder, event.payload,
                                                               activity, listener):
                    principal = auth.principal or ANONYMOUS
                    continue
                request = self.apis.parse(event.payload, conn_id, peer)
                ctx = request.context
                ctx.listener = listener
                ctx.principal = principal
                ctx.security_protocol = endpoint.endpoint.security_protocol
                ctx.token_authenticated = auth is not None and auth.token_authenticated
                ctx.client_information = activity.client_information
                await self._serve_request(transport, channel, request)
            finally:
                self.pool.release(event.pooled)

    async def _sasl_frame(self, auth: SaslServerAuthenticator, transport: Transport, channel: Channel,
                          decoder: FrameDecoder, frame: bytearray, activity: _Activity, listener: str) -> bool:
        """A frame on a SASL listener: True when the authenticator took it (authentication, re-authentication);
        False for a request KafkaApis is to answer.  Closes an expired session (Kafka's Processor)."""
        if auth.complete:
            now = self.apis.clock.monotonic_ns()
            is_handshake = len(frame) >= 2 and int.from_bytes(frame[:2], "big") == ApiKey.SASL_HANDSHAKE
            if not (is_handshake and auth.maybe_begin_reauthentication(now)):
                if auth.session_expired(now):
                    self.expired_connections_killed += 1
                    raise CloseConnection("the SASL session expired (connections.max.reauth.ms or credential "
                                          "lifetime) and the client did not re-authenticate")
                return False
        action: AuthAction = auth.receive(frame)
        if auth.complete:  # told before the client sees the response
            decoder.max_frame_size = self.config.socket_request_max_bytes
            if self.on_authenticated is not None:
                self.on_authenticated(activity.conn_id, auth)
        if action.forward:  # ApiVersions before authentication: KafkaApis answers it
            request = self.apis.parse(frame, activity.conn_id, activity.peer)
            request.context.listener = listener
            request.context.client_information = activity.client_information
            await self._serve_request(transport, channel, request)
        elif action.response is not None:
            await transport.send_frame(action.response)
        if action.close is not None:
            raise _AuthenticationFailed(action.close)
        return True

    async def _wait_for_memory(self) -> None:
        """Kafka mutes channels while the memory pool is exhausted; here the task waits for a release."""
        if self.pool.is_out_of_memory:
            if self._memory_freed is None:
                self._memory_freed = trio.Event()
            await self._memory_freed.wait()

    async def _serve_request(self, transport: Transport, channel: Channel, request: Request) -> None:
        response = await self.apis.handle(request, channel)
        try:
            if response.hold_until_unmuted:  # pre-KIP-219 clients: the response waits out the throttle
                await channel.wait_unmuted()
            if response.segments is not None:
                await transport.send_frame(response.segments)
        finally:
            # Also when the client went away (or the broker stopped) before the response left: the request
            # was received, counted and answered, so its observers (the capture) see it too.
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
