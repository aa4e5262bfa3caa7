"""Read Kafka traffic from tcpdump files (pcap or pcapng) as :class:`~.format.CaptureRecord` s.

:func:`read_pcap` streams through a capture file once: it decodes the link
layer (Ethernet with VLAN tags, Linux cooked SLL and SLL2 as ``tcpdump -i any``
writes them, raw IPv4/IPv6, BSD loopback/null), IPv4 and IPv6 (extension
headers skipped), and TCP; reassembles each direction of each TCP connection
with :class:`~.tcp.TcpStream`; splits the client's stream into request frames
and the server's into response frames (int32 size prefix); and pairs each
response with its request by correlation id.  A record is yielded once its
response arrived (or, for a request that gets none, when that is known:
acks=0 Produce at once, a request skipped by a later response, the end of the
connection or of the file), in the order the requests completed.  Memory is
bounded by the open connections' outstanding data (plus a bounded reorder
hold-back, see :class:`_Decoder`).

How the fields are filled: ``receive_ns`` is the time of the packet that
completed the request frame (when a broker could have read it), ``send_ns``
the time of the first packet of the response (when the broker began sending;
``receive_ns`` when there is no response), ``connection_id`` is
``"clientip:port-serverip:port"``, ``peer``/``server`` the two endpoints,
``broker_id`` -1 unless ``broker_ids`` maps the server ("ip:port" or port) to
one, ``principal`` "" (the wire does not tell), ``client_id`` from the request
header.

Which side is the server: the destination of a SYN if one is seen, else the
endpoint whose port is in ``ports`` (default {9092}; an empty set accepts every
TCP connection and takes the lower port as the server's when no SYN is seen).

Losses: a hole in a TCP stream (see :mod:`.tcp`) loses the frames it touches.
Inside a frame of known size the framer stays in step; otherwise it
resynchronises: on the request side it scans for a plausible request header
(size within limits, an api key minikafka knows, a version it supports, a
correlation id above the last one seen, a sane client id), on the response side
for a size followed by the correlation id of an outstanding request; a
candidate is accepted once its whole frame is there and parses.  A capture
that starts mid-connection is resynchronised the same way.  Everything lost
is counted in :class:`PcapStats`.

Limits: IP fragments are not reassembled (counted and dropped), TCP checksums
are not verified, TLS/SASL-encrypted traffic cannot be decoded (a connection
whose first frame is not Kafka is ignored), resynchronisation only finds
requests of api keys and versions minikafka knows, and pcapng Simple Packet
Blocks (no timestamp) get the previous packet's time.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import struct
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, fields
from itertools import islice
from typing import BinaryIO

from ..protocol.api import APIS
from ..protocol.headers import parse_request_header_prefix
from ..protocol.types import uvarint_at
from .format import CaptureRecord
from .frames import parse_request_frame, parse_request_header, parse_response_frame
from .tcp import ACK, DEFAULT_MAX_PENDING, RST, SYN, TcpStream

log = logging.getLogger(__name__)

__all__ = ["PcapStats", "connection_shard", "is_pcap_file", "iter_packets", "read_pcap"]

DEFAULT_PORTS = frozenset({9092})
DEFAULT_MAX_FRAME = 100 << 20  # Kafka's socket.request.max.bytes default is 100 MiB
CORRELATION_WINDOW = 1_000_000  # how far past the last seen a resynchronised correlation id may be
HOLD_RECORDS = 100_000  # finished records held back behind an unanswered request, at most
HOLD_BYTES = 64 << 20
HOLD_NS = 60_000_000_000  # ... and for at most this long (capture time)
CLOSED_LINGER_NS = 60_000_000_000  # closed connections kept this long to swallow late packets

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),  # microseconds
    b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1),  # nanoseconds
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_LOOP = 0, 1, 101, 108
LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_IPV4, LINKTYPE_IPV6 = 113, 276, 228, 229
_RAW_LINKTYPES = {LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6, 12, 14}  # 12/14: DLT_RAW on some BSDs
_VLAN = {0x8100, 0x88A8, 0x9100}
_ETH_IP = {0x0800, 0x86DD}

_TCP = struct.Struct(">HHIIBB")
_I32 = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">ihhih")  # size, api key, version, correlation id, client id length
_CTRL = re.compile(rb"[\x00-\x1f\x7f]")
_REQ_PATTERN = re.compile(b"\\x00[" + b"".join(re.escape(bytes([k])) for k in sorted(APIS)) + b"]\\x00",
                          re.DOTALL)


@dataclass
class PcapStats:
    """What :func:`read_pcap` met: packets, connections, and what could not be decoded."""

    packets: int = 0
    bytes: int = 0
    tcp_packets: int = 0  # packets of the connections decoded
    other_packets: int = 0  # not TCP over IPv4/IPv6 (ARP, UDP, ICMP ...)
    other_ports: int = 0  # TCP packets of connections not on the Kafka ports
    other_shard: int = 0  # TCP packets of connections belonging to other shards
    unsupported_link: int = 0  # packets of link types this reader does not decode
    ip_fragments: int = 0  # dropped: no IP defragmentation
    truncated_packets: int = 0  # captured shorter than sent (snap length)
    late_packets: int = 0  # packets of connections already finished
    connections: int = 0
    non_kafka_connections: int = 0  # first frame not Kafka (TLS ...): ignored
    gaps: int = 0  # holes in TCP streams given up on
    gap_bytes: int = 0
    skipped_bytes: int = 0  # captured bytes thrown away (partial frames, resynchronisation)
    lost_frames: int = 0  # frames cut by a hole while in step
    resyncs: int = 0  # times a framer found its way back after losing step
    requests: int = 0
    responses: int = 0
    records: int = 0
    acks0_requests: int = 0  # Produce with acks=0: no response expected
    requests_without_response: int = 0
    responses_without_request: int = 0
    unknown_api_requests: int = 0  # api keys minikafka does not know (yielded all the same)

    def add(self, other: PcapStats) -> None:
        """Add ``other``'s counts to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def summary(self) -> str:
        """The non-zero counts as one line."""
        return ", ".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self) if getattr(self, f.name))


