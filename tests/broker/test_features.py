"""Feature flags (KIP-584) as Kafka 4.2 reports and changes them, over the wire: ApiVersions v3/v4
``supported_features`` / ``finalized_features``, UpdateFeatures v0-v2 (upgrade, safe/unsafe downgrade,
validate_only, the refusals), the bootstrap levels, persistence, and the group.version / share.version
gates of the KIP-848 and KIP-932 APIs.  (kafka-python's describe_features / update_features drive the same
in tests/clients/test_features_clients.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import K
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig, ConfigError
from minikafka.broker.features import FeatureControlManager, FeatureUpdate, UpgradeType
from minikafka.broker.security.acl import (CLUSTER_NAME, AclBinding, AclOperation, AclPermissionType, PatternType,
                                           ResourceType)
from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.errors import ErrorCode as E

KAFKA_42_SUPPORTED = {"metadata.version": (7, 29), "kraft.version": (0, 1), "transaction.version": (0, 2),
                      "group.version": (0, 1), "eligible.leader.replicas.version": (0, 1), "share.version": (0, 1)}
KAFKA_42_FINALIZED = {"metadata.version": 29, "kraft.version": 1, "transaction.version": 2, "group.version": 1,
                      "eligible.leader.replicas.version": 1, "share.version": 1}
SAFE, UNSAFE = UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE


async def api_versions(c: KafkaConnection, version: int = 4):
    return await c.request(K.API_VERSIONS, version, {"client_software_name": "t", "client_software_version": "1"})


async def features(c: KafkaConnection) -> tuple[dict[str, int], int]:
    resp = await api_versions(c)
    assert all(f.min_version_level == f.max_version_level for f in resp.finalized_features)
    return {f.name: f.max_version_level for f in resp.finalized_features}, resp.finalized_features_epoch


async def update(c: KafkaConnection, updates: dict[str, int | tuple[int, int]], version: int = 2,
                 validate_only: bool = False):
    items = []
    for name, spec in updates.items():
        level, kind = spec if isinstance(spec, tuple) else (spec, 1)
        item = {"feature": name, "max_version_level": level}
        item.update({"allow_downgrade": kind != 1} if version == 0 else {"upgrade_type": kind})
        items.append(item)
    body = {"timeout_ms": 1000, "feature_updates": items}
    if version >= 1:
        body["validate_only"] = validate_only
    return await c.request(K.UPDATE_FEATURES, version, body)


async def test_api_versions_reports_kafka_42_features(conn: KafkaConnection) -> None:
    v4 = await api_versions(conn, 4)
    assert {f.name: (f.min_version, f.max_version) for f in v4.supported_features} == KAFKA_42_SUPPORTED
    assert {f.name: f.max_version_level for f in v4.finalized_features} == KAFKA_42_FINALIZED
    assert v4.finalized_features_epoch >= 0
    # Before v4 a supported feature whose minimum is 0 is left out (KAFKA-17011); finalized ones stay.
    v3 = await api_versions(conn, 3)
    assert [(f.name, f.min_version, f.max_version) for f in v3.supported_features] == [("metadata.version", 7, 29)]
    assert {f.name: f.max_version_level for f in v3.finalized_features} == KAFKA_42_FINALIZED
    assert {k.api_key: k.max_version for k in v4.api_keys}[K.UPDATE_FEATURES] == 2


async def test_update_features_upgrades_downgrades_and_validates(conn: KafkaConnection) -> None:
    levels, epoch = await features(conn)
    # Safe downgrade of transaction.version (v1 with validate_only first: nothing changes).
    checked = await update(conn, {"transaction.version": (1, SAFE)}, version=1, validate_only=True)
    assert checked.error_code == 0 and [(r.feature, r.error_code) for r in checked.results] == [
        ("transaction.version", 0)]
    assert await features(conn) == (levels, epoch)
    done = await update(conn, {"transaction.version": (1, SAFE), "share.version": (0, UNSAFE)})
    assert (done.error_code, done.error_message) == (0, None)
    after, after_epoch = await features(conn)
    expected = {**levels, "transaction.version": 1}
    del expected["share.version"]  # level 0: no longer finalized
    assert after == expected
    assert after_epoch > epoch
    # v0: allow_downgrade is a safe downgrade; the answer names each feature.
    v0 = await update(conn, {"group.version": (0, SAFE)}, version=0)
    assert v0.error_code == 0 and [r.feature for r in v0.results] == ["group.version"]
    # Upgrades back.
    assert (await update(conn, {"transaction.version": 2, "share.version": 1, "group.version": 1})).error_code == 0
    assert (await features(conn))[0] == KAFKA_42_FINALIZED


@pytest.mark.parametrize("updates, reason", [
    ({"transaction.version": 3}, "only supports versions 0-2"),
    ({"no.such.feature": 1}, "does not support this feature"),
    ({"transaction.version": 1}, "SAFE_DOWNGRADE or UNSAFE_DOWNGRADE"),  # a downgrade as an upgrade
    ({"share.version": (1, SAFE)}, None),  # same level: allowed
    ({"metadata.version": (22, SAFE)}, "could lose metadata"),  # crosses 4.0-IV1, which changed the format
    ({"metadata.version": (22, UNSAFE)}, "Unsafe"),
    ({"metadata.version": (22, 2)}, "could lose metadata"),
    ({"metadata.version": (6, SAFE)}, "only supports versions 7-29"),
    ({"kraft.version": (0, SAFE)}, "cannot be downgraded"),
    ({"transaction.version": (2, 0)}, "upgrade type"),
    # ELR needs metadata.version 4.0-IV1: lowering both is checked against the proposed levels.
    ({"metadata.version": (24, SAFE), "eligible.leader.replicas.version": 1}, None),
])
async def test_update_features_refusals(conn: KafkaConnection, updates: dict, reason: str | None) -> None:
    before = await features(conn)
    resp = await update(conn, updates)
    if reason is None:
        assert resp.error_code == 0, resp.error_message
        return
    assert resp.error_code == E.INVALID_UPDATE_VERSION and reason in resp.error_message
    assert await features(conn) == before  # nothing applied
    assert not hasattr(resp, "results") or not resp.results  # v2 answers without per-feature results


def test_dependencies_and_metadata_downgrades_of_the_feature_controller() -> None:
    f = FeatureControlManager(None, {"metadata.version": 22})  # 4.0-IV0: no ELR, no share groups, TV 0
    assert f.finalized() == {"metadata.version": 22, "kraft.version": 1, "group.version": 1}
    refused = f.update_features([FeatureUpdate("eligible.leader.replicas.version", 1)])
    assert refused.code == E.INVALID_UPDATE_VERSION and "depends on metadata.version level 4.0-IV1" in refused.message
    assert f.update_features([FeatureUpdate("metadata.version", 23),
                              FeatureUpdate("eligible.leader.replicas.version", 1)]).code == 0
    # A metadata.version downgrade that would leave ELR without what it needs is refused too.
    assert f.update_features([FeatureUpdate("metadata.version", 22, SAFE)]).code == E.INVALID_UPDATE_VERSION
    assert f.update_features([FeatureUpdate("metadata.version", 29)]).code == 0
    assert f.update_features([FeatureUpdate("metadata.version", 24, SAFE)]).code == 0  # 4.0-IV2 on: no change
    assert f.update_features([FeatureUpdate("transaction.version", 2, UpgradeType.UNKNOWN)]).code != 0


async def test_group_and_share_apis_follow_their_features(conn: KafkaConnection) -> None:
    """Kafka answers the KIP-848 APIs UNSUPPORTED_VERSION while group.version is 0, the KIP-932 ones while
    share.version is (still listed in ApiVersions)."""
    heartbeat = {"group_id": "g", "member_id": "m-1", "member_epoch": 0, "rebalance_timeout_ms": 30000,
                 "subscribed_topic_names": ["t"], "topic_partitions": []}
    share = {"group_id": "sg", "member_id": "m-2", "member_epoch": 0, "subscribed_topic_names": ["t"]}
    assert (await conn.request(K.CONSUMER_GROUP_HEARTBEAT, 0, heartbeat)).error_code == 0
    assert (await conn.request(K.SHARE_GROUP_HEARTBEAT, 1, share)).error_code == 0
    assert (await update(conn, {"group.version": (0, SAFE), "share.version": (0, SAFE)})).error_code == 0
    assert (await conn.request(K.CONSUMER_GROUP_HEARTBEAT, 0, heartbeat)).error_code == E.UNSUPPORTED_VERSION
    assert (await conn.request(K.SHARE_GROUP_HEARTBEAT, 1, share)).error_code == E.UNSUPPORTED_VERSION
    described = await conn.request(K.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g"],
                                                                  "include_authorized_operations": False})
    assert described.groups[0].error_code == E.UNSUPPORTED_VERSION
    assert K.CONSUMER_GROUP_HEARTBEAT in {k.api_key for k in (await api_versions(conn)).api_keys}
    assert (await update(conn, {"group.version": 1, "share.version": 1})).error_code == 0
    assert (await conn.request(K.CONSUMER_GROUP_HEARTBEAT, 0, {**heartbeat, "member_id": "m-3"})).error_code == 0


async def test_bootstrap_features_format_an_older_cluster_and_persist(tmp_path: Path) -> None:
    cfg = BrokerConfig(port=0, data_dir=tmp_path, bootstrap_features="metadata.version=4.0,transaction.version=1")
    async with serve_broker(cfg) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            levels, _ = await features(c)
            # Kafka 4.0-IV3's defaults (no ELR, no share groups) with transaction.version as given.
            assert levels == {"metadata.version": 25, "kraft.version": 1, "group.version": 1,
                              "transaction.version": 1}
            assert (await update(c, {"share.version": 1})).error_code == 0
            saved = await features(c)
    # The finalized levels (and epoch) survive a restart; the bootstrap settings no longer apply.
    async with serve_broker(BrokerConfig(port=0, data_dir=tmp_path)) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            assert await features(c) == saved


def test_levels_are_feature_level_records_of_the_metadata_log(tmp_path: Path) -> None:
    from minikafka.broker.metadata import ClusterMetadata
    from minikafka.broker.metadata_log import ClusterMetadataLog

    old = FeatureControlManager(tmp_path, {"metadata.version": 25})  # an earlier version: features.json
    assert (tmp_path / "features.json").exists()
    metadata = ClusterMetadata([0], tmp_path)
    fm = FeatureControlManager(tmp_path, {}, metadata)
    assert fm.finalized() == old.finalized() and not (tmp_path / "features.json").exists()
    assert fm.update_features([FeatureUpdate("transaction.version", 1, UpgradeType.SAFE_DOWNGRADE)]).code == E.NONE
    levels, epoch = fm.finalized(), fm.epoch
    metadata.close()
    mlog = ClusterMetadataLog(tmp_path)
    records = list(mlog.records())
    mlog.close()
    assert {rec.name for _, rec in records} == {"FeatureLevelRecord"}
    assert epoch == records[-1][0] and records[-1][1].data.name == "transaction.version"  # the last one's offset

    metadata = ClusterMetadata([0], tmp_path)
    again = FeatureControlManager(tmp_path, {"metadata.version": 27}, metadata)  # the log wins over bootstrap
    assert (again.finalized(), again.epoch) == (levels, epoch)
    metadata.close()


@pytest.mark.parametrize("setting", ["share.version=2", "metadata.version=3.2", "nonsense",
                                     "eligible.leader.replicas.version=1,metadata.version=3.9"])
async def test_bad_bootstrap_features_are_refused(setting: str) -> None:
    with pytest.raises(ConfigError):
        async with serve_broker(BrokerConfig(port=0, bootstrap_features=setting)):
            pass


async def test_update_features_needs_alter_and_share_coordinators_cluster_action_on_the_cluster() -> None:
    async with serve_broker(BrokerConfig(port=0, authorizer_class_name=STANDARD_AUTHORIZER)) as b:
        async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
            share_key = {"key_type": 2, "coordinator_keys": ["sg:AAAAAAAAAAAAAAAAAAAAAQ:0"]}
            denied = await update(c, {"transaction.version": (1, SAFE)}, version=1)
            assert (denied.error_code, list(denied.results)) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
            fc = await c.request(K.FIND_COORDINATOR, 6, share_key)
            assert fc.coordinators[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
            assert b.authorizer is not None
            b.authorizer.create_acls([AclBinding.of(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL,
                                                    "User:ANONYMOUS", "*", op, AclPermissionType.ALLOW)
                                      for op in (AclOperation.ALTER, AclOperation.CLUSTER_ACTION)])
            assert (await update(c, {"transaction.version": (1, SAFE)}, version=1)).error_code == 0
            fc = await c.request(K.FIND_COORDINATOR, 6, share_key)
            assert (fc.coordinators[0].error_code, fc.coordinators[0].node_id) == (0, 0)
