"""``minikafka capture show|export``: summarise a capture, or write it as a pcap."""

from __future__ import annotations

import argparse
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

from .format import CaptureRecord, ReadStats, capture_files
from .reading import read_capture

log = logging.getLogger(__name__)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capture", help="inspect or export a traffic capture (minikafka serve --capture DIR)")
    csub = p.add_subparsers(dest="capture_command", required=True)
    s = csub.add_parser("show", help="summary: requests and bytes per api key, connections per listener and "
                                     "principal, time span")
    s.add_argument("paths", nargs="+", help="capture directories, .mkcap files, or tcpdump pcap/pcapng files")
    s.add_argument("--port", type=int, action="append", default=None, metavar="PORT",
                   help="Kafka port in pcap/pcapng files (repeatable; default 9092)")
    s.add_argument("--transactions", action="store_true",
                   help="also summarise transactional traffic (KIP-98): transactional produce batches, "
                        "control batches (commit/abort markers), read_committed fetches, aborted "
                        "transactions (parses every Produce and Fetch)")
    s.add_argument("--groups", action="store_true",
                   help="also summarise group traffic per group: classic, KIP-848 consumer and KIP-932 share "
                        "groups (members, heartbeats, epochs, commits, errors; share groups' records acquired "
                        "and acknowledged as accepted/released/rejected)")
    e = csub.add_parser("export", help="write the capture as a pcap (tshark: -d tcp.port==PORT,kafka)")
    e.add_argument("--pcap", required=True, metavar="OUT.pcap", help="output file")
    e.add_argument("--no-handshake", action="store_true", help="leave out the synthesised SYN/SYN-ACK/ACK")
    e.add_argument("paths", nargs="+", help="capture directories, .mkcap files, or tcpdump pcap/pcapng files")
    e.add_argument("--port", type=int, action="append", default=None, metavar="PORT",
                   help="Kafka port in pcap/pcapng files (repeatable; default 9092)")
    e.add_argument("--no-progress", action="store_true", help="no progress display (none when stderr is no terminal)")


class _Connection:
    """What ``capture show`` keeps of one connection: its listener, its principal (the one of its latest
    request, i.e. after any SASL authentication: a pre-authentication ApiVersions runs as
    ``User:ANONYMOUS``) and its request count."""

    __slots__ = ("listener", "principal", "last_ns", "requests")

    def __init__(self) -> None:
        self.listener = self.principal = ""
        self.last_ns = -1
        self.requests = 0

    def add(self, r: CaptureRecord) -> None:
        self.requests += 1
        if r.receive_ns >= self.last_ns:
            self.last_ns = r.receive_ns
            self.principal = r.principal
            self.listener = r.listener or self.listener


def summarize(paths: list[str], ports: list[int] | None = None,
              transactions: bool = False, groups: bool = False) -> tuple[dict, ReadStats]:
    """Per api key [requests, request bytes, response bytes], plus totals, and what the reader met.

    The summary's "principals" maps (listener, principal) to [connections, requests]: each connection
    counted under the principal it ended with (the authenticated one) and the listener it came in on
    ("" where the capture does not tell: pcaps, and captures older than the listener field).
    For pcap/pcapng files (Kafka on ``ports``) the summary's "pcap" is a :class:`~.pcapread.PcapStats`;
    with ``transactions`` its "transactions" is a :class:`~.transactions.TransactionSummary`, with
    ``groups`` its "groups" a :class:`~.groups.GroupSummary` (None otherwise).
    """
    from .groups import GroupSummary
    from .pcapread import PcapStats
    from .transactions import TransactionSummary

    stats = ReadStats()
    pcap_stats = PcapStats()
    txn = TransactionSummary() if transactions else None
    grp = GroupSummary() if groups else None
    per_api: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    conns: dict[tuple[int, str], _Connection] = {}
    first = last = None
    for r in read_capture(paths, stats, ports=ports, pcap_stats=pcap_stats):
        row = per_api[r.api_key]
        row[0] += 1
        row[1] += len(r.request) + 4
        row[2] += 0 if r.response is None else len(r.response) + 4
        conn = conns.get((r.broker_id, r.connection_id))
        if conn is None:
            conn = conns[(r.broker_id, r.connection_id)] = _Connection()
        conn.add(r)
        first = r.receive_ns if first is None else min(first, r.receive_ns)
        last = r.send_ns if last is None else max(last, r.send_ns)
        if txn is not None:
            txn.add(r)
        if grp is not None:
            grp.add(r)
    principals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for conn in conns.values():
        row = principals[(conn.listener, conn.principal)]
        row[0] += 1
        row[1] += conn.requests
    return {"per_api": dict(per_api), "connections": len(conns), "principals": dict(principals),
            "first_ns": first, "last_ns": last, "pcap": pcap_stats, "transactions": txn, "groups": grp}, stats


