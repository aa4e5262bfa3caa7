"""``minikafka perf-test producer`` (``kafka-producer-perf-test.sh``): send ``--num-records`` records
of ``--record-size`` bytes, at most ``--throughput`` records/s, and report records/s, MB/s and the
latency of the acknowledgements (from ``send`` to the completion of the record's batch): average,
maximum and percentiles.

Latencies are taken per batch, not per record: every record of a batch is acknowledged at the same
moment, so one completion hook per batch (``ProduceRequestResult.add_done_callback``) gives each of its
records' latencies from the send times kept beside it, without a callback and a ``RecordMetadata`` per
record (Kafka's ``PerfCallback``), which would cost this tool more than the producer's own work.

``--processes N`` runs N producers in worker processes (:mod:`.perf_processes`), each sending its share
of the records, so that the figures measure the broker rather than one Python process.
"""

from __future__ import annotations

import argparse
import codecs
import logging
import random
from array import array
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from ..client.producer import KafkaProducer
    from ..client.producer.batch import ProduceRequestResult
from ..common.clock import SYSTEM_CLOCK, Clock
from .common import ToolError, client_properties, client_settings, print_table
from .progress import ProgressDisplay, progress_enabled

log = logging.getLogger(__name__)

MB = 1024 * 1024
WINDOW_S = 5.0
REFRESH_S = 0.25
PERCENTILES = (0.5, 0.95, 0.99, 0.999)
PAYLOAD_LETTERS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def percentile_ms(sorted_ms: list[float] | array, p: float) -> float:
    """The ``p`` quantile of sorted latencies (Kafka's index ``p * count``); 0 for none."""
    if not sorted_ms:
        return 0.0
    return sorted_ms[min(int(p * len(sorted_ms)), len(sorted_ms) - 1)]


def summary_line(count: int, nbytes: int, elapsed_s: float, latencies: list[float] | array, max_ms: float) -> str:
    """Kafka's final line from totals and every latency (of one producer, or merged from several)."""
    elapsed = max(elapsed_s, 1e-9)
    ordered = sorted(latencies)
    avg = sum(ordered) / len(ordered) if ordered else 0.0
    pct = ", ".join(f"{percentile_ms(ordered, p):.2f} ms {p * 100:g}th" for p in PERCENTILES)
    return (f"{count} records sent, {count / elapsed:.1f} records/sec ({nbytes / elapsed / MB:.2f} MB/sec), "
            f"{avg:.2f} ms avg latency, {max_ms:.2f} ms max latency, {pct}.")


def window_line(n: int, nbytes: int, total_ms: float, max_ms: float, elapsed_s: float) -> str:
    """Kafka's periodic line for one window."""
    elapsed = max(elapsed_s, 1e-9)
    return (f"{n} records sent, {n / elapsed:.1f} records/sec ({nbytes / elapsed / MB:.2f} MB/sec), "
            f"{total_ms / n if n else 0:.1f} ms avg latency, {max_ms:.1f} ms max latency.")


class ProducerStats:
    """Kafka's ``ProducerPerformance.Stats``: totals, every latency, and the current window."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.start = self.window_start = clock.monotonic()
        self.count = self.bytes = self.errors = 0
        self.latencies = array("d")
        self.max_ms = 0.0
        self.first_error: BaseException | None = None
        self._window = [0, 0, 0.0, 0.0]  # records, bytes, total latency, max latency

    def record(self, latency_ms: float, size: int) -> None:
        """One acknowledged record."""
        self.record_many([latency_ms], size)

    def record_many(self, latencies_ms: list[float], size: int, sizes: array | None = None) -> None:
        """Records acknowledged together: ``size`` bytes each, or ``sizes`` one by one."""
        n = len(latencies_ms)
        if not n:
            return
        nbytes = sum(sizes) if sizes is not None else n * size
        total = sum(latencies_ms)
        top = max(latencies_ms)
        self.count += n
        self.bytes += nbytes
        self.latencies.extend(latencies_ms)
        if top > self.max_ms:
            self.max_ms = top
        w = self._window
        w[0] += n
        w[1] += nbytes
        w[2] += total
        if top > w[3]:
            w[3] = top

    def record_error(self, exc: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = exc
            log.error("a record failed: %s", exc)

    def take_window(self) -> tuple[int, int, float, float]:
        """(records, bytes, total latency, max latency) since the last call, which starts a new window."""
        w = self._window
        self._window = [0, 0, 0.0, 0.0]
        return int(w[0]), int(w[1]), w[2], w[3]

    def window_line(self) -> str:
        """Kafka's periodic line for the window since the last one, which starts a new window."""
        now = self.clock.monotonic()
        elapsed = now - self.window_start
        self.window_start = now
        return window_line(*self.take_window(), elapsed)

    def rates(self) -> tuple[float, float]:
        """(records/s, MB/s) since the start."""
        elapsed = max(self.clock.monotonic() - self.start, 1e-9)
        return self.count / elapsed, self.bytes / elapsed / MB

    def summary(self, elapsed_s: float | None = None) -> str:
        """The final line: totals, rates, average and maximum latency, percentiles."""
        elapsed = self.clock.monotonic() - self.start if elapsed_s is None else elapsed_s
        return summary_line(self.count, self.bytes, elapsed, self.latencies, self.max_ms)


