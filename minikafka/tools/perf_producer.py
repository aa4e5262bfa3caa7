"""``minikafka perf-test producer`` (``kafka-producer-perf-test.sh``): send ``--num-records`` records
of ``--record-size`` bytes, at most ``--throughput`` records/s, and report records/s, MB/s and the
latency of the acknowledgements (from ``send`` to the callback): average, maximum and percentiles.
"""

from __future__ import annotations

import argparse
import codecs
import logging
import random
from array import array
from typing import TYPE_CHECKING, Any, Callable

import trio

if TYPE_CHECKING:
    from ..client.producer import RecordMetadata
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


class ProducerStats:
    """Kafka's ``ProducerPerformance.Stats``: totals, every latency, and the current window."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.start = self.window_start = clock.monotonic()
        self.count = self.bytes = self.errors = 0
        self.latencies = array("d")
        self.max_ms = 0.0
        self._window = [0, 0, 0.0, 0.0]  # records, bytes, total latency, max latency

    def callback(self, sent_at: float, size: int) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        """The ack callback of one record sent at ``sent_at``."""
        def done(meta: RecordMetadata | None, exc: BaseException | None) -> None:
            if exc is not None:
                self.errors += 1
                if self.errors == 1:
                    log.error("a record failed: %s", exc)
                return
            self.record((self.clock.monotonic() - sent_at) * 1000, size)
        return done

    def record(self, latency_ms: float, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.latencies.append(latency_ms)
        self.max_ms = max(self.max_ms, latency_ms)
        w = self._window
        w[0] += 1
        w[1] += size
        w[2] += latency_ms
        w[3] = max(w[3], latency_ms)

    def window_line(self) -> str:
        """Kafka's periodic line for the window since the last one, which starts a new window."""
        now = self.clock.monotonic()
        n, size, total, top = self._window
        elapsed = max(now - self.window_start, 1e-9)
        self.window_start, self._window = now, [0, 0, 0.0, 0.0]
        return (f"{n} records sent, {n / elapsed:.1f} records/sec ({size / elapsed / MB:.2f} MB/sec), "
                f"{total / n if n else 0:.1f} ms avg latency, {top:.1f} ms max latency.")

    def rates(self) -> tuple[float, float]:
        """(records/s, MB/s) since the start."""
        elapsed = max(self.clock.monotonic() - self.start, 1e-9)
        return self.count / elapsed, self.bytes / elapsed / MB

    def summary(self) -> str:
        """The final line: totals, rates, average and maximum latency, percentiles."""
        records_s, mb_s = self.rates()
        ordered = sorted(self.latencies)
        avg = sum(ordered) / len(ordered) if ordered else 0.0
        pct = ", ".join(f"{percentile_ms(ordered, p):.2f} ms {p * 100:g}th" for p in PERCENTILES)
        return (f"{self.count} records sent, {records_s:.1f} records/sec ({mb_s:.2f} MB/sec), "
                f"{avg:.2f} ms avg latency, {self.max_ms:.2f} ms max latency, {pct}.")


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
    clock = SYSTEM_CLOCK.monotonic
    async with KafkaProducer(**settings) as producer:
        stats = ProducerStats(SYSTEM_CLOCK)
        with ProgressDisplay("producing", args.num_records, enabled=progress_enabled(args.no_progress)) as bar:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_report, stats, bar)
                for i in range(args.num_records):
                    value = payloads.next()
                    await producer.send(args.topic, value, callback=stats.callback(clock(), len(value)))
                    if args.throughput > 0:
                        ahead = stats.start + (i + 1) / args.throughput - clock()
                        if ahead > 0:
                            await trio.sleep(ahead)
                await producer.flush()
                nursery.cancel_scope.cancel()
            bar.update(completed=stats.count)
        metrics = producer.metrics()
    print(stats.summary())
    if args.print_metrics:
        print_table(("METRIC", "VALUE"), sorted(metrics.items()))
    if stats.errors:
        raise ToolError(f"{stats.errors} of {args.num_records} record(s) failed")
    return 0
