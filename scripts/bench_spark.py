"""Spark analysis benchmark: decode-and-analyse throughput on a capture of a million requests, vs tshark.

    scripts/bench spark [--requests 1000000] [--capture-dir .bench/spark-capture] [--regenerate]
                        [--split-size BYTES] [--tuples] [--skip-spark] [--skip-jobs] [--skip-tshark]

1. Capture: a broker in its own process (``minikafka serve --capture DIR``)
   driven by real clients -- confluent-kafka producers (``linger.ms=0``,
   ``acks=1``, 100-byte messages, a few in flight each, so nearly every
   Produce request carries one message) and a consumer group member fetching
   all the while (Fetch, plus the group's FindCoordinator/JoinGroup/SyncGroup/
   Heartbeat/OffsetCommit and everyone's Metadata/ApiVersions) -- until the
   capture holds ``--requests`` requests.  The broker advertises at most the
   versions the installed tshark dissects (probed with a small pcap: tshark
   4.0 knows Produce up to v8, Fetch up to v11, Metadata up to v9...), so that
   tshark decodes the same bodies; ``--latest-versions`` lets the clients use
   the newest ones.  The capture is kept in ``--capture-dir`` (default
   ``.bench/spark-capture`` in the repository, git-ignored, or
   ``.bench/spark-capture-N`` for another ``--requests N``) and reused when it
   holds enough requests; ``--regenerate`` makes it again.
2. Spark (``--master``, default ``local[*]``): start-up time; decode only
   (the data source's ``all`` table, the ``requests``, ``partitions`` and
   ``topics`` rows in one pass as ``load_tables`` reads them, written to the
   ``noop`` sink: every column of every row decoded, nothing stored), also per
   core; decode + analyse (as ``minikafka
   analyze`` does it: tables loaded and cached, then the ``traffic`` and
   ``sessions`` jobs, every result collected with ``toPandas``).  Requests/s
   are the capture's requests over wall-clock seconds; the CPU seconds of the
   JVM and the Python workers are printed too (wall time depends on whatever
   else the machine runs, CPU time much less).
3. tshark: the same capture exported as a pcap (``export_pcap``, kept next to
   the capture directory), decoded with ``-d tcp.port==PORT,kafka``: a first
   run counts the Kafka PDUs it saw and decoded (requests and responses), then
   timed runs printing three fields and one field to /dev/null.  The ratios
   compare Spark's decode-only requests/s (all tables, one pass over the
   capture, on every core; and per core) with tshark's (one pass, one core).

Prints a figures table at the end.  ``--requests 50000`` makes a quick run.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TOPIC = "spark-bench"
PARTITIONS = 4
MESSAGE_SIZE = 100
META = "bench-spark.json"
JOBS = ("traffic", "sessions")


# -- tshark's versions and a broker advertising no more ------------------------------------------------

def tshark_versions(tshark: str) -> dict[int, int]:
    """api key -> the highest version of its requests the installed tshark dissects (probed)."""
    import re
    import struct

    from minikafka.capture.format import CaptureRecord
    from minikafka.capture.pcap import records_to_packets, write_pcap
    from minikafka.protocol.api import APIS
    from minikafka.protocol.headers import request_header_version

    recs = []
    names = {}
    for key in sorted(APIS):
        api = APIS[key]
        names[api.name] = key
        for v in range(api.min_version, api.max_version + 1):
            try:
                body = api.request.build(api.request.default(), v)
            except Exception:  # noqa: BLE001 - a version whose defaults do not build: not probed
                continue
            flexible_header = request_header_version(key, api.is_flexible(v)) >= 2
            header = struct.pack(">hhih", key, v, len(recs), 1) + b"x" + (b"\x00" if flexible_header else b"")
            t = 1_000_000_000 + len(recs) * 1000
            recs.append(CaptureRecord(t, t + 10, "c", "127.0.0.1:40000", 0, "", "x", key, v, len(recs),
                                      header + body, None, "127.0.0.1:9092"))
    with tempfile.TemporaryDirectory() as tmp:
        pcap = Path(tmp) / "probe.pcap"
        with open(pcap, "wb") as fh:
            write_pcap(fh, records_to_packets(recs))
        out = subprocess.run([tshark, "-r", str(pcap), "-d", "tcp.port==9092,kafka", "-T", "fields",
                              "-e", "_ws.col.Info"], capture_output=True, text=True, check=True).stdout
    # tshark's names differ for a few apis (ListOffsets is "Offsets"); match by key through the header.
    aliases = {"Offsets": "ListOffsets"}
    best: dict[int, int] = {}
    for line in out.splitlines():
        m = re.match(r"Kafka (\S+) v(\d+) Request(.*)", line)
        if m and "Unsupported" not in m.group(3):
            key = names.get(aliases.get(m.group(1), m.group(1)))
            if key is not None:
                best[key] = max(best.get(key, -1), int(m.group(2)))
    return best


def _broker_main(argv: list[str]) -> int:
    """``bench_spark.py --broker CAPS serve ...``: ``minikafka serve`` advertising at most CAPS (JSON)."""
    caps = {int(k): v for k, v in json.loads(argv[0]).items()}
    from minikafka.broker import apis
    from minikafka.broker.handlers import registry

    full = registry.supported_api_versions

    def capped(keys: Any) -> list[Any]:
        out = full(keys)
        for e in out:
            cap = caps.get(int(e["api_key"]))
            if cap is not None:
                e["max_version"] = max(e["min_version"], min(e["max_version"], cap))
        return out

    # The ApiVersions handler (built by the registry) and the unsupported-version answer read it by name.
    registry.supported_api_versions = capped
    apis.supported_api_versions = capped
    from minikafka.cli import main

    return main(argv[1:])


def start_broker(port: int, capture: Path, caps: dict[int, int] | None) -> subprocess.Popen:
    """A broker process with capture on (as ``bench_common.start_broker``, versions capped if ``caps``)."""
    serve = ["serve", "--port", str(port), "--log-level", "WARNING", "--capture", str(capture),
             "-o", "group.initial.rebalance.delay.ms=0"]
    if caps:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--broker", json.dumps(caps), *serve]
    else:
        cmd = [sys.executable, "-m", "minikafka", *serve]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, cwd=ROOT)
    t0 = time.perf_counter()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            return proc
        except OSError:
            if proc.poll() is not None or time.perf_counter() - t0 > 30:
                raise SystemExit("broker did not start") from None
            time.sleep(0.01)


# -- the capture -----------------------------------------------------------------------------------------

def count_capture(directory: Path) -> tuple[int, int, int]:
    """(records, files, bytes) of the capture files in ``directory`` (block headers, CRCs checked).

    Safe on a capture being written: a torn last block is not counted.
    """
    from minikafka.capture.format import ReadStats, capture_files, iter_blocks

    fmt_log = logging.getLogger("minikafka.capture.format")
    level = fmt_log.level
    fmt_log.setLevel(logging.ERROR)
    records = size = 0
    files = capture_files([directory])
    try:
        for path in files:
            stats = ReadStats()
            data = path.read_bytes()
            for _ in iter_blocks(data, stats=stats, name=str(path)):
                pass
            records += stats.records
            size += len(data)
    finally:
        fmt_log.setLevel(level)
    return records, len(files), size


class _Sent:
    """Requests sent per client, from librdkafka's statistics (``brokers.*.tx``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.tx: dict[str, int] = {}

    def callback(self, name: str):
        def cb(js: str) -> None:
            n = sum(b.get("tx", 0) for b in json.loads(js).get("brokers", {}).values())
            with self.lock:
                self.tx[name] = n
        return cb

    def total(self) -> int:
        with self.lock:
            return sum(self.tx.values())


