"""Log compaction benchmark (issue 24): the cleaner's MB/s, and what a running cleaner costs producers.

    scripts/bench compaction [--size-mb 1024] [--keys 100000] [--messages 300000] [--repeat 1]
                             [--skip-cleaner | --skip-produce] [--profile]

1. Cleaner (in this process): a compacted ``Log`` in a temporary data dir gets ``--size-mb`` MiB of 1 KiB
   records (key ``key-NNNNNN`` of ``--keys`` keys drawn at random, 1014 B value; ``--batch-records`` per
   batch, uncompressed; ``--segment-mb`` segments), rolled so all of it is cleanable, then one
   :class:`LogCleaner` cleans it until idle (first cleaning: all of it dirty). Then a quarter as much
   again is appended and cleaned (re-cleaning: a clean head and a dirty tail). Per cleaning: the dirty
   bytes mapped (``CleanerStats.map_bytes_read``), all bytes read and written, the map and clean phase
   seconds, and **MB/s cleaned = dirty MB / cleaner seconds** (MB = 10^6 bytes). ``--profile`` runs the
   cleaner's passes under cProfile on a worker thread of its own (not a cleaning process) and prints the
   top entries.
2. Producer (a broker in its own process, ``--data-dir``): a broker with the cleaner disabled fills
   ``bench-compact`` (cleanup.policy=compact, ``--segment-mb`` segments) with the same ``--size-mb`` of
   keyed 1 KiB records; its data dir is kept as a pristine copy. Then, alternately, on a fresh copy of
   it: a broker with the cleaner disabled (idle), and one with ``log.cleaner.enable=true``,
   ``log.cleaner.backoff.ms=100`` (cleaning: measuring starts once its metrics show the cleaning began,
   and it is checked to be still cleaning when the phase ends); in each a confluent-kafka producer
   sends ``--messages`` 1 KiB records (acks=1) flat out to another topic. Prints MB/s and the broker's
   and producer's CPU shares per phase, the ratio cleaning / idle, and the broker's own cleaning time (its
   ``kafka_log_logcleaner_max_clean_time_secs`` gauge) of the segments but the active one.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import random
import shutil
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import trio
from bench_common import (client_versions, cpu_seconds, free_port, minikafka_tree, produce_flat_out, start_broker,
                          stop_broker)

from minikafka.broker.log import Log, LogConfig
from minikafka.broker.log.cleaner import Cleaner, CleanerStats
from minikafka.broker.log.cleaner_manager import CleanerConfig, CleanerTarget, LogCleaner
from minikafka.protocol.records import Record, build_batch

SIZE = 1024  # bytes of key + value per record
KEY_FORMAT = b"key-%06d"
VALUE_SIZE = SIZE - len(KEY_FORMAT % 0)
COMPACT_TOPIC = "bench-compact"
PRODUCE_TOPIC = "bench-produce"
MiB = 1 << 20


# -- 1. the cleaner in this process ----------------------------------------------------------------
def fill_log(lg: Log, mib: float, keys: int, batch_records: int, rnd: random.Random) -> int:
    """Append ``mib`` MiB of keyed 1 KiB records to ``lg``, then roll; returns the records appended."""
    value = os.urandom(VALUE_SIZE)
    target = lg.size_in_bytes + int(mib * MiB)
    n = 0
    while lg.size_in_bytes < target:
        now = int(time.time() * 1000)
        recs = [Record(i, 0, KEY_FORMAT % rnd.randrange(keys), value) for i in range(batch_records)]
        lg.append_as_leader([bytearray(build_batch(recs, base_timestamp=now))], 0, now)
        n += batch_records
    lg.roll()
    return n


@dataclass
class Cleaning:
    label: str
    log_mb_before: float
    log_mb_after: float
    passes: list[CleanerStats]
    wall: float

    @property
    def dirty_mb(self) -> float:
        return sum(s.map_bytes_read for s in self.passes) / 1e6

    @property
    def read_mb(self) -> float:
        return sum(s.bytes_read for s in self.passes) / 1e6

    @property
    def written_mb(self) -> float:
        return sum(s.bytes_written for s in self.passes) / 1e6

    @property
    def seconds(self) -> float:
        return sum(s.elapsed_secs for s in self.passes)

    @property
    def map_seconds(self) -> float:
        return sum(s.map_done - s.start for s in self.passes)


def clean(cleaner: LogCleaner, lg: Log, label: str) -> Cleaning:
    """Clean until idle, keeping each cleaning's stats."""
    before = lg.size_in_bytes / 1e6
    passes: list[CleanerStats] = []

    async def run() -> None:
        while await cleaner.clean_once():
            stats = cleaner.threads[0].last_stats
            assert stats is not None
            passes.append(stats)

    t0 = time.perf_counter()
    trio.run(run)
    wall = time.perf_counter() - t0
    if not passes:
        raise SystemExit(f"{label}: nothing was cleaned")
    return Cleaning(label, before, lg.size_in_bytes / 1e6, passes, wall)


