"""``minikafka perf-test consumer`` (``kafka-consumer-perf-test.sh``): consume ``--messages`` records as a
member of a group and print Kafka's figures: MB and records consumed, MB/s and records/s over the
whole run, the time the group join took, and the rates over the fetch time that followed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
from typing import Any

from ..common.clock import SYSTEM_CLOCK, Clock
from .common import ToolError, client_properties, client_settings, print_table
from .perf_producer import MB, REFRESH_S
from .progress import ProgressDisplay, progress_enabled

HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
          "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
POLL_MS = 100


def _when(epoch_s: float) -> str:
    """Kafka's ``yyyy-MM-dd HH:mm:ss:SSS`` (local time)."""
    t = dt.datetime.fromtimestamp(epoch_s)
    return t.strftime("%Y-%m-%d %H:%M:%S:") + f"{t.microsecond // 1000:03d}"


def _rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0


def figures(nbytes: int, count: int, elapsed_s: float, join_s: float) -> str:
    """``MB, MB/s, records, records/s, rebalance ms, fetch ms, fetch MB/s, fetch records/s``."""
    fetch_s = max(elapsed_s - join_s, 0.0)
    mb = nbytes / MB
    return (f"{mb:.4f}, {_rate(mb, elapsed_s):.4f}, {count}, {_rate(count, elapsed_s):.4f}, "
            f"{join_s * 1000:.0f}, {fetch_s * 1000:.0f}, {_rate(mb, fetch_s):.4f}, {_rate(count, fetch_s):.4f}")


def consumer_settings(args: argparse.Namespace) -> dict[str, Any]:
    from ..client.consumer.config import ConsumerConfig

    props = client_properties(args.consumer_config, [], "--consumer.config")
    props["bootstrap.servers"] = args.bootstrap_server
    props.setdefault("client.id", "perf-consumer-client")
    props["auto.offset.reset"] = "latest" if args.from_latest else "earliest"
    if args.fetch_size is not None:
        props["max.partition.fetch.bytes"] = str(args.fetch_size)
    if args.group is not None or "group.id" not in props:
        props["group.id"] = args.group or f"perf-consumer-{random.randint(0, 99999)}"
    return client_settings(ConsumerConfig, props, "consumer")


async def main(args: argparse.Namespace, clock: Clock = SYSTEM_CLOCK) -> int:
    from ..client.consumer import KafkaConsumer

    if args.messages <= 0:
        raise ToolError("--messages must be positive")
    wall_start = clock.time()
    start = clock.monotonic()
    count = nbytes = 0
    join_s: float | None = None
    last_record = start
    last_report = (start, 0, 0)
    last_refresh = start
    if not args.hide_header:
        print(DETAILED_HEADER if args.show_detailed_stats else HEADER)
    async with KafkaConsumer(args.topic, **consumer_settings(args)) as consumer:
        with ProgressDisplay("consuming", args.messages, enabled=progress_enabled(args.no_progress)) as bar:
            while count < args.messages:
                batch = await consumer.poll(timeout_ms=POLL_MS, max_records=args.messages - count)
                now = clock.monotonic()
                if join_s is None and consumer.assignment():
                    join_s = now - start
                for records in batch.values():
                    for r in records:
                        count += 1
                        nbytes += len(r.key or b"") + len(r.value or b"")
                if batch:
                    last_record = now
                elif (now - last_record) * 1000 > args.timeout:
                    raise ToolError(f"exiting before consuming the expected number of messages: timeout "
                                    f"({args.timeout} ms) exceeded after {count} of {args.messages}; you can "
                                    "use the --timeout option to increase the timeout")
                if args.show_detailed_stats and (now - last_report[0]) * 1000 >= args.reporting_interval:
                    t0, c0, b0 = last_report
                    print(f"{_when(wall_start + now - start)}, 0, {figures(nbytes - b0, count - c0, now - t0, 0)}")
                    last_report = (now, count, nbytes)
                if bar.enabled and now - last_refresh >= REFRESH_S:
                    last_refresh = now
                    bar.update(completed=count, status=f"{_rate(nbytes / MB, now - start):.2f} MB/s")
        metrics = consumer.metrics()
    elapsed = clock.monotonic() - start
    if not args.show_detailed_stats:
        print(f"{_when(wall_start)}, {_when(wall_start + elapsed)}, {figures(nbytes, count, elapsed, join_s or 0.0)}")
    if args.print_metrics:
        print_table(("METRIC", "VALUE"), sorted((str(k), v) for k, v in metrics.items()))
    return 0
