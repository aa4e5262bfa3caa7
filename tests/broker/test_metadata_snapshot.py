"""Snapshots of the controller's ``__cluster_metadata`` log (KIP-630): written when the policy says, holding the
whole state between a header and a footer control record, the log cleaned below them, and a restart that
replays the latest snapshot and the log after it gives the controller the state it had."""

from __future__ import annotations

import uuid
from pathlib import Path

from minikafka.broker.metadata import ClusterMetadata, topic_to_json
from minikafka.broker.metadata_image import SnapshotPolicy
from minikafka.broker.metadata_log import ClusterMetadataLog, feature_records
from minikafka.broker.metadata_snapshot import SnapshotId, maybe_snapshot, read_snapshot, snapshots
from minikafka.common import ManualClock
from minikafka.protocol.records import ControlRecordType, decode_control_key, decode_records, iter_batches

#: A snapshot after every 2 KiB appended, small segments, nothing kept below the latest snapshot.
SMALL = SnapshotPolicy(max_bytes_between=2048, max_interval_ms=0, segment_bytes=1024, retention_bytes=0)


def _cluster(data_dir: Path, policy: SnapshotPolicy = SMALL) -> ClusterMetadata:
    md = ClusterMetadata([0, 1, 2], data_dir, snapshot_policy=policy)
    for b in (0, 1, 2):
        md.broker_started(b, "127.0.0.1", 9092 + b, endpoints={"PLAINTEXT": ("127.0.0.1", 9092 + b)},
                          protocols={"PLAINTEXT": "PLAINTEXT"})
    return md


def _topics(md: ClusterMetadata) -> dict:
    return {name: topic_to_json(t) | {"partitions": [vars(p) for p in t.partitions]} for name, t in md.topics.items()}


def _fill(md: ClusterMetadata, count: int) -> None:
    """Topics, ISR changes, configs of other resources, ACLs, SCRAM credentials and quotas: many records."""
    for i in range(count):
        md.create_topic(f"t{i}", 2, 3, configs={"retention.ms": str(1000 + i)})
        md.set_isr(f"t{i}", 0, [md.topics[f"t{i}"].partitions[0].leader])
        md.write_configs(32, f"group-{i}", {"consumer.session.timeout.ms": str(45000 + i)})
        md.write_acls({uuid.UUID(int=i + 1): (2, f"t{i}", 3, "User:alice", "*", 3, 3)}, [])
        md.write_scram({(f"user-{i}", 1): (b"salt", b"s" * 32, b"k" * 32, 4096)}, [])
        md.write_quota((("client-id", f"app-{i}"),), "producer_byte_rate", 1024.0 * (i + 1))
    md.delete_topic("t0")
    md.write_acls({}, [uuid.UUID(int=1)])
    md.write_scram({}, [("user-0", 1)])
    md.write_quota((("client-id", "app-0"),), "producer_byte_rate", None)


def test_snapshots_are_written_and_the_log_is_cleaned_below_them(tmp_path: Path) -> None:
    md = _cluster(tmp_path)
    _fill(md, 20)
    mlog = md.metadata_log
    assert mlog is not None
    found = snapshots(mlog.directory)
    assert found, "no snapshot written"
    latest, path = found[-1]
    assert 0 < mlog.log.log_start_offset <= latest.end_offset <= mlog.end_offset
    assert all(sid.end_offset >= mlog.log.log_start_offset for sid, _ in found)  # older ones deleted
    assert path.name == f"{latest.end_offset:020d}-{latest.epoch:010d}.checkpoint"
    # Header first, footer last, both control records; the metadata records between them.
    batches = list(iter_batches(path.read_bytes()))
    kinds = [decode_control_key(decode_records(v)[0].key)[1] for h, v in batches if h.is_control]
    assert batches[0][0].is_control and batches[-1][0].is_control
    assert kinds == [ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.SNAPSHOT_FOOTER]
    names = [rec.name for rec in read_snapshot(path.read_bytes(), "test")]
    assert names[:3] == ["RegisterBrokerRecord"] * 3  # (no feature levels in this cluster: brokers first)
    assert {"TopicRecord", "PartitionRecord", "ConfigRecord", "AccessControlEntryRecord",
            "UserScramCredentialRecord", "ClientQuotaRecord"} <= set(names)
    md.close()


def test_a_restart_replays_the_latest_snapshot_and_the_log_after_it(tmp_path: Path) -> None:
    md = _cluster(tmp_path)
    _fill(md, 20)
    before, state, end = _topics(md), md.state, md.metadata_offset
    epochs = {name: [md.partition_epoch(name, i) for i in range(len(t.partitions))] for name, t in md.topics.items()}
    md.close()

    again = ClusterMetadata([0, 1, 2], tmp_path, snapshot_policy=SMALL)
    try:
        assert again.metadata_log is not None and again.metadata_log.log.log_start_offset > 0
        assert _topics(again) == before and "t0" not in again.topics
        assert {name: [again.partition_epoch(name, i) for i in range(len(t.partitions))]
                for name, t in again.topics.items()} == epochs
        assert again.metadata_offset == end
        assert again.state.acls == state.acls and len(state.acls) == 19
        assert again.state.scram == state.scram and ("user-0", 1) not in state.scram
        assert again.state.quotas == state.quotas and len(state.quotas) == 19
        assert again.state.configs == state.configs
        assert again.replayed_acls() == state.acls
    finally:
        again.close()


def test_no_snapshot_below_the_bytes_nor_with_the_time_policy_off(tmp_path: Path) -> None:
    md = _cluster(tmp_path, SnapshotPolicy(max_bytes_between=1 << 30, max_interval_ms=0))
    _fill(md, 5)
    assert md.metadata_log is not None and snapshots(md.metadata_log.directory) == []
    assert md.metadata_log.log.log_start_offset == 0
    md.close()


def test_a_snapshot_after_the_interval_with_something_appended(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    mlog = ClusterMetadataLog(tmp_path, clock, SnapshotPolicy(max_bytes_between=1 << 30, max_interval_ms=60_000))
    mlog.append(feature_records({"metadata.version": 27}), 1)
    assert maybe_snapshot(mlog, lambda: [], 1) is None
    clock.sleep(60_000)
    assert maybe_snapshot(mlog, lambda: feature_records({"metadata.version": 27}), 1) == SnapshotId(1, 1)
    assert maybe_snapshot(mlog, lambda: [], 1) is None  # nothing appended since
    mlog.close()
