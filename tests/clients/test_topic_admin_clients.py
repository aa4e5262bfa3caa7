"""Real admin clients calling the topic and cluster admin APIs of Kafka 4.2 against a broker the test starts:
kafka-python 3's ``describe_topic_partitions`` (DescribeTopicPartitions with its cursor),
``delete_group_offsets`` (OffsetDelete), ``elect_leaders`` (ElectLeaders) and ``describe_metadata_quorum``
(DescribeQuorum); confluent-kafka's ``elect_leaders``.  (librdkafka 2.16's ``describe_topics`` still asks
Metadata, not DescribeTopicPartitions; no client here has UnregisterBroker: tests/broker and tests/cluster
send it over the wire.)"""

from __future__ import annotations

import pytest
from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as Errors

from clients_common import group_id, wait_for
from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from minikafka.protocol.api import ApiKey
from minikafka.testing import BrokerThread

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]


def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-topic-admin", request_timeout_ms=10000)


def test_kafka_python_describe_topic_partitions_pages_through_every_partition(broker_thread: BrokerThread) -> None:
    broker_thread.create_topic("dtp-a", 3)
    broker_thread.create_topic("dtp-b", 2)
    admin = kp_admin(broker_thread.bootstrap)
    try:
        seen: list[tuple[str, int]] = []
        cursor = None
        pages = 0
        while True:
            page = admin.describe_topic_partitions(["dtp-b", "dtp-a"], response_partition_limit=2, cursor=cursor)
            pages += 1
            for t in page["topics"]:
                assert t["error_code"] == 0 and t["topic_id"] is not None
                seen += [(t["name"], p["partition_index"]) for p in t["partitions"]]
                assert all(p["leader_id"] == 0 and p["isr_nodes"] == [0] for p in t["partitions"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 3
        assert seen == [("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2), ("dtp-b", 0), ("dtp-b", 1)]
        missing = admin.describe_topic_partitions(["nope"])["topics"]
        assert [(t["name"], t["error_code"]) for t in missing] == [("nope", Errors.UnknownTopicOrPartitionError.errno)]
        # describe_topics (Metadata) agrees on the partitions.
        (meta,) = admin.describe_topics(["dtp-b"])
        assert sorted(p["partition_index"] for p in meta["partitions"]) == [0, 1]
    finally:
        admin.close()
    assert broker_thread.broker is not None
    assert broker_thread.broker.request_stats[ApiKey.DESCRIBE_TOPIC_PARTITIONS][0] == 4


def test_kafka_python_delete_group_offsets(broker_thread: BrokerThread) -> None:
    broker_thread.create_topic("od-sub", 2)
    group = group_id("od")
    producer = KafkaProducer(bootstrap_servers=broker_thread.bootstrap)
    for p in (0, 1):
        producer.send("od-sub", b"v", partition=p)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer("od-sub", bootstrap_servers=broker_thread.bootstrap, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             metadata_max_age_ms=500)  # a leader that assigned before it saw the topic rejoins
    admin = kp_admin(broker_thread.bootstrap)
    try:
        got = 0
        for _ in range(100):
            got += sum(len(v) for v in consumer.poll(timeout_ms=200).values())
            if got >= 2:
                break
        assert got == 2
        consumer.commit()
        sub = [TopicPartition("od-sub", 0), TopicPartition("od-sub", 1)]
        result = admin.delete_group_offsets(group, sub)
        assert result == {tp: Errors.GroupSubscribedToTopicError for tp in sub}
        consumer.close()
        # Once the only member left, the group no longer subscribes: the offsets go.
        wait_for(lambda: admin.delete_group_offsets(group, sub[:1]) == {sub[0]: Errors.NoError},
                 what="the offsets of a group without members deleted")
        assert set(admin.list_group_offsets({group: None})[group]) == {sub[1]}
        with pytest.raises(Errors.GroupIdNotFoundError):
            admin.delete_group_offsets(group_id("none"), sub)
    finally:
        consumer.close()
        admin.close()


def test_kafka_python_elect_leaders_and_describe_quorum(broker_thread: BrokerThread) -> None:
    broker_thread.create_topic("el", 2)
    admin = kp_admin(broker_thread.bootstrap)
    try:
        # One broker leads every partition it holds: no election is needed (ignored as Kafka's admin ignores it).
        r = admin.elect_leaders(0, {"el": [0, 1]})
        assert {(p.partition_id, p.error_code) for t in r.replica_election_results for p in t.partition_result} == {
            (0, Errors.ElectionNotNeededError.errno), (1, Errors.ElectionNotNeededError.errno)}
        r = admin.elect_leaders(1, None)  # unclean, every partition (the client lists them): none lacks a leader
        results = {(t.topic, p.partition_id): p.error_code for t in r.replica_election_results
                   for p in t.partition_result}
        assert results[("el", 0)] == results[("el", 1)] == Errors.ElectionNotNeededError.errno
        assert set(results.values()) == {Errors.ElectionNotNeededError.errno}
        quorum = admin.describe_metadata_quorum()
        (partition,) = quorum["topics"][0]["partitions"]
        assert quorum["topics"][0]["topic_name"] == "__cluster_metadata"
        assert (partition["leader_id"], partition["error"], partition["observers"]) == (0, None, [])
        assert [v["replica_id"] for v in partition["current_voters"]] == [0]
        assert partition["high_watermark"] == partition["current_voters"][0]["log_end_offset"] > 0
        assert [(n["node_id"], n["listeners"][0]["port"]) for n in quorum["nodes"]] == [(0, broker_thread.port)]
    finally:
        admin.close()


def test_confluent_elect_leaders(broker_thread: BrokerThread) -> None:
    broker_thread.create_topic("ck-el", 1)
    admin = AdminClient({"bootstrap.servers": broker_thread.bootstrap})
    result = admin.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("ck-el", 0)]).result(timeout=10)
    ((tp, error),) = result.items()
    assert (tp.topic, tp.partition, error.code()) == ("ck-el", 0, Errors.ElectionNotNeededError.errno)
