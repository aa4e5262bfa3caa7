"""Export a capture as a classic pcap with synthesised Ethernet/IPv4/TCP framing.

Each capture connection becomes one TCP stream between the client's address
(from the peer) and the broker's listen address: a SYN/SYN-ACK/ACK handshake,
then every request (client to server, at its receive time) and response
(server to client, at its send time) as segments of at most ``MSS`` bytes with
advancing sequence numbers.  Wireshark/tshark decode it as Kafka with
``-d tcp.port==PORT,kafka``.
"""

from __future__ import annotations

import heapq
import ipaddress
import logging
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

from ..protocol.framing import encode_frame
from .format import CaptureRecord, ReadStats
from .reading import read_capture

log = logging.getLogger(__name__)

MSS = 32768
_PCAP_HEADER = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)  # nanosecond pcap, Ethernet
_REC = struct.Struct("<IIII")
_ETH = bytes.fromhex("020000000002" "020000000001") + b"\x08\x00"
_ETH_BACK = bytes.fromhex("020000000001" "020000000002") + b"\x08\x00"
SYN, ACK, PSH = 0x02, 0x10, 0x08


def _ipv4(host: str, fallback: str) -> bytes:
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        addr = ipaddress.ip_address(fallback)
    if addr.version != 4 or addr.is_unspecified:
        mapped = getattr(addr, "ipv4_mapped", None)
        addr = mapped if mapped is not None else ipaddress.ip_address(fallback)
    return addr.packed


def split_hostport(value: str, default_port: int = 0) -> tuple[str, int]:
    """("host", port) of "host:port" or "[v6]:port"."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        return value, default_port
    return host, int(port)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _packet(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int,
            payload: bytes, forward: bool) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags,
                      65535, 0, 0)
    total = 20 + len(tcp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
    return (_ETH if forward else _ETH_BACK) + ip + tcp + payload


@dataclass
class _Stream:
    client: bytes
    server: bytes
    cport: int
    sport: int
    cseq: int = 1000
    sseq: int = 5000
    packets: list = field(default_factory=list)

    def send(self, ts: int, payload: bytes, from_client: bool) -> None:
        for i in range(0, max(len(payload), 1), MSS):
            chunk = payload[i:i + MSS]
            if from_client:
                pkt = _packet(self.client, self.server, self.cport, self.sport, self.cseq, self.sseq,
                              ACK | PSH, chunk, True)
                self.cseq += len(chunk)
            else:
                pkt = _packet(self.server, self.client, self.sport, self.cport, self.sseq, self.cseq,
                              ACK | PSH, chunk, False)
                self.sseq += len(chunk)
            self.packets.append((ts, pkt))

    def handshake(self, ts: int) -> None:
        self.packets.append((ts - 3000, _packet(self.client, self.server, self.cport, self.sport,
                                                self.cseq - 1, 0, SYN, b"", True)))
        self.packets.append((ts - 2000, _packet(self.server, self.client, self.sport, self.cport,
                                                self.sseq - 1, self.cseq, SYN | ACK, b"", False)))
        self.packets.append((ts - 1000, _packet(self.client, self.server, self.cport, self.sport,
                                                self.cseq, self.sseq, ACK, b"", True)))


def records_to_packets(records: Iterable[CaptureRecord], handshake: bool = True) -> Iterator[tuple[int, bytes]]:
    """(timestamp ns, Ethernet frame) of every synthesised packet, in time order."""
    streams: dict[tuple[int, str], _Stream] = {}
    next_port = 40000
    for r in records:
        key = (r.broker_id, r.connection_id)
        st = streams.get(key)
        if st is None:
            chost, cport = split_hostport(r.peer)
            shost, sport = split_hostport(r.server, 9092)
            if not cport:
                cport = next_port
                next_port += 1
            st = streams[key] = _Stream(_ipv4(chost, "127.0.0.1"), _ipv4(shost, "127.0.0.1"), cport, sport or 9092)
            if handshake:
                st.handshake(r.receive_ns)
        st.send(r.receive_ns, encode_frame(r.request), True)
        if r.response is not None:
            st.send(max(r.send_ns, r.receive_ns), encode_frame(r.response), False)
    # Per stream the packets are in order already; merge the streams by time (stable within one).
    yield from heapq.merge(*(s.packets for s in streams.values()), key=lambda p: p[0])


def write_pcap(out: BinaryIO, packets: Iterable[tuple[int, bytes]]) -> int:
    """Write a nanosecond-resolution pcap; returns the number of packets."""
    out.write(_PCAP_HEADER)
    n = 0
    for ts, pkt in packets:
        out.write(_REC.pack(ts // 1_000_000_000, ts % 1_000_000_000, len(pkt), len(pkt)))
        out.write(pkt)
        n += 1
    return n


def export_pcap(paths: Iterable[str | os.PathLike], out_path: str | os.PathLike, handshake: bool = True,
                stats: ReadStats | None = None) -> int:
    """Write the capture files/directories ``paths`` as a pcap at ``out_path``; returns the packet count."""
    with open(out_path, "wb") as out:
        return write_pcap(out, records_to_packets(read_capture(paths, stats), handshake))
