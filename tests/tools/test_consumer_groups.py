"""`minikafka consumer-groups` (kafka-consumer-groups.sh): list, describe with lag, reset offsets, delete;
against a broker and a 3-broker cluster."""

from __future__ import annotations

import threading
from typing import Iterator

import pytest
import trio
from tools_helpers import commit, committed, create_topic, produce, run_cli, table

from minikafka.client.consumer import KafkaConsumer
from minikafka.common import TopicPartition
from minikafka.testing import BrokerThread, ClusterThread

COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
           "CLIENT-ID"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterThread]:
    with ClusterThread(3, group_initial_rebalance_delay_ms=0) as c:
        yield c


def _setup(b: str, topic: str, produced: list[int], commits: dict[int, int], group: str) -> None:
    """A topic with ``produced[p]`` records in partition p and a group that committed ``commits``."""
    create_topic(b, topic, len(produced), replication_factor=1)
    produce(b, topic, [(p, None, b"x") for p, n in enumerate(produced) for _ in range(n)])
    commit(b, group, {TopicPartition(topic, p): o for p, o in commits.items()})


def _describe(capsys, b: str, group: str) -> dict[int, dict[str, str]]:
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--describe", "--group", group)
    assert r.rc == 0, r.err
    assert r.lines[0].split() == COLUMNS
    return {int(row["PARTITION"]): row for row in table(r.out)}


def test_describe_lag_is_produced_minus_committed(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    produced, commits = [7, 3, 5], {0: 2, 1: 3}
    _setup(b, "lagging", produced, commits, "analysts")
    rows = _describe(capsys, b, "analysts")
    assert set(rows) == {0, 1}  # only the partitions the group committed (no member owns any)
    for p, offset in commits.items():
        row = rows[p]
        assert (row["GROUP"], row["TOPIC"]) == ("analysts", "lagging")
        assert (int(row["CURRENT-OFFSET"]), int(row["LOG-END-OFFSET"])) == (offset, produced[p])
        assert int(row["LAG"]) == produced[p] - offset
        assert row["CONSUMER-ID"] == row["HOST"] == row["CLIENT-ID"] == "-"
    assert "Consumer group 'analysts' has no active members." in run_cli(
        capsys, "consumer-groups", "--bootstrap-server", b, "--describe", "--group", "analysts").err

    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--list")
    assert r.lines == ["analysts"]
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--list", "--state")
    assert table(r.out) == [{"GROUP": "analysts", "STATE": "Empty"}]


def test_describe_an_active_member(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    _setup(b, "live", [4, 0], {0: 1}, "members")
    joined, done = threading.Event(), threading.Event()

    async def member() -> None:
        async with KafkaConsumer("live", bootstrap_servers=b, group_id="members", client_id="the-member",
                                 enable_auto_commit=False) as c:
            with trio.fail_after(20):
                while not c.assignment():
                    await c.poll(timeout_ms=100)
            joined.set()
            while not done.is_set():
                await c.poll(timeout_ms=50)

    thread = threading.Thread(target=trio.run, args=(member,), daemon=True)
    thread.start()
    try:
        assert joined.wait(20)
        rows = _describe(capsys, b, "members")
        assert set(rows) == {0, 1}
        assert all(row["CLIENT-ID"] == "the-member" and row["CONSUMER-ID"].startswith("the-member-")
                   for row in rows.values())
        assert (rows[0]["CURRENT-OFFSET"], rows[0]["LAG"]) == ("1", "3")
        assert (rows[1]["CURRENT-OFFSET"], rows[1]["LAG"]) == ("-", "-")  # assigned, nothing committed

        r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--describe", "--group", "members", "--members")
        [row] = table(r.out)
        assert (row["CLIENT-ID"], row["#PARTITIONS"]) == ("the-member", "2")
        r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--describe", "--group", "members", "--state")
        assert r.lines[1].split()[-2:] == ["Stable", "1"]

        # Kafka resets only inactive groups.
        r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", "members",
                    "--topic", "live", "--to-earliest", "--execute")
        assert (r.rc, r.err) == (1, "minikafka: error: assignments can only be reset if the group 'members' is "
                                    "inactive, but the current state is Stable\n")
        r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--delete", "--group", "members")
        assert r.rc == 1 and "NON_EMPTY_GROUP" in r.err
    finally:
        done.set()
        thread.join(20)


def test_reset_offsets(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    _setup(b, "resets", [10, 6], {0: 5, 1: 2}, "rewinders")
    tp0, tp1 = TopicPartition("resets", 0), TopicPartition("resets", 1)

    def reset(*spec: str) -> dict[int, int]:
        r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", "rewinders",
                    *spec)
        assert r.rc == 0, r.err
        return {int(row["PARTITION"]): int(row["NEW-OFFSET"]) for row in table(r.out)}

    # A dry run (the default) changes nothing.
    assert reset("--topic", "resets", "--to-earliest") == {0: 0, 1: 0}
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 5, tp1: 2}
    assert reset("--topic", "resets", "--to-latest", "--dry-run") == {0: 10, 1: 6}
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 5, tp1: 2}

    assert reset("--topic", "resets", "--shift-by", "3", "--execute") == {0: 8, 1: 5}
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 8, tp1: 5}
    assert reset("--all-topics", "--shift-by", "5", "--execute") == {0: 10, 1: 6}  # clamped to the log end
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 10, tp1: 6}
    assert reset("--topic", "resets:1", "--to-offset", "1", "--execute") == {1: 1}
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 10, tp1: 1}
    assert reset("--topic", "resets", "--to-earliest", "--execute") == {0: 0, 1: 0}
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 0, tp1: 0}
    assert reset("--topic", "resets", "--to-datetime", "2000-01-01T00:00:00", "--execute") == {0: 0, 1: 0}
    assert reset("--topic", "resets", "--to-datetime", "2999-01-01T00:00:00", "--execute") == {0: 10, 1: 6}
    assert committed(b, "rewinders", [tp0, tp1]) == {tp0: 10, tp1: 6}

    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", "rewinders",
                "--topic", "resets", "--execute")
    assert r.rc == 1 and r.err.startswith("minikafka: error: --reset-offsets needs one of")


