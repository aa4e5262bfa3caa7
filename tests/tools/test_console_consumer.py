"""`minikafka console-consumer` (kafka-console-consumer.sh): formatting, groups, partitions, stopping."""

from __future__ import annotations

from tools_helpers import committed, create_topic, produce, run_cli

from minikafka.common import TopicPartition
from minikafka.testing import BrokerThread


def test_print_properties_and_max_messages(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "events", 1)
    produce(b, "events", [(0, b"k0", b"v0"), (0, None, b"v1")], headers=[("h", b"x"), ("n", b"")])
    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "events", "--from-beginning",
                "--max-messages", "2", "--property", "print.key=true", "print.headers=true", "print.partition=true",
                "print.offset=true", "print.timestamp=true", "key.separator= | ")
    assert r.rc == 0
    assert r.err.endswith("Processed a total of 2 messages\n")
    first, second = r.lines
    ts, rest = first.split(" | ", 1)
    assert ts.startswith("CreateTime:") and int(ts.split(":")[1]) > 0
    assert rest == "Partition:0 | Offset:0 | h:x,n: | k0 | v0"
    assert second.split(" | ", 1)[1] == "Partition:0 | Offset:1 | h:x,n: | null | v1"

    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "events", "--partition", "0",
                "--offset", "1", "--timeout-ms", "500", "--property", "print.value=false", "print.offset=true")
    assert (r.rc, r.lines) == (0, ["Offset:1"])


def test_without_from_beginning_starts_at_the_end(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "old", 2)
    produce(b, "old", [(0, None, b"a"), (1, None, b"b")])
    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "old", "--timeout-ms", "500")
    assert (r.rc, r.out) == (0, "")
    assert "Processed a total of 0 messages" in r.err


def test_group_commits_what_it_printed(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "grouped", 1)
    produce(b, "grouped", [(0, None, b"%d" % i) for i in range(10)])
    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "grouped", "--group", "readers",
                "--from-beginning", "--max-messages", "4")
    assert (r.rc, r.lines) == (0, ["0", "1", "2", "3"])
    tp = TopicPartition("grouped", 0)
    assert committed(b, "readers", [tp]) == {tp: 4}
    # The next member of the group goes on from the committed offset (--from-beginning only without one).
    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "grouped", "--group", "readers",
                "--from-beginning", "--timeout-ms", "1000")
    assert r.lines == ["4", "5", "6", "7", "8", "9"]
    assert committed(b, "readers", [tp]) == {tp: 10}


def test_errors(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "one", 1)
    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "one", "--partition", "3")
    assert r.rc == 1 and r.err.splitlines()[0] == "minikafka: error: topic 'one' has no partition 3"
    r = run_cli(capsys, "console-consumer", "--bootstrap-server", b, "--topic", "one", "--property", "print.keys=1")
    assert r.rc == 1 and "minikafka: error: unknown --property print.keys" in r.err