def profiled(prof: cProfile.Profile, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run under ``prof`` (enabled in the calling thread: the cleaner's worker thread)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        prof.enable()
        try:
            return fn(*args, **kwargs)
        finally:
            prof.disable()

    return wrapper


def bench_cleaner(args: argparse.Namespace) -> list[Cleaning]:
    prof = cProfile.Profile() if args.profile else None
    if prof is not None:  # the passes run on trio's worker threads: profile them there
        Cleaner.build_offset_map = profiled(prof, Cleaner.build_offset_map)
        Cleaner.clean_group = profiled(prof, Cleaner.clean_group)
    rnd = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        root = Path(tmp)
        config = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=args.segment_mb * MiB,
                           min_cleanable_dirty_ratio=0.01)
        lg = Log(COMPACT_TOPIC, 0, config, root / f"{COMPACT_TOPIC}-0")
        t0 = time.perf_counter()
        n = fill_log(lg, args.size_mb, args.keys, args.batch_records, rnd)
        print(f"cleaner: log of {n} records ({lg.size_in_bytes / 1e6:.0f} MB, {lg.num_segments - 1} segment(s) of "
              f"up to {args.segment_mb} MiB) over {args.keys} keys, {args.batch_records} records a batch, "
              f"written in {time.perf_counter() - t0:.1f} s")
        # A log in a data dir is cleaned by a cleaning process, as in the broker; --profile keeps the passes
        # on a worker thread of this process so that cProfile sees them.
        cleaner = LogCleaner(CleanerConfig(processes=not args.profile), checkpoint_dir=root)
        cleaner.add_source(lambda: [CleanerTarget(f"{COMPACT_TOPIC}-0", lg, lambda: lg.high_watermark, dict)])
        runs = [clean(cleaner, lg, "first cleaning")]
        fill_log(lg, args.size_mb / 4, args.keys, args.batch_records, rnd)
        runs.append(clean(cleaner, lg, "re-cleaning"))
        cleaner.close()
        lg.close()
    print(f"{'cleaner':<15} {'log MB':>13} {'dirty MB':>8} {'read MB':>8} {'written':>8} {'passes':>6} "
          f"{'map s':>6} {'clean s':>7} {'total s':>7} {'MB/s cleaned':>12}")
    for c in runs:
        print(f"{c.label:<15} {c.log_mb_before:>6.0f}->{c.log_mb_after:<5.0f} {c.dirty_mb:>8.0f} {c.read_mb:>8.0f} "
              f"{c.written_mb:>8.0f} {len(c.passes):>6} {c.map_seconds:>6.1f} {c.seconds - c.map_seconds:>7.1f} "
              f"{c.seconds:>7.1f} {c.dirty_mb / c.seconds:>12.1f}")
    if prof is not None:
        print("\ncleaner profile (worker-thread passes, top 25 by own time):")
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        print("cleaner profile (top 15 by cumulative time):")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
    return runs


# -- 2. producers against a broker that cleans -----------------------------------------------------
def metrics(http_port: int) -> dict[str, float]:
    """The broker's unlabelled Prometheus gauges and counters."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def cleaner_state(http_port: int) -> tuple[float, float]:
    """(max-dirty-percent, max-clean-time-secs): the first is set once a cleaning was chosen, the second
    once one finished."""
    m = metrics(http_port)
    return (m.get("kafka_log_logcleanermanager_max_dirty_percent", 0.0),
            m.get("kafka_log_logcleaner_max_clean_time_secs", 0.0))


def wait_for(what: str, cond: Callable[[], bool], timeout: float) -> None:
    """Poll ``cond`` until true (connection errors: the HTTP port may not listen yet)."""
    t0 = time.perf_counter()
    while True:
        try:
            if cond():
                return
        except OSError:
            pass
        if time.perf_counter() - t0 > timeout:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def fill_broker(bootstrap: str, mib: float, keys: int, segment_mb: int) -> int:
    """Create the compacted topic and produce ``mib`` MiB of keyed 1 KiB records to it; the records sent."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(COMPACT_TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(segment_mb * MiB)})])[COMPACT_TOPIC].result(10)
    admin.create_topics([NewTopic(PRODUCE_TOPIC, 1, 1)])[PRODUCE_TOPIC].result(10)
    del admin
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1000000,
                  "queue.buffering.max.kbytes": 1048576, "queue.buffering.max.messages": 1000000, "acks": "1"})
    value = os.urandom(VALUE_SIZE)
    rnd = random.Random(2)
    n = int(mib * MiB) // SIZE
    for _ in range(n):
        key = KEY_FORMAT % rnd.randrange(keys)
        while True:
            try:
                p.produce(COMPACT_TOPIC, value, key, partition=0)
                break
            except BufferError:
                p.poll(0.001)
    if left := p.flush(300):
        raise SystemExit(f"{left} messages not delivered")
    return n


