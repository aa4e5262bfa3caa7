"""Reading a capture file: :func:`read_pcap`, the connections of one read, and the order records leave in."""

from __future__ import annotations

import logging
import os
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import BinaryIO, cast

from ..format import CaptureRecord
from ..tcp import ACK, DEFAULT_MAX_PENDING, RST, SYN
from .connection import _Conn, _Pending
from .files import iter_packets
from .packets import _PacketDecoder
from .stats import PcapStats

log = logging.getLogger(__name__)

DEFAULT_PORTS = frozenset({9092})
DEFAULT_MAX_FRAME = 100 << 20  # Kafka's socket.request.max.bytes default is 100 MiB
HOLD_RECORDS = 100_000  # finished records held back behind an unanswered request, at most
HOLD_BYTES = 64 << 20
HOLD_NS = 60_000_000_000  # ... and for at most this long (capture time)
CLOSED_LINGER_NS = 60_000_000_000  # closed connections kept this long to swallow late packets


def connection_shard(ip1: bytes, port1: int, ip2: bytes, port2: int, n: int) -> int:
    """The shard (0..n-1) of a TCP connection: crc32 of its sorted endpoints, the same both ways."""
    a, b = (ip1, port1), (ip2, port2)
    if b < a:
        a, b = b, a
    return zlib.crc32(a[0] + a[1].to_bytes(2, "big") + b[0] + b[1].to_bytes(2, "big")) % n


class _Decoder(_PacketDecoder):
    """The state of one read: connections, and the records on their way out.

    Records leave in the order their requests completed; a request still
    waiting for its response holds back the finished ones behind it, but only
    for ``HOLD_NS`` of capture time, ``HOLD_RECORDS`` records or ``HOLD_BYTES``
    bytes, after which it is passed over (and yielded whenever it finishes).
    """

    def __init__(self, stats: PcapStats, ports: frozenset[int], broker_ids: dict | None,
                 shard: tuple[int, int] | None, max_pending: int, max_frame: int) -> None:
        self.stats = stats
        self.ports = ports
        self.broker_ids = broker_ids or {}
        self.shard = shard
        self.max_pending = max_pending
        self.max_frame = max_frame
        self.conns: dict[tuple, _Conn] = {}
        self.order: deque[_Pending] = deque()
        self.ready: list[CaptureRecord] = []
        self.held_bytes = 0
        self.last_sweep = 0

    def broker_id(self, server: str, port: int) -> int:
        b = self.broker_ids
        for key in (server, str(port), port):
            if key in b:
                return int(b[key])
        return -1

    def complete(self, p: _Pending, response: bytes | None, send_ns: int) -> None:
        p.response = response
        p.send_ns = send_ns
        p.done = True
        if p.queued:
            self.held_bytes += len(p.request) + (len(response) if response is not None else 0)
        else:
            self.emit(p)

    def emit(self, p: _Pending) -> None:
        self.stats.records += 1
        self.ready.append(p.record())

    def release(self, now: int) -> None:
        order = self.order
        while order:
            p = order[0]
            if p.done:
                order.popleft()
                self.held_bytes -= len(p.request) + (len(p.response) if p.response is not None else 0)
                self.emit(p)
            elif len(order) > HOLD_RECORDS or self.held_bytes > HOLD_BYTES or p.receive_ns < now - HOLD_NS:
                order.popleft()
                p.queued = False
            else:
                return

    def tcp(self, ts: int, src: bytes, sport: int, dst: bytes, dport: int, seq: int, ack: int, flags: int,
            payload: bytes | memoryview) -> None:
        stats = self.stats
        a, b = (src, sport), (dst, dport)
        key = (a, b) if a < b else (b, a)
        conn = self.conns.get(key)
        syn = flags & SYN
        if conn is not None:
            if syn and not flags & ACK and (conn.closed or not conn.c2s.saw_syn or conn.client != a
                                            or (seq + 1) & 0xFFFFFFFF != conn.c2s.base):
                if not conn.closed:
                    conn.finish(ts)
                conn = None  # a new connection on the same 4-tuple
            elif conn.closed:
                if payload:
                    stats.late_packets += 1
                return
        if conn is None:
            if not payload and not syn:
                return  # a bare ACK/FIN/RST of a connection we know nothing about
            ports = self.ports
            if syn:
                client, server = (a, b) if not flags & ACK else (b, a)
                if ports and server[1] not in ports:
                    stats.other_ports += 1
                    return
            elif ports:
                if dport in ports:
                    client, server = a, b
                elif sport in ports:
                    client, server = b, a
                else:
                    stats.other_ports += 1
                    return
            else:
                client, server = (a, b) if dport <= sport else (b, a)
            if self.shard is not None and connection_shard(src, sport, dst, dport, self.shard[1]) != self.shard[0]:
                stats.other_shard += 1
                return
            conn = self.conns[key] = _Conn(self, client, server)
            stats.connections += 1
            if ts - self.last_sweep > 10_000_000_000:
                self.sweep(ts)
        stats.tcp_packets += 1
        if a == conn.client:
            stream, other = conn.c2s, conn.s2c
        else:
            stream, other = conn.s2c, conn.c2s
            if syn and flags & ACK:
                other.anchor(ack)  # the SYN-ACK tells where the client's stream starts
        if flags & ACK and other.has_pending:
            other.ack(ack, ts)
        stream.segment(seq, payload, ts, flags)
        if flags & RST or (conn.c2s.finished and conn.s2c.finished):
            conn.finish(ts)
        if self.order:
            self.release(ts)

    def sweep(self, ts: int) -> None:
        """Forget connections closed long enough ago that no late packet of theirs is to be expected."""
        self.last_sweep = ts
        for key in [k for k, c in self.conns.items() if c.closed and c.close_ts < ts - CLOSED_LINGER_NS]:
            del self.conns[key]

    def close(self, ts: int) -> None:
        """End of the capture: every open connection ends here."""
        for conn in self.conns.values():
            if not conn.closed:
                conn.finish(ts)
        self.release(ts)
        for p in self.order:  # finished by now
            self.emit(p)
        self.order.clear()
        self.conns.clear()


