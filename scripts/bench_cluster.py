"""Cluster benchmark: replication throughput and acks=all latency with confluent-kafka.

Runs ``python -m minikafka serve --brokers N --in-process`` (all brokers in one process, so
they share one core), then a controller process and N broker processes
(:class:`minikafka.supervisor.processes.ProcessCluster`, one core each when there are enough),
each with topics of replication factor N (default 3), and on each:

1. throughput: a confluent-kafka producer sends M messages of 1 KiB with
   acks=all (and, for comparison, acks=1); with acks=all every acknowledged
   byte is on all N replicas, so the acks=all MB/s is the replication throughput
   (each follower fetched that many MB/s);
2. latency: messages sent one at a time (linger.ms 0, waiting for each delivery)
   with acks=all: p50/p99 in ms;
3. end to end: a record every 2 ms (acks=all) to a long-polling consumer: p50/p99 in ms.

Prints the clusters' CPU share per phase (100% = one core) and the ratios processes / one process.
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


def end_to_end(bootstrap: str, topic: str, n: int, size: int) -> list[float]:
    """A record sent every 2 ms (acks=all, linger 0) to a long-polling consumer: n send-to-receive times in ms."""
    import threading

    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-{topic}", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 500, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic, 0, -1)])  # from the end
    consumer.consume(1, 2.0)  # connected and positioned
    out: list[float] = []
    done = threading.Event()

    def consume() -> None:
        while len(out) < n and not done.is_set():
            msg = consumer.poll(0.5)  # (one at a time: consume(n) waits for n records or its timeout)
            if msg is not None and msg.error() is None and msg.value()[:1] == b"T":
                sent = int.from_bytes(msg.value()[1:9], "big")
                out.append((time.perf_counter_ns() - sent) / 1e6)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    padding = os.urandom(max(size - 9, 0))
    for _ in range(n):
        p.produce(topic, b"T" + time.perf_counter_ns().to_bytes(8, "big") + padding, partition=0)
        p.poll(0)
        time.sleep(0.002)
    p.flush(30)
    thread.join(30)
    done.set()
    consumer.close()
    return out


def measure(label: str, bootstrap: str, processes: list[psutil.Process], args: argparse.Namespace) -> dict:
    """Throughput (acks=all and 1), acks=all latency and end-to-end p50/p99 on one cluster."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    out: dict = {"label": label}
    for acks in ("all", "1"):
        topic = f"bench-tp-{acks}"
        admin.create_topics([NewTopic(topic, args.partitions, args.brokers)])[topic].result(30)
        time.sleep(0.5)
        c0 = sum(cpu_seconds(p) for p in processes)
        t = produce_flat_out(bootstrap, topic, args.messages, args.size, args.partitions, acks)
        c1 = sum(cpu_seconds(p) for p in processes)
        out[f"mbs_{acks}"] = args.messages * args.size / 1e6 / t
        out[f"cpu_{acks}"] = (c1 - c0) / t
    topic = "bench-lat"
    admin.create_topics([NewTopic(topic, 1, args.brokers)])[topic].result(30)
    time.sleep(0.5)
    lat = latencies(bootstrap, topic, args.latency_messages, args.size, "all")
    out["ack_p50"], out["ack_p99"] = pct(lat, 0.5), pct(lat, 0.99)
    topic = "bench-e2e"
    admin.create_topics([NewTopic(topic, 1, args.brokers)])[topic].result(30)
    time.sleep(0.5)
    e2e = end_to_end(bootstrap, topic, args.latency_messages, args.size)
    out["e2e_p50"], out["e2e_p99"] = pct(e2e, 0.5), pct(e2e, 0.99)
    return out


def in_process(args: argparse.Namespace) -> dict:
    while True:  # N consecutive free ports
        port = free_port()
        try:
            for i in range(1, args.brokers):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port + i))
            break
        except OSError:
            continue
    proc, _startup = start_broker(port, "--brokers", str(args.brokers), "--in-process")
    try:
        for i in range(1, args.brokers):
            wait_port(port + i)
        bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(args.brokers))
        return measure("one process", bootstrap, [psutil.Process(proc.pid)], args)
    finally:
        stop_broker(proc)


def multi_process(args: argparse.Namespace) -> dict:
    from minikafka.supervisor.processes import ProcessCluster

    with ProcessCluster(args.brokers, log_level="WARNING") as cluster:
        processes = [psutil.Process(n.pid) for n in (cluster.controller, *cluster.brokers.values())
                     if n.pid is not None]
        return measure(f"{args.brokers + 1} processes", cluster.bootstrap, processes, args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--messages", type=int, default=200_000, help="messages of --size for throughput")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--latency-messages", type=int, default=2000)
    ap.add_argument("--only", choices=("in-process", "processes"), default=None,
                    help="measure one of the two clusters only")
    args = ap.parse_args()
    print(f"client: {client_versions()}; cores: {os.cpu_count()}")
    print(f"{args.brokers} brokers, in memory; topics with RF {args.brokers}, {args.partitions} partition(s) "
          f"(leaders spread over the brokers); {args.size} B records")
    results = []
    if args.only != "processes":
        results.append(in_process(args))
    if args.only != "in-process":
        results.append(multi_process(args))
    print(f"\n{'cluster':>12} {'acks=all MB/s':>14} {'CPU':>6} {'acks=1 MB/s':>12} {'CPU':>6} "
          f"{'ack p50':>8} {'ack p99':>8} {'e2e p50':>8} {'e2e p99':>8}  (ms)")
    for r in results:
        print(f"{r['label']:>12} {r['mbs_all']:>14.1f} {r['cpu_all']:>6.0%} {r['mbs_1']:>12.1f} {r['cpu_1']:>6.0%} "
              f"{r['ack_p50']:>8.2f} {r['ack_p99']:>8.2f} {r['e2e_p50']:>8.2f} {r['e2e_p99']:>8.2f}")
    if len(results) == 2:
        a, b = results
        print(f"\nprocesses / one process: acks=all MB/s {b['mbs_all'] / a['mbs_all']:.2f}x, acks=1 "
              f"{b['mbs_1'] / a['mbs_1']:.2f}x, end-to-end p99 {b['e2e_p99'] / a['e2e_p99']:.2f}x")
    print("(acks=all: every acknowledged byte is on every replica; CPU: the cluster's processes together, "
          "100% = one core)")


if __name__ == "__main__":
    main()
