"""Wire replay benchmark: a capture of realistic traffic replayed at max speed, locally and through Spark.

    scripts/bench replay [--requests 100000] [--capture DIR] [--regenerate] [--spark] [--master local[2]]
                         [--partitions 2] [--scale K] [--summary] [--report OUT.json]

1. Capture (:func:`make_replay_capture`): a broker in its own process
   (``minikafka serve --capture DIR``) driven by minikafka's own clients in
   this process -- ``--producers`` producers (``acks=1``, no idempotence,
   ``linger.ms`` 5 and a few records every few milliseconds, so each Produce
   request carries a few records; each producer writes partitions of its own,
   so offsets do not depend on how producers interleave), ``--consumers``
   consumers in two classic groups fetching with fetch sessions and
   auto-committing every 500 ms, everyone refreshing metadata every second --
   until the capture holds ``--requests`` requests (topics created first with
   CreateTopics, so a fresh target can replay it).  The capture is kept in
   ``--capture`` (default ``.bench/replay-capture`` in the repository,
   git-ignored, or ``.bench/replay-capture-N`` for another ``--requests N``)
   and reused when it holds enough requests; ``--regenerate`` makes it again.
2. Local replay: a fresh broker in its own process, ``run_replay`` at max
   speed (one Trio process), requests/s, duration, equal/differing counts.
3. ``--spark``: the same through ``run_spark_replay`` (``--master``,
   ``--partitions``) against another fresh broker: the replay duration of the
   report (the longest task) and the wall time of the Spark job, and both
   ratios to the local replay.

``--requests 20000`` makes a quick run.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

META = "bench-replay.json"
TOPICS = ("replay-bench-a", "replay-bench-b")
PARTITIONS = 4
MESSAGE_SIZE = 100
BROKER_OPTS = ("-o", "group.initial.rebalance.delay.ms=0")


# -- the capture -----------------------------------------------------------------------------------------

async def _drive(bootstrap: str, directory: Path, target: int, producers: int, consumers: int) -> dict:
    """minikafka clients on the broker until its capture in ``directory`` holds ``target`` requests."""
    import trio
    from bench_spark import count_capture

    from minikafka.client.consumer import KafkaConsumer
    from minikafka.client.producer import KafkaProducer
    from minikafka.tools.admin import AdminClient

    async with AdminClient(bootstrap, client_id="replay-bench-admin") as admin:
        await admin.create_topics([{"name": t, "num_partitions": PARTITIONS, "replication_factor": 1,
                                    "assignments": [], "configs": []} for t in TOPICS])
    stop = trio.Event()
    counts = {"produced": 0, "consumed": 0}
    payload = bytes(random.getrandbits(8) for _ in range(MESSAGE_SIZE))

    per_topic = max(1, min(PARTITIONS, -(-producers // len(TOPICS))))  # producers per topic

    async def produce(i: int) -> None:
        rng = random.Random(i)
        async with KafkaProducer(bootstrap, client_id=f"replay-bench-producer-{i}", acks=1,
                                 enable_idempotence=False, linger_ms=5, batch_size=4096,
                                 metadata_max_age_ms=1000) as p:
            # Each producer writes its own partitions (as keyed producers mostly do): offsets do not depend on
            # how the producers' requests interleave.
            topic = TOPICS[i % len(TOPICS)]
            mine = [q for q in range(PARTITIONS) if q % per_topic == i // len(TOPICS) % per_topic]
            while not stop.is_set():
                part = rng.choice(mine)
                for _ in range(rng.randint(2, 5)):
                    await p.send(topic, payload, partition=part)
                    counts["produced"] += 1
                await trio.sleep(0.002 + rng.random() * 0.004)
            await p.flush()

    async def consume(j: int) -> None:
        async with KafkaConsumer(*TOPICS, bootstrap_servers=bootstrap, group_id=f"replay-bench-group-{j % 2}",
                                 client_id=f"replay-bench-consumer-{j}", auto_offset_reset="earliest",
                                 enable_auto_commit=True, auto_commit_interval_ms=500, fetch_max_wait_ms=100,
                                 metadata_max_age_ms=1000, heartbeat_interval_ms=1000) as c:
            while not stop.is_set():
                got = await c.poll(100)
                counts["consumed"] += sum(len(v) for v in got.values())

    t0 = time.perf_counter()
    have = 0
    async with trio.open_nursery() as nursery:
        for j in range(consumers):
            nursery.start_soon(consume, j)
        for i in range(producers):
            nursery.start_soon(produce, i)
        last = t0
        while True:
            await trio.sleep(1.0)
            have = (await trio.to_thread.run_sync(count_capture, directory))[0]
            now = time.perf_counter()
            if have >= target:
                break
            if now - last >= 10:
                last = now
                print(f"  ... capture holds {have:,} requests after {now - t0:.0f} s", flush=True)
        stop.set()
    return {"drive_seconds": time.perf_counter() - t0, **counts}


def make_replay_capture(cap_dir: str | Path, requests: int = 100_000, producers: int = 4,
                        consumers: int = 4) -> dict:
    """Make a capture of at least ``requests`` requests of realistic traffic in ``cap_dir`` (emptied first).

    A broker in its own process captures; minikafka producers and consumer groups (see the module docstring)
    drive it.  Returns the figures also written to ``cap_dir/bench-replay.json``.
    """
    import shutil

    import trio
    from bench_common import free_port, start_broker, stop_broker
    from bench_spark import count_capture

    directory = Path(cap_dir)
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    port = free_port()
    t0 = time.perf_counter()
    proc, _ = start_broker(port, "--capture", str(directory), *BROKER_OPTS)
    try:
        info = trio.run(_drive, f"127.0.0.1:{port}", directory, requests, producers, consumers)
    finally:
        stop_broker(proc)
    records, files, size = count_capture(directory)
    info.update(seconds=time.perf_counter() - t0, records=records, files=files, bytes=size, target=requests,
                producers=producers, consumers=consumers)
    (directory / META).write_text(json.dumps(info, indent=1))
    return info


def ensure_replay_capture(cap_dir: Path, requests: int, regenerate: bool = False, producers: int = 4,
                          consumers: int = 4) -> dict:
    """The capture in ``cap_dir``: reused when it holds ``requests`` requests, else made (again)."""
    from bench_spark import count_capture

    meta = cap_dir / META
    if meta.exists() and not regenerate:
        info = json.loads(meta.read_text())
        records, files, size = count_capture(cap_dir)
        if records >= requests:
            info.update(records=records, files=files, bytes=size, reused=True)
            print(f"capture: reusing {cap_dir} ({records:,} requests, made in {info['seconds']:.0f} s)", flush=True)
            return info
        print(f"capture: {cap_dir} holds {records:,} requests: making it again", flush=True)
    print(f"capture: driving a broker to {requests:,} requests ({producers} producers, {consumers} consumers "
          f"in 2 groups) into {cap_dir}", flush=True)
    info = make_replay_capture(cap_dir, requests, producers, consumers)
    info["reused"] = False
    print(f"capture: {info['records']:,} requests in {info['seconds']:.1f} s ({info['files']} file(s), "
          f"{info['bytes'] / 1e6:.0f} MB; {info['produced']:,} records produced, {info['consumed']:,} consumed)",
          flush=True)
    return info


# -- the replays -----------------------------------------------------------------------------------------

def _fresh_broker():
    from bench_common import free_port, start_broker

    port = free_port()
    proc, _ = start_broker(port, *BROKER_OPTS)
    return proc, port


def _against_fresh_broker(replay):
    """``replay(port)`` against a fresh broker process; (its report, wall seconds)."""
    from bench_common import stop_broker

    proc, port = _fresh_broker()
    try:
        t0 = time.perf_counter()
        report = replay(port)
        return report, time.perf_counter() - t0
    finally:
        stop_broker(proc)


def _counts(report) -> str:
    equal = sum(st.equal for st in report.per_api.values())
    differing = sum(st.differing for st in report.per_api.values())
    return (f"{report.sent:,} sent of {report.requests:,}, {report.received:,} answered, {equal:,} equal, "
            f"{differing:,} differing, {report.failed:,} failed")


def _options(port: int, scale: int):
    from minikafka.capture.replay import ReplayOptions

    return ReplayOptions("127.0.0.1", port, speed=None, scale=scale)


def local_replay(cap_dir: Path, scale: int = 1, summary: bool = False):
    """``run_replay`` at max speed against a fresh broker process; returns (report, wall seconds)."""

    from minikafka.capture.replay import run_replay

    report, wall = _against_fresh_broker(lambda port: run_replay([cap_dir], _options(port, scale)))
    print(f"local: {report.rate:,.0f} requests/s, replay {report.duration_s:.2f} s (wall {wall:.2f} s incl. "
          f"reading the capture); {_counts(report)}", flush=True)
    if summary:
        print(report.summary(), flush=True)
    return report, wall


def spark_replay(cap_dir: Path, master: str, partitions: int, scale: int = 1, summary: bool = False):
    """``run_spark_replay`` at max speed against a fresh broker process; returns (report, job wall seconds)."""
    from minikafka.analysis.replay_job import _session, run_spark_replay

    t0 = time.perf_counter()
    spark = _session(master)
    print(f"spark: {spark.version} on {spark.sparkContext.master}, start-up {time.perf_counter() - t0:.1f} s",
          flush=True)
    report, wall = _against_fresh_broker(lambda port: run_spark_replay(
        [cap_dir], _options(port, scale), master=master, partitions=partitions, spark=spark))
    print(f"spark: {report.rate:,.0f} requests/s, replay {report.duration_s:.2f} s (job wall {wall:.2f} s), "
          f"{report.tasks} task(s); {_counts(report)}", flush=True)
    if summary:
        print(report.summary(), flush=True)
    return report, wall


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench replay", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=100_000, metavar="N", help="requests in the capture")
    p.add_argument("--capture", type=Path, default=None, metavar="DIR",
                   help="where the capture is kept and reused (default .bench/replay-capture[-N])")
    p.add_argument("--regenerate", action="store_true", help="make the capture again")
    p.add_argument("--capture-only", action="store_true", help="make (or check) the capture, replay nothing")
    p.add_argument("--producers", type=int, default=4)
    p.add_argument("--consumers", type=int, default=4)
    p.add_argument("--skip-local", action="store_true", help="no local replay")
    p.add_argument("--spark", action="store_true", help="also replay through Spark")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--partitions", type=int, default=2, help="Spark tasks (default 2)")
    p.add_argument("--scale", type=int, default=1, metavar="K", help="replay the capture K times in parallel")
    p.add_argument("--summary", action="store_true", help="print each replay's full report")
    p.add_argument("--report", type=Path, default=None, metavar="OUT.json", help="write the figures as JSON")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    cap_dir = args.capture or ROOT / ".bench" / ("replay-capture" if args.requests == 100_000
                                                  else f"replay-capture-{args.requests}")
    info = ensure_replay_capture(cap_dir, args.requests, args.regenerate, args.producers, args.consumers)
    figures: dict = {"capture": {k: info.get(k) for k in ("records", "files", "bytes", "seconds", "reused")}}
    if args.capture_only:
        print(json.dumps(figures, indent=1))
        return 0
    local = None
    if not args.skip_local:
        report, wall = local_replay(cap_dir, args.scale, args.summary)
        local = report
        figures["local"] = {"requests_per_s": round(report.rate, 1), "duration_s": round(report.duration_s, 3),
                            "wall_s": round(wall, 3), "report": report.to_dict()}
    if args.spark:
        report, wall = spark_replay(cap_dir, args.master, args.partitions, args.scale, args.summary)
        figures["spark"] = {"requests_per_s": round(report.rate, 1), "duration_s": round(report.duration_s, 3),
                            "job_wall_s": round(wall, 3), "report": report.to_dict()}
        if local is not None and local.duration_s > 0:
            r1 = report.duration_s / local.duration_s
            r2 = wall / figures["local"]["wall_s"]
            figures["spark"].update(ratio_duration=round(r1, 2), ratio_wall=round(r2, 2))
            print(f"Spark/local: {r1:.2f}x by replay duration, {r2:.2f}x by wall time (Spark job vs local "
                  "run_replay call)", flush=True)
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(figures, indent=1, default=str) + "\n")
        print(f"figures written to {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
