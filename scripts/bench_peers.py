"""minikafka beside other Kafka brokers: the probes of issue 27's table, run against each in the same run.

With no option it starts minikafka (``python -m minikafka serve``, its own process; ``--tree PATH``: from that
source tree) and probes it.
``--peer NAME=HOST:PORT`` adds an already-running broker; ``--peer-cmd NAME='COMMAND ... {port}'`` a broker
the bench starts on a free port (``{port}`` is replaced), times until it accepts connections, measures
idle (its process tree's RSS 0.5 s later) and stops at the end of its run (SIGINT to its process group).
``--bootstrap [NAME=]HOST:PORT`` probes that address instead of starting minikafka.  The first broker is
the one the ratio columns divide (first / peer).

Probes (one fresh topic of one partition per probe and broker, made with AdminClient; confluent-kafka,
the client issue 27's table was measured with, except the round trips; acks=1 unless ``--acks``, where
librdkafka's own default would be all; ``--depth`` sets the 5 in flight):
  produce     single-record Produce requests/s: linger.ms=0, batch.num.messages=1, 100 B, 5 in flight
              (records per request checked in librdkafka's statistics)
  ack         produce acknowledgement latency p50/p99: linger 0, one record at a time, after a warm-up
  e2e         end-to-end latency p50/p99: a long-polling consumer (fetch.wait.max.ms 500), assigned and
              caught up; a record every 10 ms stamped with time.perf_counter_ns()
  fetch, metadata, commit
              small round trips/s on a raw socket, 5 in flight on one connection (--connections N: N
              connections in N processes): Fetch of an empty partition (max_wait_ms 0), Metadata of one
              topic, OffsetCommit of one partition (simple commit: generation -1)
  startup     start to accepting connections and idle RSS (brokers the bench starts)
  throughput  1 KiB produce then consume MB/s (as scripts/bench broker)
The produce and round-trip probes also give the broker's CPU per request (its process tree's CPU time over the
probe, divided by its requests; where the bench knows the broker's process), which the machine's wake-up latency
and the client's pace move less than the requests/s.
Each figure is a range min-max over ``--repeat`` runs; runs alternate between brokers (A B A B ...).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from bench_broker import default_messages
from bench_common import (client_versions, cpu_seconds, free_port, minikafka_tree, start_broker, stop_broker,
                          wait_accepting)
from bench_peers_probes import ack_latency, end_to_end_latency, single_record_produce, throughput_1k
from bench_peers_wire import WireClient, check_sample, pipelined, round_trips
from confluent_kafka.admin import AdminClient, NewTopic

PROBES = ("produce", "ack", "e2e", "fetch", "metadata", "commit", "startup", "throughput")
ROUND_TRIPS = ("fetch", "metadata", "commit")


@dataclass(frozen=True)
class Row:
    """One figure of the table: which probe gives it, its unit, which way is better, issue 27's target."""

    key: str
    probe: str
    label: str
    unit: str
    higher_better: bool
    target: str = ""


def rows(acks: str, depth: int) -> list[Row]:
    return [
        Row("produce", "produce", f"single-record Produce requests/s (linger 0, 100 B, {depth} in flight, "
            f"acks={acks})", "k", True, ">= 0.8x the Go fake"),
        Row("produce_cpu", "produce", "broker CPU per single-record Produce request, us", "us", False),
        Row("ack_p50", "ack", f"produce acknowledgement p50, ms (linger 0, one at a time, acks={acks})", "ms",
            False, "<= 0.07 ms"),
        Row("ack_p99", "ack", "produce acknowledgement p99, ms", "ms", False),
        Row("e2e_p50", "e2e", "end-to-end p50, ms (long-polling consumer, 10 ms apart)", "ms", False),
        Row("e2e_p99", "e2e", "end-to-end p99, ms", "ms", False, "<= 1.2x the Go fake"),
        Row("fetch", "fetch", f"Fetch requests/s (empty partition, max_wait 0, {depth} in flight)", "k", True,
            "in proportion"),
        Row("metadata", "metadata", f"Metadata requests/s (one topic, {depth} in flight)", "k", True,
            "in proportion"),
        Row("commit", "commit", f"OffsetCommit requests/s (one partition, {depth} in flight)", "k", True,
            "in proportion"),
        *(Row(f"{kind}_cpu", kind, f"broker CPU per {name} request, us", "us", False)
          for kind, name in (("fetch", "Fetch"), ("metadata", "Metadata"), ("commit", "OffsetCommit"))),
        Row("startup", "startup", "start to accepting connections, s", "s", False, "<= 0.25 s"),
        Row("rss", "startup", "idle RSS, MB", "MB", False, "<= 40 MB"),
        Row("produce_1k", "throughput", "1 KiB produce MB/s (acks=1)", "MB", True, ">= 1.2x the best peer"),
        Row("consume_1k", "throughput", "1 KiB consume MB/s", "MB", True, ">= 1.2x the best peer"),
    ]


