"""A Kafka protocol connection on Trio (the wire half of Kafka's ``NetworkClient``).

Sends requests declared in :mod:`minikafka.protocol` and matches responses by
correlation id; requests may be pipelined.  Used by minikafka's own clients
and by the tests to drive a broker with raw requests.  Frames are cut by
:class:`~minikafka.protocol.framing.FrameDecoder`; :func:`read_frame` is that
loop for any Trio stream (wire replay reads through it too).
"""

from __future__ import annotations

import errno
import itertools
import logging
from typing import Any

import trio

from ..iovec import frame_views, write_nowait
from ..protocol.api import APIS, ApiKey
from ..protocol.framing import CLOSED, NEED_MEMORY, Frame, FrameDecoder, FrameError, TruncatedFrame, encode_frame
from ..protocol.headers import RequestHeader, parse_response_frame, request_header_version

log = logging.getLogger(__name__)

_CLOSED_ERRNOS = frozenset({errno.EBADF, errno.ENOTSOCK})
_COALESCE = 64 * 1024  # frames up to this size are joined and sent as one buffer


async def _receive(stream: trio.abc.ReceiveStream, decoder: FrameDecoder) -> None:
    """One read from ``stream`` into ``decoder``: straight into the frame being filled when the
    stream is a socket stream, else a copy of up to ``read_size`` bytes."""
    view = decoder.frame_buffer()
    sock = getattr(stream, "socket", None) if view is not None else None
    if sock is None:
        decoder.receive_data(await stream.receive_some(decoder.read_size))
        return
    try:
        n = await sock.recv_into(view)
    except OSError as exc:  # as trio.SocketStream.receive_some reports them
        if exc.errno in _CLOSED_ERRNOS:
            raise trio.ClosedResourceError("this socket was already closed") from None
        raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
    decoder.buffer_updated(n)


async def read_frame(stream: trio.abc.ReceiveStream, decoder: FrameDecoder) -> bytearray | None:
    """The next frame's payload from ``stream`` (without size prefix), or None once the peer closed
    (at a frame boundary or inside a frame).

    ``decoder`` keeps what was read past the frame for the next call; its pool
    must be unbounded (nothing here waits for memory).  A negative or oversized
    declared size raises ConnectionError.
    """
    while True:
        try:
            event = decoder.next_event()
        except TruncatedFrame as exc:
            log.debug("peer closed mid-frame: %s", exc)
            return None
        except FrameError as exc:
            raise ConnectionError(f"malformed frame: {exc}") from exc
        if isinstance(event, Frame):
            decoder.pool.release(event.pooled)  # the caller owns the payload now
            return event.payload
        if event is CLOSED:
            return None
        if event is NEED_MEMORY:
            raise RuntimeError("read_frame needs a decoder with an unbounded memory pool")
        await _receive(stream, decoder)


class KafkaConnection:
    """One TCP connection to a broker."""

    def __init__(self, stream: trio.abc.Stream, client_id: str | None = "minikafka") -> None:
        """``stream``: a TCP stream, or a ``trio.SSLStream`` over one (TLS listeners)."""
        self.stream = stream
        self.client_id = client_id
        self._corr = itertools.count(1)
        self._decoder = FrameDecoder()  # responses (fetch ones) may be large: no size limit
        self.api_versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str | None = "minikafka") -> "KafkaConnection":
        stream = await trio.open_tcp_stream(host, port)
        return cls(stream, client_id)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> "KafkaConnection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _header(self, api_key: int, version: int, correlation_id: int) -> bytes:
        """The request header of ``api_key`` v``version`` from this client."""
        hv = request_header_version(api_key, APIS[api_key].is_flexible(version))
        return RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                    "correlation_id": correlation_id, "client_id": self.client_id}, hv)

    def encode_request(self, api_key: int, version: int, body: dict | None, correlation_id: int) -> bytes:
        """Header + body, without the size prefix."""
        return self._header(api_key, version, correlation_id) + APIS[api_key].request.build(body or {}, version)

    def encode_request_segments(self, api_key: int, version: int, body: dict | None,
                                correlation_id: int) -> list[bytes | bytearray | memoryview]:
        """Header + body as buffers, without the size prefix: large ``records`` values (a producer's
        batches) are passed through uncopied."""
        return [self._header(api_key, version, correlation_id),
                *APIS[api_key].request.build_segments(body or {}, version)]

    async def send_raw(self, payload: bytes) -> None:
        """Send one frame (the size prefix is added)."""
        await self.stream.send_all(encode_frame(payload))

    async def send_segments(self, segments: list[bytes | bytearray | memoryview]) -> None:
        """Send one frame made of ``segments`` (the size prefix is added).  On a plain socket the buffers go
        out with ``writev`` on the non-blocking socket (large ones uncopied), waiting only while the socket's
        buffer is full: a request that fits costs no trip through the scheduler (as the broker's
        ``SocketTransport`` writes responses).  Other streams (TLS) get one joined buffer."""
        views = frame_views(segments, _COALESCE)
        sock = getattr(self.stream, "socket", None)
        if sock is None:
            await self.stream.send_all(b"".join(views))
            return
        i = 0
        while True:
            try:
                i = write_nowait(sock.fileno(), views, i)
            except OSError as exc:  # as trio.SocketStream.send_all reports them
                if exc.errno in _CLOSED_ERRNOS:
                    raise trio.ClosedResourceError("this socket was already closed") from None
                raise trio.BrokenResourceError(f"socket connection broken: {exc}") from exc
            if i == len(views):
                return
            await trio.lowlevel.wait_writable(sock)

    async def receive_frame(self) -> bytearray | None:
        """The next response frame (without size prefix), or None if the broker closed."""
        return await read_frame(self.stream, self._decoder)

    def decode_response(self, api_key: int, version: int, frame: bytes | bytearray) -> tuple[int, Any]:
        """(correlation id, body) of a response frame; ``records`` fields are memoryviews into ``frame``."""
        return parse_response_frame(frame, api_key, version)

    async def send(self, api_key: int, version: int, body: dict | None = None) -> int:
        """Send a request; returns its correlation id."""
        corr = next(self._corr)
        await self.send_raw(self.encode_request(api_key, version, body, corr))
        return corr

    async def receive(self, api_key: int, version: int) -> Any:
        frame = await self.receive_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        return self.decode_response(api_key, version, frame)[1]

    async def request(self, api_key: int, version: int, body: dict | None = None) -> Any:
        """Send a request and wait for its response body."""
        corr = await self.send(api_key, version, body)
        frame = await self.receive_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        got, resp = self.decode_response(api_key, version, frame)
        if got != corr:
            raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
        return resp

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions: remember the broker's supported range per api key."""
        resp = await self.request(ApiKey.API_VERSIONS, 3,
                                  {"client_software_name": "minikafka", "client_software_version": "0.1"})
        self.api_versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        return self.api_versions