def _counted(records: Iterable[CaptureRecord], advance: Callable[[int], None], every: int = 1024
             ) -> Iterator[CaptureRecord]:
    """``records``, calling ``advance(n)`` after every ``every`` of them and after the last."""
    n = 0
    for r in records:
        yield r
        n += 1
        if n == every:
            advance(n)
            n = 0
    advance(n)


def run_capture_command(args: argparse.Namespace) -> int:
    if not capture_files(args.paths):
        print("no capture files found")
        return 1
    if args.capture_command == "show":
        from ..protocol.api import APIS

        summary, stats = summarize(args.paths, args.port, getattr(args, "transactions", False),
                                   getattr(args, "groups", False))
        files = capture_files(args.paths)
        print(f"{len(files)} file(s), {stats.blocks} block(s), {stats.records} request(s), "
              f"{summary['connections']} connection(s)")
        if summary["first_ns"] is not None:
            print(f"time span: {(summary['last_ns'] - summary['first_ns']) / 1e9:.3f} s")
        if stats.corrupt_blocks or stats.torn_bytes or stats.skipped_bytes:
            print(f"corrupt blocks skipped: {stats.corrupt_blocks}, torn tail bytes: {stats.torn_bytes}, "
                  f"unreadable bytes: {stats.skipped_bytes}")
        ps = summary["pcap"]
        if ps.packets:
            print(f"pcap: {ps.packets} packet(s), {ps.connections} Kafka connection(s), "
                  f"{ps.gaps} gap(s) ({ps.gap_bytes} bytes), {ps.skipped_bytes} bytes skipped, "
                  f"{ps.requests_without_response} request(s) without response, "
                  f"{ps.responses_without_request} response(s) without request")
            if ps.other_ports:
                print(f"pcap: {ps.other_ports} TCP packet(s) on other ports (Kafka ports: --port)")
        print(f"{'api':<24} {'key':>4} {'requests':>9} {'request bytes':>14} {'response bytes':>15}")
        tot = [0, 0, 0]
        for key, (n, rq, rs) in sorted(summary["per_api"].items()):
            name = APIS[key].name if key in APIS else "?"
            print(f"{name:<24} {key:>4} {n:>9} {rq:>14} {rs:>15}")
            tot = [tot[0] + n, tot[1] + rq, tot[2] + rs]
        print(f"{'total':<24} {'':>4} {tot[0]:>9} {tot[1]:>14} {tot[2]:>15}")
        principals = summary["principals"]
        if any(listener or principal for listener, principal in principals):
            width = max(24, *(len(p) for _, p in principals))
            print(f"{'listener':<16} {'principal':<{width}} {'connections':>11} {'requests':>9}")
            for (listener, principal), (n, reqs) in sorted(principals.items(), key=lambda kv: (-kv[1][1], kv[0])):
                print(f"{listener or '?':<16} {principal or '?':<{width}} {n:>11} {reqs:>9}")
        if summary["transactions"] is not None:
            for line in summary["transactions"].lines():
                print(line)
        if summary["groups"] is not None:
            for line in summary["groups"].lines():
                print(line)
        return 0
    if args.capture_command == "export":
        from ..tools.progress import ProgressDisplay, progress_enabled
        from .pcap import records_to_packets, write_pcap

        stats = ReadStats()
        with open(args.pcap, "wb") as out, \
                ProgressDisplay("exporting requests", enabled=progress_enabled(args.no_progress)) as bar:
            records = _counted(read_capture(args.paths, stats, ports=args.port), bar.advance)
            n = write_pcap(out, records_to_packets(records, handshake=not args.no_handshake))
            bar.update(total=stats.records)
        print(f"wrote {n} packet(s) for {stats.records} request(s) to {args.pcap}")
        return 0
    return 2
