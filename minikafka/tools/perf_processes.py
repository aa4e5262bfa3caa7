"""``minikafka perf-test producer --processes N``: N producers in worker processes, one summary.

One Python process running one producer measures itself as much as the broker.  The parent starts N
worker processes (``multiprocessing`` with *spawn*), each with its own :class:`KafkaProducer` and its
share of ``--num-records`` (and of ``--throughput``).  Every worker fetches the topic's metadata, says it
is ready, and waits for the parent's start signal, so that the run is timed from one common start to the
last worker's end.  While they run, the workers publish their running totals (records, bytes, latency
sum, window maximum) to a shared array every 0.25 s, which the parent sums for the progress display or
Kafka's 5-second window lines.  At the end each worker sends back its totals and every latency it
measured; the parent merges the latency samples (not the workers' percentiles) into one summary line in
Kafka's format.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
from array import array
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import trio

from ..common.clock import SYSTEM_CLOCK
from .common import ToolError, print_table
from .perf_producer import REFRESH_S, WINDOW_S, Payloads, ProducerStats, produce, producer_settings, summary_line
from .perf_producer import main as single_producer_main
from .perf_producer import window_line
from .progress import ProgressDisplay, progress_enabled

log = logging.getLogger(__name__)

# a worker's slots in the shared progress array
READY, RECORDS, BYTES, LATENCY_SUM, WINDOW_MAX = range(5)
SLOTS = 5
POLL_S = 0.02


@dataclass
class ProducerJob:
    """What one worker process sends (picklable: it crosses to a spawned process)."""

    index: int
    settings: dict[str, Any]
    topic: str
    num_records: int
    record_size: int | None
    payload_file: str | None
    payload_delimiter: str
    throughput: float


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` shares differing by at most one (the first ones get the remainder)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# -- in a worker process ----------------------------------------------------------------------------
def producer_worker(job: ProducerJob, progress: Any, go: Any, conn: Connection) -> None:
    """A worker process's entry point: produce ``job``, send the result (or the error) to the parent."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        conn.send(trio.run(_produce_job, job, progress, go))
    except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent, which reports it
        conn.send({"error": f"worker {job.index}: {_describe(exc)}"})
    finally:
        conn.close()


def _describe(exc: BaseException) -> str:
    from .common import reported_error

    found = reported_error(exc)
    return str(found) if found is not None else f"{type(exc).__name__}: {exc}"


async def _produce_job(job: ProducerJob, progress: Any, go: Any) -> dict[str, Any]:
    from ..client.producer import KafkaProducer

    payloads = Payloads(job.record_size, job.payload_file, job.payload_delimiter)
    stats = ProducerStats(SYSTEM_CLOCK)
    async with KafkaProducer(**job.settings) as producer:
        await producer.partitions_for(job.topic)  # metadata (and the topic) before the common start
        with progress.get_lock():
            progress[job.index * SLOTS + READY] = 1
        await trio.to_thread.run_sync(go.wait, abandon_on_cancel=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_publish, stats, progress, job.index)
            await produce(producer, job.topic, payloads, job.num_records, job.throughput, stats)
            nursery.cancel_scope.cancel()
        _publish_once(stats, progress, job.index)
        metrics = producer.metrics()
    return {"count": stats.count, "bytes": stats.bytes, "errors": stats.errors, "max_ms": stats.max_ms,
            "first_error": str(stats.first_error) if stats.first_error is not None else None,
            "end": SYSTEM_CLOCK.monotonic(), "latencies": stats.latencies.tobytes(), "metrics": metrics}


def _publish_once(stats: ProducerStats, progress: Any, index: int) -> None:
    n, nbytes, total, top = stats.take_window()
    base = index * SLOTS
    with progress.get_lock():
        progress[base + RECORDS] += n
        progress[base + BYTES] += nbytes
        progress[base + LATENCY_SUM] += total
        if top > progress[base + WINDOW_MAX]:
            progress[base + WINDOW_MAX] = top


async def _publish(stats: ProducerStats, progress: Any, index: int) -> None:
    while True:
        await trio.sleep(REFRESH_S)
        _publish_once(stats, progress, index)


# -- in the parent ----------------------------------------------------------------------------------
class _Progress:
    """The parent's view of the shared array: totals over all workers, and Kafka's windows."""

    def __init__(self, array_: Any, workers: int) -> None:
        self.array = array_
        self.workers = workers
        self.last = (0.0, 0.0, 0.0)
        self.window_start = SYSTEM_CLOCK.monotonic()

    def ready(self) -> int:
        with self.array.get_lock():
            return sum(int(self.array[i * SLOTS + READY]) for i in range(self.workers))

    def totals(self, reset_max: bool = False) -> tuple[float, float, float, float]:
        """(records, bytes, latency sum, max latency since the last reset) over all workers."""
        a = self.array
        with a.get_lock():
            out = [0.0, 0.0, 0.0, 0.0]
            for i in range(self.workers):
                base = i * SLOTS
                out[0] += a[base + RECORDS]
                out[1] += a[base + BYTES]
                out[2] += a[base + LATENCY_SUM]
                out[3] = max(out[3], a[base + WINDOW_MAX])
                if reset_max:
                    a[base + WINDOW_MAX] = 0.0
        return out[0], out[1], out[2], out[3]

    def window_line(self) -> str:
        records, nbytes, total, top = self.totals(reset_max=True)
        now = SYSTEM_CLOCK.monotonic()
        r0, b0, t0 = self.last
        self.last = (records, nbytes, total)
        elapsed, self.window_start = now - self.window_start, now
        return window_line(int(records - r0), int(nbytes - b0), total - t0, top, elapsed)


