"""pcap and pcapng files: magic numbers, blocks, timestamps -> (time, link type, bytes) per packet."""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

from .stats import PcapStats

log = logging.getLogger(__name__)

PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000), b"\xa1\xb2\xc3\xd4": (">", 1000),  # microseconds
    b"\x4d\x3c\xb2\xa1": ("<", 1), b"\xa1\xb2\x3c\x4d": (">", 1),  # nanoseconds
}
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


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
                last_ts = conv((hi << 32) | lo)
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
                last_ts = conv((hi << 32) | lo)
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