@dataclass
class Phase:
    kind: str
    mbs: float
    broker_cpu: float
    producer_cpu: float
    note: str = ""


def produce_phase(data_dir: Path, kind: str, messages: int) -> tuple[Phase, float]:
    """A broker on ``data_dir`` (cleaner on for ``kind == "cleaning"``) and a flat-out producer; the phase and,
    when cleaning, the broker's cleaning seconds."""
    port, http_port = free_port(), free_port()
    cleaning = kind == "cleaning"
    opts = ["-o", f"log.cleaner.enable={str(cleaning).lower()}", "-o", "log.cleaner.backoff.ms=100"]
    os.sync()  # the copy's dirty pages written back before, not during, the phase
    proc, _ = start_broker(port, "--data-dir", str(data_dir), "--http-port", str(http_port), *opts)
    note, clean_secs = "", 0.0
    try:
        bp, me = psutil.Process(proc.pid), psutil.Process()
        if cleaning:
            wait_for("the cleaning to start", lambda: cleaner_state(http_port)[0] > 0, 60)
        c0, m0 = cpu_seconds(bp), cpu_seconds(me)
        seconds = produce_flat_out(f"127.0.0.1:{port}", PRODUCE_TOPIC, messages, SIZE)
        share, own = (cpu_seconds(bp) - c0) / seconds, (cpu_seconds(me) - m0) / seconds
        if cleaning:
            if cleaner_state(http_port)[1] > 0:
                note = "the cleaning ended before the producer did: use a larger --size-mb"
            t0 = time.perf_counter()
            wait_for("the cleaning to end", lambda: cleaner_state(http_port)[1] > 0, 3600)
            clean_secs = cleaner_state(http_port)[1]
            note = note or f"cleaning went on {time.perf_counter() - t0:.1f} s after the phase"
    finally:
        stop_broker(proc)
    return Phase(kind, messages * SIZE / 1e6 / seconds, share, own, note), clean_secs


def cleanable_bytes(data_dir: Path) -> int:
    """Bytes of the compacted partition's segments but the last (active) one: what its first cleaning reads."""
    logs = sorted((data_dir / "logs" / f"{COMPACT_TOPIC}-0").glob("*.log"), key=lambda p: int(p.stem))
    if len(logs) < 2:
        raise SystemExit(f"{COMPACT_TOPIC} has a single segment, nothing to clean: use a smaller --segment-mb")
    return sum(p.stat().st_size for p in logs[:-1])


