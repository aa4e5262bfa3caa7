"""`minikafka reassign-partitions` (kafka-reassign-partitions.sh) against a 3-broker cluster: --generate proposes
a plan, --execute starts it with replication throttles, --verify reports progress and clears the throttles when
done, --cancel reverts, --list shows what is going on.  Effects are checked over the wire (tools_helpers)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from minikafka.testing import ClusterThread
from minikafka.tools.reassign_partitions import assign_replicas_to_brokers
from tools_helpers import consume, produce, run_cli, topic_configs, topic_metadata
import waiting

FAST = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0)
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


@pytest.fixture
def cluster() -> Iterator[ClusterThread]:
    with ClusterThread(3, **FAST) as ct:
        yield ct


def stuck_follower(ct: ClusterThread, broker_id: int) -> int:
    """A fault rule under which ``broker_id``'s replica fetches fail: a reassignment onto it stays in progress
    (deterministically) until the rule is removed."""
    return ct.faults.add(api="Fetch", client_id=f"broker-{broker_id}-fetcher-*", error="NOT_LEADER_OR_FOLLOWER").id


def wait_for(cond, what: str, timeout: float = 60) -> None:
    waiting.wait_for(cond, timeout, what)


def reassigning(ct: ClusterThread) -> bool:
    return ct.call(lambda: any(p.is_reassigning for t in ct.cluster.metadata.topics.values() for p in t.partitions))


def test_generate_execute_verify(cluster: ClusterThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ct = cluster
    ct.call(lambda: ct.cluster.broker(0).create_topic("t", 2, assignments={0: [0, 1], 1: [1, 0]}))
    bootstrap = ct.bootstrap
    produce(bootstrap, "t", [(p, None, b"v%d-%d" % (p, i)) for i in range(20) for p in (0, 1)])
    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"topics": [{"topic": "t"}], "version": 1}))

    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--generate",
                "--topics-to-move-json-file", str(topics_file), "--broker-list", "1,2")
    assert r.rc == 0, r.err
    lines = r.lines
    assert lines[0] == "Current partition replica assignment" and lines[3] == "Proposed partition reassignment " \
                                                                              "configuration"
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [0, 1], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [1, 0], "log_dirs": ["any", "any"]}]}
    proposed = json.loads(lines[4])
    assert [(p["topic"], p["partition"]) for p in proposed["partitions"]] == [("t", 0), ("t", 1)]
    assert all(sorted(p["replicas"]) == [1, 2] for p in proposed["partitions"])
    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])

    rule = stuck_follower(ct, 2)
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                "--reassignment-json-file", str(plan), "--throttle", "50000000")
    assert r.rc == 0, r.err
    assert r.lines[0] == "Current partition replica assignment" and json.loads(r.lines[2]) == json.loads(lines[1])
    assert "Save this to use as the --reassignment-json-file option during rollback" in r.lines
    assert "The inter-broker throttle limit was set to 50000000 B/s" in r.lines
    assert r.lines[-1] == "Successfully started partition reassignments for t-0,t-1"
    # Throttled as Kafka's tool throttles: the current replicas lead, the new one follows.
    configs = topic_configs(bootstrap, "t")
    assert configs[REPLICAS[0]][0] == "0:0,0:1,1:0,1:1" and configs[REPLICAS[1]][0] == "0:2,1:2"
    for b in ("0", "1", "2"):
        broker_configs = topic_configs(bootstrap, b, resource_type=4)
        assert all(broker_configs[rate][0] == "50000000" for rate in RATES)

    # While broker 2 cannot catch up: in progress, and a second --execute is refused.
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert r.lines[0] == "Current partition reassignments:"
    assert sorted(r.lines[1:]) == sorted(f"t-{p}: replicas: {','.join(map(str, q['replicas'] + [0]))}. adding: 2. "
                                         f"removing: 0." for p, q in enumerate(proposed["partitions"]))
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                "--reassignment-json-file", str(plan))
    assert r.rc == 0
    assert r.lines[:3] == ["Status of partition reassignment:", "Reassignment of partition t-0 is still in progress.",
                           "Reassignment of partition t-1 is still in progress."]
    assert not any("Clearing" in line for line in r.lines)  # throttles stay while it goes on
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                "--reassignment-json-file", str(plan))
    assert r.rc == 1 and "Cannot execute because there is an existing partition assignment" in r.err

    ct.faults.remove(rule)
    wait_for(lambda: not reassigning(ct), "the reassignment to complete")
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                "--reassignment-json-file", str(plan))
    assert r.rc == 0
    assert r.lines[:3] == ["Status of partition reassignment:", "Reassignment of partition t-0 is completed.",
                           "Reassignment of partition t-1 is completed."]
    assert "Clearing broker-level throttles on brokers 0,1,2" in r.lines
    assert "Clearing topic-level throttles on topic t" in r.lines
    assert not any(name in topic_configs(bootstrap, "t") and topic_configs(bootstrap, "t")[name][1] == 1
                   for name in REPLICAS)
    for b in ("0", "1", "2"):
        broker_configs = topic_configs(bootstrap, b, resource_type=4)
        assert all(broker_configs.get(rate, (None, 0))[1] != 2 for rate in RATES)  # no dynamic broker value left
    md = topic_metadata(bootstrap, "t")
    assert {p.partition_index: list(p.replica_nodes) for p in md.partitions} == {
        p["partition"]: p["replicas"] for p in proposed["partitions"]}
    got = consume(ct.bootstrap, "t", [0, 1], 40)
    assert sorted(r.value for r in got) == sorted(b"v%d-%d" % (p, i) for i in range(20) for p in (0, 1))
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert r.lines == ["No partition reassignments found."]


def test_cancel(cluster: ClusterThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ct = cluster
    ct.call(lambda: ct.cluster.broker(0).create_topic("c", 1, assignments={0: [0]}))
    bootstrap = ct.bootstrap
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "c", "partition": 0, "replicas": [2]}]}))
    stuck_follower(ct, 2)
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                "--reassignment-json-file", str(plan), "--throttle", "1000000")
    assert r.rc == 0 and r.lines[-1] == "Successfully started partition reassignment for c-0"
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--cancel",
                "--reassignment-json-file", str(plan))
    assert r.rc == 0, r.err
    assert r.lines[:2] == ["Successfully cancelled partition reassignment for: c-0",
                           "None of the specified partition moves are active."]
    assert "Clearing topic-level throttles on topic c" in r.lines
    assert [list(p.replica_nodes) for p in topic_metadata(bootstrap, "c").partitions] == [[0]]
    assert REPLICAS[0] not in topic_configs(bootstrap, "c") or topic_configs(bootstrap, "c")[REPLICAS[0]][1] != 1
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--cancel",
                "--reassignment-json-file", str(plan), "--preserve-throttles")
    assert r.lines == ["None of the specified partition reassignments are active.",
                       "None of the specified partition moves are active."]


def test_bad_plans_and_options(cluster: ClusterThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ct = cluster
    ct.call(lambda: ct.cluster.broker(0).create_topic("e", 1, assignments={0: [0]}))
    bootstrap = ct.bootstrap
    plan = tmp_path / "plan.json"

    def execute(partitions: list[dict], *extra: str) -> str:
        plan.write_text(json.dumps({"version": 1, "partitions": partitions}))
        r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                    "--reassignment-json-file", str(plan), *extra)
        assert r.rc == 1
        return r.err

    assert "Partition reassignment list cannot be empty" in execute([])
    assert "Partition replica list cannot be empty" in execute([{"topic": "e", "partition": 0, "replicas": []}])
    assert "duplicate topic partitions: e-0" in execute([{"topic": "e", "partition": 0, "replicas": [1]}] * 2)
    assert "e-0 contains multiple entries for 1" in execute([{"topic": "e", "partition": 0, "replicas": [1, 1]}])
    assert "Unknown broker id 9" in execute([{"topic": "e", "partition": 0, "replicas": [9]}])
    assert "Unable to find partition: e-4" in execute([{"topic": "e", "partition": 4, "replicas": [1]}])
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                "--reassignment-json-file", str(plan), "--throttle", "5")
    assert r.rc == 1 and "can't be used with action" in r.err
    r = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--generate", "--broker-list", "1")
    assert r.rc == 1 and "topics-to-move-json-file" in r.err
    assert [list(p.replica_nodes) for p in topic_metadata(bootstrap, "e").partitions] == [[0]]


def test_proposals_spread_replicas_as_kafka_does() -> None:
    rng = random.Random(7)
    for _ in range(20):
        got = assign_replicas_to_brokers({1: None, 2: None, 3: None}, 6, 2, rng)
        assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in got)
        assert sorted(r[0] for r in got) == [1, 1, 2, 2, 3, 3]  # leaders round-robin
    # Rack-aware: the two replicas of a partition always on different racks.
    racks = {0: "a", 1: "a", 2: "b", 3: "b"}
    for _ in range(20):
        got = assign_replicas_to_brokers(racks, 8, 2, rng)
        assert all(racks[r[0]] != racks[r[1]] for r in got)
