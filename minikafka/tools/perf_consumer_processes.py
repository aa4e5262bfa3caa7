"""``minikafka perf-test consumer --processes N``: N consumers in worker processes, one line of figures.

As on the producer side (:mod:`.perf_processes`), one Python process consuming measures itself as much
as the broker.  The parent starts N worker processes (``multiprocessing`` with *spawn*); each builds its
consumer, fetches the topic's metadata, says it is ready and waits for the parent's start signal, then
either joins the group with the others (``subscribe``, the default: the group's assignor spreads the
partitions) or, with ``--disjoint-partitions``, takes the partitions ``p`` with ``p % N == i`` itself
(``assign``, no group coordination; offsets still start from the group's committed ones, else
``auto.offset.reset``).

``--messages`` is a total: every worker claims the records it polled from one shared counter, so that
together they count exactly ``--messages`` (records polled past it are not counted) and all stop when
it is reached.  Running totals (records, bytes) live in a shared array, which the parent sums for the
progress display and ``--show-detailed-stats`` (one line per worker, its index as ``threadId``).  The
summary is Kafka's line over all workers: from the common start to the last counted record, with the
rebalance time the longest any worker waited for its first partitions.  ``--timeout`` applies to the
whole: the run fails when no worker counted a record for that long.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import trio

from ..common.clock import SYSTEM_CLOCK
from .common import ToolError, print_table
from .perf_consumer import DETAILED_HEADER, HEADER, MB, POLL_MS, _rate, _when, consumer_settings, figures
from .perf_consumer import main as single_consumer_main
from .perf_processes import POLL_S, _collect, _describe
from .perf_producer import REFRESH_S
from .progress import ProgressDisplay, progress_enabled

log = logging.getLogger(__name__)

# a worker's slots in the shared array; the array ends with one more slot, the records claimed by all
READY, RECORDS, BYTES = range(3)
SLOTS = 3


@dataclass
class ConsumerJob:
    """What one worker process is given (picklable: it crosses to a spawned process)."""

    index: int
    workers: int
    settings: dict[str, Any]
    topic: str
    messages: int
    disjoint: bool


def _claimed_slot(workers: int) -> int:
    return workers * SLOTS


# -- in a worker process ----------------------------------------------------------------------------
def consumer_worker(job: ConsumerJob, shared: Any, go: Any, stop: Any, conn: Connection) -> None:
    """A worker process's entry point: consume until the total is reached, send the result (or the error)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        conn.send(trio.run(_consume_job, job, shared, go, stop))
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, which reports it
        conn.send({"error": f"worker {job.index}: {_describe(exc)}"})
    finally:
        conn.close()


def _claim(shared: Any, job: ConsumerJob, sizes: list[int]) -> tuple[int, bool]:
    """Count as many of the polled records (their ``sizes``) as the total still wants: (taken, total reached)."""
    claimed = _claimed_slot(job.workers)
    base = job.index * SLOTS
    with shared.get_lock():
        take = min(len(sizes), job.messages - int(shared[claimed]))
        if take > 0:
            shared[claimed] += take
            shared[base + RECORDS] += take
            shared[base + BYTES] += sum(sizes[:take])
        return max(take, 0), shared[claimed] >= job.messages


async def _consume_job(job: ConsumerJob, shared: Any, go: Any, stop: Any) -> dict[str, Any]:
    from ..client.consumer import KafkaConsumer, TopicPartition

    joined_at: float | None = None
    last_at: float | None = None
    count = nbytes = 0
    async with KafkaConsumer(**job.settings) as consumer:
        partitions = await consumer.partitions_for(job.topic)  # metadata before the common start
        with shared.get_lock():
            shared[job.index * SLOTS + READY] = 1
        await trio.to_thread.run_sync(go.wait, abandon_on_cancel=True)
        if job.disjoint:
            consumer.assign([TopicPartition(job.topic, p) for p in partitions if p % job.workers == job.index])
        else:
            consumer.subscribe([job.topic])
        while not stop.is_set():
            batch = await consumer.poll(timeout_ms=POLL_MS)
            now = SYSTEM_CLOCK.monotonic()
            if joined_at is None and consumer.assignment():
                joined_at = now
            if not batch:
                continue
            sizes = [len(r.key or b"") + len(r.value or b"") for records in batch.values() for r in records]
            take, done = _claim(shared, job, sizes)
            if take:
                count += take
                nbytes += sum(sizes[:take])
                last_at = now
            if done:
                stop.set()
        metrics = {str(k): v for k, v in consumer.metrics().items()}
    return {"count": count, "bytes": nbytes, "joined_at": joined_at, "last_at": last_at, "metrics": metrics}


