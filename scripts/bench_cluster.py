"""Cluster benchmark: replication throughput and acks=all latency with confluent-kafka.

Runs ``python -m minikafka serve --brokers N`` (all brokers in one process, so
they share one core) and a topic with replication factor N (default 3), then:

1. throughput: a confluent-kafka producer sends M messages of 1 KiB with
   acks=all (and, for comparison, acks=1); with acks=all every acknowledged
   byte is on all N replicas, so the acks=all MB/s is the replication throughput
   (each follower fetched that many MB/s);
2. latency: messages sent one at a time (linger.ms 0, waiting for each delivery)
   with acks=all and acks=1: p50/p99/max in ms.

Prints the cluster process's CPU share per phase (near 100% = the brokers set the pace).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import time

import psutil
from bench_common import client_versions, cpu_seconds, free_port, produce_flat_out, start_broker, stop_broker
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def wait_port(port: int, timeout: float = 30) -> None:
    t0 = time.perf_counter()
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.05).close()
            return
        except OSError:
            if time.perf_counter() - t0 > timeout:
                raise SystemExit(f"broker on port {port} did not start")
            time.sleep(0.01)


def latencies(bootstrap: str, topic: str, n: int, size: int, acks: str) -> list[float]:
    """Send one message at a time and wait for its delivery report: n latencies in ms."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": acks})
    payload = os.urandom(size)
    out: list[float] = []
    errors: list[object] = []

    def done(err, msg) -> None:
        if err is not None:
            errors.append(err)

    for _ in range(50):  # warm up: connections, metadata
        p.produce(topic, payload, partition=0, on_delivery=done)
        p.flush(10)
    for _ in range(n):
        t0 = time.perf_counter()
        p.produce(topic, payload, partition=0, on_delivery=done)
        p.flush(10)
        out.append((time.perf_counter() - t0) * 1000)
    if errors:
        raise SystemExit(f"delivery errors: {errors[:3]}")
    return out


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--messages", type=int, default=200_000, help="messages of --size for throughput")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--latency-messages", type=int, default=2000)
    args = ap.parse_args()

    while True:  # N consecutive free ports
        port = free_port()
        try:
            for i in range(1, args.brokers):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + i))
            break
        except OSError:
            continue
    proc, startup = start_broker(port, "--brokers", str(args.brokers))
    for i in range(1, args.brokers):
        wait_port(port + i)
    bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(args.brokers))
    cluster = psutil.Process(proc.pid)
    print(f"client: {client_versions()}")
    print(f"cluster: {args.brokers} brokers in one process, in memory; topics with RF {args.brokers}, "
          f"{args.partitions} partition(s) (leaders spread over the brokers)")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        print(f"{'acks':>5} {'messages':>9} {'size':>6} {'MB/s':>7} {'msgs/s':>9} {'cluster CPU':>12}")
        for acks in ("all", "1"):
            topic = f"bench-tp-{acks}"
            admin.create_topics([NewTopic(topic, args.partitions, args.brokers)])[topic].result(10)
            time.sleep(0.5)
            c0 = cpu_seconds(cluster)
            t = produce_flat_out(bootstrap, topic, args.messages, args.size, args.partitions, acks)
            c1 = cpu_seconds(cluster)
            mb = args.messages * args.size / 1e6
            print(f"{acks:>5} {args.messages:>9} {args.size:>6} {mb / t:>7.1f} {args.messages / t:>9.0f} "
                  f"{(c1 - c0) / t:>11.0%}")
        print(f"(acks=all: every acknowledged byte is on all {args.brokers} replicas, so each follower "
              f"replicated at that MB/s)")
        print(f"\nacks latency, {args.latency_messages} messages of {args.size} B sent one at a time (ms):")
        print(f"{'acks':>5} {'p50':>7} {'p99':>7} {'max':>7} {'mean':>7}")
        for acks in ("all", "1"):
            topic = f"bench-lat-{acks}"
            admin.create_topics([NewTopic(topic, 1, args.brokers)])[topic].result(10)
            time.sleep(0.5)
            lat = latencies(bootstrap, topic, args.latency_messages, args.size, acks)
            print(f"{acks:>5} {pct(lat, 0.5):>7.2f} {pct(lat, 0.99):>7.2f} {max(lat):>7.2f} "
                  f"{statistics.mean(lat):>7.2f}")
        print(f"\ncluster start-up to accepting connections: {startup * 1000:.0f} ms")
    finally:
        stop_broker(proc)


if __name__ == "__main__":
    main()
