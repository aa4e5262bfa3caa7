"""The Trio TCP front end (Kafka's ``SocketServer``: Acceptor + Processor).

One task per connection feeds the socket's bytes to a sans-I/O
:class:`~minikafka.protocol.framing.FrameDecoder` and hands each frame to
:class:`~minikafka.broker.apis.KafkaApis`, one request at a time and in order,
as Kafka does by muting a channel while a request is in flight; responses go
out in request order.  Requests a client pipelined and that were read in one go
are handled one after the other, and their responses leave together, with one
write, once nothing more is buffered (Kafka's processor sends every response
that is ready): a :class:`ResponseQueue` per connection.  A response is never
held behind a request that waits: whatever is queued is written before the
handling of a request first gives up the CPU (a long-polling Fetch, an acks=all
Produce, a JoinGroup, an injected delay), before the connection waits for
memory or a throttle, and before it reads.  On a plaintext socket writes are
made without waiting (``writev`` on the non-blocking socket; the scheduler is
involved only when the socket's buffer is full), and so are reads (the socket
is read directly; the scheduler is involved only when nothing has arrived, or
once every few reads for fairness), and a request's handling is driven by the
loop itself up to its first wait, so a request answered at once costs no trip
through the scheduler and no awaitable.  On TLS the responses queued together
are coalesced into TLS records sent together as well.  The server knows
nothing of capture, quotas or Produce: a quota that throttles the request mutes the connection
through its :class:`Channel` (the quota's ``ThrottleCallback``), and the server
reads nothing more until it is unmuted.  Observers are told of each response
(``sent_ns``) once it left, in request order, also when the client is gone.

Listeners (Kafka's ``listeners``): every configured endpoint is bound; each
connection knows its listener and security protocol, and every request's
:class:`~minikafka.broker.request.RequestContext` carries the listener name and
the connection's principal.  PLAINTEXT and SASL_PLAINTEXT connections read the
socket directly (``recv_into`` the frame being filled, scatter-gather
``writev``); SSL and SASL_SSL connections go through a ``trio.SSLStream``
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

import contextlib
import errno
import functools
import itertools
import logging
import os
import socket
import ssl
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..common import Clock
from ..iovec import IOV_MAX, advance, byte_views, frame_views, joined_or_views, write_nowait
from ..protocol.api import ApiKey
from ..protocol.framing import NEED_DATA, NEED_MEMORY, Frame, FrameDecoder, FrameError, MemoryPool
from .apis import CloseConnection, KafkaApis
from .config import BrokerConfig, StartupError
from .network_links import LinkGate, NetworkLinks
from .quota import ThrottledChannelReaper
from .request import ClientInformation, Request, Response
from .security.listeners import ANONYMOUS, EndPoint

if TYPE_CHECKING:  # SASL and TLS: loaded by the listeners that use them
    from .security.authenticator import AuthAction, SaslServerAuthenticator, SaslServerMechanism
    from .security.ssl import SslPrincipalMapper

log = logging.getLogger(__name__)

_ids = itertools.count(1)
_COALESCE = 64 * 1024
# SO_RCVLOWAT while a large frame is filled: woken when this much of it (at most _RCVLOWAT_MAX) has arrived
_RCVLOWAT_MIN = 128 * 1024
_RCVLOWAT_MAX = 512 * 1024
_SO_RCVLOWAT: int | None = getattr(socket, "SO_RCVLOWAT", None)
_MAX_QUEUED = 16  # responses a connection queues before it writes them (ResponseQueue)
_EAGER_READS = 8  # reads that found bytes waiting before a connection lets the other tasks run (SocketTransport)
_readv, _read = os.readv, os.read
_wait_readable = trio.lowlevel.wait_readable
# Kafka's Acceptor and trio's serve_listeners back off on these instead of failing.
ACCEPT_CAPACITY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
ACCEPT_BACKOFF_S = 0.1
_TRANSPORT_ERRORS = (OSError, trio.BrokenResourceError, trio.ClosedResourceError)


async def send_frame(sock: trio.socket.SocketType, segments: list) -> None:
    """Send a size-prefixed frame made of ``segments`` (scatter-gather, no joining of large buffers)."""
    views = frame_views(segments, _COALESCE)
    i = 0
    while i < len(views):
        i = advance(views, i, await sock.sendmsg(views[i:i + IOV_MAX]))


async def _gated_send_frame(gate: LinkGate, sock: trio.socket.SocketType, segments: list) -> None:
    """:func:`send_frame` once ``gate`` is open."""
    await gate.wait_open()
    await send_frame(sock, segments)


class SocketTransport:
    """A plaintext connection's socket: reads straight into the frame being filled (the socket's own methods,
    bound once); writes without waiting (``writev`` on the non-blocking socket, so a response that fits in the
    socket's buffer costs no trip through the scheduler) and waits for room only when the buffer is full."""

    __slots__ = ("sock", "send_frame", "gate", "_fd", "_lowat", "_eager")

    def __init__(self, sock: trio.socket.SocketType, gate: LinkGate | None = None) -> None:
        """``gate``: while it is closed (a paused broker, a cut link) nothing is written."""
        self.sock = sock
        self.gate = gate
        self.send_frame: Callable[[list], Awaitable[None]] = functools.partial(send_frame, sock)
        if gate is not None:
            self.send_frame = functools.partial(_gated_send_frame, gate, sock)
        self._fd = sock.fileno()
        self._lowat = 1
        self._eager = 0  # reads in a row that found bytes waiting (no trip through the scheduler)

    async def recv_into(self, view: memoryview) -> int:
        """Read what has arrived straight into ``view`` (0: end of stream), as :meth:`_read` reads."""
        return await self._read(_readv, (view,))

    async def recv(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of what has arrived (empty: end of stream), as :meth:`_read` reads."""
        return await self._read(_read, max_bytes)

    async def _read(self, read: Callable[[int, Any], Any], arg: Any) -> Any:
        """``read(fd, arg)`` on the non-blocking socket, directly: the scheduler is involved only when nothing
        has arrived yet (trio's ``wait_readable``), or once every ``_EAGER_READS`` reads so that a connection
        whose client never lets up cannot hold the others (and a cancellation is seen)."""
        while True:
            try:
                got = read(self._fd, arg)
            except BlockingIOError:
                self._eager = 0
                await _wait_readable(self.sock)
                continue
            self._eager += 1
            if self._eager >= _EAGER_READS:
                self._eager = 0
                await trio.lowlevel.checkpoint()
            return got

    def wake_after(self, nbytes: int) -> None:
        """Be woken for reading only once ``nbytes`` (capped) have arrived, the rest of a large frame being
        filled (``SO_RCVLOWAT``: one wake-up per few hundred KiB rather than per TCP segment); 1 otherwise."""
        want = min(nbytes, _RCVLOWAT_MAX) if nbytes >= _RCVLOWAT_MIN else 1
        if want != self._lowat:
            self._lowat = want
            if _SO_RCVLOWAT is not None:
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, _SO_RCVLOWAT, want)
                except OSError:  # a socket without it: woken at each arrival, as before
                    pass

    def write_nowait(self, views: list[memoryview], i: int = 0) -> int:
        """Write ``views[i:]`` as far as the socket takes them now; the index of the first view not written."""
        gate = self.gate
        if gate is not None and gate.links.active and gate.blocked():
            return i  # nothing leaves a paused broker or crosses a cut link
        return write_nowait(self._fd, views, i)

    async def wait_writable(self) -> None:
        gate = self.gate
        if gate is not None and gate.blocked():
            await gate.wait_open()  # the caller writes again
            return
        await trio.lowlevel.wait_writable(self.sock)


class TlsTransport:
    """A TLS connection (SSL, SASL_SSL listeners): the same reads and sends through a ``trio.SSLStream`` (a TLS
    stream cannot be written without waiting: queued responses leave together from ``send_buffers``)."""

    __slots__ = ("stream", "gate")

    def __init__(self, stream: trio.SSLStream[trio.SocketStream], gate: LinkGate | None = None) -> None:
        """``gate``: while it is closed (a paused broker, a cut link) nothing is sent."""
        self.stream = stream
        self.gate = gate

    async def recv_into(self, view: memoryview) -> int:
        data = await self.stream.receive_some(len(view))
        n = len(data)
        view[:n] = data
        return n

    async def recv(self, max_bytes: int) -> bytes | bytearray:
        return await self.stream.receive_some(max_bytes)

    def wake_after(self, nbytes: int) -> None:
        """Nothing: TLS records are read as they come."""

    async def send_frame(self, segments: list) -> None:
        """A size-prefixed frame made of ``segments`` (see :meth:`send_buffers`)."""
        total = sum(s.nbytes if isinstance(s, memoryview) else len(s) for s in segments)
        await self.send_buffers([total.to_bytes(4, "big"), *segments])

    async def send_buffers(self, buffers: list) -> None:
        """``buffers`` in order: small ones coalesced into TLS records of up to 64 KiB (the responses queued
        together leave in one send), large ones as they are."""
        if self.gate is not None:
            await self.gate.wait_open()
        pending: list = []
        size = 0
        for seg in buffers:
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


class ResponseQueue:
    """One connection's responses that are ready to leave, in request order (Kafka's Processor sends every
    response that is ready; the channel's queued sends).

    On a plaintext socket the responses to the requests read in one go are written together (one ``writev``)
    when the connection has nothing more to handle, when ``_MAX_QUEUED`` responses or ``_COALESCE`` bytes are
    queued, and before anything waits: the request loop flushes before it reads, waits for memory or for a
    throttle, and :meth:`before_park` writes what is queued when a request's handling is about to wait (a
    long-polling Fetch, an acks=all Produce, a JoinGroup ...), so a ready response is never held behind a
    waiting request.  Should the socket's buffer be full just then, a task of the server's ``nursery``
    finishes the write.  On TLS the queued responses are coalesced the same way, into TLS records of up to
    64 KiB sent together; as a TLS stream cannot be written without waiting, :meth:`before_park` hands them to
    a task of the ``nursery``.  Without a nursery each response is sent as it is ready.

    ``sent(response)`` is told of every response, in request order, once its bytes left (``sent_ns`` set:
    one clock read per write) or, by :meth:`abandon`, when the connection ends before they could.
    """

    __slots__ = ("transport", "coalesces", "_socket", "_tls", "_now", "_sent", "_nursery", "_responses",
                 "_segments", "_nbytes", "_views", "_next", "_writer", "_failure")

    def __init__(self, transport: Transport, clock: Clock, sent: Callable[[Response], None],
                 nursery: trio.Nursery | None = None) -> None:
        self.transport = transport
        # written without waiting: a plaintext socket, with a nursery for a write to finish in (before_park)
        self._socket = transport if isinstance(transport, SocketTransport) and nursery is not None else None
        # coalesced too, each write awaited (in a task of the nursery while a request waits)
        self._tls = transport if isinstance(transport, TlsTransport) and nursery is not None else None
        self.coalesces = self._socket is not None or self._tls is not None
        self._now = clock.monotonic_ns
        self._sent = sent
        self._nursery = nursery
        self._responses: list[Response] = []  # queued and not yet told (all their bytes are in _segments/_views)
        self._segments: list = []  # frames (size prefix, then the response's buffers) not yet in _views
        self._nbytes = 0  # bytes in _segments
        self._views: list[memoryview] = []  # bytes being written: _views[_next:] still to go
        self._next = 0
        self._writer: trio.Event | None = None  # set when a background write (see before_park) ends
        self._failure: BaseException | None = None  # the write error a background write or before_park met

    def __len__(self) -> int:
        return len(self._responses)

    def add(self, response: Response) -> None:
        """Queue a response (one without a frame, e.g. acks=0, is only told, in its turn)."""
        self._responses.append(response)
        segments = response.segments
        if segments is not None:
            total = 0
            for s in segments:
                total += s.nbytes if isinstance(s, memoryview) else len(s)
            self._segments.append(total.to_bytes(4, "big"))
            self._segments += segments
            self._nbytes += total + 4

    @property
    def full(self) -> bool:
        """Enough is queued to write it now rather than wait for more."""
        return not self.coalesces or len(self._responses) >= _MAX_QUEUED or self._nbytes >= _COALESCE

    def add_now(self, response: Response) -> None:
        """Queue and write at once a response another task completed while this connection's request waits
        (a delayed fetch completed by an append: Kafka's ``DelayedFetch`` completed by the produce); the
        request's handling already wrote what was queued before it (``before_park``), so the order holds."""
        self.add(response)
        self.before_park()

    def before_park(self) -> None:
        """The request being handled is about to wait: what is queued leaves now.  Never raises (it runs while
        the handling's wait is being set up): an error is raised by the next :meth:`flush`."""
        if not self._responses or self._writer is not None or self._failure is not None:
            return
        if self._socket is not None:
            try:
                if self._write():
                    return
            except Exception as exc:  # the client went away (or an observer failed: logged)
                if not isinstance(exc, OSError):
                    log.exception("writing responses failed")
                self._failure = exc
                return
        assert self._nursery is not None
        self._writer = trio.Event()
        self._nursery.start_soon(self._write_in_background, self._writer)

    async def flush(self) -> None:
        """Send everything queued, waiting for the socket as needed."""
        if self._writer is not None:
            await self._writer.wait()
        if self._failure is not None:
            raise self._failure
        if not self._responses:
            return
        if self._socket is not None:
            while not self._write():
                await self._socket.wait_writable()
        elif self._tls is not None:
            await self._send_tls()
        else:
            await self._send_each()

    def abandon(self) -> None:
        """The connection ended: tell of every response still queued (their ``sent_ns`` now)."""
        self._segments, self._views, self._nbytes, self._next = [], [], 0, 0
        self._told()

    def _write(self) -> bool:
        """Write what the socket takes now; True (every queued response told) when nothing is left."""
        if self._segments:
            if self._views:
                self._views += byte_views(self._segments)
            else:
                self._views = joined_or_views(self._segments, self._nbytes, _COALESCE)
            self._segments, self._nbytes = [], 0
        assert self._socket is not None
        i = self._socket.write_nowait(self._views, self._next)
        if i < len(self._views):
            self._next = i
            return False
        self._views, self._next = [], 0
        self._told()
        return True

    def _told(self) -> None:
        responses = self._responses
        if responses:
            self._responses = []
            now = self._now()
            for response in responses:
                response.sent_ns = now
                self._sent(response)

    async def _send_tls(self) -> None:
        """TLS: what is queued, coalesced (told once it left; a response queued meanwhile leaves next)."""
        assert self._tls is not None
        while self._responses:
            responses, segments = self._responses, self._segments
            self._responses, self._segments, self._nbytes = [], [], 0
            try:
                await self._tls.send_buffers(segments)
            except BaseException:
                self._responses[:0] = responses  # told by abandon(), in their turn
                raise
            now = self._now()
            for response in responses:
                response.sent_ns = now
                self._sent(response)

    async def _send_each(self) -> None:
        """Without a nursery: each response sent on its own (told as it leaves)."""
        self._segments, self._nbytes = [], 0
        while self._responses:
            response = self._responses[0]
            if response.segments is not None:
                await self.transport.send_frame(response.segments)
            del self._responses[0]
            response.sent_ns = self._now()
            self._sent(response)

    async def _write_in_background(self, done: trio.Event) -> None:
        """Finish a write the socket's buffer could not take while the connection's request waits (ends at
        the latest when the connection closes its socket); on TLS, the send of what is queued."""
        try:
            if self._tls is not None:
                await self._send_tls()
            else:
                assert self._socket is not None
                while self._responses and not self._write():
                    await self._socket.wait_writable()
        except _TRANSPORT_ERRORS as exc:
            self._failure = exc
        except Exception as exc:  # a bug must cost one connection, never the broker
            log.exception("writing responses failed")
            self._failure = exc
        finally:
            self._writer = None
            done.set()


class _Resume:
    """Awaits the rest of a request's handling that gave up the CPU after the server drove it to its first trap
    (``coro.send(None)``: handling that completes at once costs no awaitable at all); from there on, what
    ``await coro`` does: the scheduler's traps and answers go through."""

    __slots__ = ("_coro", "_trap")

    def __init__(self, coro: Coroutine[Any, Any, Response], trap: Any) -> None:
        self._coro = coro
        self._trap = trap

    def __await__(self) -> Generator[Any, Any, Response]:
        coro, trap = self._coro, self._trap
        while True:
            try:
                answer = yield trap
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown in (trio sends outcomes; kept for any other driver)
                try:
                    trap = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    trap = coro.send(answer)
                except StopIteration as done:
                    return done.value


class SaslMechanisms(Protocol):
    """The SASL mechanisms a SASL listener offers and the server side of each (the broker wires
    :mod:`minikafka.broker.security.sasl` with its SCRAM credentials)."""

    @property
    def authentication_error(self) -> type[Exception]: ...

    def enabled(self, listener: str) -> list[str]: ...

    def create(self, listener: str, mechanism: str) -> SaslServerMechanism: ...


class Listener:
    """One bound endpoint and what its connections need: the TLS context (SSL, SASL_SSL), the principal
    mapping of client certificates (SSL) and the SASL mechanisms (SASL_*)."""

    def __init__(self, config: BrokerConfig, endpoint: EndPoint, sasl: SaslMechanisms | None) -> None:
        self.endpoint = endpoint
        self.name = endpoint.listener
        self.config = config
        self.ssl_context: ssl.SSLContext | None = None
        self.mapper: SslPrincipalMapper | None = None
        if endpoint.tls:
            from .security.ssl import principal_mapper, server_context

            self.ssl_context = server_context(config, endpoint)
            if endpoint.security_protocol == "SSL":
                self.mapper = principal_mapper(config, endpoint.listener)
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
        from .security.authenticator import SaslServerAuthenticator

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
    gate: LinkGate | None = None  # a broker of a cluster: paused, or its link to the peer cut
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
                 on_authenticated: Callable[[str, SaslServerAuthenticator], None] | None = None,
                 links: NetworkLinks | None = None, processing: bool = True) -> None:
        """``sasl``: the mechanisms of SASL listeners; ``on_authenticated(connection_id, authenticator)`` is
        told of every completed SASL authentication and re-authentication (metrics, tests); ``links``: a
        cluster's paused brokers and cut links (no request is handled, no response written across them);
        ``processing`` False: the listeners are bound but accept nothing until :meth:`enable_request_processing`
        (a broker that must first catch up with its controller's metadata log)."""
        self.config = config
        self._processing = trio.Event()
        if processing:
            self._processing.set()
        self.links = links
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
        self._nursery: trio.Nursery | None = None  # the connections' (a response write may finish in it)

    def _on_memory_released(self) -> None:
        if self._memory_freed is not None:
            self._memory_freed.set()
            self._memory_freed = None

    def enable_request_processing(self) -> None:
        """Start accepting connections (Kafka's ``SocketServer.enableRequestProcessing``, once a broker has caught
        up with the metadata log: before, a client would be told of no topic at all)."""
        self._processing.set()

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
            self._nursery = nursery
            for lst in self.endpoints:
                for sock_listener in lst.sockets:
                    nursery.start_soon(self._accept_loop, sock_listener, lst, nursery)
            nursery.start_soon(self._close_idle_connections)
            task_status.started(first)

    async def _accept_loop(self, listener: trio.SocketListener, endpoint: Listener, nursery: trio.Nursery) -> None:
        """Kafka's Acceptor: wait for a connection slot (``max.connections``), then accept."""
        async with listener:
            await self._processing.wait()
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
            address: tuple[str, int] | None = (peername[0], peername[1])
        except OSError:
            ip = peer = "?"
            address = None
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
        if self.links is not None:
            activity.gate = LinkGate(self.links, self.config.node_id, address)
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
                    transport = TlsTransport(tls, activity.gate)
                else:
                    transport = SocketTransport(sock, activity.gate)
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
        from .security.ssl import NoMatchingRule, ssl_principal

        try:
            return ssl_principal(tls.getpeercert(binary_form=True), endpoint.mapper)
        except NoMatchingRule as exc:
            raise _AuthenticationFailed(str(exc)) from None
        except (ValueError, IndexError) as exc:
            raise _AuthenticationFailed(f"cannot read the client certificate's subject: {exc}") from None

    async def _request_loop(self, transport: Transport, decoder: FrameDecoder, activity: _Activity,
                            endpoint: Listener, principal: str) -> None:
        """Handle the connection's requests one at a time, in order; the responses to requests that arrived
        together leave together (:class:`ResponseQueue`), each told to the observers once it left."""
        channel = Channel()
        out = ResponseQueue(transport, self.apis.clock, self.apis.response_sent, self._nursery)
        try:
            await self._handle_frames(transport, decoder, activity, endpoint, principal, channel, out)
        except Exception as exc:
            if not isinstance(exc, _TRANSPORT_ERRORS):  # a bad frame, a failed authentication, a bug ...
                with contextlib.suppress(*_TRANSPORT_ERRORS):
                    await out.flush()  # ... closes the connection after the earlier requests' responses left
            raise
        finally:
            # Also when the client went away (or the broker stopped) before the responses left: the requests
            # were received, counted and answered, so their observers (the capture) see them too.
            out.abandon()

    async def _handle_frames(self, transport: Transport, decoder: FrameDecoder, activity: _Activity,
                             endpoint: Listener, principal: str, channel: Channel, out: ResponseQueue) -> None:
        conn_id, peer = activity.conn_id, activity.peer
        listener = endpoint.name
        security_protocol = endpoint.endpoint.security_protocol
        auth = endpoint.authenticator(self.apis.clock)
        if auth is not None:
            decoder.max_frame_size = min(self.config.socket_request_max_bytes, self.config.sasl_server_max_receive_size)
        recv_into, recv, wake_after = transport.recv_into, transport.recv, transport.wake_after
        parse, release, handle = self.apis.parse, self.pool.release, self.apis.handle
        coalesces = out.coalesces
        gate = activity.gate
        while True:
            event = decoder.next_event()
            if event is NEED_DATA:
                if out:
                    await out.flush()  # nothing more to handle now: what is ready leaves
                activity.waiting = True
                view = decoder.frame_buffer()  # straight into the frame being filled, else read ahead
                if view is not None:
                    wake_after(view.nbytes)
                    decoder.buffer_updated(await recv_into(view))
                else:
                    wake_after(0)
                    decoder.receive_data(await recv(decoder.read_size))
                activity.waiting = False
                activity.last = trio.current_time()
                continue
            if event is NEED_MEMORY:
                await out.flush()
                await self._wait_for_memory()
                continue
            if not isinstance(event, Frame):  # CLOSED
                await out.flush()
                return
            try:
                if gate is not None and gate.links.active and gate.blocked():
                    await gate.wait_open()  # a paused broker or a cut link: the request waits, unanswered
                if auth is not None and await self._sasl_frame(auth, transport, channel, decoder, event.payload,
                                                               activity, listener, out):
                    principal = auth.principal or ANONYMOUS
                    continue
                request = parse(event.payload, conn_id, peer)
                ctx = request.context
                ctx.listener = listener
                ctx.principal = principal
                ctx.security_protocol = security_protocol
                ctx.token_authenticated = auth is not None and auth.token_authenticated
                ctx.client_information = activity.client_information
                if not coalesces:
                    await self._serve_request(out, channel, request)
                    continue
                # _serve_request, inline: the handling is driven to its first trap here, and the usual request,
                # answered without waiting, costs no awaitable and no task switch
                coro = handle(request, channel, out.add_now)
                try:
                    trap = coro.send(None)
                except StopIteration as done:
                    response = done.value
                else:
                    out.before_park()  # it waits: what is queued leaves first
                    response = await _Resume(coro, trap)
                    if response is ctx.early_response:
                        continue  # queued (and written) by the task that completed it, while this one waited
                if response.hold_until_unmuted or response.close_connection or channel.muted:
                    await self._queue(out, channel, response)
                else:
                    out.add(response)
                    if out.full:
                        await out.flush()
            finally:
                release(event.pooled)

    async def _sasl_frame(self, auth: SaslServerAuthenticator, transport: Transport, channel: Channel,
                          decoder: FrameDecoder, frame: bytearray, activity: _Activity, listener: str,
                          out: ResponseQueue) -> bool:
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
        await out.flush()  # authentication exchanges go out on their own, after what was answered before
        action: AuthAction = auth.receive(frame)
        if auth.complete:  # told before the client sees the response
            decoder.max_frame_size = self.config.socket_request_max_bytes
            if self.on_authenticated is not None:
                self.on_authenticated(activity.conn_id, auth)
        if action.forward:  # ApiVersions before authentication: KafkaApis answers it
            request = self.apis.parse(frame, activity.conn_id, activity.peer)
            request.context.listener = listener
            request.context.client_information = activity.client_information
            await self._serve_request(out, channel, request)
            await out.flush()
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

    async def _serve_request(self, out: ResponseQueue, channel: Channel, request: Request) -> None:
        """Handle one request and queue its response (what is queued leaves first if the handling waits)."""
        if out.coalesces:
            coro = self.apis.handle(request, channel, out.add_now)
            try:
                trap = coro.send(None)
            except StopIteration as done:
                response = done.value
            else:
                out.before_park()
                response = await _Resume(coro, trap)
                if response is request.context.early_response:
                    return  # queued (and written) by the task that completed it, while this one waited
        else:
            response = await self.apis.handle(request, channel)
        await self._queue(out, channel, response)

    async def _queue(self, out: ResponseQueue, channel: Channel, response: Response) -> None:
        """Queue a response in its turn: after the throttle of a client that does not back off by itself, and
        written at once when enough is queued, the channel is muted or the connection is to close."""
        try:
            if response.hold_until_unmuted:  # pre-KIP-219 clients: the response waits out the throttle
                await out.flush()
                await channel.wait_unmuted()
        finally:
            out.add(response)
        if out.full or channel.muted or response.close_connection:
            await out.flush()
        if response.close_connection:
            raise CloseConnection(f"fault injection {response.injected}")
        if channel.muted:
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