def drive(bootstrap: str, directory: Path, target: int, producers: int, in_flight: int) -> dict:
    """Real clients on the broker until its capture in ``directory`` holds ``target`` requests."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(10)
    del admin
    sent = _Sent()
    stop = threading.Event()
    consumed = [0]
    quiet = {"log_level": 3}

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "spark-bench", "client.id": "bench-consumer",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True,
                      "auto.commit.interval.ms": 1000, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
                      "statistics.interval.ms": 250, "stats_cb": sent.callback("consumer"), **quiet})
        c.subscribe([TOPIC])
        try:
            while not stop.is_set():
                consumed[0] += len(c.consume(num_messages=10000, timeout=0.1))
        finally:
            c.close()

    consumer = threading.Thread(target=consume, name="bench-consumer", daemon=True)
    consumer.start()
    prods = [Producer({"bootstrap.servers": bootstrap, "client.id": f"bench-producer-{i}", "linger.ms": 0,
                       "acks": 1, "max.in.flight.requests.per.connection": 5,
                       "statistics.interval.ms": 250, "stats_cb": sent.callback(f"producer-{i}"), **quiet})
               for i in range(producers)]
    payload = os.urandom(MESSAGE_SIZE)
    produced = 0
    t0 = last = time.perf_counter()
    # The capture drops records when its writer falls behind (a loaded machine): aim a little higher,
    # then top up until the capture on disk (a lower bound: the broker still buffers some) is enough.
    goal = int(target * 1.02) + 1000
    try:
        while True:
            while sent.total() < goal:
                for i, p in enumerate(prods):
                    while len(p) < in_flight:
                        p.produce(TOPIC, payload, partition=(produced + i) % PARTITIONS)
                        produced += 1
                    p.poll(0.0005)
                now = time.perf_counter()
                if now - last >= 10:
                    last = now
                    print(f"  ... {sent.total():,} requests sent in {now - t0:.0f} s", flush=True)
            for p in prods:
                p.flush(30)
            # The broker writes its queue out within a few seconds: count until the capture stops growing.
            have = -1
            for _ in range(20):
                now_have = count_capture(directory)[0]
                if now_have >= target or now_have == have:
                    break
                have = now_have
                time.sleep(1)
            have = now_have
            if have >= target:
                break
            goal = sent.total() + int((target - have) * 1.05) + 1000
            print(f"  ... capture holds {have:,} so far, topping up", flush=True)
    finally:
        for p in prods:
            p.flush(30)
        elapsed = time.perf_counter() - t0
        stop.set()
        consumer.join(30)
    return {"drive_seconds": elapsed, "produced": produced, "consumed": consumed[0],
            "client_requests": sent.total()}


def make_capture(directory: Path, target: int, producers: int, in_flight: int,
                 caps: dict[int, int] | None) -> dict:
    from bench_common import free_port, stop_broker

    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    port = free_port()
    t0 = time.perf_counter()
    proc = start_broker(port, directory, caps)
    try:
        info = drive(f"127.0.0.1:{port}", directory, target, producers, in_flight)
    finally:
        stop_broker(proc)
    info["seconds"] = time.perf_counter() - t0
    records, files, size = count_capture(directory)
    used = versions_used(directory)
    over = {k: v for k, v in used.items() if caps and k in caps and v > caps[k]}
    if over:  # tshark would see requests it cannot dissect: its figures would count work it did not do
        raise SystemExit(f"the capture has versions above tshark's: {over} (caps {caps})")
    info.update(records=records, files=files, bytes=size, port=port,
                version_caps={str(k): v for k, v in sorted((caps or {}).items())},
                versions_used={str(k): v for k, v in sorted(used.items())})
    (directory / META).write_text(json.dumps(info, indent=1))
    return info


def versions_used(directory: Path, limit: int = 50_000) -> dict[int, int]:
    """api key -> the highest request version among the first ``limit`` requests of the capture."""
    from minikafka.capture import read_capture

    best: dict[int, int] = {}
    for i, rec in enumerate(read_capture([directory])):
        if i >= limit:
            break
        best[rec.api_key] = max(best.get(rec.api_key, -1), rec.api_version)
    return best


def ensure_capture(args: argparse.Namespace, caps: dict[int, int] | None) -> dict:
    meta_path = args.capture_dir / META
    want_caps = {str(k): v for k, v in sorted((caps or {}).items())}
    if meta_path.exists() and not args.regenerate:
        info = json.loads(meta_path.read_text())
        records, files, size = count_capture(args.capture_dir)
        if records >= args.requests and info.get("version_caps") == want_caps:
            info.update(records=records, files=files, bytes=size, reused=True)
            print(f"capture: reusing {args.capture_dir} ({records:,} requests; made in "
                  f"{info['seconds']:.0f} s)")
            return info
        print(f"capture: {args.capture_dir} holds {records:,} requests"
              f"{'' if info.get('version_caps') == want_caps else ' made with other versions'}: making it again")
    print(f"capture: driving a broker to {args.requests:,} requests ({args.producers} producers, "
          f"{args.in_flight} messages in flight each, a consumer)"
          + (", versions capped to tshark's" if caps else ""), flush=True)
    info = make_capture(args.capture_dir, args.requests, args.producers, args.in_flight, caps)
    info["reused"] = False
    print(f"capture: {info['records']:,} requests in {info['seconds']:.1f} s "
          f"({info['records'] / info['seconds']:,.0f} requests/s), {info['files']} file(s), "
          f"{info['bytes'] / 1e6:.0f} MB; the clients sent {info['client_requests']:,} (librdkafka's "
          f"count, sampled every 250 ms: more than captured means the capture dropped some)")
    return info


# -- Spark -----------------------------------------------------------------------------------------------

class CpuMeter:
    """CPU seconds (user + system) used by this process and its descendants (Spark's JVM, its Python
    workers) while in the ``with`` block, sampled every ``interval`` seconds (a process that ends between
    two samples loses its last moments).  Other load on the machine does not count, unlike wall time."""

    def __init__(self, interval: float = 0.25) -> None:
        import psutil

        self.psutil = psutil
        self.interval = interval
        self.me = psutil.Process()
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.kinds: dict[int, str] = {}
        self.stop = threading.Event()
        self.seconds = 0.0

    def _sample(self, first: bool = False) -> None:
        try:
            procs = [self.me, *self.me.children(recursive=True)]
        except self.psutil.Error:
            return
        for p in procs:
            try:
                t = p.cpu_times()
                if p.pid not in self.kinds:
                    self.kinds[p.pid] = ("driver" if p.pid == self.me.pid else "JVM" if "java" in p.name()
                                         else "Python workers")
            except self.psutil.Error:
                continue
            cpu = t.user + t.system
            if first:
                self.first[p.pid] = cpu
            self.last[p.pid] = cpu

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> "CpuMeter":
        self._sample(first=True)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.stop.is_set():
            return
        self.stop.set()
        self.thread.join()
        self._sample()
        self.seconds = sum(cpu - self.first.get(pid, 0.0) for pid, cpu in self.last.items())
        self.by_kind: dict[str, float] = {}
        for pid, cpu in self.last.items():
            kind = self.kinds.get(pid, "other")
            self.by_kind[kind] = self.by_kind.get(kind, 0.0) + cpu - self.first.get(pid, 0.0)

    def breakdown(self) -> str:
        """CPU seconds by process kind (JVM, Python workers, this driver)."""
        return ", ".join(f"{k} {v:.1f} s" for k, v in sorted(self.by_kind.items(), key=lambda kv: -kv[1]))


def run_spark(args: argparse.Namespace, records: int, figures: list) -> None:
    from minikafka.analysis.session import spark_session
    from minikafka.analysis.tables import load_tables

    options: dict = {}
    if args.split_size:
        options["splitSize"] = args.split_size
    if args.tuples:
        options["arrow"] = "false"
    cap = str(args.capture_dir)
    t0 = time.perf_counter()
    spark = spark_session(args.master, app_name="bench-spark")
    startup = time.perf_counter() - t0
    cores = spark.sparkContext.defaultParallelism
    print(f"spark: {spark.version}, {spark.sparkContext.master} ({cores} cores), start-up {startup:.1f} s"
          f"{', rows as tuples' if args.tuples else ''}", flush=True)
    figures.append(("Spark start-up", f"{startup:.1f} s", ""))
    try:
        # (a) decode only: the three tables in one pass (the data source's "all" table, as load_tables reads)
        from minikafka.analysis.tables import read_table

        source = read_table(spark, cap, "all", **options)
        splits = source.rdd.getNumPartitions()
        t = time.perf_counter()
        with CpuMeter() as cpu:
            source.write.format("noop").mode("overwrite").save()
        total, total_cpu = time.perf_counter() - t, cpu.seconds
        print(f"decode only ({splits} splits, requests + partitions + topics in one pass): {total:.1f} s, "
              f"{records / total:,.0f} requests/s, {records / total / cores:,.0f} per core "
              f"(CPU {total_cpu:.0f} s: {records / total_cpu:,.0f} requests per CPU-second; {cpu.breakdown()})",
              flush=True)
        figures.append(("decode only: both", f"{total:.1f} s",
                        f"{records / total:,.0f} req/s; CPU {total_cpu:.0f} s"))
        figures.append(("decode only: per core", f"{cores} cores", f"{records / total / cores:,.0f} req/s per core"))
        figures.append(("decode only: per CPU-second", f"{total_cpu:.1f} s",
                        f"{records / total_cpu:,.0f} req per CPU-second ({cpu.breakdown()})"))
        # (b) decode + analyse, as minikafka analyze: tables cached, the jobs' results collected
        if args.skip_jobs:
            return
        from minikafka.analysis.jobs import AnalysisOptions, job

        t_all = time.perf_counter()
        meter = CpuMeter().__enter__()
        tables = load_tables(spark, cap, decode_in="executors", **options).cache()  # the capture decoded once, here
        ran = []
        try:
            print(f"tables decoded and cached: {time.perf_counter() - t_all:.1f} s", flush=True)
            for name in JOBS:
                try:
                    mod = job(name)
                except Exception as exc:  # noqa: BLE001 - a job that does not import is skipped
                    print(f"job {name}: not available ({type(exc).__name__}: {exc})")
                    continue
                t = time.perf_counter()
                results = mod.run(tables, AnalysisOptions())
                rows = {k: len(df.toPandas()) for k, df in results.items()}
                print(f"job {name}: {time.perf_counter() - t:.1f} s, result rows {rows}", flush=True)
                ran.append(name)
            total = time.perf_counter() - t_all
            meter.__exit__()
            n_req, n_part = tables.requests.count(), tables.partitions.count()
        finally:
            meter.__exit__()
            tables.unpersist()
        if ran:
            print(f"decode + analyse ({', '.join(ran)}): {total:.1f} s, {records / total:,.0f} requests/s "
                  f"(CPU {meter.seconds:.0f} s; tables: {n_req:,} requests, {n_part:,} partition rows)")
            figures.append((f"decode + analyse ({' + '.join(ran)})", f"{total:.1f} s",
                            f"{records / total:,.0f} req/s; CPU {meter.seconds:.0f} s"))
    finally:
        spark.stop()


# -- tshark ----------------------------------------------------------------------------------------------

def _timed(cmd: list[str], out: str | None = None) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stdout if ``out`` is None) of a command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    if out is None:
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True)
        stdout = res.stdout
    else:
        with open(out, "wb") as fh:
            subprocess.run(cmd, stdout=fh, stderr=subprocess.DEVNULL, check=True)
        stdout = ""
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), stdout


def run_tshark(args: argparse.Namespace, tshark: str, info: dict, figures: list) -> dict:
    from minikafka.capture.pcap import export_pcap

    records, port = info["records"], info["port"]
    pcap = args.capture_dir.with_name(args.capture_dir.name + ".pcap")
    meta = args.capture_dir / META
    if not pcap.exists() or pcap.stat().st_mtime < meta.stat().st_mtime:
        t = time.perf_counter()
        packets = export_pcap([args.capture_dir], pcap)
        print(f"pcap: exported {packets:,} packets in {time.perf_counter() - t:.1f} s to {pcap} "
              f"({pcap.stat().st_size / 1e6:.0f} MB)", flush=True)
    else:
        print(f"pcap: reusing {pcap} ({pcap.stat().st_size / 1e6:.0f} MB)")
    base = [tshark, "-r", str(pcap), "-d", f"tcp.port=={port},kafka"]
    # Sanity: what it saw and decoded (a PDU is decoded when tshark names its api: kafka.api_key).
    _w, _c, out = _timed(base + ["-T", "fields", "-E", "occurrence=a", "-e", "tcp.srcport", "-e", "kafka.len",
                                 "-e", "kafka.api_key"])
    seen = {"requests": 0, "responses": 0}
    decoded = {"requests": 0, "responses": 0}
    for line in out.splitlines():
        src, lens, keys = (line.split("\t") + ["", "", ""])[:3]
        side = "requests" if src != str(port) else "responses"
        seen[side] += len(lens.split(",")) if lens else 0
        decoded[side] += len(keys.split(",")) if keys else 0
    print(f"tshark decoded {decoded['requests']:,} requests and {decoded['responses']:,} responses "
          f"(saw {seen['requests']:,} and {seen['responses']:,} Kafka PDUs; the capture has {records:,} "
          f"requests)")
    result = {"decoded": decoded, "seen": seen}
    for label, fields in (("3 fields", ["frame.number", "kafka.api_key", "kafka.correlation_id"]),
                          ("1 field", ["kafka.api_key"])):
        cmd = base + ["-T", "fields"] + [a for f in fields for a in ("-e", f)]
        wall, cpu, _ = _timed(cmd, os.devnull)
        print(f"tshark -T fields ({label}): {wall:.1f} s (CPU {cpu:.1f} s), {records / wall:,.0f} requests/s",
              flush=True)
        figures.append((f"tshark -T fields, {label}", f"{wall:.1f} s",
                        f"{records / wall:,.0f} req/s; CPU {cpu:.0f} s"))
        result[label] = wall
        result[label + " cpu"] = cpu
    figures.append(("tshark Kafka PDUs decoded",
                    f"{decoded['requests'] + decoded['responses']:,}",
                    f"{decoded['requests']:,} req + {decoded['responses']:,} resp"))
    return result


# -- main ------------------------------------------------------------------------------------------------

def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--broker":
        sys.exit(_broker_main(sys.argv[2:]))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000, help="requests in the capture (default 1,000,000)")
    ap.add_argument("--capture-dir", type=Path, default=None,
                    help="where the capture is kept (default .bench/spark-capture, or "
                         ".bench/spark-capture-N for --requests N other than 1,000,000)")
    ap.add_argument("--regenerate", action="store_true", help="make the capture again even if it is big enough")
    ap.add_argument("--latest-versions", action="store_true",
                    help="let the clients use the newest versions (default: at most what tshark dissects)")
    # More load than this saturates the broker's event loop, and its capture writer (a task on the same
    # loop) falls behind and drops records (3 producers x 5: a quarter of them on this 2-core machine).
    ap.add_argument("--producers", type=int, default=2, help="producer clients (default 2)")
    ap.add_argument("--in-flight", type=int, default=4, help="messages outstanding per producer (default 4)")
    ap.add_argument("--master", default=None, help="Spark master (default local[*])")
    ap.add_argument("--split-size", type=int, default=None, help="data source splitSize in bytes (default its own)")
    ap.add_argument("--tuples", action="store_true", help="data source option arrow=false (rows as tuples)")
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--skip-jobs", action="store_true", help="decode only, no analysis jobs")
    ap.add_argument("--skip-tshark", action="store_true")
    args = ap.parse_args()
    if args.capture_dir is None:
        name = "spark-capture" if args.requests == 1_000_000 else f"spark-capture-{args.requests}"
        args.capture_dir = ROOT / ".bench" / name
    args.capture_dir = args.capture_dir.resolve()
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_common

    tshark = shutil.which("tshark")
    caps = None
    if not args.latest_versions:
        if tshark:
            caps = tshark_versions(tshark)
        else:
            print("tshark not found: clients use the newest versions")
    info = ensure_capture(args, caps)
    records = info["records"]
    figures: list[tuple[str, str, str]] = [
        ("capture: requests", f"{records:,}", f"{info['files']} file(s), {info['bytes'] / 1e6:,.0f} MB"),
        ("capture: generation" + (" (earlier run)" if info.get("reused") else ""), f"{info['seconds']:.0f} s",
         f"{records / info['seconds']:,.0f} req/s"),
    ]
    if not args.skip_spark:
        try:
            import pyarrow  # noqa: F401
            import pyspark  # noqa: F401
        except ImportError as exc:
            print(f"Spark part skipped: {exc} (pip install -e '.[analysis]')")
        else:
            run_spark(args, records, figures)
    tres = None
    if not args.skip_tshark:
        if tshark is None:
            print("tshark not found: skipped")
        else:
            tres = run_tshark(args, tshark, info, figures)
    if tres and not args.skip_spark:
        spark_rate = next((float(v.split()[0].replace(",", "")) for k, _s, v in figures
                           if k == "decode only: both"), None)
        if spark_rate:
            ratio = spark_rate / (records / tres["3 fields"])
            figures.append(("Spark decode only / tshark (3 fields)", f"{ratio:.2f}x", "requests/s ratio"))
            cores = next((int(v.split()[0]) for k, v, _n in figures if k == "decode only: per core"), 0)
            if cores:
                figures.append(("per core: Spark / tshark (3 fields)", f"{ratio / cores:.2f}x",
                                f"{spark_rate / cores:,.0f} vs {records / tres['3 fields']:,.0f} req/s per core "
                                "(tshark uses one core)"))
        spark_cpu = next((float(v.split()[0]) for k, v, _n in figures if k == "decode only: per CPU-second"), None)
        if spark_cpu and tres.get("3 fields cpu"):
            # The same per-core question in CPU time (every process of each side): what a shared, busy machine
            # changes least.  Wall-clock ratios suffer from other load, Spark's more than tshark's (it needs
            # both cores at once, tshark one).
            tshark_rate = records / tres["3 fields cpu"]
            figures.append(("per CPU-second: Spark / tshark (3 fields)", f"{records / spark_cpu / tshark_rate:.2f}x",
                            f"{records / spark_cpu:,.0f} vs {tshark_rate:,.0f} requests per CPU-second"))
    width = max(len(k) for k, _v, _n in figures)
    print(f"\n{'figure':<{width}}  {'value':>12}  rate / note")
    for k, v, n in figures:
        print(f"{k:<{width}}  {v:>12}  {n}")


if __name__ == "__main__":
    main()
