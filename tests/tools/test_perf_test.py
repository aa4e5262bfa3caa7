"""`minikafka perf-test producer|consumer` (kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh)."""

from __future__ import annotations

import re

from tools_helpers import consume, create_topic, produce, run_cli

from minikafka.testing import BrokerThread
from minikafka.common.clock import ManualClock
from minikafka.tools.perf_producer import ProducerStats, percentile_ms

SUMMARY = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max "
    r"latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th\.$")
CONSUMER_HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def test_producer_prints_the_figures_for_the_records_asked(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "perf", 2)
    r = run_cli(capsys, "perf-test", "producer", "--topic", "perf", "--num-records", "800", "--record-size", "100",
                "--throughput", "-1", "--producer-props", f"bootstrap.servers={b}", "acks=1", "linger.ms=2",
                "compression.type=lz4", "--print-metrics")
    assert r.rc == 0, r.err
    assert "\x1b[" not in r.out + r.err  # no progress display when not on a terminal
    m = SUMMARY.match(r.lines[0])
    assert m, r.lines[0]
    count, rate, mb_s, avg, top, p50, p95, p99, p999 = (float(g) for g in m.groups())
    assert count == 800 and rate > 0 and mb_s > 0
    assert abs(mb_s - rate * 100 / 2**20) < 0.01
    assert 0 <= p50 <= p95 <= p99 <= p999 <= top and avg <= top
    assert any(line.split()[:1] == ["record-send-rate"] for line in r.lines[1:])
    assert len(consume(b, "perf", [0, 1], 800)) == 800


def test_producer_throughput_limit(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "perf-test", "producer", "--bootstrap-server", b, "--topic", "slow", "--num-records", "30",
                "--record-size", "10", "--throughput", "100", "--no-progress")
    assert r.rc == 0, r.err
    m = SUMMARY.match(r.lines[-1])
    assert m and int(m.group(1)) == 30
    assert float(m.group(2)) <= 110  # 30 records at 100/s take at least 0.29 s


def test_producer_payload_file_and_errors(broker_thread: BrokerThread, capsys, tmp_path) -> None:
    b = broker_thread.bootstrap
    payloads = tmp_path / "payloads.txt"
    payloads.write_bytes(b"alpha\nbeta\n\ngamma\n")
    create_topic(b, "from-file", 1)
    r = run_cli(capsys, "perf-test", "producer", "--bootstrap-server", b, "--topic", "from-file", "--num-records",
                "20", "--payload-file", str(payloads))
    assert r.rc == 0, r.err
    assert {rec.value for rec in consume(b, "from-file", [0], 20)} <= {b"alpha", b"beta", b"gamma"}
    r = run_cli(capsys, "perf-test", "producer", "--topic", "x", "--num-records", "5", "--record-size", "1")
    assert (r.rc, r.err) == (1, "minikafka: error: --bootstrap-server (or bootstrap.servers in --producer-props) "
                                "is required\n")
    r = run_cli(capsys, "perf-test", "producer", "--bootstrap-server", b, "--topic", "x", "--num-records", "5",
                "--record-size", "1", "--producer-props", "acks=2")
    assert r.rc == 1 and r.err.startswith("minikafka: error: acks must be")


def test_consumer_reads_the_messages_asked(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "to-read", 3)
    produce(b, "to-read", [(i % 3, b"k", b"v" * 99) for i in range(600)])
    r = run_cli(capsys, "perf-test", "consumer", "--bootstrap-server", b, "--topic", "to-read", "--messages", "600",
                "--group", "perf-readers")
    assert r.rc == 0, r.err
    header, line = r.lines
    assert header == CONSUMER_HEADER
    fields = [f.strip() for f in line.split(",")]
    assert len(fields) == 10
    assert float(fields[2]) == round(600 * 100 / 2**20, 4) and int(fields[4]) == 600
    assert float(fields[3]) > 0 and float(fields[5]) > 0

    r = run_cli(capsys, "perf-test", "consumer", "--bootstrap-server", b, "--topic", "to-read", "--messages", "700",
                "--timeout", "500", "--hide-header")
    assert r.rc == 1 and r.out == ""
    assert r.err.startswith("minikafka: error: exiting before consuming the expected number of messages: timeout "
                            "(500 ms) exceeded after 600 of 700")


def test_stats_percentiles() -> None:
    assert percentile_ms([], 0.99) == 0.0
    ordered = [float(i) for i in range(1, 1001)]
    assert [percentile_ms(ordered, p) for p in (0.5, 0.95, 0.99, 0.999)] == [501.0, 951.0, 991.0, 1000.0]
    clock = ManualClock(monotonic_ns=0)
    stats = ProducerStats(clock=clock)
    for ms in (1.0, 2.0, 3.0, 10.0):
        stats.record(ms, 1024)
    clock.sleep(2000)
    assert stats.window_line() == ("4 records sent, 2.0 records/sec (0.00 MB/sec), 4.0 ms avg latency, "
                                   "10.0 ms max latency.")
    assert stats.summary().startswith("4 records sent, 2.0 records/sec (0.00 MB/sec), 4.00 ms avg latency, "
                                      "10.00 ms max latency, 3.00 ms 50th, 10.00 ms 95th")