# -- files ---------------------------------------------------------------------------------------

def is_pcap_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a pcap (either magic, either byte order) or pcapng file, by its magic number."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError:
        return False
    return magic in PCAP_MAGICS or magic == PCAPNG_MAGIC


def _pcap_packets(f: BinaryIO, head: bytes, stats: PcapStats) -> Iterator[tuple[int, int, bytes]]:
    endian, mult = PCAP_MAGICS[head[:4]]
    rest = f.read(20)
    if len(rest) < 20:
        raise ValueError("truncated pcap file header")
    linktype = struct.unpack(endian + "I", rest[16:20])[0] & 0xFFFF
    rec = struct.Struct(endian + "IIII")
    read = f.read
    while True:
        h = read(16)
        if len(h) < 16:
            if h:
                log.warning("%s: truncated packet header at the end", getattr(f, "name", "pcap"))
            return
        sec, frac, incl, orig = rec.unpack(h)
        data = read(incl)
        if len(data) < incl:
            log.warning("%s: truncated packet at the end", getattr(f, "name", "pcap"))
            return
        if incl < orig:
            stats.truncated_packets += 1
        yield sec * 1_000_000_000 + frac * mult, linktype, data


def _ts_converter(resol: int, offset_s: int):
    """ticks -> ns for a pcapng interface's if_tsresol and if_tsoffset."""
    off = offset_s * 1_000_000_000
    if resol & 0x80:
        p = resol & 0x7F
        return lambda t: off + ((t * 1_000_000_000) >> p)
    if resol <= 9:
        m = 10 ** (9 - resol)
        return lambda t: off + t * m
    d = 10 ** (resol - 9)
    return lambda t: off + t // d


