"""`minikafka topics --describe` through DescribeTopicPartitions, `consumer-groups --delete-offsets`,
`leader-election` (kafka-leader-election.sh) and `metadata-quorum describe` (kafka-metadata-quorum.sh), against
a broker and a 3-broker cluster; effects checked over the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest
from tools_helpers import commit, committed, create_topic, request, run_cli, table
import waiting

from minikafka.client.consumer.protocol import Subscription, encode_subscription
from minikafka.client.network import BrokerConnection, KafkaClientError
from minikafka.common import TopicPartition
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread, ClusterThread


@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterThread]:
    with ClusterThread(3, group_initial_rebalance_delay_ms=0, replica_fetch_wait_max_ms=50,
                       replica_fetch_backoff_ms=50) as c:
        yield c


def wait_for(cond: Any, timeout: float = 20, what: str = "condition") -> None:
    waiting.wait_for(cond, timeout, what)


# -- topics --describe -------------------------------------------------------------------------------
def test_describe_pages_through_describe_topic_partitions(broker_thread: BrokerThread, capsys,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "paged", 3)
    assert broker_thread.broker is not None
    stats = broker_thread.broker.request_stats
    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--describe", "--topic", "paged",
                "--partition-size-limit-per-response", "1")
    assert r.rc == 0, r.err
    head, *parts = r.lines
    assert head.startswith("Topic: paged\tTopicId: ") and "\tPartitionCount: 3\tReplicationFactor: 1\t" in head
    assert parts == [f"\tTopic: paged\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: \tLastKnownElr: "
                     for p in range(3)]
    assert stats[ApiKey.DESCRIBE_TOPIC_PARTITIONS][0] == 3  # one partition a response: three pages
    # A broker without DescribeTopicPartitions (before Kafka 3.7): described by Metadata, no ELR known.
    original = BrokerConnection.pick_version

    def without_dtp(self: BrokerConnection, api_key: int, max_version: int | None = None) -> int:
        if api_key == ApiKey.DESCRIBE_TOPIC_PARTITIONS:
            raise KafkaClientError("broker does not support DescribeTopicPartitions", retriable=False)
        return original(self, api_key, max_version)

    monkeypatch.setattr(BrokerConnection, "pick_version", without_dtp)
    r = run_cli(capsys, "topics", "--bootstrap-server", b, "--describe", "--topic", "paged")
    assert r.rc == 0, r.err
    assert r.lines[1:] == [f"\tTopic: paged\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\t"
                           "LastKnownElr: N/A" for p in range(3)]
    assert stats[ApiKey.DESCRIBE_TOPIC_PARTITIONS][0] == 3


# -- consumer-groups --delete-offsets --------------------------------------------------------------------
def join_as_consumer(b: str, group: str, topics: list[str]) -> None:
    """A classic consumer member subscribed to ``topics`` (JoinGroup v3: no member id round trip); it stays a
    member for its session timeout."""
    metadata = encode_subscription(Subscription(topics), 0)
    r = request(b, ApiKey.JOIN_GROUP, 3, {
        "group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 30000, "member_id": "",
        "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": metadata}]})
    assert r.error_code == 0, r


def test_delete_offsets(broker_thread: BrokerThread, capsys) -> None:
    b = broker_thread.bootstrap
    create_topic(b, "od", 2)
    create_topic(b, "od-live", 1)
    tps = [TopicPartition("od", 0), TopicPartition("od", 1)]
    commit(b, "od-group", {tps[0]: 5, tps[1]: 7})
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--delete-offsets", "--group", "od-group",
                "--topic", "od:0")
    assert r.rc == 0, r.err
    assert r.lines[0] == "Request succeed for deleting offsets with topic od:0 group od-group"
    assert table("\n".join(r.lines[1:])) == [{"TOPIC": "od", "PARTITION": "0", "STATUS": "Successful"}]
    assert committed(b, "od-group", tps) == {tps[1]: 7}
    # A topic without partitions: all of them; an unknown topic: "Not Provided".
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--delete-offsets", "--group", "od-group",
                "--topic", "od", "--topic", "nope")
    assert r.rc == 1
    assert r.lines[0] == "Error: Encounter some partition level error, see the follow-up details:"
    assert [line.split() for line in r.lines[2:]] == [
        ["TOPIC", "PARTITION", "STATUS"], ["nope", "Not", "Provided", "Error:", ":UNKNOWN_TOPIC_OR_PARTITION"],
        ["od", "0", "Successful"], ["od", "1", "Successful"]]
    assert committed(b, "od-group", tps) == {}
    # A group that does not exist; a group subscribed to the topic.
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--delete-offsets", "--group", "ghost",
                "--topic", "od")
    assert (r.rc, r.err) == (1, "minikafka: error: 'ghost' does not exist.\n")
    commit(b, "live", {TopicPartition("od-live", 0): 3, tps[0]: 4})
    join_as_consumer(b, "live", ["od-live"])
    r = run_cli(capsys, "consumer-groups", "--bootstrap-server", b, "--delete-offsets", "--group", "live",
                "--topic", "od-live", "--topic", "od:0")
    assert r.rc == 1
    # Sorted as Kafka sorts them: by topic name and partition as one string.
    assert table("\n".join(r.lines[1:])) == [
        {"TOPIC": "od-live", "PARTITION": "0", "STATUS": "Error:"},
        {"TOPIC": "od", "PARTITION": "0", "STATUS": "Successful"}]
    assert "Error: :GROUP_SUBSCRIBED_TO_TOPIC" in r.lines[-2]
    assert committed(b, "live", [TopicPartition("od-live", 0), tps[0]]) == {TopicPartition("od-live", 0): 3}


# -- leader-election and metadata-quorum ---------------------------------------------------------------------
def test_leader_election_and_metadata_quorum(cluster: ClusterThread, capsys, tmp_path: Path) -> None:
    b = cluster.bootstrap
    cluster.call(lambda: cluster.cluster.broker(0).create_topic("le", assignments={0: [1, 0], 1: [0, 1]}))
    pm = cluster.cluster.metadata.topics["le"].partitions[0]
    cluster.stop_broker(1)
    assert cluster.leader("le", 0) == 0
    cluster.start_broker(1)
    wait_for(lambda: 1 in pm.isr, what="broker 1 back in the ISR")
    b = cluster.bootstrap
    r = run_cli(capsys, "leader-election", "--bootstrap-server", b, "--election-type", "preferred",
                "--topic", "le", "--partition", "0")
    assert (r.rc, r.lines) == (0, ["Successfully completed leader election (PREFERRED) for partitions le-0"]), r.err
    assert cluster.leader("le", 0) == 1
    r = run_cli(capsys, "leader-election", "--bootstrap-server", b, "--election-type", "PREFERRED",
                "--all-topic-partitions")
    assert r.rc == 0 and r.out == ""  # every partition has its preferred leader: nothing to report
    spec = tmp_path / "election.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "le", "partition": 1}, {"topic": "le", "partition": 9}]}))
    r = run_cli(capsys, "leader-election", "--bootstrap-server", b, "--election-type", "unclean",
                "--path-to-json-file", str(spec))
    assert r.rc == 1
    assert r.lines == ["Valid replica already elected for partitions le-1",
                       "Error completing leader election (UNCLEAN) for partition: le-9: UNKNOWN_TOPIC_OR_PARTITION: "
                       "No such partition as le-9"]
    assert r.err == "minikafka: error: 1 replica(s) could not be elected\n"
    spec.write_text(json.dumps({"partitions": [{"topic": "le", "partition": 1}, {"topic": "le", "partition": 1}]}))
    r = run_cli(capsys, "leader-election", "--bootstrap-server", b, "--election-type", "preferred",
                "--path-to-json-file", str(spec))
    assert (r.rc, r.err) == (1, "minikafka: error: Replica election data contains duplicate partitions: le-1\n")

    r = run_cli(capsys, "metadata-quorum", "--bootstrap-server", b, "describe", "--status")
    assert r.rc == 0, r.err
    status = dict(line.split(":", 1) for line in r.lines)
    assert {k: v.strip() for k, v in status.items() if k in ("LeaderId", "MaxFollowerLag", "MaxFollowerLagTimeMs")} == {
        "LeaderId": "0", "MaxFollowerLag": "0", "MaxFollowerLagTimeMs": "0"}
    assert status["ClusterId"].strip() == cluster.cluster.base_config.cluster_id
    port = cluster.cluster.configs[0].port
    assert status["CurrentVoters"].strip() == (
        f'[{{"id": 0, "directoryId": null, "endpoints": ["PLAINTEXT://127.0.0.1:{port}"]}}]')
    assert status["CurrentObservers"].strip() == '[{"id": 1, "directoryId": null}, {"id": 2, "directoryId": null}]'
    r = run_cli(capsys, "metadata-quorum", "--bootstrap-controller", b, "describe", "--replication")
    assert r.rc == 0, r.err
    rows = [line.split() for line in r.lines]
    assert rows[0] == ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
                       "Status"]
    assert [(row[0], row[3], row[6]) for row in rows[1:]] == [("0", "0", "Leader"), ("1", "0", "Observer"),
                                                              ("2", "0", "Observer")]
    r = run_cli(capsys, "metadata-quorum", "--bootstrap-server", b, "describe")
    assert (r.rc, r.err) == (1, "minikafka: error: One of --status or --replication must be specified with describe "
                                "sub-command\n")
