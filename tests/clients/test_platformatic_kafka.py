"""The Node.js client ``@platformatic/kafka`` (npm) against the broker (issue 23): producing (plain,
idempotent, transactional), consuming with a consumer group (classic and KIP-848 protocols) and its Admin
(topics, partitions, configs, offsets, groups, records, log dirs, ACLs), each result checked, here or with another client.

The client picks, for each API, the highest version the broker offers that it implements; a test checks it
did so for every request it sent (so the versions follow the broker as it gains Kafka 4.2's).  Scripts:
``tests/node/platformatic.mjs``; the package is installed by ``scripts/install-test-tools``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from minikafka.broker.config import BrokerConfig
from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER
from minikafka.common import TopicPartition
from minikafka.protocol.api import APIS
from minikafka.testing import BrokerThread
from clients_common import KIP848_BROKER_SETTINGS, ck_read_all, unique_name
from node_clients import (RequestLog, committed, offered_versions, ok_result, platformatic_versions,
                          require_package, run_script)

pytestmark = pytest.mark.clients

PACKAGE = "@platformatic/kafka"
SCRIPT = "platformatic.mjs"
CLIENT = "plt-"  # every client id the tests give starts with it


@pytest.fixture(scope="module")
def version() -> str:
    return require_package(PACKAGE)


@pytest.fixture(scope="module")
def served(version: str) -> Iterator[tuple[BrokerThread, RequestLog]]:
    with BrokerThread(BrokerConfig(port=0, **KIP848_BROKER_SETTINGS)) as broker:
        yield broker, RequestLog().install(broker)


def run(action: str, broker: BrokerThread, **spec: Any) -> Any:
    return run_script(SCRIPT, CLIENT, action, broker, **spec)


def messages(n: int, partitions: int, tag: str) -> list[dict[str, Any]]:
    return [{"key": f"{tag}-k{i}", "value": f"{tag}-v{i}", "partition": i % partitions,
             "headers": {"i": str(i), "tag": tag}} for i in range(n)]


def test_produce_read_by_another_client(served: tuple[BrokerThread, RequestLog]) -> None:
    broker, _ = served
    topic = unique_name("plt-produce")
    broker.create_topic(topic, 3)
    sent = messages(30, 3, "p")
    out = run("produce", broker, topic=topic, messages=sent)
    assert sorted((o["partition"], int(o["offset"])) for o in out["offsets"]) == [(0, 0), (1, 0), (2, 0)]
    got = ck_read_all(broker.bootstrap, topic, 3, 30)
    assert sorted((m.partition(), m.key().decode(), m.value().decode(), tuple((k, v.decode()) for k, v in m.headers()))
                  for m in got) == sorted((s["partition"], s["key"], s["value"], tuple(s["headers"].items()))
                                          for s in sent)
    # Per partition, the records are in the order sent, at offsets 0..9.
    for p in range(3):
        assert [m.value().decode() for m in sorted(got, key=lambda m: m.offset()) if m.partition() == p] == \
            [s["value"] for s in sent if s["partition"] == p]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consume_with_group_and_commit(served: tuple[BrokerThread, RequestLog], protocol: str) -> None:
    broker, _ = served
    topic, group = unique_name("plt-consume"), unique_name("plt-group")
    broker.create_topic(topic, 2)
    sent = messages(20, 2, protocol)
    run("produce", broker, topic=topic, messages=sent)
    out = run("consume", broker, group=group, topics=[topic], count=20, groupProtocol=protocol)
    assert sorted((m["partition"], m["key"], m["value"]) for m in out["messages"]) == \
        sorted((s["partition"], s["key"], s["value"]) for s in sent)
    assert all(m["headers"] == {"i": m["key"].split("k")[-1], "tag": protocol} for m in out["messages"])
    # Every record was committed: the group's offsets are the partitions' ends.
    assert committed(broker, group) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}
    # A second member of the same group resumes from the commits: nothing left to read.
    more = run("produce", broker, topic=topic, messages=[{"key": "late", "value": "late", "partition": 1}])
    assert more["offsets"][0]["offset"] == "10"
    again = run("consume", broker, group=group, topics=[topic], count=1, groupProtocol=protocol)
    assert [(m["partition"], m["offset"], m["value"]) for m in again["messages"]] == [(1, "10", "late")]


def test_idempotent_and_transactional_produce(served: tuple[BrokerThread, RequestLog]) -> None:
    broker, _ = served
    topic = unique_name("plt-txn")
    broker.create_topic(topic, 1)
    run("produce", broker, topic=topic, messages=messages(3, 1, "idem"), idempotent=True)
    committed_txn = run("txn", broker, topic=topic, transactionalId=unique_name("plt-tx"), messages=messages(2, 1, "yes"))
    assert committed_txn["committed"] is True
    run("txn", broker, topic=topic, transactionalId=unique_name("plt-tx"), messages=messages(2, 1, "no"), commit=False)
    run("produce", broker, topic=topic, messages=[{"key": "end", "value": "end", "partition": 0}])
    # read_committed: the aborted transaction's records are not delivered.
    out = run("consume", broker, group=unique_name("plt-rc"), topics=[topic], count=6, isolationLevel=1)
    assert [m["value"] for m in out["messages"]] == ["idem-v0", "idem-v1", "idem-v2", "yes-v0", "yes-v1", "end"]


def test_admin(served: tuple[BrokerThread, RequestLog]) -> None:
    broker, _ = served
    topic, doomed, group = unique_name("plt-admin"), unique_name("plt-doomed"), unique_name("plt-admin-group")
    TOPIC_CONFIG = 2  # ConfigResourceTypes.TOPIC
    calls: list[list[Any]] = [
        ["createTopics", {"topics": [topic, doomed], "partitions": 2, "replicas": 1,
                          "configs": [{"name": "retention.ms", "value": "3600000"}]}],
        ["createTopics", {"topics": [topic], "partitions": 2, "replicas": 1}],
        ["listTopics", {}],
        ["createPartitions", {"topics": [{"name": topic, "count": 3}]}],
        ["metadata", {"topics": [topic]}],
        ["incrementalAlterConfigs", {"resources": [{"resourceType": TOPIC_CONFIG, "resourceName": topic, "configs": [
            {"name": "cleanup.policy", "configOperation": 0, "value": "compact"}]}]}],
        ["describeConfigs", {"resources": [{"resourceType": TOPIC_CONFIG, "resourceName": topic,
                                            "configurationKeys": ["retention.ms", "cleanup.policy"]}]}],
        ["deleteTopics", {"topics": [doomed]}],
        ["listTopics", {}],
    ]
    r = run("admin", broker, calls=calls)
    created = ok_result(r, 0)
    assert sorted((t["name"], t["partitions"]) for t in created) == sorted([(doomed, 2), (topic, 2)])
    assert r[1]["code"] == "TOPIC_ALREADY_EXISTS"
    assert {topic, doomed} <= set(ok_result(r, 2))
    meta = ok_result(r, 4)
    assert meta["topics"][topic]["partitionsCount"] == 3
    configs = {c["name"]: c["value"] for c in ok_result(r, 6)[0]["configs"]}
    assert configs == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    assert doomed not in ok_result(r, 8) and topic in ok_result(r, 8)

    # Offsets, records and groups: three records in partition 0, a group that read them.
    run("produce", broker, topic=topic, messages=[{"key": str(i), "value": str(i), "partition": 0} for i in range(3)])
    run("consume", broker, group=group, topics=[topic], count=3)
    calls = [
        ["listOffsets", {"topics": [{"name": topic, "partitions": [{"partitionIndex": 0, "timestamp": "-2n"},
                                                                    {"partitionIndex": 1, "timestamp": "-1n"}]}]}],
        ["listGroups", {}],
        ["describeGroups", {"groups": [group]}],
        ["listConsumerGroupOffsets", {"groups": [group]}],
        ["alterConsumerGroupOffsets", {"groupId": group, "topics": [
            {"name": topic, "partitionOffsets": [{"partition": 0, "offset": "1n"}]}]}],
        ["listConsumerGroupOffsets", {"groups": [group]}],
        ["deleteRecords", {"topics": [{"name": topic, "partitions": [{"partition": 0, "offset": "2n"}]}]}],
        ["listOffsets", {"topics": [{"name": topic, "partitions": [{"partitionIndex": 0, "timestamp": "-2n"}]}]}],
        ["findCoordinator", {"keyType": 0, "keys": [group]}],
        ["deleteGroups", {"groups": [group]}],
        ["listGroups", {}],
        ["describeLogDirs", {"topics": [{"name": topic, "partitions": [0, 1]}]}],
    ]
    r = run("admin", broker, calls=calls)
    assert {(p["partitionIndex"], p["offset"]) for p in ok_result(r, 0)[0]["partitions"]} == {(0, "0"), (1, "0")}
    groups = ok_result(r, 1)
    assert groups[group]["protocolType"] == "consumer" and groups[group]["state"] == "EMPTY"
    described = ok_result(r, 2)[group]
    assert described["state"] == "EMPTY" and described["members"] == {}

    def offsets(result: Any) -> dict[tuple[str, int], str]:
        return {(t["name"], p["partitionIndex"]): p["committedOffset"] for g in result for t in g["topics"]
                for p in t["partitions"]}
    assert offsets(ok_result(r, 3)) == {(topic, 0): "3"}
    assert ok_result(r, 4) is None
    assert offsets(ok_result(r, 5)) == {(topic, 0): "1"}
    assert [(p["partition"], p["lowWatermark"]) for p in ok_result(r, 6)[0]["partitions"]] == [(0, "2")]
    assert [p["offset"] for p in ok_result(r, 7)[0]["partitions"]] == ["2"]
    coordinator = ok_result(r, 8)[0]
    assert (coordinator["nodeId"], coordinator["port"]) == (0, broker.port)
    assert group not in ok_result(r, 10)
    [log_dirs] = ok_result(r, 11)  # one broker, in memory: one notional directory
    assert log_dirs["broker"] == 0
    [directory] = log_dirs["results"]
    [sizes] = [{p["partitionIndex"]: int(p["partitionSize"]) for p in t["partitions"]} for t in directory["topics"]]
    assert sorted(sizes) == [0, 1] and sizes[0] > 0 and sizes[1] == 0


def test_acls_through_admin(version: str) -> None:
    """createAcls / describeAcls / deleteAcls against a broker with an authorizer (the test's anonymous
    PLAINTEXT client is a super user)."""
    with BrokerThread(BrokerConfig(port=0, authorizer_class_name=STANDARD_AUTHORIZER,
                                   super_users="User:ANONYMOUS")) as broker:
        acl = {"resourceType": 2, "resourceName": "orders-", "resourcePatternType": 4, "principal": "User:alice",
               "host": "*", "operation": 3, "permissionType": 3}  # TOPIC, PREFIXED, READ, ALLOW
        match = {"resourceType": 2, "resourceName": "orders-eu", "resourcePatternType": 2, "principal": None,
                 "host": None, "operation": 1, "permissionType": 1}  # MATCH, ANY, ANY
        r = run("admin", broker, calls=[["createAcls", {"creations": [acl]}],
                                        ["describeAcls", {"filter": match}],
                                        ["deleteAcls", {"filters": [match]}],
                                        ["describeAcls", {"filter": match}]])
        assert ok_result(r, 0) is None
        [resource] = ok_result(r, 1)
        assert (resource["resourceName"], resource["resourcePatternType"]) == ("orders-", 4)
        assert [(a["principal"], a["operation"], a["permissionType"]) for a in resource["acls"]] == \
            [("User:alice", 3, 3)]
        assert [(a["resourceName"], a["principal"]) for a in ok_result(r, 2)] == [("orders-", "User:alice")]
        assert ok_result(r, 3) == []


def test_negotiated_the_highest_common_versions(served: tuple[BrokerThread, RequestLog]) -> None:
    """Every request the client sent used the highest version both it and the broker have (in this module:
    the tests above when they ran, and a produce and two group consumes here)."""
    broker, log = served
    topic = unique_name("plt-versions")
    broker.create_topic(topic, 1)
    run("produce", broker, topic=topic, messages=messages(2, 1, "ver"))
    for protocol in ("classic", "consumer"):
        run("consume", broker, group=unique_name("plt-versions"), topics=[topic], count=2, groupProtocol=protocol)
    used = log.versions(CLIENT)
    assert {"Produce", "Fetch", "Metadata", "JoinGroup", "SyncGroup", "ConsumerGroupHeartbeat", "OffsetCommit"} <= set(used)
    implemented = platformatic_versions()
    offered = {APIS[k].name: lo_hi for k, lo_hi in offered_versions(broker).items() if k in APIS}
    wrong = {}
    for api, versions in used.items():
        if api == "ApiVersions" or api not in implemented:
            continue
        lo, hi = offered[api]
        best = max(v for v in implemented[api] if lo <= v <= hi)
        if versions != {best}:
            wrong[api] = (sorted(versions), best)
    print("@platformatic/kafka negotiated:", {api: sorted(v) for api, v in used.items()})
    assert not wrong, f"versions used (expected the highest common one): {wrong}"