@dataclass
class Counts:
    """How much each probe does: the default run, or ``--quick``'s smoke run."""

    produce: int = 60_000
    ack: int = 3000
    ack_warmup: int = 300
    e2e: int = 500
    e2e_interval: float = 0.010
    round_trip_seconds: float = 2.0
    records_1k: int = default_messages(1024)  # as scripts/bench broker: 500k


QUICK = Counts(produce=2000, ack=50, ack_warmup=10, e2e=20, round_trip_seconds=0.3, records_1k=5000)


@dataclass
class Broker:
    """A broker to probe: minikafka started by the bench, a command the bench starts, or a running one."""

    name: str
    bootstrap: str | None = None  # already running
    command: str | None = None  # started on a free port: ``{port}`` in it is replaced
    tree: Path | None = None  # minikafka's source tree (None: the installed one)

    @property
    def started(self) -> bool:
        return self.bootstrap is None

    def describe(self) -> str:
        if self.bootstrap:
            return f"{self.name}: already running at {self.bootstrap}"
        if self.command:
            return f"{self.name}: started with {self.command}"
        return f"{self.name}: python -m minikafka serve (in memory) from {minikafka_tree(self.tree)}"


@dataclass
class Running:
    """A broker during one run: its address and, when the bench started it, its process and start-up."""

    bootstrap: str
    proc: subprocess.Popen | None = None
    startup: float | None = None
    rss: float | None = None
    log: Path | None = None
    pid: int | None = None  # its process: the one started, or the local one listening on the bootstrap port

    def cpu(self) -> float | None:
        """CPU seconds of its process tree so far (None when its process is not known)."""
        if self.pid is None:
            return None
        try:
            root = psutil.Process(self.pid)
            return sum(cpu_seconds(p) for p in [root, *root.children(recursive=True)])
        except psutil.NoSuchProcess:
            return None


def tree_rss_mb(pid: int) -> float:
    """RSS of a process and its children (nan once it is gone)."""
    try:
        root = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20
    except psutil.NoSuchProcess:
        return float("nan")


