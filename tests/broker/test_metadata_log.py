"""The controller's topics as KRaft's metadata records in ``<data_dir>/__cluster_metadata-0`` (issue 26, first
step): every change is written as Kafka's records, a restart rebuilds the same topics from them, the segment reads
as Kafka's ``dump-log --cluster-metadata-decoder`` prints it, and an earlier version's JSON file is carried over."""

from __future__ import annotations

import json
from pathlib import Path

from tools.tools_helpers import run_cli

from minikafka.broker.metadata import ClusterMetadata, topic_to_json
from minikafka.broker.metadata_log import ClusterMetadataLog


def _state(md: ClusterMetadata) -> dict:
    return {name: topic_to_json(t) | {"partitions": [vars(p) for p in t.partitions]} for name, t in md.topics.items()}


def _record_types(data_dir: Path) -> list[str]:
    mlog = ClusterMetadataLog(data_dir)
    try:
        return [rec.name for _, rec in mlog.records()]
    finally:
        mlog.close()


def test_every_change_is_a_record_and_a_restart_rebuilds_the_same_topics(tmp_path: Path) -> None:
    md = ClusterMetadata([0, 1, 2], tmp_path)
    for b in (0, 1, 2):
        md.broker_started(b, "127.0.0.1", 9092 + b, endpoints={"PLAINTEXT": ("127.0.0.1", 9092 + b)},
                          protocols={"PLAINTEXT": "PLAINTEXT"})
    md.create_topic("orders", 2, 3, configs={"retention.ms": "1000"}, assignments={0: [0, 1, 2], 1: [1, 2, 0]})
    md.create_topic("gone", 1, 1)
    md.add_partitions("orders", 3)
    md.set_topic_configs("orders", {"cleanup.policy": "compact"}, replace=True)
    md.set_isr("orders", 0, [0, 1])  # an ISR shrink: a PartitionChangeRecord without a leader
    md.broker_stopped(1)  # fenced: its leadership moves (epoch + 1), it leaves every ISR
    assert md.topics["orders"].partitions[1].leader == 2
    md.move_leader("orders", 1, 0)  # an election: a PartitionChangeRecord with the leader (epoch + 1 on replay)
    md.topics["orders"].partitions[0].leader_epoch += 3  # epochs passed between two writes: a whole PartitionRecord
    md.persist()
    md.alter_partition_reassignments([("orders", 2, [0, 2])])
    md.delete_topic("gone")
    before = _state(md)
    epochs = dict(md.broker_epochs)
    end = md.metadata_offset
    md.close()

    types = _record_types(tmp_path)
    assert len(types) == end  # the metadata offset is the log's end
    assert {"RegisterBrokerRecord", "TopicRecord", "ConfigRecord", "PartitionRecord", "PartitionChangeRecord",
            "FenceBrokerRecord", "RemoveTopicRecord"} <= set(types)
    # A broker's epoch is the offset of its registration, as in KRaft.
    assert [types[epochs[b]] for b in (0, 2)] == ["RegisterBrokerRecord"] * 2

    again = ClusterMetadata([0, 1, 2], tmp_path)
    try:
        assert _state(again) == before and "gone" not in again.topics
        assert again.metadata_offset == end and again.replica_count == sum(
            len(p.replicas) for t in again.topics.values() for p in t.partitions)
        # Changes after the restart continue the log.
        again.set_topic_configs("orders", {"retention.ms": "5"})
        assert again.metadata_offset == end + 1
    finally:
        again.close()
    third = ClusterMetadata([0, 1, 2], tmp_path)
    assert third.topics["orders"].configs == {"cleanup.policy": "compact", "retention.ms": "5"}
    third.close()