def read_pcap(path: str | os.PathLike | BinaryIO, ports: Iterable[int] | None = None,
              broker_ids: dict[str, int] | None = None, stats: PcapStats | None = None,
              shard: tuple[int, int] | None = None, *, max_pending: int = DEFAULT_MAX_PENDING,
              max_frame: int = DEFAULT_MAX_FRAME) -> Iterator[CaptureRecord]:
    """The Kafka requests and responses in a pcap/pcapng file, as capture records.

    ``ports``: the brokers' ports (default {9092}; empty: every TCP connection).
    ``broker_ids``: "ip:port" or port -> broker id for the records' ``broker_id``.
    ``stats``: filled in as the file is read.  ``shard=(i, n)``: only the TCP
    connections with :func:`connection_shard` i of n.  ``max_pending``: bytes a
    TCP direction buffers behind a hole before giving up on it; ``max_frame``:
    the largest frame believed.
    """
    stats = stats if stats is not None else PcapStats()
    port_set = DEFAULT_PORTS if ports is None else frozenset(int(p) for p in ports)
    if shard is not None and not 0 <= shard[0] < shard[1]:
        raise ValueError(f"bad shard {shard!r}: want (i, n) with 0 <= i < n")
    dec = _Decoder(stats, port_set, broker_ids, shard, max_pending, max_frame)
    opened: AbstractContextManager[BinaryIO]
    if not hasattr(path, "read"):
        name = str(path)
        opened = open(path, "rb", buffering=1 << 20)
    else:
        name = getattr(path, "name", "<file>")
        opened = nullcontext(cast(BinaryIO, path))  # a file object (hasattr does not narrow the union)
    ts = 0
    with opened as f:
        ready = dec.ready
        for ts, linktype, data in iter_packets(f, stats):
            stats.packets += 1
            stats.bytes += len(data)
            dec.packet(ts, linktype, data)
            if ready:
                yield from ready
                ready.clear()
        dec.close(ts)
        yield from ready
        ready.clear()
    log.info("%s: %s", name, stats.summary())