def listening_pid(bootstrap: str) -> int | None:
    """The process on this host listening on ``bootstrap``'s port, if it is local and can be seen."""
    host, _, port = bootstrap.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"):
        return None
    try:
        for conn in psutil.net_connections("tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == int(port) and conn.pid:
                return conn.pid
    except psutil.AccessDenied:
        pass
    return None


def wait_ready(bootstrap: str, timeout: float = 30) -> None:
    """Until the broker answers ApiVersions (accepting connections may come before that)."""
    deadline = time.perf_counter() + timeout
    while True:
        try:
            client = WireClient(bootstrap, timeout=2)
            try:
                client.negotiate()
                return
            finally:
                client.close()
        except (OSError, ConnectionError) as exc:
            if time.perf_counter() > deadline:
                raise SystemExit(f"{bootstrap} did not answer ApiVersions: {exc}")
            time.sleep(0.01)


def start(broker: Broker, logs: Path) -> Running:
    if not broker.started:
        assert broker.bootstrap is not None
        wait_ready(broker.bootstrap)
        return Running(broker.bootstrap, pid=listening_pid(broker.bootstrap))
    port = free_port()
    log = None
    if broker.command is None:
        proc, startup = start_broker(port, tree=broker.tree, new_session=True)  # scheduled as the peers are
    else:
        argv = [a.replace("{port}", str(port)) for a in shlex.split(broker.command)]
        log = logs / f"{broker.name}-{port}.log"
        t0 = time.perf_counter()
        with log.open("wb") as out:  # its own session: stopped with its process group
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            startup = wait_accepting(proc, port, t0)
        except SystemExit:
            raise SystemExit(f"{broker.name} did not start; its output:\n{log.read_text(errors='replace')}")
    running = Running(f"127.0.0.1:{port}", proc, startup, log=log, pid=proc.pid)
    time.sleep(0.5)
    running.rss = tree_rss_mb(proc.pid)
    wait_ready(running.bootstrap)
    return running


def stop(broker: Broker, running: Running) -> None:
    proc = running.proc
    if proc is None:
        return
    if broker.command is None:
        stop_broker(proc)
        return
    for sig, wait in ((signal.SIGINT, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(wait)
            break
        except subprocess.TimeoutExpired:
            continue


Figures = dict[str, float]


@dataclass
class Run:
    """What one run of the probes on one broker gave: figures, notes, the probes that failed."""

    figures: Figures = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def run_once(broker: Broker, probes: list[str], args: argparse.Namespace, logs: Path) -> Run:
    """Start (or reach) ``broker``, run the chosen probes on it, stop it; its figures and notes."""
    counts: Counts = args.counts
    running = start(broker, logs)
    run = Run()
    figures, notes = run.figures, run.notes
    if running.startup is not None:
        figures["startup"], figures["rss"] = running.startup, running.rss or float("nan")
    admin = AdminClient({"bootstrap.servers": running.bootstrap, "log_level": 3})
    made: list[str] = []

    def topic(probe: str) -> str:
        name = f"bench-peers-{probe}-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(15)
        made.append(name)
        return name

    def probe(name: str, body: Callable[[], None]) -> None:
        if name not in probes:
            return
        try:
            body()
        except (Exception, SystemExit) as exc:  # one probe a broker fails (an API it lacks) leaves the others
            notes.append(f"{broker.name}: {name} failed: {type(exc).__name__}: {exc}")
            run.failed.append(name)

    def produce() -> None:
        name = topic("produce")
        cpu0 = running.cpu()
        figures["produce"], per_request = single_record_produce(running.bootstrap, name, counts.produce, args.acks)
        cpu_per_request(figures, "produce_cpu", cpu0, running.cpu(), counts.produce)
        notes.append(f"{broker.name}: produce: {per_request:.2f} records per Produce request (librdkafka stats)")

    def ack() -> None:
        figures["ack_p50"], figures["ack_p99"] = ack_latency(running.bootstrap, topic("ack"), counts.ack,
                                                             counts.ack_warmup, args.acks)

    def e2e() -> None:
        figures["e2e_p50"], figures["e2e_p99"] = end_to_end_latency(running.bootstrap, topic("e2e"), counts.e2e,
                                                                    counts.e2e_interval, args.acks)

    def round_trip(kind: str) -> None:
        client = WireClient(running.bootstrap)
        try:
            client.negotiate()
            rt = round_trips(client, topic(kind), f"bench-peers-{uuid.uuid4().hex[:8]}")[kind]
            errors = rt.errors(client.request(rt.api_key, rt.version, rt.body))
        finally:
            client.close()
        if errors:
            raise RuntimeError(f"{rt.name} v{rt.version} answered error codes {errors}")
        cpu0, machine0 = running.cpu(), psutil.cpu_times()
        result = pipelined(running.bootstrap, rt, counts.round_trip_seconds, args.depth, args.connections)
        cpu1, machine1 = running.cpu(), psutil.cpu_times()
        if errors := check_sample(rt, result.sample):
            raise RuntimeError(f"{rt.name} v{rt.version} answered error codes {errors} under load")
        figures[kind] = result.rate
        cpu_per_request(figures, f"{kind}_cpu", cpu0, cpu1, result.responses)
        client_share = result.client_cpu / result.seconds
        broker_share = None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / result.seconds
        idle = (machine1.idle - machine0.idle) / (sum(machine1) - sum(machine0) or 1)
        cores = psutil.cpu_count() or 1
        bound = ("client-bound" if client_share >= 0.9 * result.connections else
                 "broker-bound (a core)" if broker_share is not None and broker_share >= 0.9 else
                 "all cores busy" if idle < 0.1 else "neither saturated: round-trip latency")
        notes.append(f"{broker.name}: {rt.name} v{rt.version}: client {client_share:.0%} CPU over "
                     f"{result.connections} connection(s), broker "
                     f"{'?' if broker_share is None else f'{broker_share:.0%}'} CPU, machine {1 - idle:.0%} "
                     f"of {cores} cores busy: {bound}")

    def throughput() -> None:
        figures["produce_1k"], figures["consume_1k"] = throughput_1k(running.bootstrap, topic("throughput"),
                                                                     counts.records_1k)

    try:
        probe("produce", produce)
        probe("ack", ack)
        probe("e2e", e2e)
        for kind in ROUND_TRIPS:
            probe(kind, lambda: round_trip(kind))
        probe("throughput", throughput)
        if not broker.started and made:  # leave a running broker as it was
            try:
                for f in admin.delete_topics(made).values():
                    f.result(15)
            except Exception as exc:
                notes.append(f"{broker.name}: could not delete the bench's topics: {exc}")
    finally:
        del admin  # destroyed now, so it does not keep reconnecting to a stopped broker
        stop(broker, running)
    return run


def cpu_per_request(figures: Figures, key: str, cpu0: float | None, cpu1: float | None, requests: int) -> None:
    """``figures[key]``: the broker's CPU microseconds per request between two readings of its process tree's CPU
    time (none when the bench does not know its process): a figure that the machine's wake-up latency and the
    client's pace move less than the requests/s beside it."""
    if cpu0 is not None and cpu1 is not None and requests:
        figures[key] = (cpu1 - cpu0) / requests * 1e6


def fmt(value: float, unit: str) -> str:
    if value != value:
        return "nan"
    if unit == "k":
        return f"{value / 1000:.1f}k"
    if unit == "ms":
        return f"{value:.3f}" if value < 1 else f"{value:.2f}" if value < 100 else f"{value:.0f}"
    if unit == "s":
        return f"{value:.3f}"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def span(values: list[float], show: Callable[[float], str]) -> str:
    """``min-max`` of ``values`` as ``show`` writes them (one figure when they look the same)."""
    if not values:
        return "-"
    lo, hi = show(min(values)), show(max(values))
    if lo == hi:
        return lo
    if lo.endswith("k") and hi.endswith("k"):
        return f"{lo[:-1]}-{hi}"
    return f"{lo}-{hi}"


def ratio_text(values: list[float]) -> str:
    return span(values, lambda v: f"{v:.2f}") + "x" if values else "-"


def table(brokers: list[Broker], results: dict[str, list[Figures]], shown: list[Row]) -> str:
    """The markdown table: a row per figure, a column per broker, and first/peer ratios per peer."""
    first, peers = brokers[0], brokers[1:]
    head = ["probe", "better", first.name]
    for p in peers:
        head += [p.name, f"{first.name}/{p.name}"]
    head.append("issue 27 target")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in shown:
        cells = [row.label, "higher" if row.higher_better else "lower"]
        mine = [r.get(row.key) for r in results[first.name]]
        cells.append(span([v for v in mine if v is not None], lambda v: fmt(v, row.unit)))
        for p in peers:
            theirs = [r.get(row.key) for r in results[p.name]]
            cells.append(span([v for v in theirs if v is not None], lambda v: fmt(v, row.unit)))
            cells.append(ratio_text([a / b for a, b in zip(mine, theirs) if a is not None and b]))
        cells.append(row.target)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_named(spec: str, option: str, default_name: str | None = None) -> tuple[str, str]:
    name, sep, value = spec.partition("=")
    if not sep:
        if default_name is None:
            raise SystemExit(f"{option} wants NAME=VALUE, not {spec!r}")
        return default_name, spec
    if not name or not value:
        raise SystemExit(f"{option} wants NAME=VALUE, not {spec!r}")
    return name, value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer", action="append", default=[], metavar="NAME=HOST:PORT",
                    help="an already-running broker to probe as well (repeatable)")
    ap.add_argument("--peer-cmd", action="append", default=[], metavar="NAME='COMMAND {port}'",
                    help="a broker the bench starts on a free port ({port}), times and stops (repeatable)")
    ap.add_argument("--bootstrap", metavar="[NAME=]HOST:PORT",
                    help="probe this address (first column) instead of starting minikafka")
    ap.add_argument("--tree", type=Path, help="start minikafka from this source tree (default: the installed one)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per broker, alternated A B A B (default 1)")
    ap.add_argument("--probes", default=",".join(PROBES),
                    help=f"comma-separated, from {','.join(PROBES)} (default all; 'round-trips' = "
                         f"{','.join(ROUND_TRIPS)})")
    ap.add_argument("--quick", action="store_true", help="small counts: a smoke run of a few seconds")
    ap.add_argument("--acks", default="1", help="acks of the produce, ack-latency and e2e probes (default 1)")
    ap.add_argument("--depth", type=int, default=5, help="requests in flight per connection (default 5)")
    ap.add_argument("--connections", type=int, default=1,
                    help="round-trip probes: connections, each in its own process (default 1)")
    args = ap.parse_args(argv)
    probes: list[str] = []
    for p in args.probes.split(","):
        p = p.strip()
        if p in ("round-trips", "roundtrips"):
            probes += ROUND_TRIPS
        elif p in PROBES:
            probes.append(p)
        elif p:
            ap.error(f"unknown probe {p!r} (known: {', '.join(PROBES)}, round-trips)")
    args.probes = probes
    args.counts = QUICK if args.quick else Counts()
    brokers: list[Broker] = []
    if args.bootstrap:
        name, addr = parse_named(args.bootstrap, "--bootstrap", "target")
        brokers.append(Broker(name, bootstrap=addr))
    else:
        brokers.append(Broker("minikafka", tree=args.tree))
    for spec in args.peer:
        name, addr = parse_named(spec, "--peer")
        brokers.append(Broker(name, bootstrap=addr))
    for spec in args.peer_cmd:
        name, command = parse_named(spec, "--peer-cmd")
        brokers.append(Broker(name, command=command))
    names = [b.name for b in brokers]
    if len(set(names)) != len(names):
        ap.error(f"broker names must differ: {names}")
    args.brokers = brokers
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    brokers: list[Broker] = args.brokers
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {client_versions()}; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    for b in brokers:
        print(f"  {b.describe()}")
    results: dict[str, list[Figures]] = {b.name: [] for b in brokers}
    notes: list[str] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as logs:
        for i in range(args.repeat):
            for b in brokers:
                t0 = time.perf_counter()
                run = run_once(b, args.probes, args, Path(logs))
                results[b.name].append(run.figures)
                notes += [f"run {i + 1}, {n}" for n in run.notes]
                failed = failed or bool(run.failed)
                print(f"run {i + 1}/{args.repeat} {b.name}: {time.perf_counter() - t0:.1f} s, load average "
                      f"{os.getloadavg()[0]:.2f}", flush=True)
    shown = [r for r in rows(args.acks, args.depth) if r.probe in args.probes]
    if not any(b.started for b in brokers):
        shown = [r for r in shown if r.probe != "startup"]
    print()
    print(table(brokers, results, shown))
    ratios = f"ratios: {brokers[0].name} / peer (see 'better' for which way is good); " if len(brokers) > 1 else ""
    print(f"\n{ratios}ranges are min-max over {args.repeat} run(s)")
    for n in notes:
        print(f"  {n}")
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
