"""Per-group dynamic configs (Kafka's GroupConfig / GroupConfigManager) and DescribeConfigs /
IncrementalAlterConfigs / AlterConfigs on GROUP resources (type 32)."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.broker.broker import Broker
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.config_ops import OP_APPEND, OP_DELETE, OP_SET
from minikafka.broker.groups.group_config import (
    GroupConfigManager,
    ShareAutoOffsetReset,
    parse_iso_duration_ms,
)
from minikafka.broker.metadata import ClusterMetadata, MetadataError
from minikafka.broker.metadata_log import ClusterMetadataLog
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode

GROUP = 32


def test_defaults_come_from_the_broker_config() -> None:
    cfg = BrokerConfig(group_share_session_timeout_ms=50000, group_share_record_lock_duration_ms=20000,
                       group_consumer_heartbeat_interval_ms=6000, group_share_delivery_count_limit=3)
    gc = GroupConfigManager(cfg).group_config("any")
    assert gc.share_session_timeout_ms == 50000
    assert gc.share_record_lock_duration_ms == 20000
    assert gc.consumer_heartbeat_interval_ms == 6000
    assert gc.consumer_session_timeout_ms == 45000
    assert gc.share_delivery_count_limit == 3
    assert gc.share_auto_offset_reset == ShareAutoOffsetReset("latest")
    assert gc.share_isolation_level == "read_uncommitted" and not gc.share_read_committed


def test_overrides_apply_to_their_group_only() -> None:
    m = GroupConfigManager(BrokerConfig())
    m.alter("g1", [("share.record.lock.duration.ms", OP_SET, "15000"),
                   ("share.auto.offset.reset", OP_SET, "by_duration:PT1H"),
                   ("share.isolation.level", OP_SET, "read_committed"),
                   ("share.delivery.count.limit", OP_SET, "10")], incremental=True, validate_only=False)
    g1 = m.group_config("g1")
    assert g1.share_record_lock_duration_ms == 15000
    assert g1.share_auto_offset_reset == ShareAutoOffsetReset("by_duration", 3_600_000)
    assert g1.share_auto_offset_reset.timestamp(10_000_000) == 10_000_000 - 3_600_000
    assert g1.share_read_committed and g1.share_delivery_count_limit == 10
    assert m.group_config("g2").share_record_lock_duration_ms == 30000
    # Incremental: a later SET keeps the others; DELETE goes back to the broker default.
    m.alter("g1", [("share.isolation.level", OP_DELETE, None)], incremental=True, validate_only=False)
    assert m.group_config("g1").share_isolation_level == "read_uncommitted"
    assert m.group_config("g1").share_record_lock_duration_ms == 15000
    # AlterConfigs replaces the whole set.
    m.alter("g1", [("share.session.timeout.ms", OP_SET, "50000")], incremental=False, validate_only=False)
    assert m.overrides("g1") == {"share.session.timeout.ms": "50000"}
    # validate_only changes nothing.
    m.alter("g1", [("share.session.timeout.ms", OP_SET, "46000")], incremental=True, validate_only=True)
    assert m.group_config("g1").share_session_timeout_ms == 50000


@pytest.mark.parametrize(("name", "value", "message"), [
    ("no.such.config", "1", "Unknown group config name: no.such.config"),
    ("share.session.timeout.ms", "abc", "Not a number of type INT"),
    ("share.session.timeout.ms", "0", "Value must be at least 1"),
    ("share.session.timeout.ms", "44999",
     "share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms"),
    ("share.session.timeout.ms", "60001", "must be less than or equal to group.share.max.session.timeout.ms"),
    ("consumer.heartbeat.interval.ms", "4999", "group.consumer.min.heartbeat.interval.ms"),
    ("share.record.lock.duration.ms", "999", "Value must be at least 1000"),
    ("share.record.lock.duration.ms", "60001", "group.share.max.record.lock.duration.ms"),
    ("share.delivery.count.limit", "11", "group.share.max.delivery.count.limit"),
    ("share.delivery.count.limit", "1", "Value must be at least 2"),
    ("share.auto.offset.reset", "LATEST", "The value must be either 'earliest', 'latest'"),
    ("share.auto.offset.reset", "by_duration", "by_duration:<PnDTnHnMn.nS.>"),
    ("share.auto.offset.reset", "by_duration:-PT1H", "by_duration:<PnDTnHnMn.nS.>"),
    ("share.isolation.level", "serializable", "String must be one of"),
])
def test_invalid_values_are_invalid_config(name: str, value: str, message: str) -> None:
    m = GroupConfigManager(BrokerConfig())
    with pytest.raises(MetadataError) as exc_info:
        m.alter("g", [(name, OP_SET, value)], incremental=True, validate_only=False)
    assert exc_info.value.code == ErrorCode.INVALID_CONFIG
    assert message in exc_info.value.message
    assert m.overrides("g") == {}


def test_session_must_exceed_heartbeat_and_other_errors() -> None:
    cfg = BrokerConfig(group_share_max_heartbeat_interval_ms=60000)
    m = GroupConfigManager(cfg)
    with pytest.raises(MetadataError, match="share.session.timeout.ms must be greater than share.heartbeat"):
        m.alter("g", [("share.heartbeat.interval.ms", OP_SET, "45000")], incremental=True, validate_only=False)
    with pytest.raises(MetadataError) as exc_info:  # no list-typed group configs
        m.alter("g", [("share.isolation.level", OP_APPEND, "read_committed")], incremental=True,
                validate_only=False)
    assert exc_info.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(MetadataError) as exc_info:
        m.alter("", [("share.isolation.level", OP_SET, "read_committed")], incremental=True, validate_only=False)
    assert exc_info.value.code == ErrorCode.INVALID_REQUEST


def test_iso_durations_as_java_parses_them() -> None:
    assert parse_iso_duration_ms("P2D") == 2 * 86_400_000
    assert parse_iso_duration_ms("PT1H30M") == 5_400_000
    assert parse_iso_duration_ms("pt0.5s") == 500
    assert parse_iso_duration_ms("P1DT-1H") == 23 * 3_600_000
    assert parse_iso_duration_ms("-PT1S") == -1000
    for bad in ("", "P", "PT", "1H", "PT1", "P1H", "PT1.S2"):
        with pytest.raises(ValueError):
            parse_iso_duration_ms(bad)
    assert ShareAutoOffsetReset.parse("earliest").timestamp(5) == -2
    assert ShareAutoOffsetReset.parse("latest").timestamp(5) == -1


def test_persisted_in_the_data_dir(tmp_path: Path) -> None:
    m = GroupConfigManager(BrokerConfig(), tmp_path)
    seen: list[str] = []
    m.listeners.append(seen.append)
    m.alter("g", [("share.record.lock.duration.ms", OP_SET, "20000")], incremental=True, validate_only=False)
    assert seen == ["g"]
    again = GroupConfigManager(BrokerConfig(), tmp_path)
    assert again.group_config("g").share_record_lock_duration_ms == 20000
    again.delete("g")
    assert GroupConfigManager(BrokerConfig(), tmp_path).overrides("g") == {}


def test_describe_sources() -> None:
    m = GroupConfigManager(BrokerConfig(group_share_session_timeout_ms=50000))
    m.alter("g", [("share.isolation.level", OP_SET, "read_committed")], incremental=True, validate_only=False)
    rows = {name: (value, source, ctype, syn) for name, value, source, ctype, syn in m.describe("g", True)}
    assert rows["share.isolation.level"][:3] == ("read_committed", 8, 2)
    assert rows["share.isolation.level"][3] == [("share.isolation.level", "read_committed", 8),
                                                ("share.isolation.level", "read_uncommitted", 5)]
    assert rows["share.session.timeout.ms"][:3] == ("50000", 4, 3)  # static broker config
    assert rows["share.heartbeat.interval.ms"][:3] == ("5000", 5, 3)  # Kafka's default
    assert rows["share.heartbeat.interval.ms"][3] == [("group.share.heartbeat.interval.ms", "5000", 5)]
    assert len(rows) == 8


# -- over the wire ---------------------------------------------------------------------------------

async def test_describe_and_alter_group_configs_over_the_wire(broker: Broker, conn: KafkaConnection) -> None:
    resp = await conn.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
        {"resource_type": GROUP, "resource_name": "wire-group", "configs": [
            {"name": "share.record.lock.duration.ms", "config_operation": OP_SET, "value": "16000"},
            {"name": "consumer.session.timeout.ms", "config_operation": OP_SET, "value": "50000"}]},
        {"resource_type": GROUP, "resource_name": "bad-group", "configs": [
            {"name": "share.unknown", "config_operation": OP_SET, "value": "1"}]},
    ], "validate_only": False})
    codes = {r["resource_name"]: (r["error_code"], r["error_message"]) for r in resp["responses"]}
    assert codes["wire-group"] == (0, None)
    assert codes["bad-group"] == (ErrorCode.INVALID_CONFIG, "Unknown group config name: share.unknown")
    assert broker.group_configs.group_config("wire-group").share_record_lock_duration_ms == 16000

    resp = await conn.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": GROUP, "resource_name": "wire-group", "configuration_keys": None},
        {"resource_type": GROUP, "resource_name": "", "configuration_keys": None},
    ], "include_synonyms": True, "include_documentation": False})
    described, empty = resp["results"]
    assert described["error_code"] == 0
    configs = {c["name"]: c for c in described["configs"]}
    assert configs["share.record.lock.duration.ms"]["value"] == "16000"
    assert configs["share.record.lock.duration.ms"]["config_source"] == 8
    assert configs["share.record.lock.duration.ms"]["config_type"] == 3
    assert configs["share.auto.offset.reset"]["value"] == "latest"
    assert configs["share.auto.offset.reset"]["config_source"] == 5
    assert empty["error_code"] == ErrorCode.INVALID_REQUEST

    # AlterConfigs (legacy) replaces the group's set.
    resp = await conn.request(ApiKey.ALTER_CONFIGS, 2, {"resources": [
        {"resource_type": GROUP, "resource_name": "wire-group", "configs": [
            {"name": "share.auto.offset.reset", "value": "earliest"}]}], "validate_only": False})
    assert resp["responses"][0]["error_code"] == 0
    assert broker.group_configs.overrides("wire-group") == {"share.auto.offset.reset": "earliest"}


def test_unreadable_file_starts_without_overrides(tmp_path: Path) -> None:
    (tmp_path / "group-configs.json").write_text("{not json")
    assert GroupConfigManager(BrokerConfig(), tmp_path).overrides("g") == {}
    (tmp_path / "group-configs.json").write_text('{"version": 1, "groups": {"ok": {"share.isolation.level": '
                                                 '"read_committed"}, "bad": {"share.session.timeout.ms": "x"}}}')
    m = GroupConfigManager(BrokerConfig(), tmp_path)
    assert m.group_config("ok").share_read_committed and m.overrides("bad") == {}


async def test_shared_by_the_brokers_of_a_cluster(tmp_path: Path) -> None:
    async with serve_cluster(2, BrokerConfig(port=0, data_dir=tmp_path)) as cluster:
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(0).port) as c0:
            resp = await c0.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [
                {"resource_type": GROUP, "resource_name": "shared", "configs": [
                    {"name": "share.delivery.count.limit", "config_operation": OP_SET, "value": "7"}]}],
                "validate_only": False})
            assert resp["responses"][0]["error_code"] == 0
        async with await KafkaConnection.connect("127.0.0.1", cluster.broker(1).port) as c1:
            resp = await c1.request(ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
                {"resource_type": GROUP, "resource_name": "shared",
                 "configuration_keys": ["share.delivery.count.limit"]}],
                "include_synonyms": False, "include_documentation": False})
            configs = resp["results"][0]["configs"]
            assert [(c["name"], c["value"]) for c in configs] == [("share.delivery.count.limit", "7")]
    metadata = ClusterMetadata([0, 1], tmp_path)  # a ConfigRecord of the group in the cluster's metadata log
    assert GroupConfigManager(BrokerConfig(), tmp_path, metadata).group_config("shared").share_delivery_count_limit == 7
    assert not (tmp_path / "group-configs.json").exists()
    metadata.close()


def test_overrides_are_config_records_of_the_metadata_log_and_an_earlier_file_is_carried_over(tmp_path: Path):
    (tmp_path / "group-configs.json").write_text('{"version": 1, "groups": {"g": {"share.isolation.level": '
                                                 '"read_committed", "share.delivery.count.limit": "4"}}}')
    metadata = ClusterMetadata([0], tmp_path)
    m = GroupConfigManager(BrokerConfig(), tmp_path, metadata)
    assert m.overrides("g") == {"share.isolation.level": "read_committed", "share.delivery.count.limit": "4"}
    assert not (tmp_path / "group-configs.json").exists()
    m.set_overrides("g", {"share.delivery.count.limit": "6"})  # one set, one removed
    m.set_overrides("g", {"share.delivery.count.limit": "6"})  # unchanged: nothing written
    metadata.close()
    mlog = ClusterMetadataLog(tmp_path)
    configs = [(r.data.resource_type, r.data.resource_name, r.data.name, r.data.value) for _, r in mlog.records()]
    mlog.close()
    assert configs == [(32, "g", "share.isolation.level", "read_committed"),
                       (32, "g", "share.delivery.count.limit", "4"),
                       (32, "g", "share.delivery.count.limit", "6"), (32, "g", "share.isolation.level", None)]
    metadata = ClusterMetadata([0], tmp_path)
    assert GroupConfigManager(BrokerConfig(), tmp_path, metadata).overrides("g") == {"share.delivery.count.limit": "6"}
    metadata.close()