def bench_produce(args: argparse.Namespace) -> list[Phase]:
    print(f"client: {client_versions()}; broker: minikafka from {minikafka_tree()}, data dir")
    with tempfile.TemporaryDirectory(prefix="bench-compaction-") as tmp:
        pristine, run_dir = Path(tmp) / "pristine", Path(tmp) / "run"
        port = free_port()
        proc, _ = start_broker(port, "--data-dir", str(pristine), "-o", "log.cleaner.enable=false")
        try:
            t0 = time.perf_counter()
            n = fill_broker(f"127.0.0.1:{port}", args.size_mb, args.keys, args.segment_mb)
            fill_secs = time.perf_counter() - t0
        finally:
            stop_broker(proc)
        print(f"filled {COMPACT_TOPIC} with {n} keyed records ({n * SIZE / 1e6:.0f} MB) over {args.keys} keys in "
              f"{fill_secs:.1f} s ({n * SIZE / 1e6 / fill_secs:.0f} MB/s, cleaner disabled)")
        dirty_mb = cleanable_bytes(pristine) / 1e6
        phases: list[Phase] = []
        print(f"{'producer':<15} {'MB/s':>7} {'msgs/s':>8} {'broker CPU':>10} {'producer CPU':>12}  note")
        for i in range(args.repeat):
            for kind in ("idle", "cleaning") if i % 2 == 0 else ("cleaning", "idle"):
                shutil.rmtree(run_dir, ignore_errors=True)
                shutil.copytree(pristine, run_dir)
                phase, clean_secs = produce_phase(run_dir, kind, args.messages)
                if clean_secs:
                    phase.note += (f"; broker cleaned {dirty_mb:.0f} MB in {clean_secs:.1f} s "
                                   f"({dirty_mb / clean_secs:.1f} MB/s)")
                phases.append(phase)
                print(f"{kind:<15} {phase.mbs:>7.1f} {phase.mbs * 1e6 / SIZE:>8.0f} {phase.broker_cpu:>10.0%} "
                      f"{phase.producer_cpu:>12.0%}  {phase.note}")
    idle = [p.mbs for p in phases if p.kind == "idle"]
    busy = [p.mbs for p in phases if p.kind == "cleaning"]
    print(f"produce MB/s idle {statistics.median(idle):.1f}, while cleaning {statistics.median(busy):.1f} (median); "
          f"cleaning / idle: {statistics.median(busy) / statistics.median(idle):.2f}x")
    return phases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=1024, help="MiB of records to clean (default 1024)")
    ap.add_argument("--keys", type=int, default=100_000, help="distinct keys (default 100000)")
    ap.add_argument("--batch-records", type=int, default=16,
                    help="records per batch of the in-process log (default 16: ~16 KiB, the Java producer's "
                         "batch.size)")
    ap.add_argument("--segment-mb", type=int, help="segment.bytes in MiB (default: 64, or an eighth of --size-mb "
                                                   "if less)")
    ap.add_argument("--messages", type=int, default=300_000,
                    help="1 KiB records per produce phase (default 300000)")
    ap.add_argument("--repeat", type=int, default=1, help="pairs of produce phases idle / cleaning (default 1)")
    ap.add_argument("--skip-cleaner", action="store_true", help="only the produce phases")
    ap.add_argument("--skip-produce", action="store_true", help="only the in-process cleaner")
    ap.add_argument("--profile", action="store_true", help="profile the in-process cleaner (cProfile)")
    args = ap.parse_args()
    args.segment_mb = args.segment_mb or max(1, min(64, int(args.size_mb) // 8))
    if not args.skip_cleaner:
        bench_cleaner(args)
    if not args.skip_produce:
        if not args.skip_cleaner:
            print()
        bench_produce(args)


if __name__ == "__main__":
    main()
