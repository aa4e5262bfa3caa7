"""One TCP connection: its two streams and framers, and the pairing of responses with requests."""

from __future__ import annotations

import struct
from collections import deque
from typing import Any, Protocol

from ...protocol.api import APIS
from ...protocol.exceptions import ProtocolError
from ...protocol.headers import parse_request_header_prefix, request_body_offset
from ...protocol.types import uvarint_at
from ..format import CaptureRecord
from ..tcp import TcpStream
from .framing import _I32, _RequestFramer, _ResponseFramer
from .packets import _ip_str
from .stats import PcapStats



class _Decoder(Protocol):
    """What a connection needs of the read it belongs to (:class:`~.reader._Decoder`)."""

    stats: PcapStats
    order: Any
    max_frame: int
    max_pending: int

    def broker_id(self, server: str, port: int) -> int: ...

    def complete(self, pending: Any, response: bytes | None, send_ns: int) -> None: ...


def _produce_acks(frame: bytes, version: int) -> int | None:
    """The acks field of a Produce request frame, or None if it cannot be read."""
    try:
        off = request_body_offset(frame)
        if version >= 3:
            if APIS[0].is_flexible(version):
                n, off = uvarint_at(frame, off)
                off += max(n - 1, 0)
            else:
                (n,) = struct.unpack_from(">h", frame, off)
                off += 2 + max(n, 0)
        return struct.unpack_from(">h", frame, off)[0]
    except (ProtocolError, struct.error, IndexError):  # short or garbled: not known to be acks=0
        return None


class _Pending:
    """A request seen, waiting for its response (or for being known to get none)."""

    __slots__ = ("api_key", "api_version", "client_id", "conn", "corr", "done", "queued", "receive_ns",
                 "request", "response", "send_ns")

    def __init__(self, conn: _Conn, receive_ns: int, api_key: int, api_version: int, corr: int,
                 client_id: str | None, request: bytes) -> None:
        self.conn = conn
        self.receive_ns = receive_ns
        self.send_ns = receive_ns
        self.api_key = api_key
        self.api_version = api_version
        self.corr = corr
        self.client_id = client_id
        self.request = request
        self.response: bytes | None = None
        self.done = False
        self.queued = True

    def record(self) -> CaptureRecord:
        c = self.conn
        return CaptureRecord(self.receive_ns, self.send_ns, c.connection_id, c.peer, c.broker_id, "",
                             self.client_id, self.api_key, self.api_version, self.corr, self.request,
                             self.response, c.server)


class _Conn:
    """One TCP connection: its two streams, framers, and the requests awaiting responses."""

    __slots__ = ("broker_id", "c2s", "client", "close_ts", "closed", "connection_id", "dead", "decoder",
                 "last_corr", "outstanding", "peer", "requests", "responses", "s2c", "server", "server_ep")

    def __init__(self, decoder: _Decoder, client: tuple[bytes, int], server: tuple[bytes, int]) -> None:
        self.decoder = decoder
        self.client = client
        self.server_ep = server
        self.peer = f"{_ip_str(client[0])}:{client[1]}"
        self.server = f"{_ip_str(server[0])}:{server[1]}"
        self.connection_id = f"{self.peer}-{self.server}"
        self.broker_id = decoder.broker_id(self.server, server[1])
        self.requests = _RequestFramer(self, decoder.max_frame)
        self.responses = _ResponseFramer(self, decoder.max_frame)
        self.c2s = TcpStream(self.requests, decoder.max_pending)
        self.s2c = TcpStream(self.responses, decoder.max_pending)
        self.requests.stream = self.c2s
        self.responses.stream = self.s2c
        self.outstanding: deque[_Pending] = deque()
        self.last_corr: int | None = None
        self.dead = False
        self.closed = False
        self.close_ts = 0

    def on_request(self, frame: bytes, ts: int) -> None:
        d = self.decoder
        d.stats.requests += 1
        try:
            hdr = parse_request_header_prefix(frame)
            api_key, version, corr, client_id = hdr.api_key, hdr.api_version, hdr.correlation_id, hdr.client_id
        except ProtocolError:  # too short for the client id length: the fixed part only
            api_key, version, corr = struct.unpack_from(">hhi", frame)
            client_id = None
        if api_key not in APIS:
            d.stats.unknown_api_requests += 1
        self.last_corr = corr
        p = _Pending(self, ts, api_key, version, corr, client_id, frame)
        d.order.append(p)
        if api_key == 0 and _produce_acks(frame, version) == 0:
            d.stats.acks0_requests += 1
            d.complete(p, None, ts)
        else:
            self.outstanding.append(p)

    def on_response(self, frame: bytes, start_ts: int) -> None:
        d = self.decoder
        d.stats.responses += 1
        (corr,) = _I32.unpack_from(frame)
        out = self.outstanding
        for i, p in enumerate(out):
            if p.corr == corr:
                break
        else:
            d.stats.responses_without_request += 1
            return
        for _ in range(i):  # Kafka answers in order: those before got no (captured) response
            q = out.popleft()
            d.stats.requests_without_response += 1
            d.complete(q, None, q.receive_ns)
        out.popleft()
        d.complete(p, frame, max(start_ts, p.receive_ns))

    def finish(self, ts: int) -> None:
        """The connection ended (or the capture did): flush the streams, settle what is outstanding."""
        self.c2s.close(ts)
        self.s2c.close(ts)
        self.requests.end()
        self.responses.end()
        d = self.decoder
        while self.outstanding:
            q = self.outstanding.popleft()
            d.stats.requests_without_response += 1
            d.complete(q, None, q.receive_ns)
        self.closed = True
        self.close_ts = ts
