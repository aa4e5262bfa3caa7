"""Watch a produce quota at work: a confluent-kafka producer flat out under producer_byte_rate.

    .venv/bin/python examples/quota_live.py                       # in-process broker, 1 MiB/s, 35 s
    .venv/bin/python examples/quota_live.py --quota 500000 --seconds 60 --window-num 5
    .venv/bin/python examples/quota_live.py --bootstrap localhost:9092   # any broker with quotas
    .venv/bin/python examples/quota_live.py --seconds 13 --window-num 3 --out DIR   # figures + chart in DIR

The quota is set with AlterClientQuotas (the code behind `minikafka quotas alter`) for the
producer's client id.  One line per second:

    delivered   MB of values the producer saw acknowledged in that second
    byte-rate   the broker's quota metric Produce:client-id=...,user=/byte-rate (what the quota bounds)
    sent        throttled Produce responses the broker sent that second: count and largest throttle_time_ms
    librdkafka  the throttle window librdkafka last reported in its statistics (brokers[*].throttle):
                count and max, for the statistics interval (1 s) that ended during that second

The broker columns need the in-process broker; with --bootstrap they show "-".

Expect Kafka's shape: a burst of about quota x (window_num - 1) x window_size at the start
(Rate pads a young metric's window), then throttled sends, and a new burst each time the
sample holding the previous burst expires, every window_num x window_size seconds.  The
average over whole periods is the quota.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import trio
from confluent_kafka import Producer

from minikafka.broker.config import BrokerConfig
from minikafka.broker.request import ResponseObserver
from minikafka.client.quotas_cli import alter
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread

sys.path.append(str(Path(__file__).resolve().parent))  # examples/_tutorial.py (appended: never hides a module)
from _tutorial import Figures, parser  # noqa: E402

MB = 1e6


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--seconds", type=int, default=35, help="how long to produce (default 35)")
    ap.add_argument("--quota", type=float, default=1048576, metavar="BYTES_PER_S",
                    help="producer_byte_rate to set (default 1048576)")
    ap.add_argument("--client-id", default="quota-live")
    ap.add_argument("--topic", default="quota-live")
    ap.add_argument("--window-num", type=int, default=11, help="quota.window.num of the in-process broker")
    ap.add_argument("--value-size", type=int, default=1000)
    args = ap.parse_args()

    broker: BrokerThread | None = None
    if args.bootstrap is None:
        broker = BrokerThread(BrokerConfig(port=0, quota_window_num=args.window_num,
                                           quota_window_size_seconds=1)).start()
        bootstrap = broker.bootstrap
    else:
        bootstrap = args.bootstrap
    try:
        figures = Figures("quotas", args.out)
        figures.values.update(run(args, bootstrap, broker))
        t = list(range(1, len(figures["delivered_mb_s"]) + 1))
        figures.chart("throughput", f"A producer flat out under producer_byte_rate={args.quota:.0f} B/s",
                      "second", "MB/s", [("delivered", t, figures["delivered_mb_s"])]
                      + ([("broker byte-rate metric", t, figures["byte_rate_mb_s"])] if broker else []),
                      hline=("quota", args.quota / MB))
        if broker is not None:
            figures.chart("throttle", "Largest throttle_time_ms the broker sent, per second", "second", "ms",
                          [("broker", t, figures["throttle_max_ms"])], kind="step")
        figures.write()
    finally:
        if broker is not None:
            broker.stop()


def run(args: argparse.Namespace, bootstrap: str, broker: BrokerThread | None) -> dict:
    """Produce flat out for ``args.seconds``; print a line a second and return the figures."""
    cid = args.client_id
    trio.run(alter, bootstrap, f"client-id={cid}", [f"producer_byte_rate={args.quota!r}"], [], False)
    where = f"in-process broker {bootstrap}, quota.window.num={args.window_num}, window 1 s" if broker else bootstrap
    print(f"producer_byte_rate={args.quota:.0f} B/s ({args.quota / MB:.3f} MB/s) for client-id={cid} on {where}")

    sent: list[tuple[float, int]] = []  # (time, throttle_time_ms) of this client's Produce responses
    if broker is not None:
        broker.call(broker.broker.observe, ResponseObserver(
            lambda ctx, frame, resp: sent.append((time.monotonic(), ctx.throttle_time_ms))
            if ctx.api_key == ApiKey.PRODUCE and ctx.client_id == cid else None))
    metric_name = f"Produce:client-id={cid},user=/byte-rate"

    last_stats: list[tuple[int, int]] = [(0, 0)]  # (cnt, max) of librdkafka's last throttle window

    def on_stats(raw: str) -> None:
        s = json.loads(raw)
        cnt = sum(b["throttle"]["cnt"] for b in s["brokers"].values())
        mx = max((b["throttle"]["max"] for b in s["brokers"].values() if b["throttle"]["cnt"]), default=0)
        last_stats[0] = (cnt, mx)

    producer = Producer({
        "bootstrap.servers": bootstrap, "client.id": cid, "acks": 1, "linger.ms": 5, "compression.type": "none",
        "batch.size": 65536, "queue.buffering.max.kbytes": 2048, "max.in.flight.requests.per.connection": 1,
        "statistics.interval.ms": 1000, "stats_cb": on_stats,
    })
    delivered_bytes = [0]

    def on_delivery(err, msg) -> None:
        if err is None:
            delivered_bytes[0] += len(msg.value())

    value = b"x" * args.value_size
    print(f"{'t':>4} {'delivered MB/s':>15} {'byte-rate MB/s':>15} {'sent: n, max ms':>16} "
          f"{'librdkafka: n, max ms':>22}")
    start = time.monotonic()
    next_line = start + 1
    per_second: list[int] = []
    rates: list[float] = []
    throttles: list[int] = []
    second = 0
    while second < args.seconds:
        try:
            producer.produce(args.topic, value, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
        now = time.monotonic()
        if now >= next_line:
            second += 1
            got, delivered_bytes[0] = delivered_bytes[0], 0
            per_second.append(got)
            if broker is not None:
                rate = broker.call(broker.broker.metrics).get(metric_name, 0.0)
                window = [th for t, th in list(sent) if next_line - 1 <= t < next_line and th > 0]
                broker_cols = f"{rate / MB:15.3f} {len(window):>6}, {max(window, default=0):>7}"
                rates.append(round(rate / MB, 4))
                throttles.append(max(window, default=0))
            else:
                broker_cols = f"{'-':>15} {'-':>16}"
            cnt, mx = last_stats[0]
            print(f"{second:>4} {got / MB:15.3f} {broker_cols} {cnt:>12}, {mx:>7}", flush=True)
            next_line += 1
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(30)
    # Whole periods after a warm-up of one and a half periods (the edges mid-period, away from bursts).
    period = args.window_num
    warm = period + period // 2
    periods = (len(per_second) - warm) // period
    # The first burst: what went out before the first throttled second (Rate pads a young window).
    first_throttled = next((i for i, th in enumerate(throttles) if th > 0), None)
    figures: dict = {
        "quota": int(args.quota), "quota_mb_s": round(args.quota / MB, 3), "window_num": args.window_num,
        "window_size_s": 1, "period_s": period, "seconds": len(per_second), "value_size": args.value_size,
        "delivered_mb_s": [round(b / MB, 4) for b in per_second], "byte_rate_mb_s": rates,
        "throttle_max_ms": throttles, "max_throttle_ms": max(throttles, default=None),
        "expected_burst_mb": round(args.quota * (args.window_num - 1) / MB, 3),
        "first_throttled_second": None if first_throttled is None else first_throttled + 1,
        "first_second_mb": round(per_second[0] / MB, 3) if per_second else None,
    }
    if periods >= 1:
        window = per_second[warm:warm + periods * period]
        avg = sum(window) / len(window)
        figures.update(avg_from=warm + 1, avg_to=warm + len(window), avg_periods=periods,
                       avg_mb_s=round(avg / MB, 3), avg_ratio=round(avg / args.quota, 3))
        print(f"seconds {warm + 1}-{warm + len(window)} ({periods} whole period(s) of {period} s): "
              f"{avg / MB:.3f} MB/s = {avg / args.quota:.3f} x quota")
    else:
        print(f"run at least {warm + period} s (--seconds) to average over a whole period of {period} s")
    return figures


if __name__ == "__main__":
    main()