def _pcapng_packets(f: BinaryIO, head: bytes, stats: PcapStats) -> Iterator[tuple[int, int, bytes]]:
    name = getattr(f, "name", "pcapng")
    endian = "<"
    ifaces: list[tuple[int, int, object]] = []  # (linktype, snaplen, ticks -> ns)
    last_ts = 0
    read = f.read
    h = head + read(4)
    while len(h) == 8:
        if h[:4] == PCAPNG_MAGIC:  # section header: fixes the byte order of what follows
            bom = read(4)
            if bom == b"\x4d\x3c\x2b\x1a":
                endian = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                endian = ">"
            else:
                raise ValueError(f"{name}: bad pcapng byte-order magic")
            (total,) = struct.unpack(endian + "I", h[4:8])
            if len(read(total - 12)) < total - 12:
                return
            ifaces = []
            h = read(8)
            continue
        btype, total = struct.unpack(endian + "II", h)
        if total < 12 or total % 4:
            log.warning("%s: corrupt pcapng block (length %d), stopping", name, total)
            return
        body = read(total - 8)
        if len(body) < total - 8:
            log.warning("%s: truncated block at the end", name)
            return
        if btype == 6:  # enhanced packet block
            iface, hi, lo, caplen, orig = struct.unpack_from(endian + "IIIII", body)
            if iface < len(ifaces):
                linktype, _snap, conv = ifaces[iface]
                last_ts = conv((hi << 32) | lo)  # type: ignore[operator]
                if caplen < orig:
                    stats.truncated_packets += 1
                yield last_ts, linktype, body[20:20 + caplen]
        elif btype == 1:  # interface description
            linktype, _res, snaplen = struct.unpack_from(endian + "HHI", body)
            resol, offset_s = 6, 0
            p = 8
            while p + 4 <= len(body) - 4:
                code, length = struct.unpack_from(endian + "HH", body, p)
                if code == 0:
                    break
                value = body[p + 4:p + 4 + length]
                if code == 9 and length >= 1:
                    resol = value[0]
                elif code == 14 and length >= 8:
                    (offset_s,) = struct.unpack(endian + "q", value[:8])
                p += 4 + ((length + 3) & ~3)
            ifaces.append((linktype, snaplen, _ts_converter(resol, offset_s)))
        elif btype == 3 and ifaces:  # simple packet block: no timestamp, interface 0
            (orig,) = struct.unpack_from(endian + "I", body)
            linktype, snaplen, _conv = ifaces[0]
            n = min(orig, snaplen or orig, len(body) - 8)
            yield last_ts, linktype, body[4:4 + n]
        elif btype == 2:  # obsolete packet block
            iface, _drops, hi, lo, caplen, orig = struct.unpack_from(endian + "HHIIII", body)
            if iface < len(ifaces):
                linktype, _snap, conv = ifaces[iface]
                last_ts = conv((hi << 32) | lo)  # type: ignore[operator]
                yield last_ts, linktype, body[20:20 + caplen]
        h = read(8)


