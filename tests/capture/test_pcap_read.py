"""Reading tcpdump files (pcap/pcapng) of Kafka traffic back into capture records.

The traffic is a real broker capture: exported with our own pcap export, or cut
into segments here and re-packed with every link type, reordered, duplicated,
overlapped, wrapped around 2**32, with segments lost, or started mid-stream.
Then real tcpdump on the loopback interface against a real client.
"""

from __future__ import annotations

import io
import random
import re
import shutil
import signal
import struct
import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import trio
from helpers import batch, create, fetch, produce
from waiting import wait_for, wait_for_no_connections

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.capture import CaptureRecord, read_capture
from minikafka.capture.cli import summarize
from minikafka.capture.pcap import records_to_packets, write_pcap
from minikafka.capture.pcapread import PcapStats, is_pcap_file, read_pcap
from minikafka.capture.tcp import ACK, FIN, PSH, RST, SYN, TcpStream
from minikafka.cli import main as cli_main
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.testing import BrokerThread

MASK = 0xFFFFFFFF


# -- the traffic: one broker session, captured by the broker itself ---------------------------------

@pytest.fixture(scope="module")
def session(tmp_path_factory) -> tuple[list[CaptureRecord], int, Path]:
    """(records in capture order, broker port, capture dir) of three clients' traffic."""
    cap = tmp_path_factory.mktemp("cap")

    async def run() -> int:
        async with serve_broker(capture_dir=cap, captures=CAPTURE) as broker:
            async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="client-a") as a, \
                    await KafkaConnection.connect("127.0.0.1", broker.port, client_id="client-b") as b, \
                    await KafkaConnection.connect("127.0.0.1", broker.port, client_id=None) as c:
                for conn in (a, b, c):
                    await conn.negotiate()
                    await conn.request(K.METADATA, 12, {"topics": None})
                await create(a, "t")
                for i in range(4):
                    await produce(a, "t", batch([b"a%d-" % i * 900, b"k" * (i * 700)]))
                    await produce(b, "t", batch([b"b%d" % i]), version=3)
                    await c.request(K.METADATA, 1 + i, {"topics": None})
                await a.send(K.PRODUCE, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": [
                    {"name": "t", "partition_data": [{"index": 0, "records": batch([b"no-ack" * 300])}]}]})
                await fetch(a, "t")
                await fetch(b, "t", offset=3)
                await produce(a, "t", batch([b"last" * 500]))
            return broker.port

    port = trio.run(run)
    recs = list(read_capture([cap]))
    assert len({r.connection_id for r in recs}) == 3
    return recs, port, cap


def key(r: CaptureRecord) -> tuple:
    return r.peer, r.correlation_id


def fields_of(r: CaptureRecord, times: bool = True, endpoints: bool = True) -> tuple:
    t = (r.api_key, r.api_version, r.correlation_id, r.client_id, r.request, r.response)
    if endpoints:
        t += (r.peer, r.server, r.connection_id)
    if times:
        t += (r.receive_ns, r.send_ns)
    return t


def expected(r: CaptureRecord, us: bool = False, v6: bool = False) -> CaptureRecord:
    """What the pcap reader gives for a broker-captured record sent as in :func:`segments`."""
    send = max(r.send_ns, r.receive_ns) if r.response is not None else r.receive_ns
    recv = r.receive_ns
    if us:
        recv, send = recv // 1000 * 1000, send // 1000 * 1000
    peer, server = r.peer, r.server
    if v6:
        peer, server = peer.replace("127.0.0.1", "::1"), server.replace("127.0.0.1", "::1")
    return replace(r, receive_ns=recv, send_ns=send, peer=peer, server=server, connection_id=f"{peer}-{server}",
                   broker_id=-1, principal="")


def assert_same(got: list[CaptureRecord], want: list[CaptureRecord], times: bool = True) -> None:
    assert sorted((fields_of(r, times) for r in got), key=repr) == sorted((fields_of(r, times) for r in want), key=repr)


# -- segments: the records' frames cut into TCP segments, and packets made of them --------------------

