"""One captured packet's link layer, IP and TCP headers -> a TCP segment.

Link types: Ethernet (with VLAN tags), Linux cooked SLL and SLL2, raw
IPv4/IPv6, BSD loopback/null.  IPv4 and IPv6 (extension headers skipped); IP
fragments are counted and dropped.
"""

from __future__ import annotations

import socket
import struct

from .stats import PcapStats

LINKTYPE_NULL, LINKTYPE_ETHERNET, LINKTYPE_RAW, LINKTYPE_LOOP = 0, 1, 101, 108
LINKTYPE_LINUX_SLL, LINKTYPE_LINUX_SLL2, LINKTYPE_IPV4, LINKTYPE_IPV6 = 113, 276, 228, 229
_RAW_LINKTYPES = {LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6, 12, 14}  # 12/14: DLT_RAW on some BSDs
_VLAN = {0x8100, 0x88A8, 0x9100}
_ETH_IP = {0x0800, 0x86DD}

_TCP = struct.Struct(">HHIIBB")


class _PacketDecoder:
    """Decodes a packet down to its TCP segment and hands that to :meth:`tcp` (see :class:`~.reader._Decoder`)."""

    stats: PcapStats

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
        """One TCP segment (``payload`` possibly empty) of a packet; the subclass's job."""
        raise NotImplementedError


def _ip_str(ip: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(ip) == 4 else socket.AF_INET6, ip)