def iter_packets(f: BinaryIO, stats: PcapStats | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(timestamp ns, link type, captured bytes) of every packet of a pcap or pcapng file object."""
    stats = stats if stats is not None else PcapStats()
    head = f.read(4)
    if head in PCAP_MAGICS:
        return _pcap_packets(f, head, stats)
    if head == PCAPNG_MAGIC:
        return _pcapng_packets(f, head, stats)
    raise ValueError(f"{getattr(f, 'name', 'file')}: not a pcap or pcapng file (magic {head.hex()})")


def connection_shard(ip1: bytes, port1: int, ip2: bytes, port2: int, n: int) -> int:
    """The shard (0..n-1) of a TCP connection: crc32 of its sorted endpoints, the same both ways."""
    a, b = (ip1, port1), (ip2, port2)
    if b < a:
        a, b = b, a
    return zlib.crc32(a[0] + a[1].to_bytes(2, "big") + b[0] + b[1].to_bytes(2, "big")) % n


def _ip_str(ip: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(ip) == 4 else socket.AF_INET6, ip)


# -- Kafka framing --------------------------------------------------------------------------------

def _produce_acks(frame: bytes, version: int) -> int | None:
    """The acks field of a Produce request frame, or None if it cannot be read."""
    try:
        off = parse_request_header(frame).body_offset
        if version >= 3:
            if APIS[0].is_flexible(version):
                n, off = uvarint_at(frame, off)
                off += max(n - 1, 0)
            else:
                (n,) = struct.unpack_from(">h", frame, off)
                off += 2 + max(n, 0)
        return struct.unpack_from(">h", frame, off)[0]
    except Exception:  # noqa: BLE001 - a malformed request simply is not known to be acks=0
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


class _Framer:
    """Splits one direction's byte stream into Kafka frames, resynchronising after holes.

    In step (``synced``), frames follow each other by their size prefixes.  Out
    of step, the buffer is scanned for candidate frame starts (``cands``,
    positions in ``buf``; ``scan_pos``: where scanning goes on); the first
    candidate whose whole frame arrived and verifies puts the framer back in
    step there.  ``synced`` None means "decide at the first byte": in step if
    the stream's start (SYN) was seen.
    """

    __slots__ = ("buf", "cands", "conn", "frames", "max_frame", "pos", "scan_pos", "skip", "start_ts", "stats",
                 "stream", "synced")

    MAX_CANDIDATES = 256

    def __init__(self, conn: _Conn, max_frame: int) -> None:
        self.conn = conn
        self.stats = conn.decoder.stats
        self.stream: TcpStream | None = None
        self.max_frame = max_frame
        self.buf = bytearray()
        self.pos = 0
        self.synced: bool | None = None
        self.cands: list[int] = []
        self.scan_pos = 0
        self.skip = 0
        self.start_ts = 0
        self.frames = 0

    # StreamSink
    def data(self, data: bytes | memoryview, ts: int) -> None:
        if self.conn.dead:
            return
        if self.synced is None:
            self.synced = self.stream is not None and self.stream.saw_syn
        if self.skip:
            k = min(self.skip, len(data))
            self.skip -= k
            self.stats.skipped_bytes += k
            if k == len(data):
                return
            data = memoryview(data)[k:]
        if self.pos == len(self.buf):
            self.start_ts = ts
        self.buf += data
        self._parse(ts)

    def gap(self, nbytes: int, ts: int) -> None:
        self.stats.gaps += 1
        self.stats.gap_bytes += nbytes
        if self.conn.dead:
            return
        buf, pos = self.buf, self.pos
        avail = len(buf) - pos
        if self.skip:
            if nbytes <= self.skip:
                self.skip -= nbytes
                return
            self.skip = 0
            self.synced = False
        elif self.synced and avail >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            remaining = 4 + size - avail
            if 0 <= size <= self.max_frame and nbytes <= remaining:
                self.skip = remaining - nbytes  # the frame is lost, the next one starts in step
                self.stats.lost_frames += 1
            else:
                self.synced = False
        else:
            if self.synced and avail:
                self.stats.lost_frames += 1
            self.synced = False
        self.stats.skipped_bytes += avail
        buf.clear()
        self.pos = self.scan_pos = 0
        self.cands.clear()
        if not self.synced:
            log.debug("%s: %s out of step after a %d-byte hole", self.conn.connection_id, type(self).__name__,
                      nbytes)

    def end(self) -> None:
        """End of the stream: a partial frame left is lost."""
        avail = len(self.buf) - self.pos
        if avail and self.synced:
            self.stats.lost_frames += 1
        self.stats.skipped_bytes += avail
        self.buf = bytearray()
        self.pos = self.scan_pos = 0
        self.cands.clear()

    def _parse(self, ts: int) -> None:
        buf = self.buf
        while True:
            if not self.synced and not self._resync():
                break
            pos = self.pos
            if len(buf) - pos < 4:
                break
            (size,) = _I32.unpack_from(buf, pos)
            ok = self._plausible(pos, size)
            if ok is None:
                break
            if not ok:
                if self._not_kafka():
                    return
                log.debug("%s: implausible %s frame, resynchronising", self.conn.connection_id, type(self).__name__)
                self.synced = False
                self.stats.skipped_bytes += 1
                self.pos = self.scan_pos = pos + 1
                continue
            end = pos + 4 + size
            if len(buf) < end:
                break
            with memoryview(buf) as mv:
                frame = bytes(mv[pos + 4:end])
            self.pos = end
            self.frames += 1
            self._frame(frame, self.start_ts, ts)
            self.start_ts = ts
            if self.conn.dead:
                return
        pos = self.pos
        if pos == len(buf):
            buf.clear()
            self.pos = self.scan_pos = 0
            self.cands.clear()
        elif pos >= 65536 and 2 * pos >= len(buf):
            del buf[:pos]
            self.pos = 0
            self.scan_pos -= pos
            self.cands[:] = [c - pos for c in self.cands]

    def _resync(self) -> bool:
        """Look for the way back into step; True (and ``pos`` there) once found."""
        buf, cands = self.buf, self.cands
        while True:
            c, found = self._find(self.scan_pos)
            if not found:
                self.scan_pos = c
                break
            cands.append(c)
            self.scan_pos = c + 1
        if len(cands) > self.MAX_CANDIDATES:
            del cands[:len(cands) - self.MAX_CANDIDATES]
        n = len(buf)
        rejected = 0
        for c in cands:
            (size,) = _I32.unpack_from(buf, c)
            end = c + 4 + size
            if end > n:
                continue
            with memoryview(buf) as mv:
                frame = bytes(mv[c + 4:end])
            if self._verify(frame):
                self.stats.skipped_bytes += c - self.pos
                self.pos = c
                self.synced = True
                self.stats.resyncs += 1
                cands.clear()
                self.scan_pos = 0
                log.debug("%s: %s back in step", self.conn.connection_id, type(self).__name__)
                return True
            rejected += 1
        if rejected:
            cands[:] = [c for c in cands if c + 4 + _I32.unpack_from(buf, c)[0] > n]
        keep = cands[0] if cands else self.scan_pos
        self.stats.skipped_bytes += keep - self.pos
        self.pos = keep
        return False

    def _not_kafka(self) -> bool:
        return False

    # per direction
    def _plausible(self, pos: int, size: int) -> bool | None:
        """Whether a frame of ``size`` at ``pos`` is believable in step (None: need more bytes)."""
        raise NotImplementedError

    def _find(self, start: int) -> tuple[int, bool]:
        """(c, True): a candidate frame start at c >= start; (c, False): none before c, keep from c on."""
        raise NotImplementedError

    def _verify(self, frame: bytes) -> bool:
        """Whether a candidate's whole frame is what it seems."""
        raise NotImplementedError

    def _frame(self, frame: bytes, start_ts: int, ts: int) -> None:
        raise NotImplementedError


class _RequestFramer(_Framer):
    """Client to server: request frames."""

    __slots__ = ()

    def _plausible(self, pos: int, size: int) -> bool | None:
        if size < 8 or size > self.max_frame:
            return False
        if len(self.buf) - pos < 8:
            return None
        api_key, version = struct.unpack_from(">hh", self.buf, pos + 4)
        return 0 <= api_key <= 255 and 0 <= version <= 127

    def _not_kafka(self) -> bool:
        stream = self.stream
        if self.frames == 0 and stream is not None and stream.saw_syn and not stream.gaps:
            conn = self.conn
            conn.dead = True
            conn.decoder.stats.non_kafka_connections += 1
            log.info("%s: not Kafka (first request frame implausible), ignored", conn.connection_id)
            self.buf = bytearray()
            self.pos = 0
            return True
        return False

    def _find(self, start: int) -> tuple[int, bool]:
        buf = self.buf
        n = len(buf)
        last = self.conn.last_corr
        p = start + 4
        while True:
            m = _REQ_PATTERN.search(buf, p)
            if m is None:
                return max(start, n - 13), False
            c = m.start() - 4
            if c + 14 > n:
                return c, False
            size, api_key, version, corr, cid = _REQ_HEAD.unpack_from(buf, c)
            api = APIS[api_key]
            if (10 <= size <= self.max_frame and api.min_version <= version <= api.max_version
                    and (corr >= 0 if last is None else last < corr <= last + CORRELATION_WINDOW)
                    and -1 <= cid <= size - 10):
                head_end = c + 14 + max(cid, 0)
                flexible = api.is_flexible(version)
                if head_end + flexible > n:
                    return c, False
                client = bytes(buf[c + 14:head_end])
                try:
                    client.decode("utf-8")
                    ok = _CTRL.search(client) is None and (not flexible or buf[head_end] < 16)
                except UnicodeDecodeError:
                    ok = False
                if ok:
                    return c, True
            p = m.start() + 1

    def _verify(self, frame: bytes) -> bool:
        try:
            parse_request_frame(frame)
        except Exception:  # noqa: BLE001 - any failure means "not a request frame"
            return False
        return True

    def _frame(self, frame: bytes, start_ts: int, ts: int) -> None:
        self.conn.on_request(frame, ts)


class _ResponseFramer(_Framer):
    """Server to client: response frames."""

    __slots__ = ()

    def _plausible(self, pos: int, size: int) -> bool | None:
        return 4 <= size <= self.max_frame

    def _find(self, start: int) -> tuple[int, bool]:
        buf = self.buf
        n = len(buf)
        best: int | None = None
        for p in islice(self.conn.outstanding, 64):
            needle = _I32.pack(p.corr)
            i = buf.find(needle, start + 4, n if best is None else best + 4)
            while i >= 0:
                (size,) = _I32.unpack_from(buf, i - 4)
                if 4 <= size <= self.max_frame:
                    best = i - 4
                    break
                i = buf.find(needle, i + 1, n if best is None else best + 4)
        if best is None:
            return max(start, n - 7), False
        return best, True

    def _verify(self, frame: bytes) -> bool:
        (corr,) = _I32.unpack_from(frame)
        for p in self.conn.outstanding:
            if p.corr == corr:
                if p.api_key not in APIS:
                    return True
                try:
                    parse_response_frame(frame, p.api_key, p.api_version)
                except Exception:  # noqa: BLE001 - any failure means "not this response"
                    return False
                return True
        return False

    def _frame(self, frame: bytes, start_ts: int, ts: int) -> None:
        self.conn.on_response(frame, start_ts)


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
        except (struct.error, IndexError):
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


class _Decoder:
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

    def packet(self, ts: int, linktype: int, data: bytes) -> None:
        stats = self.stats
        # link layer -> offset of the IP header
        if linktype == LINKTYPE_ETHERNET:
            if len(data) < 14:
                stats.other_packets += 1
                return
            off = 12
            etype = (data[12] << 8) | data[13]
            while etype in _VLAN and len(data) >= off + 8:
                off += 4
                etype = (data[off] << 8) | data[off + 1]
            if etype not in _ETH_IP:
                stats.other_packets += 1
                return
            off += 2
        elif linktype == LINKTYPE_LINUX_SLL:
            if len(data) < 16 or ((data[14] << 8) | data[15]) not in _ETH_IP:
                stats.other_packets += 1
                return
            off = 16
        elif linktype == LINKTYPE_LINUX_SLL2:
            if len(data) < 20 or ((data[0] << 8) | data[1]) not in _ETH_IP:
                stats.other_packets += 1
                return
            off = 20
        elif linktype in _RAW_LINKTYPES:
            off = 0
        elif linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
            off = 4
        else:
            stats.unsupported_link += 1
            return
        n = len(data)
        if n < off + 20:
            stats.other_packets += 1
            return
        version = data[off] >> 4
        if version == 4:
            ihl = (data[off] & 15) * 4
            total = (data[off + 2] << 8) | data[off + 3]
            if ((data[off + 6] << 8) | data[off + 7]) & 0x3FFF:
                stats.ip_fragments += 1
                return
            if data[off + 9] != 6:
                stats.other_packets += 1
                return
            src, dst = data[off + 12:off + 16], data[off + 16:off + 20]
            end = off + total if total else n  # 0: TSO super-packet as seen on the sending host
            t = off + ihl
        elif version == 6:
            if n < off + 40:
                stats.other_packets += 1
                return
            plen = (data[off + 4] << 8) | data[off + 5]
            nh = data[off + 6]
            src, dst = data[off + 8:off + 24], data[off + 24:off + 40]
            end = off + 40 + plen if plen else n
            t = off + 40
            while nh != 6:
                if nh in (0, 43, 60) and n >= t + 8:
                    nh, t = data[t], t + (data[t + 1] + 1) * 8
                elif nh == 44:
                    stats.ip_fragments += 1
                    return
                else:
                    stats.other_packets += 1
                    return
        else:
            stats.other_packets += 1
            return
        if n < t + 20:
            stats.truncated_packets += 1
            return
        end = min(end, n)
        sport, dport, seq, ack, doff, flags = _TCP.unpack_from(data, t)
        t += (doff >> 4) * 4
        payload = memoryview(data)[t:end] if end > t else b""
        self.tcp(ts, src, sport, dst, dport, seq, ack, flags, payload)

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
    own = not hasattr(path, "read")
    name = str(path) if own else getattr(path, "name", "<file>")
    ts = 0
    with open(path, "rb", buffering=1 << 20) if own else nullcontext(path) as f:  # type: ignore[arg-type]
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