def test_delete_group(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    _setup(b, "gone", [2], {0: 1}, "leaving")
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--delete", "--group", "leaving")
    assert (r.rc, r.out) == (0, "Deletion of requested consumer groups ('leaving') was successful.\n")
    assert run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--list").lines == []
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--describe", "--group", "leaving")
    assert (r.rc, r.err) == (1, "minikafka: error: consumer group 'leaving' does not exist\n")


def test_cluster_describe_and_reset(cluster: ClusterThread, capsys) -> None:
    b = cluster.bootstrap
    create_topic(b, "spread", 3, replication_factor=3)
    produce(b, "spread", [(p, None, b"r") for p in range(3) for _ in range(p + 2)])  # 2, 3, 4 records
    commit(b, "cgroup", {TopicPartition("spread", p): 1 for p in range(3)})

    rows = _describe(capsys, b, "cgroup")
    assert {p: (row["LOG-END-OFFSET"], row["LAG"]) for p, row in rows.items()} == {
        0: ("2", "1"), 1: ("3", "2"), 2: ("4", "3")}
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--reset-offsets", "--group", "cgroup",
                "--topic", "spread", "--to-latest", "--execute")
    assert r.rc == 0, r.err
    tps = [TopicPartition("spread", p) for p in range(3)]
    assert committed(b, "cgroup", tps) == {tps[0]: 2, tps[1]: 3, tps[2]: 4}
    assert {row["LAG"] for row in _describe(capsys, b, "cgroup").values()} == {"0"}
    assert "cgroup" in run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--list").lines