def test_the_segment_reads_as_kafkas_cluster_metadata_log(tmp_path: Path, capsys) -> None:
    md = ClusterMetadata([0], tmp_path)
    md.broker_started(0, "127.0.0.1", 9092, endpoints={"SASL_SSL": ("localhost", 9093)},
                      protocols={"SASL_SSL": "SASL_SSL"})
    topic = md.create_topic("t", 1, 1)
    md.close()
    segment = next((tmp_path / "__cluster_metadata-0").glob("*.log"))
    r = run_cli(capsys, "dump-log", "--files", str(segment), "--cluster-metadata-decoder", "--skip-record-metadata")
    assert (r.rc, r.err) == (0, "")
    payloads = [json.loads(line.split(" payload: ", 1)[1]) for line in r.lines if " payload: " in line]
    assert [(p["type"], p["version"]) for p in payloads] == [
        ("REGISTER_BROKER_RECORD", 1), ("TOPIC_RECORD", 0), ("PARTITION_RECORD", 0)]
    register, topic_record, partition = (p["data"] for p in payloads)
    assert register["brokerId"] == 0 and register["brokerEpoch"] == 0 and register["fenced"] is False
    assert register["endPoints"] == [{"name": "SASL_SSL", "host": "localhost", "port": 9093, "securityProtocol": 3}]
    assert topic_record["name"] == "t"
    assert (partition["partitionId"], partition["replicas"], partition["isr"], partition["leader"]) == (0, [0], [0], 0)
    assert partition["topicId"] == topic_record["topicId"] and topic.topic_id is not None


def test_an_earlier_versions_json_file_is_carried_over_into_the_log(tmp_path: Path) -> None:
    md = ClusterMetadata([0, 1], None)
    md.create_topic("old", 2, 2, configs={"retention.ms": "7"})
    md.topics["old"].partitions[1].leader_epoch = 5  # several elections ago
    (tmp_path / ClusterMetadata.FILE).write_text(json.dumps({"topics": [topic_to_json(md.topics["old"])],
                                                             "metadata_offset": 12}))
    before = _state(md)

    carried = ClusterMetadata([0, 1], tmp_path)
    try:
        assert _state(carried) == before
        assert not (tmp_path / ClusterMetadata.FILE).exists()
    finally:
        carried.close()
    assert _record_types(tmp_path) == ["TopicRecord", "ConfigRecord", "PartitionRecord", "PartitionRecord"]
    reopened = ClusterMetadata([0, 1], tmp_path)
    assert _state(reopened) == before and reopened.topics["old"].partitions[1].leader_epoch == 5
    reopened.close()


def test_broker_configs_and_client_quotas_are_records_a_restart_takes_back(tmp_path: Path) -> None:
    """Dynamic broker configs (the cluster default and one broker's) and client quotas changed through the
    stores are ConfigRecords of type BROKER and ClientQuotaRecords; reopened, the stores hold them again, over
    the quotas a configuration sets."""
    from minikafka.broker.cluster_stores import open_quota_configs
    from minikafka.broker.config import BrokerConfig
    from minikafka.broker.dynamic_config import DynamicBrokerConfig, DynamicConfigStore
    from minikafka.broker.quota.entity import ClientQuotaEntity

    config = BrokerConfig(client_quotas=["client-id=static:consumer_byte_rate=500"])
    md = ClusterMetadata([0], tmp_path)
    store = DynamicConfigStore()
    store.attach(md)
    brokers = DynamicBrokerConfig(0, store, any_broker=True)
    brokers.alter("", [("leader.replication.throttled.rate", 0, "1000")], incremental=True, validate_only=False)
    brokers.alter("2", [("follower.replication.throttled.rate", 0, "2000")], incremental=True, validate_only=False)
    quotas = open_quota_configs(config, md)
    quotas.set(ClientQuotaEntity(user="alice"), "producer_byte_rate", 4096.0)
    quotas.set(ClientQuotaEntity(client_id="gone"), "request_percentage", 50.0)
    quotas.remove(ClientQuotaEntity(client_id="gone"), "request_percentage")
    md.close()
    assert {"ConfigRecord", "ClientQuotaRecord"} <= set(_record_types(tmp_path))

    again = ClusterMetadata([0], tmp_path)
    try:
        store = DynamicConfigStore()
        store.attach(again)
        assert store.defaults == {"leader.replication.throttled.rate": "1000"}
        assert store.per_broker == {2: {"follower.replication.throttled.rate": "2000"}}
        quotas = open_quota_configs(config, again)
        assert quotas.entries == {ClientQuotaEntity(user="alice"): {"producer_byte_rate": 4096.0},
                                  ClientQuotaEntity(client_id="static"): {"consumer_byte_rate": 500.0}}
    finally:
        again.close()