@dataclass
class Seg:
    ts: int
    conn: str  # connection id
    c2s: bool
    off: int  # stream offset of the first byte
    data: bytes
    ack_off: int  # the other direction's bytes sent so far
    flags: int = ACK | PSH


@dataclass
class Traffic:
    segs: list[Seg]
    endpoints: dict[str, tuple[tuple[str, int], tuple[str, int]]]  # conn -> (client, server)
    ranges: dict[tuple[str, int], tuple[tuple[int, int], tuple[int, int] | None]]  # (conn, corr) -> req, resp


def hostport(s: str) -> tuple[str, int]:
    h, _, p = s.rpartition(":")
    return h, int(p)


def segments(records: list[CaptureRecord], size: int = 1400) -> Traffic:
    """Every request/response frame, cut into ``size``-byte segments, in time order."""
    events = []
    for i, r in enumerate(records):
        events.append((r.receive_ns, i, 0, r))
        if r.response is not None:
            events.append((max(r.send_ns, r.receive_ns), i, 1, r))
    events.sort(key=lambda e: (e[0], e[2], e[1]))
    sent: dict[tuple[str, bool], int] = defaultdict(int)
    segs: list[Seg] = []
    endpoints = {}
    ranges: dict = {}
    for ts, _i, kind, r in events:
        c2s = kind == 0
        frame = (r.request if c2s else r.response)
        frame = len(frame).to_bytes(4, "big") + frame
        endpoints[r.connection_id] = (hostport(r.peer), hostport(r.server))
        start = sent[(r.connection_id, c2s)]
        for i in range(0, len(frame), size):
            segs.append(Seg(ts, r.connection_id, c2s, start + i, frame[i:i + size],
                            sent[(r.connection_id, not c2s)]))
        sent[(r.connection_id, c2s)] = start + len(frame)
        req, resp = ranges.get((r.connection_id, r.correlation_id), (None, None))
        if c2s:
            req = (start, start + len(frame))
        else:
            resp = (start, start + len(frame))
        ranges[(r.connection_id, r.correlation_id)] = (req, resp)
    return Traffic(segs, endpoints, ranges)


def _ip(host: str, v6: bool) -> bytes:
    import ipaddress
    return ipaddress.ip_address("::1" if v6 else host).packed


def packet(src: bytes, dst: bytes, sport: int, dport: int, seq: int, ack: int, flags: int, payload: bytes,
           link: str) -> bytes:
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq & MASK, ack & MASK, 5 << 4, flags, 65535, 0, 0) + payload
    if len(src) == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src, dst) + tcp
        etype = 0x0800
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp), 6, 64, src, dst) + tcp
        etype = 0x86DD
    mac = bytes.fromhex("020000000001020000000002")
    if link == "eth":
        return mac + struct.pack("!H", etype) + ip
    if link == "vlan":
        return mac + struct.pack("!HHH", 0x8100, 7, etype) + ip
    if link == "sll":
        return struct.pack("!HHH8sH", 0, 772, 6, b"\x00" * 8, etype) + ip
    if link == "sll2":
        return struct.pack("!HHIHBB8s", etype, 0, 1, 772, 0, 6, b"\x00" * 8) + ip
    if link == "raw":
        return ip
    if link == "null":
        return struct.pack("<I", 2 if len(src) == 4 else 30) + ip
    raise ValueError(link)


LINKTYPES = {"eth": 1, "vlan": 1, "sll": 113, "sll2": 276, "raw": 101, "null": 0}


