"""KafkaJS (npm ``kafkajs``) against the broker: produce, consume with a consumer group, and its admin
client (topics, partitions, configs, offsets, groups, records), each result checked, here or with another
client.  KafkaJS 2.2 negotiates older versions than the broker's newest (Produce 7, Fetch 11): the test
records them.  Scripts: ``tests/node/kafkajs.mjs``; the package is installed by ``scripts/install-test-tools``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from minikafka.broker.config import BrokerConfig
from minikafka.common import TopicPartition
from minikafka.testing import BrokerThread
from clients_common import ck_read_all, unique_name
from node_clients import RequestLog, committed, ok_result, require_package, run_script

pytestmark = pytest.mark.clients

SCRIPT = "kafkajs.mjs"
CLIENT = "kjs-"
TOPIC_CONFIG = 2


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[BrokerThread, RequestLog]]:
    require_package("kafkajs")
    with BrokerThread(BrokerConfig(port=0, group_initial_rebalance_delay_ms=0)) as broker:
        yield broker, RequestLog().install(broker)


def run(action: str, broker: BrokerThread, **spec: Any) -> Any:
    return run_script(SCRIPT, CLIENT, action, broker, **spec)


def test_produce_and_consume_with_group(served: tuple[BrokerThread, RequestLog]) -> None:
    broker, log = served
    topic, group = unique_name("kjs"), unique_name("kjs-group")
    broker.create_topic(topic, 2)
    sent = [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2, "headers": {"i": str(i)}} for i in range(20)]
    out = run("produce", broker, topic=topic, messages=sent, idempotent=True)
    assert {(r["partition"], r["errorCode"]) for r in out["records"]} == {(0, 0), (1, 0)}
    got = ck_read_all(broker.bootstrap, topic, 2, 20)
    assert sorted((m.partition(), m.key().decode(), m.value().decode(), m.headers()[0][1].decode()) for m in got) == \
        sorted((s["partition"], s["key"], s["value"], s["headers"]["i"]) for s in sent)

    consumed = run("consume", broker, group=group, topics=[topic], count=20)
    assert sorted((m["partition"], m["key"], m["value"], m["headers"]["i"]) for m in consumed["messages"]) == \
        sorted((s["partition"], s["key"], s["value"], s["headers"]["i"]) for s in sent)

    assert committed(broker, group) == {TopicPartition(topic, 0): 10, TopicPartition(topic, 1): 10}
    used = log.versions(CLIENT)
    print("KafkaJS negotiated:", {api: sorted(v) for api, v in used.items()})
    assert {"Produce", "Fetch", "JoinGroup", "SyncGroup", "OffsetCommit", "InitProducerId"} <= set(used)


def test_admin(served: tuple[BrokerThread, RequestLog]) -> None:
    broker, _ = served
    topic, doomed, group = unique_name("kjs-admin"), unique_name("kjs-doomed"), unique_name("kjs-admin-group")
    r = run("admin", broker, calls=[
        ["createTopics", {"topics": [{"topic": topic, "numPartitions": 2,
                                      "configEntries": [{"name": "retention.ms", "value": "3600000"}]},
                                     {"topic": doomed, "numPartitions": 1}]}],
        ["listTopics", None],
        ["createPartitions", {"topicPartitions": [{"topic": topic, "count": 3}]}],
        ["fetchTopicMetadata", {"topics": [topic]}],
        ["describeConfigs", {"resources": [{"type": TOPIC_CONFIG, "name": topic, "configNames": ["retention.ms"]}],
                             "includeSynonyms": False}],
        ["deleteTopics", {"topics": [doomed]}],
        ["listTopics", None],
        ["describeCluster", None],
    ])
    assert ok_result(r, 0) is True
    assert {topic, doomed} <= set(ok_result(r, 1))
    [meta] = ok_result(r, 3)["topics"]
    assert meta["name"] == topic and len(meta["partitions"]) == 3
    [resource] = ok_result(r, 4)["resources"]
    assert [(c["configName"], c["configValue"]) for c in resource["configEntries"]] == [("retention.ms", "3600000")]
    assert doomed not in ok_result(r, 6)
    cluster = ok_result(r, 7)
    assert [(b["nodeId"], b["port"]) for b in cluster["brokers"]] == [(0, broker.port)]

    run("produce", broker, topic=topic, messages=[{"key": str(i), "value": str(i), "partition": 0} for i in range(3)])
    run("consume", broker, group=group, topics=[topic], count=3)
    r = run("admin", broker, calls=[
        ["fetchTopicOffsets", topic],
        ["listGroups", None],
        ["describeGroups", [group]],
        ["fetchOffsets", {"groupId": group, "topics": [topic]}],
        ["setOffsets", {"groupId": group, "topic": topic, "partitions": [{"partition": 0, "offset": "1"}]}],
        ["fetchOffsets", {"groupId": group, "topics": [topic]}],
        ["deleteTopicRecords", {"topic": topic, "partitions": [{"partition": 0, "offset": "2"}]}],
        ["fetchTopicOffsets", topic],
        ["deleteGroups", [group]],
        ["listGroups", None],
    ])
    assert {(p["partition"], p["low"], p["high"]) for p in ok_result(r, 0)} == {(0, "0", "3"), (1, "0", "0"), (2, "0", "0")}
    assert {"groupId": group, "protocolType": "consumer"} in ok_result(r, 1)["groups"]
    [described] = ok_result(r, 2)["groups"]
    assert (described["groupId"], described["state"], described["members"]) == (group, "Empty", [])

    def committed(result: Any) -> dict[int, str]:
        [t] = result
        return {p["partition"]: p["offset"] for p in t["partitions"] if p["offset"] != "-1"}
    assert committed(ok_result(r, 3)) == {0: "3"}
    assert committed(ok_result(r, 5)) == {0: "1"}
    assert [(p["partition"], p["low"]) for p in ok_result(r, 7) if p["partition"] == 0] == [(0, "2")]
    assert [(g["groupId"], g["errorCode"]) for g in ok_result(r, 8)] == [(group, 0)]
    assert group not in {g["groupId"] for g in ok_result(r, 9)["groups"]}
