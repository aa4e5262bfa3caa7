"""The Trio TCP front end (Kafka's ``SocketServer``: Acceptor + Processor).

One task per connection reads size-prefixed frames, hands each to
:class:`~minikafka.broker.apis.KafkaApis` and writes the response before it
reads the next request, as Kafka does by muting a channel while a request is
in flight; pipelined requests simply wait in the receive buffer, so responses
go out in request order.  A frame over ``socket.request.max.bytes``, an
unknown api key, an unsupported version or a body that does not parse closes
that connection with one log line; other connections carry on.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
import logging
from typing import TYPE_CHECKING

import trio

from ..capture.produce import original_frame_parts
from ..iovec import IOV_MAX, advance, byte_views
from .apis import CloseConnection, KafkaApis
from .quota import client_throttles_itself

if TYPE_CHECKING:
    from .broker import Broker

log = logging.getLogger(__name__)

_RECV_SIZE = 256 * 1024
_ids = itertools.count(1)


class FrameReader:
    """Reads Kafka size-prefixed frames from a trio socket with few copies.

    Small frames are cut from a shared receive buffer; a large frame gets its
    own ``bytearray`` that the socket fills directly (``recv_into``).
    """

    def __init__(self, sock: trio.socket.SocketType, max_size: int) -> None:
        self.sock = sock
        self.max_size = max_size
        self.buf = bytearray()

    async def _fill(self) -> bool:
        data = await self.sock.recv(_RECV_SIZE)
        if not data:
            return False
        self.buf += data
        return True

    async def read_frame(self) -> bytearray | None:
        """The next frame's payload, or None at a clean end of stream."""
        while len(self.buf) < 4:
            if not await self._fill():
                if self.buf:
                    raise CloseConnection("connection closed mid-frame")
                return None
        size = int.from_bytes(self.buf[:4], "big", signed=True)
        if size < 0 or size > self.max_size:
            raise CloseConnection(
                f"frame of {size} bytes exceeds socket.request.max.bytes={self.max_size}"
            )
        have = len(self.buf) - 4
        if have >= size:
            frame = self.buf[4:4 + size]
            del self.buf[:4 + size]
            return frame
        frame = bytearray(size)
        view = memoryview(frame)
        with memoryview(self.buf) as pending:
            view[:have] = pending[4:]
        self.buf.clear()
        pos = have
        while pos < size:
            n = await self.sock.recv_into(view[pos:], size - pos)
            if n == 0:
                raise CloseConnection("connection closed mid-frame")
            pos += n
        return frame


_COALESCE = 64 * 1024


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


class SocketServer:
    """Accepts connections and runs one request loop per connection."""

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.apis = KafkaApis(broker)
        self.connections: dict[str, trio.SocketStream] = {}
        self.listeners: list[trio.SocketListener] = []

    async def serve(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.broker.config
        self.listeners = await trio.open_tcp_listeners(cfg.port, host=cfg.host)
        bound = self.listeners[0].socket.getsockname()[1]
        if cfg.port == 0:
            cfg.port = bound
        log.info("broker %d listening on %s:%d", cfg.node_id, cfg.host, bound)
        task_status.started(bound)
        await trio.serve_listeners(self.handle_connection, self.listeners)

    async def _send_throttled(self, sock: trio.socket.SocketType, ctx, response: list | None,
                              sent: Callable[[], None]) -> None:
        """KIP-219: answer at once, then mute the connection for the throttle time.

        Versions whose clients do not back off on throttle_time_ms get their
        response held for the throttle time instead (the pre-KIP-219 behaviour).
        ``sent`` is called as soon as the response has left (capture's send time).
        """
        quotas = self.broker.quotas
        channel = quotas.reaper.add(ctx.connection_id, ctx.throttle_quota, ctx.throttle_time_ms)
        early = client_throttles_itself(ctx.api_key, ctx.api_version) or response is None
        if early:
            if response is not None:
                await send_frame(sock, response)
            sent()
        try:
            await channel.released.wait()  # muted: nothing is read from this connection meanwhile
        finally:
            quotas.by_type(ctx.throttle_quota).on_unmuted()
        if not early:
            await send_frame(sock, response)
            sent()

    def _sent(self, ctx, raw, response: list | None) -> None:
        """The response left (or, without one, the request was handled): capture the pair."""
        if self.broker.capture is not None:
            self.broker.on_response_sent(ctx, raw, response)

    async def handle_connection(self, stream: trio.SocketStream) -> None:
        sock = stream.socket
        try:
            sock.setsockopt(trio.socket.IPPROTO_TCP, trio.socket.TCP_NODELAY, 1)
            peername = sock.getpeername()
            peer = f"{peername[0]}:{peername[1]}"
        except OSError:
            peer = "?"
        conn_id = f"{self.broker.config.node_id}-{next(_ids)}"
        self.connections[conn_id] = stream
        reader = FrameReader(sock, self.broker.config.socket_request_max_bytes)
        apis = self.apis
        try:
            while True:
                frame = await reader.read_frame()
                if frame is None:
                    break
                ctx, req = apis.parse(frame, conn_id, peer)
                # Produce batches are stamped with offsets in place: capture keeps the bytes as received.
                raw = frame
                if ctx.api_key == 0 and self.broker.capture is not None and req is not None:
                    raw = original_frame_parts(frame, req)
                response = await apis.handle(ctx, req)
                # Accounted before the response leaves, so a client that reads the
                # broker's metrics after its response always sees its own request.
                self.broker.on_request_done(ctx, frame, response)
                sent = partial(self._sent, ctx, raw, response)
                if ctx.throttle_time_ms:
                    await self._send_throttled(sock, ctx, response, sent)
                else:
                    if response is not None:
                        await send_frame(sock, response)
                    sent()
        except CloseConnection as exc:
            log.warning("closing connection %s from %s: %s", conn_id, peer, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
            log.info("connection %s from %s dropped: %s", conn_id, peer, exc)
        except Exception:
            log.exception("closing connection %s from %s after an internal error", conn_id, peer)
        finally:
            self.connections.pop(conn_id, None)
            self.broker.on_connection_closed(conn_id)
            with trio.CancelScope(shield=True):
                await stream.aclose()