async def producer_main(args: argparse.Namespace) -> int:
    """``perf-test producer``: in this process, or in ``--processes`` worker processes."""
    processes = getattr(args, "processes", 1)
    if processes < 1:
        raise ToolError("--processes must be at least 1")
    if processes == 1:
        return await single_producer_main(args)
    if args.num_records <= 0:
        raise ToolError("--num-records must be positive")
    Payloads(args.record_size, args.payload_file, args.payload_delimiter)  # the same errors, before any worker
    return await run_producers(args, producer_settings(args), processes)


async def run_producers(args: argparse.Namespace, settings: dict[str, Any], processes: int) -> int:
    """Run the producer perf test in ``processes`` worker processes and print the merged figures."""
    ctx = multiprocessing.get_context("spawn")
    counts = [n for n in shares(args.num_records, processes) if n]
    throughput = args.throughput / len(counts) if args.throughput > 0 else args.throughput
    progress_array = ctx.Array("d", len(counts) * SLOTS)
    go = ctx.Event()
    workers: list[tuple[Any, Connection]] = []
    results: dict[int, dict[str, Any]] = {}
    try:
        for i, n in enumerate(counts):
            job = ProducerJob(i, settings, args.topic, n, args.record_size, args.payload_file,
                              args.payload_delimiter, throughput)
            receiver, sender = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=producer_worker, args=(job, progress_array, go, sender), daemon=True,
                               name=f"perf-producer-{i}")
            proc.start()
            sender.close()
            workers.append((proc, receiver))
        progress = _Progress(progress_array, len(workers))
        while progress.ready() < len(workers):
            await _collect(workers, results)
            await trio.sleep(POLL_S)
        start = SYSTEM_CLOCK.monotonic()
        progress.window_start = start
        go.set()
        with ProgressDisplay("producing", args.num_records, enabled=progress_enabled(args.no_progress)) as bar:
            next_report = start + (REFRESH_S if bar.enabled else WINDOW_S)
            while len(results) < len(workers):
                await _collect(workers, results)
                now = SYSTEM_CLOCK.monotonic()
                if now >= next_report and len(results) < len(workers):
                    if bar.enabled:
                        records, nbytes, _, _ = progress.totals()
                        elapsed = max(now - start, 1e-9)
                        bar.update(completed=int(records), status=f"{records / elapsed:,.0f} records/s  "
                                                             f"{nbytes / elapsed / 2**20:.2f} MB/s")
                        next_report = now + REFRESH_S
                    else:
                        print(progress.window_line(), flush=True)
                        next_report = now + WINDOW_S
                await trio.sleep(POLL_S)
            bar.update(completed=sum(r["count"] for r in results.values()))
    finally:
        for proc, receiver in workers:
            if proc.is_alive() and proc.pid is not None and len(results) < len(workers):
                proc.terminate()
            proc.join(10)
            receiver.close()
    return _report(args, start, [results[i] for i in range(len(workers))])


async def _collect(workers: list[tuple[Any, Connection]], results: dict[int, dict[str, Any]],
                   kind: str = "producer") -> None:
    """Take the results that arrived; ToolError for a ``kind`` worker that failed or died without one."""
    for i, (proc, receiver) in enumerate(workers):
        if i in results:
            continue
        if receiver.poll():
            try:
                result = await trio.to_thread.run_sync(receiver.recv)
            except EOFError:
                raise ToolError(f"{kind} worker {i} exited with status {proc.exitcode}") from None
            if "error" in result:
                raise ToolError(result["error"])
            results[i] = result
        elif not proc.is_alive():
            raise ToolError(f"{kind} worker {i} exited with status {proc.exitcode}")


def _report(args: argparse.Namespace, start: float, results: list[dict[str, Any]]) -> int:
    latencies = array("d")
    for r in results:
        latencies.frombytes(r["latencies"])
    count = sum(r["count"] for r in results)
    print(summary_line(count, sum(r["bytes"] for r in results), max(r["end"] for r in results) - start,
                       latencies, max(r["max_ms"] for r in results)))
    if args.print_metrics:
        names = sorted(set().union(*(r["metrics"] for r in results)))
        print_table(("METRIC", *(f"WORKER {i}" for i in range(len(results)))),
                    [(n, *(r["metrics"].get(n) for r in results)) for n in names])
    errors = sum(r["errors"] for r in results)
    if errors:
        first = next(r["first_error"] for r in results if r["first_error"])
        raise ToolError(f"{errors} of {args.num_records} record(s) failed (first: {first})")
    return 0