def packets(traffic: Traffic, segs: list[Seg] | None = None, isn: tuple[int, int] = (1000, 5000),
            handshake: bool = True, link: str = "eth", v6: bool = False) -> list[tuple[int, bytes]]:
    """(ts, packet) of the segments (default: all, in order), with a handshake before each connection's first."""
    out = []
    seen = set()
    for s in traffic.segs if segs is None else segs:
        (ch, cp), (sh, sp) = traffic.endpoints[s.conn]
        c, srv = _ip(ch, v6), _ip(sh, v6)
        if s.conn not in seen:
            seen.add(s.conn)
            if handshake:
                out.append((s.ts - 3000, packet(c, srv, cp, sp, isn[0], 0, SYN, b"", link)))
                out.append((s.ts - 2000, packet(srv, c, sp, cp, isn[1], isn[0] + 1, SYN | ACK, b"", link)))
                out.append((s.ts - 1000, packet(c, srv, cp, sp, isn[0] + 1, isn[1] + 1, ACK, b"", link)))
        if s.c2s:
            pkt = packet(c, srv, cp, sp, isn[0] + 1 + s.off, isn[1] + 1 + s.ack_off, s.flags, s.data, link)
        else:
            pkt = packet(srv, c, sp, cp, isn[1] + 1 + s.off, isn[0] + 1 + s.ack_off, s.flags, s.data, link)
        out.append((s.ts, pkt))
    return out


