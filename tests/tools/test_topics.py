"""`minikafka topics` (kafka-topics.sh) against a broker and a 3-broker cluster."""

from __future__ import annotations

from typing import Iterator

import pytest
from tools_helpers import run_cli, topic_configs, topic_metadata

from minikafka.testing import BrokerThread, ClusterThread


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterThread]:
    with ClusterThread(3, group_initial_rebalance_delay_ms=0) as c:
        yield c


def test_create_list_describe_alter_delete(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "orders", "--partitions", "3",
                "--replication-factor", "1", "--config", "retention.ms=60000", "--config", "cleanup.policy=compact")
    assert (r.rc, r.out) == (0, "Created topic orders.\n")
    meta = topic_metadata(b, "orders")
    assert meta is not None and len(meta.partitions) == 3
    configs = topic_configs(b, "orders")
    assert configs["retention.ms"][0] == "60000" and configs["cleanup.policy"][0] == "compact"

    run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "other")
    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--list")
    assert r.lines == ["orders", "other"]
    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--list", "--topic", "ord.*").lines == ["orders"]

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--describe", "--topic", "orders")
    assert r.rc == 0
    head, *parts = r.lines
    assert head.startswith("Topic: orders\tTopicId: ")
    assert "\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: " in head
    assert set(head.split("Configs: ")[1].split(",")) == {"retention.ms=60000", "cleanup.policy=compact"}
    # Described by DescribeTopicPartitions (Kafka 3.7+): the eligible leader replicas close each line.
    assert parts == [f"\tTopic: orders\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: "
                     for p in range(3)]

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--alter", "--topic", "orders", "--partitions", "5")
    assert (r.rc, r.out) == (0, "Adding partitions succeeded!\n")
    assert len(topic_metadata(b, "orders").partitions) == 5

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--delete", "--topic", "orders")
    assert r.rc == 0
    assert topic_metadata(b, "orders") is None
    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--list").lines == ["other"]


def test_errors_are_one_line(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "t").rc == 0
    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "t")
    assert r.rc == 1
    assert r.err.splitlines() == ["minikafka: error: cannot create topic 't': TOPIC_ALREADY_EXISTS: "
                                  "Topic 't' already exists."]
    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "t", "--if-not-exists").rc == 0

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--delete", "--topic", "missing")
    assert (r.rc, r.err) == (1, "minikafka: error: topic 'missing' does not exist\n")
    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--delete", "--topic", "missing", "--if-exists").rc == 0

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "bad", "--config", "retention.ms=1h")
    assert r.rc == 1 and r.err.startswith("minikafka: error: cannot create topic 'bad': INVALID_CONFIG")
    assert len(r.err.splitlines()) == 1

    r = run_cli(capsys, "topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert r.rc == 1 and r.err.startswith("minikafka: error: cannot connect to bootstrap servers")
    assert len(r.err.splitlines()) == 1


def test_cluster_replicas_and_filters(cluster: ClusterThread, capsys) -> None:
    b = cluster.bootstrap
    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "replicated", "--partitions", "4",
                "--replication-factor", "3")
    assert r.rc == 0, r.err
    meta = topic_metadata(b, "replicated")
    assert len(meta.partitions) == 4
    assert all(sorted(p.replica_nodes) == [0, 1, 2] for p in meta.partitions)

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--describe", "--topic", "replicated")
    head, *parts = r.lines
    assert "PartitionCount: 4\tReplicationFactor: 3" in head
    by_partition = {int(line.split("Partition: ")[1].split("\t")[0]): line for line in parts}
    for p in meta.partitions:
        line = by_partition[p.partition_index]
        assert f"Leader: {p.leader_id}\t" in line
        assert f"Replicas: {','.join(map(str, p.replica_nodes))}\t" in line

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "placed",
                "--replica-assignment", "2:1,1:0")
    assert r.rc == 0, r.err
    assert [list(p.replica_nodes) for p in topic_metadata(b, "placed").partitions] == [[2, 1], [1, 0]]

    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--create", "--topic", "too-many",
                "--replication-factor", "4")
    assert r.rc == 1 and "INVALID_REPLICATION_FACTOR" in r.err

    # With broker 2 down, its partitions are under-replicated until it is back.
    cluster.stop_broker(2)
    try:
        r = run_cli(capsys, "topics", "--bootstrap-server", b.split(",")[0], "--describe", "--topic", "replicated",
                    "--under-replicated-partitions")
        assert r.rc == 0 and len(r.lines) == 4
        assert all("Isr: " in line and "2" not in line.split("Isr: ")[1] for line in r.lines)
    finally:
        cluster.start_broker(2)

    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--alter", "--topic", "placed",
                   "--partitions", "3").rc == 0
    assert len(topic_metadata(b, "placed").partitions) == 3
    assert run_cli(capsys, "topics", "--bootstrap-server", b, "--delete", "--topic", "placed|replicated").rc == 0
    assert topic_metadata(b, "placed") is None and topic_metadata(b, "replicated") is None