class BatchLatencies:
    """Send times kept per batch; when a batch completes, its records' latencies go to the stats."""

    def __init__(self, stats: ProducerStats, record_size: int | None) -> None:
        self.stats = stats
        self.record_size = record_size  # None: values differ in size, kept one by one
        self._current: ProduceRequestResult | None = None
        self._times = array("d")
        self._sizes: array | None = None
        self._open: dict[ProduceRequestResult, tuple[array, array | None]] = {}

    def track(self, result: ProduceRequestResult, sent_at: float, size: int) -> None:
        """A record sent at ``sent_at`` went into the batch whose outcome is ``result``."""
        if result is not self._current:
            entry = self._open.get(result)
            if entry is None:
                entry = self._open[result] = (array("d"), None if self.record_size is not None else array("q"))
                result.add_done_callback(self._done)
            self._current = result
            self._times, self._sizes = entry
        self._times.append(sent_at)
        if self._sizes is not None:
            self._sizes.append(size)

    def _done(self, result: ProduceRequestResult) -> None:
        times, sizes = self._open.pop(result)
        if result is self._current:
            self._current = None
        stats = self.stats
        now = stats.clock.monotonic()
        if result.error is None:
            stats.record_many([(now - t) * 1000 for t in times], self.record_size or 0, sizes)
            return
        ok: list[float] = []
        ok_sizes = array("q") if sizes is not None else None
        for i, t in enumerate(times):  # a record's index in the batch is the order it was appended
            exc = result.error_for(i)
            if exc is not None:
                stats.record_error(exc)
            else:
                ok.append((now - t) * 1000)
                if ok_sizes is not None and sizes is not None:
                    ok_sizes.append(sizes[i])
        stats.record_many(ok, self.record_size or 0, ok_sizes)


class Payloads:
    """Record values: one random payload of ``--record-size`` bytes, or a random one of a file's."""

    def __init__(self, record_size: int | None, payload_file: str | None, delimiter: str) -> None:
        if payload_file is not None:
            try:
                data = open(payload_file, "rb").read()
            except OSError as exc:
                raise ToolError(f"cannot read {payload_file}: {exc.strerror or exc}") from None
            sep = codecs.decode(delimiter, "unicode_escape").encode()
            self.values = [v for v in data.split(sep) if v]
            if not self.values:
                raise ToolError(f"{payload_file} holds no payloads")
        elif record_size is not None and record_size >= 0:
            self.values = [bytes(random.choices(PAYLOAD_LETTERS, k=record_size))]
        else:
            raise ToolError("--record-size or --payload-file is required")

    @property
    def fixed_size(self) -> int | None:
        """The size of every value, or None when they differ."""
        return len(self.values[0]) if len(self.values) == 1 else None

    def next(self) -> bytes:
        return self.values[0] if len(self.values) == 1 else random.choice(self.values)


def producer_settings(args: argparse.Namespace) -> dict[str, Any]:
    from ..client.producer import ProducerConfig

    props = client_properties(args.producer_config, args.producer_props, "--producer-props")
    if args.bootstrap_server:
        props["bootstrap.servers"] = args.bootstrap_server
    if "bootstrap.servers" not in props:
        raise ToolError("--bootstrap-server (or bootstrap.servers in --producer-props) is required")
    props.setdefault("client.id", "perf-producer-client")
    return client_settings(ProducerConfig, props, "producer")


async def produce(producer: KafkaProducer, topic: str, payloads: Payloads, num_records: int, throughput: float,
                  stats: ProducerStats) -> None:
    """Kafka's send loop: ``num_records`` records, at most ``throughput`` records/s (<= 0: unthrottled), then
    flush; latencies go to ``stats``, whose start is the start of the run."""
    tracker = BatchLatencies(stats, payloads.fixed_size)
    track = tracker.track
    send = producer.send
    clock = stats.clock.monotonic
    fixed = payloads.fixed_size
    value = payloads.values[0]
    next_value = payloads.next
    stats.start = stats.window_start = clock()
    for i in range(num_records):
        if fixed is None:
            value = next_value()
        sent_at = clock()
        track((await send(topic, value)).result, sent_at, len(value))
        if throughput > 0:
            ahead = stats.start + (i + 1) / throughput - clock()
            if ahead > 0:
                await trio.sleep(ahead)
    await producer.flush()


async def _report(stats: ProducerStats, bar: ProgressDisplay) -> None:
    """Refresh the progress display, or print Kafka's window line every 5 seconds."""
    while True:
        if bar.enabled:
            await trio.sleep(REFRESH_S)
            records_s, mb_s = stats.rates()
            bar.update(completed=stats.count, status=f"{records_s:,.0f} records/s  {mb_s:.2f} MB/s")
        else:
            await trio.sleep(WINDOW_S)
            print(stats.window_line(), flush=True)


async def main(args: argparse.Namespace) -> int:
    from ..client.producer import KafkaProducer

    if args.num_records <= 0:
        raise ToolError("--num-records must be positive")
    payloads = Payloads(args.record_size, args.payload_file, args.payload_delimiter)
    settings = producer_settings(args)
    async with KafkaProducer(**settings) as producer:
        stats = ProducerStats(SYSTEM_CLOCK)
        with ProgressDisplay("producing", args.num_records, enabled=progress_enabled(args.no_progress)) as bar:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_report, stats, bar)
                await produce(producer, args.topic, payloads, args.num_records, args.throughput, stats)
                nursery.cancel_scope.cancel()
            bar.update(completed=stats.count)
        metrics = producer.metrics()
    print(stats.summary())
    if args.print_metrics:
        print_table(("METRIC", "VALUE"), sorted(metrics.items()))
    if stats.errors:
        raise ToolError(f"{stats.errors} of {args.num_records} record(s) failed")
    return 0


__all__ = ["BatchLatencies", "Payloads", "ProducerStats", "main", "percentile_ms", "produce", "summary_line",
           "window_line"]