def write_pcap_file(path: Path, pkts: list[tuple[int, bytes]], linktype: int = 1, nano: bool = True,
                    endian: str = "<") -> None:
    with open(path, "wb") as f:
        f.write(struct.pack(endian + "IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, 262144, linktype))
        for ts, pkt in pkts:
            frac = ts % 1_000_000_000 if nano else ts % 1_000_000_000 // 1000
            f.write(struct.pack(endian + "IIII", ts // 1_000_000_000, frac, len(pkt), len(pkt)) + pkt)


def _block(endian: str, btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) % 4)
    return struct.pack(endian + "II", btype, len(body) + 12) + body + struct.pack(endian + "I", len(body) + 12)


def write_pcapng_file(path: Path, pkts: list[tuple[int, bytes, int]], linktypes: list[int], endian: str = ">",
                      tsresol: int = 9) -> None:
    """A hand-built pcapng: one section, one interface per link type (if_tsresol), enhanced packet blocks."""
    with open(path, "wb") as f:
        f.write(_block(endian, 0x0A0D0D0A, struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1)))
        for lt in linktypes:
            opts = struct.pack(endian + "HH", 9, 1) + bytes([tsresol]) + b"\x00" * 3 + struct.pack(endian + "HH", 0, 0)
            f.write(_block(endian, 1, struct.pack(endian + "HHI", lt, 0, 262144) + opts))
        scale = 10 ** (9 - tsresol)
        for ts, pkt, iface in pkts:
            t = ts // scale
            f.write(_block(endian, 6, struct.pack(endian + "IIIII", iface, t >> 32, t & MASK, len(pkt), len(pkt))
                           + pkt))


def read_all(path, ports, **kw) -> tuple[list[CaptureRecord], PcapStats]:
    stats = PcapStats()
    return list(read_pcap(path, ports=ports, stats=stats, **kw)), stats


# -- round trips ---------------------------------------------------------------------------------

def test_round_trip_own_export(session, tmp_path: Path) -> None:
    recs, port, cap = session
    path = tmp_path / "export.pcap"
    with open(path, "wb") as f:
        write_pcap(f, records_to_packets(recs))
    assert is_pcap_file(path) and not is_pcap_file(next(cap.glob("*.mkcap"))) and not is_pcap_file(tmp_path)
    got, stats = read_all(path, {port})
    assert_same(got, [expected(r) for r in recs])
    assert stats.gaps == stats.skipped_bytes == stats.responses_without_request == 0
    assert stats.requests_without_response == 0 and stats.acks0_requests == 1
    assert stats.records == stats.requests == len(recs) and stats.connections == 3
    acks0 = [r for r in got if r.api_key == K.PRODUCE and r.response is None]
    assert len(acks0) == 1 and acks0[0].send_ns == acks0[0].receive_ns
    # in the order the requests completed
    assert [r.receive_ns for r in got] == sorted(r.receive_ns for r in got)
    # the default port is 9092 only: nothing here
    assert read_all(path, None)[0] == []
    # broker ids by port or by "ip:port"
    assert {r.broker_id for r in read_pcap(path, ports={port}, broker_ids={str(port): 7})} == {7}
    assert {r.broker_id for r in read_pcap(path, ports={port}, broker_ids={f"127.0.0.1:{port}": 3})} == {3}
    # a file object works too
    assert len(list(read_pcap(io.BytesIO(path.read_bytes()), ports={port}))) == len(recs)


@pytest.mark.parametrize("link,v6,fmt", [
    ("eth", False, "pcap-ns-le"), ("vlan", True, "pcap-us-be"), ("sll", False, "pcapng-le-us"),
    ("sll2", True, "pcapng-be-ns"), ("raw", False, "pcap-us-le"), ("null", True, "pcap-ns-be"),
])
def test_link_types_and_formats(session, tmp_path: Path, link: str, v6: bool, fmt: str) -> None:
    recs, port, _ = session
    pkts = packets(segments(recs), link=link, v6=v6)
    path = tmp_path / "t.cap"
    us = fmt.endswith("us") or "-us-" in fmt
    if fmt.startswith("pcapng"):
        write_pcapng_file(path, [(ts, p, 0) for ts, p in pkts], [LINKTYPES[link]],
                          endian="<" if "-le" in fmt else ">", tsresol=6 if us else 9)
    else:
        write_pcap_file(path, pkts, LINKTYPES[link], nano=not us, endian="<" if "-le" in fmt else ">")
    assert is_pcap_file(path)
    got, stats = read_all(path, [port])
    assert_same(got, [expected(r, us=us, v6=v6) for r in recs])
    assert stats.gaps == 0 and stats.other_packets == 0 and stats.unsupported_link == 0
    if v6:
        assert got[0].peer.startswith("::1:")


def test_pcapng_two_interfaces_and_dpkt_writer(session, tmp_path: Path) -> None:
    """Packets over two interfaces of different link types; and a pcapng written by dpkt (microseconds)."""
    import dpkt

    recs, port, _ = session
    traffic = segments(recs)
    eth = packets(traffic, link="eth")
    raw = packets(traffic, link="raw")
    mixed = [(ts, (e if i % 2 else r), i % 2) for i, ((ts, e), (_, r)) in enumerate(zip(eth, raw))]
    path = tmp_path / "two.pcapng"
    write_pcapng_file(path, mixed, [101, 1])
    got, _ = read_all(path, {port})
    assert_same(got, [expected(r) for r in recs])

    path2 = tmp_path / "dpkt.pcapng"
    with open(path2, "wb") as f:
        w = dpkt.pcapng.Writer(f, snaplen=262144, linktype=dpkt.pcap.DLT_EN10MB)
        for ts, pkt in eth:
            w.writepkt(pkt, ts=ts / 1e9)
    got, _ = read_all(path2, {port})
    assert_same(got, [expected(r) for r in recs], times=False)
    for r in got:  # microseconds, through a float: within a few microseconds
        want = expected(next(x for x in recs if key(x) == key(r)))
        assert abs(r.receive_ns - want.receive_ns) < 5000 and abs(r.send_ns - want.send_ns) < 5000


def test_reordered_duplicated_overlapping_wrapped(session, tmp_path: Path) -> None:
    recs, port, _ = session
    traffic = segments(recs, size=500)
    rnd = random.Random(7)
    # runs of segments in one direction of one connection, shuffled within windows of 5
    runs: list[list[Seg]] = []
    for s in traffic.segs:
        if runs and (runs[-1][0].conn, runs[-1][0].c2s) == (s.conn, s.c2s):
            runs[-1].append(s)
        else:
            runs.append([s])
    segs: list[Seg] = []
    for run in runs:
        for i in range(0, len(run), 5):
            w = run[i:i + 5]
            rnd.shuffle(w)
            segs.extend(w)
    # duplicates, a few positions later
    for _ in range(len(segs) // 6):
        i = rnd.randrange(len(segs))
        segs.insert(min(len(segs), i + rnd.randrange(1, 6)), segs[i])
    # overlapping retransmits: the second half of one segment and the first half of the next
    by_stream: dict[tuple[str, bool], dict[int, Seg]] = defaultdict(dict)
    for s in segs:
        by_stream[(s.conn, s.c2s)][s.off] = s
    for _ in range(len(segs) // 8):
        i = rnd.randrange(len(segs))
        s = segs[i]
        nxt = by_stream[(s.conn, s.c2s)].get(s.off + len(s.data))
        if nxt is None:
            continue
        h = len(s.data) // 2
        over = replace(s, off=s.off + h, data=s.data[h:] + nxt.data[:len(nxt.data) // 2 + 1])
        segs.insert(max(0, i - rnd.randrange(0, 3)), over)
    assert len(segs) > len(traffic.segs) * 1.2
    path = tmp_path / "mess.pcap"
    write_pcap_file(path, packets(traffic, segs, isn=(2**32 - 3000, 2**32 - 800)))
    got, stats = read_all(path, {port})
    assert_same(got, [expected(r) for r in recs], times=False)
    assert stats.gaps == 0 and stats.skipped_bytes == 0 and stats.resyncs == 0
    assert stats.requests_without_response == stats.responses_without_request == 0


def _lost_case(recs: list[CaptureRecord], traffic: Traffic, which: str) -> Seg:
    """The segment to drop: of a multi-segment request (Produce) or response (Fetch) of client-a."""
    c2s = which.startswith("request")
    r = [r for r in recs if r.client_id == "client-a" and r.api_key == (K.PRODUCE if c2s else K.FETCH)
         and r.response is not None][1 if c2s else 0]
    req, resp = traffic.ranges[(r.connection_id, r.correlation_id)]
    lo, hi = req if c2s else resp
    segs = [s for s in traffic.segs if s.conn == r.connection_id and s.c2s == c2s and lo <= s.off < hi]
    assert len(segs) >= 3
    return segs[0] if which.endswith("start") else segs[len(segs) // 2]


@pytest.mark.parametrize("which", ["request-start", "request-middle", "response-start", "response-middle",
                                   "request-fetch"])
def test_lost_segment(session, tmp_path: Path, which: str) -> None:
    """One segment missing: the frame it was part of is lost and counted, everything after it is back."""
    recs, port, _ = session
    traffic = segments(recs, size=600)
    if which == "request-fetch":  # a whole one-segment request lost, and the segment before resynchronising
        r = next(r for r in recs if r.client_id == "client-a" and r.api_key == K.FETCH)
        lo, _ = traffic.ranges[(r.connection_id, r.correlation_id)][0]
        drop = next(s for s in traffic.segs if s.conn == r.connection_id and s.c2s and s.off == lo)
    else:
        drop = _lost_case(recs, traffic, which)
    lo, hi = drop.off, drop.off + len(drop.data)
    want = []
    lost_req = lost_resp = 0
    for r in recs:
        req, resp = traffic.ranges[(r.connection_id, r.correlation_id)]
        if r.connection_id == drop.conn and drop.c2s and req[0] < hi and lo < req[1]:
            lost_req += 1
            continue
        if r.connection_id == drop.conn and not drop.c2s and resp is not None and resp[0] < hi and lo < resp[1]:
            lost_resp += 1
            r = replace(r, response=None, send_ns=r.receive_ns)
        want.append(r)
    assert lost_req + lost_resp == 1
    path = tmp_path / "lost.pcap"
    write_pcap_file(path, packets(traffic, [s for s in traffic.segs if s is not drop]))
    got, stats = read_all(path, {port})
    assert_same(got, [expected(r) for r in want], times=False)
    assert stats.gaps == 1 and stats.gap_bytes == hi - lo
    assert stats.responses_without_request == lost_req and stats.requests_without_response == lost_resp
    assert stats.resyncs == (1 if which.endswith(("start", "fetch")) else 0)
    if which.endswith("middle"):
        assert stats.lost_frames == 1


def test_capture_starts_mid_stream(session, tmp_path: Path) -> None:
    recs, port, _ = session
    traffic = segments(recs, size=700)
    a_conn = next(r.connection_id for r in recs if r.client_id == "client-a")
    # cut in the middle of client-a's second Produce request
    prod = [r for r in recs if r.connection_id == a_conn and r.api_key == K.PRODUCE][1]
    lo, hi = traffic.ranges[(a_conn, prod.correlation_id)][0]
    cut = next(i for i, s in enumerate(traffic.segs) if s.conn == a_conn and s.c2s and lo < s.off < hi)
    kept = traffic.segs[cut:]
    first: dict[tuple[str, bool], int] = {}
    for s in kept:
        first.setdefault((s.conn, s.c2s), s.off)
    want = []
    for r in recs:
        req, _resp = traffic.ranges[(r.connection_id, r.correlation_id)]
        if (r.connection_id, True) in first and req[0] >= first[(r.connection_id, True)]:
            want.append(r)
    assert 0 < len(want) < len(recs)
    assert any(r.connection_id == a_conn for r in want)
    path = tmp_path / "mid.pcap"
    write_pcap_file(path, packets(traffic, kept, handshake=False))
    got, stats = read_all(path, {port})
    assert_same(got, [expected(r) for r in want], times=False)
    assert stats.requests_without_response == 0 and stats.resyncs >= 1


def test_shards_partition_connections(session, tmp_path: Path) -> None:
    recs, port, _ = session
    path = tmp_path / "s.pcap"
    write_pcap_file(path, packets(segments(recs)))
    whole = {fields_of(r) for r in read_pcap(path, ports={port})}
    parts = [[fields_of(r) for r in read_pcap(path, ports={port}, shard=(i, 3))] for i in range(3)]
    assert sum(len(p) for p in parts) == len(whole) and set().union(*parts) == whole
    conns = [{f[8] for f in p} for p in parts]
    assert sum(len(c) for c in conns) == 3  # each connection in exactly one shard
    with pytest.raises(ValueError):
        list(read_pcap(path, ports={port}, shard=(3, 3)))


def test_not_kafka_connection_ignored(session, tmp_path: Path) -> None:
    """A TLS-looking connection on the port is skipped; the others are decoded."""
    recs, port, _ = session
    traffic = segments(recs)
    tls = Seg(traffic.segs[0].ts, "tls", True, 0, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x5a" * 500, 0)
    traffic.endpoints["tls"] = (("127.0.0.1", 45000), ("127.0.0.1", port))
    path = tmp_path / "tls.pcap"
    write_pcap_file(path, packets(traffic, [tls, *traffic.segs]))
    got, stats = read_all(path, {port})
    assert_same(got, [expected(r) for r in recs])
    assert stats.non_kafka_connections == 1 and stats.connections == 4


def test_capture_show_and_export_pcap(session, tmp_path: Path, capsys) -> None:
    recs, port, _ = session
    path = tmp_path / "show.pcap"
    write_pcap_file(path, packets(segments(recs)))
    assert cli_main(["capture", "show", str(path), "--port", str(port)]) == 0
    out = capsys.readouterr().out
    assert f"{len(recs)} request(s)" in out and "Produce" in out and "Metadata" in out
    summary, _ = summarize([str(path)], ports=[port])
    assert summary["per_api"][K.PRODUCE][0] == sum(r.api_key == K.PRODUCE for r in recs)
    # pcap -> records -> our export -> records again
    out_pcap = tmp_path / "again.pcap"
    assert cli_main(["capture", "export", "--pcap", str(out_pcap), "--port", str(port), str(path)]) == 0
    assert_same(list(read_pcap(out_pcap, ports={port})), [expected(r) for r in recs], times=False)
    assert list(read_capture([path], ports=[port])) and not list(read_capture([path]))


# -- TcpStream on its own ---------------------------------------------------------------------------

class Sink:
    def __init__(self) -> None:
        self.out = bytearray()
        self.gaps: list[int] = []

    def data(self, data, ts: int) -> None:
        self.out += data

    def gap(self, n: int, ts: int) -> None:
        self.gaps.append(n)
        self.out += b"?" * n


def test_tcp_stream_wrap_overlap_gap_fin() -> None:
    sink = Sink()
    s = TcpStream(sink, max_pending=10)
    isn = MASK - 3
    s.segment(isn, b"", 0, SYN)
    s.segment(isn + 1 + 4, b"efgh", 1)  # ahead of a hole
    s.segment(isn + 1, b"abcdef", 2)  # fills it, overlaps
    s.segment(isn + 1 + 2, b"cd", 3)  # old duplicate
    assert bytes(sink.out) == b"abcdefgh" and s.duplicate_bytes == 4 and s.out_of_order == 1
    s.segment((isn + 1 + 20) & MASK, b"uvwxyz", 4)  # hole of 12
    assert not sink.gaps and s.has_pending
    s.ack((isn + 1 + 26) & MASK, 5)  # the receiver had it: the hole never fills
    assert sink.gaps == [12] and bytes(sink.out).endswith(b"?" * 12 + b"uvwxyz")
    s.segment((isn + 1 + 40) & MASK, b"0123456789ab", 6)  # more than max_pending behind a hole
    assert sink.gaps == [12, 14]
    s.segment((isn + 1 + 60) & MASK, b"", 7, FIN | ACK)
    assert not s.finished
    s.segment((isn + 1 + 52) & MASK, b"cdefghij", 8)
    assert s.finished and bytes(sink.out).endswith(b"0123456789abcdefghij")
    s.segment((isn + 1 + 60) & MASK, b"late", 9)
    assert s.late_segments == 1


def test_tcp_stream_mid_stream_and_rst() -> None:
    sink = Sink()
    s = TcpStream(sink)
    s.segment(100, b"", 0, ACK)  # a bare ACK does not start the stream
    s.segment(5000, b"hello", 1)
    s.segment(5010, b"world", 2)
    s.segment(5020, b"", 3, RST | ACK)
    assert s.finished and bytes(sink.out) == b"hello?????world" and not s.saw_syn


# -- real tcpdump, real client ------------------------------------------------------------------------

def _start_tcpdump(args: list[str]) -> subprocess.Popen | None:
    # immediate mode: no block timeout holding packets back at exit; -B: room for bursts of 64 KiB lo packets
    p = subprocess.Popen(["tcpdump", "-U", "--immediate-mode", "-B", "65536", "-n", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    deadline = time.time() + 5
    line = b""
    while time.time() < deadline:  # "listening on lo, link-type EN10MB ..."
        line = p.stderr.readline()
        if b"listening on" in line or not line:
            break
    if b"listening on" not in line:
        p.kill()
        p.wait()
        return None
    return p


def _counts_match(request_stats: dict[int, list[int]], answered: Counter, sent: Counter) -> bool:
    """Whether the broker's request counts lie between the requests answered and those sent."""
    counts = {k: v[0] for k, v in request_stats.items()}
    return all(answered[k] <= counts.get(k, 0) <= sent[k] for k in set(counts) | set(sent))


def test_tcpdump_real_client(tmp_path: Path, capsys) -> None:
    if shutil.which("tcpdump") is None:
        pytest.skip("tcpdump is not installed")
    from confluent_kafka import Consumer, Producer, TopicPartition

    n = 200
    with BrokerThread(BrokerConfig(port=0)) as bt:
        port = bt.port
        files = {"lo": tmp_path / "lo.pcap", "any": tmp_path / "any.pcap", "sll": tmp_path / "sll.pcap"}
        dumps = {
            "lo": _start_tcpdump(["-i", "lo", "-w", str(files["lo"]), "tcp", "port", str(port)]),
            "any": _start_tcpdump(["-i", "any", "-w", str(files["any"]), "tcp", "port", str(port)]),
            "sll": _start_tcpdump(["-i", "any", "-y", "LINUX_SLL", "--time-stamp-precision=nano",
                                   "-w", str(files["sll"]), "tcp", "port", str(port)]),
        }
        if dumps["lo"] is None:
            for p in dumps.values():
                if p is not None:
                    p.kill()
            pytest.skip("tcpdump could not capture on lo (not root?)")
        try:
            p = Producer({"bootstrap.servers": bt.bootstrap, "linger.ms": 2, "client.id": "pcap-producer"})
            for i in range(n):
                p.produce("pt", b"value-%d" % i * 20)
                if i % 50 == 0:
                    p.flush()
            assert p.flush(10) == 0
            c = Consumer({"bootstrap.servers": bt.bootstrap, "group.id": "g", "client.id": "pcap-consumer",
                          "enable.auto.commit": False, "fetch.wait.max.ms": 50})
            c.assign([TopicPartition("pt", 0, 0)])
            got = 0
            deadline = time.time() + 20
            while got < n and time.time() < deadline:
                got += len([m for m in c.consume(100, timeout=1) if m.error() is None])
            c.close()
            del p
            assert got == n
            wait_for_no_connections(bt)  # the clients' last packets went out
        finally:
            for proc in dumps.values():
                if proc is not None:
                    proc.send_signal(signal.SIGINT)
            drops = {}
            for name, proc in dumps.items():
                if proc is not None:
                    err = proc.communicate(timeout=10)[1].decode()
                    m = re.search(r"(\d+) packets? dropped by kernel", err)
                    drops[name] = int(m.group(1)) if m else 0
        results = {}
        for name, path in files.items():
            if dumps[name] is None:
                continue
            recs, stats = read_all(path, {port})
            results[name] = (recs, stats)
        # The broker counts a request once handled: wait for the last ones.  A request a client sent
        # just before closing may get no response (and not be counted by the broker): those are the slack.
        recs_lo = results["lo"][0]
        answered = Counter(r.api_key for r in recs_lo if r.response is not None or r.api_key == K.PRODUCE)
        sent = Counter(r.api_key for r in recs_lo)
        try:
            wait_for(lambda: _counts_match(bt.broker.request_stats, answered, sent), 3, "the broker's counts")
        except AssertionError:
            pass  # the comparisons below say what differs
        broker_stats = {k: list(v) for k, v in bt.broker.request_stats.items()}
    assert set(results) >= {"lo"}
    for name, (recs, stats) in results.items():
        if drops[name]:  # the capture is incomplete: only what it has can be checked
            assert stats.gaps and Counter(r.api_key for r in recs) <= Counter(
                {k: v[0] for k, v in broker_stats.items()}), name
            continue
        unanswered = [r for r in recs if r.response is None and r.api_key != K.PRODUCE]
        # Only what a client still had in flight when it closed its connection goes unanswered (a consumer's last
        # fetch; librdkafka closing a consumer may also drop its FindCoordinator, telemetry and Metadata
        # requests): the last requests of their connection, none answered after them.
        position = {id(r): i for i, r in enumerate(recs)}
        for r in unanswered:
            later = [q for q in recs[position[id(r)] + 1:] if q.connection_id == r.connection_id]
            assert all(q.response is None for q in later), (name, r, later)
        assert len({r.connection_id for r in unanswered}) <= 2, (name, unanswered)  # the two clients' last
        if not unanswered:
            assert Counter(r.api_key for r in recs) == {k: v[0] for k, v in broker_stats.items()}, name
            req_bytes: dict[int, int] = defaultdict(int)
            for r in recs:
                req_bytes[r.api_key] += len(r.request) + 4
            assert dict(req_bytes) == {k: v[1] for k, v in broker_stats.items()}, name
        else:
            assert _counts_match(broker_stats, Counter(r.api_key for r in recs if r not in unanswered),
                                 Counter(r.api_key for r in recs)), (name, broker_stats, recs)
        assert stats.gaps == 0 and stats.resyncs == 0 and stats.responses_without_request == 0, (name, stats)
        assert {r.client_id for r in recs} == {"pcap-producer", "pcap-consumer"}
        assert all(r.server == f"127.0.0.1:{port}" and r.receive_ns <= r.send_ns for r in recs)
        by_conn: dict[str, list[int]] = defaultdict(list)
        for r in recs:
            by_conn[r.connection_id].append(r.correlation_id)
        assert all(ids == sorted(ids) for ids in by_conn.values())
    if "any" in results:
        assert is_pcap_file(files["any"])
    assert cli_main(["capture", "show", str(files["lo"]), "--port", str(port)]) == 0
    out = capsys.readouterr().out
    total = len(results["lo"][0])
    assert f"{total} request(s)" in out and "Produce" in out and "Fetch" in out