# -- in the parent ----------------------------------------------------------------------------------
async def consumer_main(args: argparse.Namespace) -> int:
    """``perf-test consumer``: in this process, or in ``--processes`` worker processes."""
    processes = getattr(args, "processes", 1)
    if processes < 1:
        raise ToolError("--processes must be at least 1")
    if processes == 1:
        if getattr(args, "disjoint_partitions", False):
            raise ToolError("--disjoint-partitions needs --processes 2 or more")
        return await single_consumer_main(args)
    if args.messages <= 0:
        raise ToolError("--messages must be positive")
    return await run_consumers(args, consumer_settings(args), processes)


def _worker_totals(shared: Any, workers: int) -> tuple[list[int], list[int]]:
    with shared.get_lock():
        return ([int(shared[i * SLOTS + RECORDS]) for i in range(workers)],
                [int(shared[i * SLOTS + BYTES]) for i in range(workers)])


async def run_consumers(args: argparse.Namespace, settings: dict[str, Any], processes: int) -> int:
    """Run the consumer perf test in ``processes`` worker processes (one group) and print the merged figures."""
    ctx = multiprocessing.get_context("spawn")
    shared = ctx.Array("d", processes * SLOTS + 1)
    go, stop = ctx.Event(), ctx.Event()
    workers: list[tuple[Any, Connection]] = []
    results: dict[int, dict[str, Any]] = {}
    disjoint = bool(getattr(args, "disjoint_partitions", False))
    if not args.hide_header:
        print(DETAILED_HEADER if args.show_detailed_stats else HEADER)
    try:
        for i in range(processes):
            job = ConsumerJob(i, processes, settings, args.topic, args.messages, disjoint)
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=consumer_worker, args=(job, shared, go, stop, sender), daemon=True,
                               name=f"perf-consumer-{i}")
            proc.start()
            sender.close()
            workers.append((proc, receiver))
        while True:
            with shared.get_lock():
                ready = sum(int(shared[i * SLOTS + READY]) for i in range(processes))
            if ready == processes:
                break
            await _collect(workers, results, "consumer")
            await trio.sleep(POLL_S)
        wall_start = SYSTEM_CLOCK.time()
        start = last_progress = last_refresh = SYSTEM_CLOCK.monotonic()
        last_total = 0
        reported = [(start, 0, 0)] * processes  # per worker: (time, records, bytes) at its last detailed line
        go.set()
        with ProgressDisplay("consuming", args.messages, enabled=progress_enabled(args.no_progress)) as bar:
            while len(results) < len(workers):
                await _collect(workers, results, "consumer")
                now = SYSTEM_CLOCK.monotonic()
                counts, sizes = _worker_totals(shared, processes)
                total = sum(counts)
                if total != last_total:
                    last_total, last_progress = total, now
                elif not stop.is_set() and (now - last_progress) * 1000 > args.timeout:
                    raise ToolError(f"exiting before consuming the expected number of messages: timeout "
                                    f"({args.timeout} ms) exceeded after {total} of {args.messages}; you can "
                                    "use the --timeout option to increase the timeout")
                if args.show_detailed_stats and (now - reported[0][0]) * 1000 >= args.reporting_interval:
                    for i in range(processes):
                        t0, c0, b0 = reported[i]
                        print(f"{_when(wall_start + now - start)}, {i}, "
                              f"{figures(sizes[i] - b0, counts[i] - c0, now - t0, 0)}", flush=True)
                        reported[i] = (now, counts[i], sizes[i])
                if bar.enabled and now - last_refresh >= REFRESH_S:
                    last_refresh = now
                    bar.update(completed=total, status=f"{_rate(sum(sizes) / MB, now - start):.2f} MB/s")
                await trio.sleep(POLL_S)
            bar.update(completed=sum(r["count"] for r in results.values()))
    finally:
        stop.set()
        go.set()  # a worker still waiting for the start would otherwise wait for ever
        for proc, receiver in workers:
            if proc.is_alive() and len(results) < len(workers):
                proc.terminate()
            proc.join(10)
            receiver.close()
    return _report(args, wall_start, start, [results[i] for i in range(processes)])


def _report(args: argparse.Namespace, wall_start: float, start: float, results: list[dict[str, Any]]) -> int:
    """Kafka's summary line over every worker (unless ``--show-detailed-stats``), and their metrics."""
    count = sum(r["count"] for r in results)
    nbytes = sum(r["bytes"] for r in results)
    ends = [r["last_at"] for r in results if r["last_at"] is not None]
    joins = [r["joined_at"] for r in results if r["joined_at"] is not None]
    elapsed = max(max(ends, default=start) - start, 0.0)
    join_s = min(max(max(joins, default=start) - start, 0.0), elapsed)
    if not args.show_detailed_stats:
        print(f"{_when(wall_start)}, {_when(wall_start + elapsed)}, {figures(nbytes, count, elapsed, join_s)}")
    if args.print_metrics:
        names = sorted(set().union(*(r["metrics"] for r in results)))
        print_table(("METRIC", *(f"WORKER {i}" for i in range(len(results)))),
                    [(n, *(r["metrics"].get(n) for r in results)) for n in names])
    return 0
