"""`minikafka perf-test producer|consumer` (kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh)."""

from __future__ import annotations

import re

import argparse
from array import array

import pytest
import trio
from tools_helpers import consume, create_topic, produce, run_cli, run_subprocess

from minikafka.client.consumer import KafkaConsumer, TopicPartition
from minikafka.testing import BrokerThread
from minikafka.common.clock import ManualClock
from minikafka.tools.common import ToolError
from minikafka.tools.perf_processes import _report, shares
from minikafka.tools.perf_producer import ProducerStats, percentile_ms, summary_line

SUMMARY = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, ([\d.]+) ms max "
    r"latency, ([\d.]+) ms 50th, ([\d.]+) ms 95th, ([\d.]+) ms 99th, ([\d.]+) ms 99.9th\.$")
DETAILED_HEADER = ("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                   "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
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


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    async def go() -> dict[int, int]:
        async with KafkaConsumer(bootstrap_servers=bootstrap) as c:
            got = await c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
            return {tp.partition: offset for tp, offset in got.items()}
    return trio.run(go)


def test_producer_in_two_processes_sends_the_records_asked_once(broker_thread: BrokerThread) -> None:
    """``--processes 2``: the real command spawns two producers; one merged summary line counts every record
    (and only those: the topic holds exactly as many), each worker's metrics are printed side by side."""
    b = broker_thread.bootstrap
    create_topic(b, "perf-procs", 2)
    r = run_subprocess("perf-test", "producer", "--bootstrap-server", b, "--topic", "perf-procs", "--num-records",
                       "901", "--record-size", "100", "--processes", "2", "--producer-props", "acks=1",
                       "linger.ms=2", "--print-metrics")
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    m = SUMMARY.match(lines[0])
    assert m, r.out
    count, rate, mb_s, avg, top, p50, p95, p99, p999 = (float(g) for g in m.groups())
    assert count == 901 and rate > 0 and abs(mb_s - rate * 100 / 2**20) < 0.01
    assert 0 <= p50 <= p95 <= p99 <= p999 <= top and avg <= top
    assert lines[1].split() == ["METRIC", "WORKER", "0", "WORKER", "1"]
    sends = [line.split() for line in lines[2:] if line.split()[:1] == ["record-send-total"]]
    assert len(sends) == 1 and sorted(float(v) for v in sends[0][1:]) == [450.0, 451.0]
    assert sum(end_offsets(b, "perf-procs", 2).values()) == 901


def test_producer_processes_errors(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "perf-test", "producer", "--bootstrap-server", b, "--topic", "x", "--num-records", "5",
                "--record-size", "1", "--processes", "0")
    assert (r.rc, r.err) == (1, "minikafka: error: --processes must be at least 1\n")
    r = run_cli(capsys, "perf-test", "producer", "--bootstrap-server", b, "--topic", "x", "--num-records", "5",
                "--processes", "2")
    assert (r.rc, r.err) == (1, "minikafka: error: --record-size or --payload-file is required\n")
    r = run_cli(capsys, "perf-test", "producer", "--bootstrap-server", b, "--topic", "x", "--num-records", "5",
                "--record-size", "1", "--processes", "2", "--producer-props", "acks=2")
    assert r.rc == 1 and re.fullmatch(r"minikafka: error: worker [01]: acks must be all, -1, 0 or 1, not 2\n", r.err)


def test_shares_split_the_records() -> None:
    assert shares(901, 2) == [451, 450]
    assert shares(7, 3) == [3, 2, 2]
    assert shares(2, 4) == [1, 1, 0, 0]


def test_merged_summary_takes_percentiles_of_all_samples(capsys) -> None:
    """Two workers' latencies are merged as samples: the 50th percentile of 100 fast and 100 slow records is
    a slow one's (Kafka's index p * count), not the average of the workers' medians."""
    fast, slow = array("d", [1.0] * 100), array("d", [100.0 + i for i in range(100)])
    results = [{"count": 100, "bytes": 100 * 1024, "errors": 0, "max_ms": 1.0, "first_error": None, "end": 10.0,
                "latencies": fast.tobytes(), "metrics": {}},
               {"count": 100, "bytes": 100 * 1024, "errors": 0, "max_ms": 199.0, "first_error": None, "end": 12.0,
                "latencies": slow.tobytes(), "metrics": {}}]
    args = argparse.Namespace(print_metrics=False, num_records=200)
    assert _report(args, 2.0, results) == 0
    line = capsys.readouterr().out.strip()
    assert line == summary_line(200, 200 * 1024, 10.0, list(fast) + list(slow), 199.0)
    assert line.startswith("200 records sent, 20.0 records/sec (0.02 MB/sec), 75.25 ms avg latency, "
                           "199.00 ms max latency, 100.00 ms 50th, 190.00 ms 95th, 198.00 ms 99th, 199.00 ms 99.9th.")
    results[1]["errors"], results[1]["first_error"] = 3, "NOT_LEADER_OR_FOLLOWER"
    with pytest.raises(ToolError, match="3 of 200 record"):
        _report(args, 2.0, results)


def test_batch_latencies_per_batch_completion() -> None:
    """One hook per batch: every record of a completed batch gets its latency from its own send time; a
    failed batch counts an error for each of its records (each its own, KIP-467)."""
    from minikafka.client.producer.batch import ProduceRequestResult
    from minikafka.client.producer.errors import KafkaProducerError
    from minikafka.tools.perf_producer import BatchLatencies

    clock = ManualClock(monotonic_ns=0)
    stats = ProducerStats(clock=clock)
    tracker = BatchLatencies(stats, 10)
    ok, failed = ProduceRequestResult(), ProduceRequestResult()
    for i, result in enumerate([ok, failed, ok, failed, failed]):
        tracker.track(result, clock.monotonic(), 10)
        clock.sleep(1)
    ok.set(0, -1, None)
    ok.done()  # at 5 ms: records sent at 0 and 2 ms
    named = KafkaProducerError("INVALID_RECORD: bad")
    other = KafkaProducerError("part of a batch with invalid records")
    failed.set(-1, -1, KafkaProducerError("batch failed"), lambda i: named if i == 1 else other)
    failed.done()
    assert (stats.count, stats.bytes, stats.errors) == (2, 20, 3)
    assert sorted(stats.latencies) == [3.0, 5.0] and stats.max_ms == 5.0
    assert stats.first_error is other


def consumer_fields(line: str) -> list[str]:
    fields = [f.strip() for f in line.split(",")]
    assert len(fields) == 10, line
    return fields


@pytest.mark.parametrize("mode", [[], ["--disjoint-partitions"]], ids=["group", "disjoint"])
def test_consumer_in_two_processes_counts_the_messages_asked(broker_thread: BrokerThread, mode: list[str]) -> None:
    """``perf-test consumer --processes 2``: the real command spawns two consumers (one group, or each on its own
    partitions); the one CSV line counts exactly ``--messages`` records and their bytes between them, and
    ``--print-metrics`` has a column per worker."""
    b = broker_thread.bootstrap
    topic = f"perf-read-{len(mode)}"
    create_topic(b, topic, 4)
    produce(b, topic, [(i % 4, b"k", b"v" * 99) for i in range(1000)])
    r = run_subprocess("perf-test", "consumer", "--bootstrap-server", b, "--topic", topic, "--messages", "900",
                       "--processes", "2", *mode, "--print-metrics")
    assert r.rc == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == CONSUMER_HEADER
    fields = consumer_fields(lines[1])
    assert int(fields[4]) == 900 and float(fields[2]) == round(900 * 100 / 2**20, 4)
    assert float(fields[3]) > 0 and float(fields[5]) > 0
    assert 0 <= int(fields[6]) and 0 <= int(fields[7])
    assert lines[2].split() == ["METRIC", "WORKER", "0", "WORKER", "1"]
    consumed = [line.split() for line in lines[3:] if line.split()[0].endswith("/records-consumed-total")]
    assert len(consumed) == 1 and len(consumed[0]) == 3
    assert all(v == "-" or float(v) >= 0 for v in consumed[0][1:])


def test_consumer_processes_detailed_stats_and_errors(broker_thread: BrokerThread, capsys) -> None:
    """A line per worker per interval (the worker as threadId); a total never reached fails after --timeout
    with Kafka's message; --processes below 1 and --disjoint-partitions alone are refused."""
    b = broker_thread.bootstrap
    create_topic(b, "perf-detail", 2)
    produce(b, "perf-detail", [(i % 2, None, b"v" * 50) for i in range(400)])
    r = run_subprocess("perf-test", "consumer", "--bootstrap-server", b, "--topic", "perf-detail", "--messages",
                       "500", "--processes", "2", "--timeout", "1500", "--reporting-interval", "200",
                       "--show-detailed-stats")
    assert r.rc == 1
    assert r.err.startswith("minikafka: error: exiting before consuming the expected number of messages: timeout "
                            "(1500 ms) exceeded after 400 of 500"), r.err
    lines = r.out.splitlines()
    assert lines[0] == DETAILED_HEADER
    rows = [consumer_fields(line) for line in lines[1:]]
    assert rows and {row[1] for row in rows} == {"0", "1"}
    assert sum(int(row[4]) for row in rows) <= 400
    r = run_cli(capsys, "perf-test", "consumer", "--bootstrap-server", b, "--topic", "x", "--messages", "5",
                "--processes", "0")
    assert (r.rc, r.err) == (1, "minikafka: error: --processes must be at least 1\n")
    r = run_cli(capsys, "perf-test", "consumer", "--bootstrap-server", b, "--topic", "x", "--messages", "5",
                "--disjoint-partitions")
    assert (r.rc, r.err) == (1, "minikafka: error: --disjoint-partitions needs --processes 2 or more\n")
