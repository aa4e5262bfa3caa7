"""The coordinators' compacted logs: ``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``.

* every key and value the broker writes, against bytes built by hand from Kafka's record schemas;
* replay of a ``__consumer_offsets`` log with commits, tombstones, transactional offsets committed and
  aborted (the aborted transaction in the log's index), a type change and an unreadable record;
* migration of the JSON-lines files of earlier versions;
* a broker on a background thread restarted over its data dir keeps offsets, transactions and share state.
"""

from __future__ import annotations

import json
import logging
import struct
import uuid
from pathlib import Path

import pytest
import trio

from helpers import create, produce, batch, wait_until
from minikafka.broker.config import BrokerConfig
from minikafka.broker.coordinator_log import CoordinatorLog, compacted_log_config
from minikafka.broker.groups.offset_log import OffsetLog
from minikafka.broker.log.cleaner_manager import CleanerConfig, LogCleaner
from minikafka.broker.log.txn_index import AbortedTxn
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.share.partition_state import PersistedShareState, ShareStateKey, ShareStateStore
from minikafka.broker.txn.metadata import TransactionMetadata, TransactionState
from minikafka.broker.txn.state_log import TransactionStateLog
from minikafka.client.connection import KafkaConnection
from minikafka.common import ManualClock, OffsetAndMetadata, TopicPartition
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.coordinator_records import (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue,
                                                    CoordinatorRecordError, GroupMemberMetadata, GroupMetadataKey,
                                                    GroupMetadataValue, OffsetCommitKey, OffsetCommitValue,
                                                    ShareSnapshotKey, ShareSnapshotValue, ShareStateBatch,
                                                    TransactionLogKey, TransactionLogValue, TransactionPartitions,
                                                    decode_group_record, decode_share_record,
                                                    decode_transaction_record, encode_key, encode_record,
                                                    encode_value)
from minikafka.testing import BrokerThread

S = TransactionState
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


# -- hand-built wire format (Kafka's MessageUtil.toVersionPrefixedBytes) -----------------------------------------
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def u16(v: int) -> bytes:
    return struct.pack(">H", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str | None) -> bytes:
    """A classic (non-flexible) string: int16 length, -1 for null."""
    return i16(-1) if s is None else i16(len(s.encode())) + s.encode()


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def compact_string(s: str) -> bytes:
    return uvarint(len(s.encode()) + 1) + s.encode()


NO_TAGS = uvarint(0)


def test_offset_commit_records_match_kafkas_bytes() -> None:
    key = OffsetCommitKey("grp", "topic", 3)
    assert encode_key(key) == i16(1) + string("grp") + string("topic") + i32(3)
    # No expire timestamp: version 3 (leader epoch, no expire timestamp).
    value = OffsetCommitValue(42, "meta", 1_700_000_000_000, leader_epoch=5)
    v3 = i16(3) + i64(42) + i32(5) + string("meta") + i64(1_700_000_000_000)
    assert encode_value(value) == v3
    # With one (OffsetCommit v1-4 retention): version 1 (expire timestamp, no leader epoch).
    expiring = OffsetCommitValue(42, "meta", 1_700_000_000_000, expire_timestamp=1_800_000_000_000)
    v1 = i16(1) + i64(42) + string("meta") + i64(1_700_000_000_000) + i64(1_800_000_000_000)
    assert encode_value(expiring) == v1
    assert decode_group_record(encode_key(key), v3) == (key, value)
    assert decode_group_record(encode_key(key), v1) == (key, expiring)
    assert encode_record(key, None) == (encode_key(key), None)
    assert decode_group_record(encode_key(key), None) == (key, None)  # a tombstone
    # Key version 0 (Kafka before 2.x) reads as the same key.
    assert decode_group_record(i16(0) + string("grp") + string("topic") + i32(3), v3) == (key, value)


def test_group_metadata_records_match_kafkas_bytes() -> None:
    key = GroupMetadataKey("grp")
    assert encode_key(key) == i16(2) + string("grp")
    value = GroupMetadataValue("consumer", 7, current_state_timestamp=123)
    raw = i16(3) + string("consumer") + i32(7) + string(None) + string(None) + i64(123) + i32(0)
    assert encode_value(value) == raw
    assert decode_group_record(encode_key(key), raw) == (key, value)
    # A value with a member, as Kafka writes for a Stable group, reads back whole.
    member = (string("m-1") + string("inst") + string("client") + string("/10.0.0.1") + i32(300_000) + i32(45_000)
              + i32(3) + b"sub" + i32(2) + b"as")
    with_member = (i16(3) + string("consumer") + i32(7) + string("range") + string("m-1") + i64(123) + i32(1)
                   + member)
    _, decoded = decode_group_record(encode_key(key), with_member)
    assert decoded == GroupMetadataValue("consumer", 7, "range", "m-1", 123, (
        GroupMemberMetadata("m-1", "client", "/10.0.0.1", 45_000, b"sub", b"as", 300_000, "inst"),))
    assert encode_value(decoded) == with_member


def test_consumer_group_metadata_records_match_kafkas_bytes() -> None:
    key = ConsumerGroupMetadataKey("grp")
    assert encode_key(key) == i16(3) + string("grp")
    raw = i16(0) + i32(12) + NO_TAGS  # flexible from version 0: an empty tagged-field section
    assert encode_value(ConsumerGroupMetadataValue(12)) == raw
    assert decode_group_record(encode_key(key), raw) == (key, ConsumerGroupMetadataValue(12))


def test_transaction_log_records_match_kafkas_bytes() -> None:
    key = TransactionLogKey("tx-1")
    assert encode_key(key) == i16(0) + string("tx-1")
    value = TransactionLogValue(
        producer_id=1000, producer_epoch=3, transaction_timeout_ms=60_000, transaction_status=2,
        transaction_partitions=(TransactionPartitions("__consumer_offsets", (17,)), TransactionPartitions("t", (0, 1))),
        transaction_last_update_timestamp_ms=5000, transaction_start_timestamp_ms=4000, previous_producer_id=999,
        client_transaction_version=2)
    partitions = (uvarint(3)
                  + compact_string("__consumer_offsets") + uvarint(2) + i32(17) + NO_TAGS
                  + compact_string("t") + uvarint(3) + i32(0) + i32(1) + NO_TAGS)
    tags = uvarint(2) + uvarint(0) + uvarint(8) + i64(999) + uvarint(2) + uvarint(2) + i16(2)  # next id -1: default
    raw = i16(1) + i64(1000) + i16(3) + i32(60_000) + i8(2) + partitions + i64(5000) + i64(4000) + tags
    assert encode_value(value) == raw
    assert decode_transaction_record(encode_key(key), raw) == (key, value)
    # Empty: null partitions (compact array length 0); the tagged fields at their defaults are left out.
    empty = TransactionLogValue(1000, 0, 60_000, 0, None, 5000, -1)
    raw_empty = i16(1) + i64(1000) + i16(0) + i32(60_000) + i8(0) + uvarint(0) + i64(5000) + i64(-1) + NO_TAGS
    assert encode_value(empty) == raw_empty
    assert decode_transaction_record(encode_key(key), raw_empty) == (key, empty)
    # Version 0 (transaction.version 0) has no tagged fields.
    raw_v0 = i16(0) + i64(1000) + i16(0) + i32(60_000) + i8(0) + i32(-1) + i64(5000) + i64(-1)
    assert decode_transaction_record(encode_key(key), raw_v0) == (key, empty._replace(client_transaction_version=0))
    assert decode_transaction_record(encode_key(key), None) == (key, None)


def test_share_snapshot_records_match_kafkas_bytes() -> None:
    topic_id = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    key = ShareSnapshotKey("share", topic_id, 2)
    assert encode_key(key) == i16(0) + string("share") + topic_id.bytes + i32(2)
    value = ShareSnapshotValue(4, 1, -1, 10, (ShareStateBatch(10, 12, 2, 1), ShareStateBatch(13, 13, 0, 3)))
    raw = (i16(0) + u16(4) + i32(1) + i32(-1) + i64(10) + uvarint(3)
           + i64(10) + i64(12) + i8(2) + i16(1) + NO_TAGS
           + i64(13) + i64(13) + i8(0) + i16(3) + NO_TAGS + NO_TAGS)
    assert encode_value(value) == raw
    assert decode_share_record(encode_key(key), raw) == (key, value)
    assert decode_share_record(encode_key(key), None) == (key, None)


def test_records_that_do_not_decode_raise() -> None:
    for bad in (b"\x00", i16(15) + string("g"), i16(1) + string("g")):  # short, unknown type, truncated key
        with pytest.raises(CoordinatorRecordError):
            decode_group_record(bad, None)
    with pytest.raises(CoordinatorRecordError):  # a value version Kafka never had
        decode_group_record(encode_key(GroupMetadataKey("g")), i16(9) + b"\x00")
    with pytest.raises(CoordinatorRecordError):  # ShareUpdate: never written here
        decode_share_record(i16(1) + string("g") + bytes(16) + i32(0), None)
    with pytest.raises(CoordinatorRecordError):
        decode_transaction_record(i16(1) + string("tx"), None)


# -- __consumer_offsets: replay --------------------------------------------------------------------------------
def om(offset: int, ts: int = 1000) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "m", ts)


def test_offsets_log_replays_commits_tombstones_and_transactions(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    offsets = OffsetLog(tmp_path, clock=ManualClock(time_ms=5000))
    assert offsets.load() == {}
    offsets.write_group_metadata("classic", "classic", "consumer", 3)
    offsets.commit_offsets("classic", {TP0: om(10), TP1: om(11)})
    offsets.commit_offsets("classic", {TP0: om(12)})
    offsets.remove_offsets("classic", [TP1])  # expired
    offsets.commit_offsets("gone", {TP0: om(1)})
    offsets.delete_group("gone", [TP0])
    # Producer 7 commits, producer 8 aborts, producer 9 is still open when the broker stops.
    offsets.commit_txn_offsets("classic", 7, 0, {TP1: om(70)})
    offsets.commit_txn_offsets("other", 8, 2, {TP0: om(80)})
    offsets.end_txn(0, 7, commit=True)
    offsets.end_txn(0, 8, commit=False)
    offsets.end_txn(0, 8, commit=True)  # a second completion writes nothing
    offsets.commit_txn_offsets("open", 9, 0, {TP0: om(90)})
    # A classic group upgraded to a consumer group keeps its offsets.
    offsets.commit_offsets("upgraded", {TP0: om(5)})
    offsets.write_group_metadata("upgraded", "classic", "consumer", 2)
    offsets.write_group_metadata("upgraded", "consumer", None, 4)
    # A record this coordinator cannot read is skipped on replay.
    assert offsets.log is not None
    offsets.log.append([(b"\x00\x09junk", b"\x00\x00")])
    marker_8 = offsets.log.log.txn_index.entries[0].last_offset
    first_9 = offsets.log.open_txns[9][0]
    offsets.close()

    again = OffsetLog(tmp_path)
    with caplog.at_level(logging.WARNING):
        groups = again.load()
    assert "skipping unreadable record" in caplog.text
    assert set(groups) == {"classic", "other", "open", "upgraded"}
    classic = groups["classic"]
    assert (classic.protocol_type, classic.generation_id, classic.group_type) == ("consumer", 3, "classic")
    assert classic.offsets == {TP0: om(12), TP1: om(70)} and classic.pending_txn_offsets == {}
    assert groups["other"].offsets == {} and groups["other"].pending_txn_offsets == {}
    assert groups["open"].pending_txn_offsets == {9: {TP0: om(90)}}
    upgraded = groups["upgraded"]
    assert (upgraded.group_type, upgraded.generation_id, upgraded.offsets) == ("consumer", 4, {TP0: om(5)})
    # The aborted transaction is in the rebuilt index; the cleaner stops at the open one.
    assert again.log is not None
    entries = again.log.log.txn_index.entries
    assert len(entries) == 1 and (entries[0].producer_id, entries[0].last_offset) == (8, marker_8)
    assert again.log.last_stable_offset() == first_9
    [target] = again.cleaner_targets()
    assert target.name == "__consumer_offsets-0" and target.log.config.compact
    assert target.last_stable_offset() == first_9 and target.active_producers() == {}
    again.end_txn(0, 9, commit=False)
    assert again.log.last_stable_offset() == again.log.log.log_end_offset
    assert again.log.log.txn_index.entries[-1] == AbortedTxn(9, first_9, again.log.log.log_end_offset - 1,
                                                             again.log.log.log_end_offset)
    again.close()


async def test_cleaned_offsets_log_replays_to_the_same_groups(tmp_path: Path) -> None:
    """The log cleaner compacts ``__consumer_offsets`` through ``cleaner_targets``; replay gives the same state."""
    config = compacted_log_config(2048, {"delete.retention.ms": "0"})
    offsets = OffsetLog(tmp_path, config=config, clock=ManualClock(time_ms=5000))
    offsets.load()
    offsets.write_group_metadata("g", "classic", "consumer", 1)
    for i in range(150):
        offsets.commit_offsets("g", {TP0: om(i), TP1: om(1000 + i)})
    offsets.commit_txn_offsets("g", 7, 0, {TP0: om(7000)})
    offsets.end_txn(0, 7, commit=False)
    offsets.commit_txn_offsets("g", 8, 0, {TP1: om(8000)})
    offsets.end_txn(0, 8, commit=True)
    offsets.commit_offsets("gone", {TP0: om(1)})
    offsets.delete_group("gone", [TP0])
    for i in range(50):  # fill segments past the ones to clean
        offsets.commit_offsets("h", {TP0: om(i)})
    assert offsets.log is not None
    before = offsets.log.log.size_in_bytes
    cleaner = LogCleaner(CleanerConfig(threads=1, dedupe_buffer_size=1 << 20))
    cleaner.add_source(offsets.cleaner_targets)
    assert await cleaner.clean_until_idle() >= 1
    assert offsets.log.log.size_in_bytes < before / 2
    offsets.close()
    groups = OffsetLog(tmp_path, config=config).load()
    assert set(groups) == {"g", "h"}
    assert groups["g"].offsets == {TP0: om(149), TP1: om(8000)} and groups["g"].generation_id == 1
    assert groups["h"].offsets == {TP0: om(49)}


def test_coordinator_log_config_is_kafkas_internal_topic_config(tmp_path: Path) -> None:
    config = compacted_log_config(104857600, {"delete.retention.ms": "1000", "min.cleanable.dirty.ratio": "0.25"})
    assert config.cleanup_policy == frozenset({"compact"}) and config.segment_bytes == 104857600
    assert (config.delete_retention_ms, config.min_cleanable_dirty_ratio) == (1000, 0.25)
    lg = CoordinatorLog(tmp_path, "__consumer_offsets", 7, config)
    assert lg.append([]) == -1 and lg.log.directory == tmp_path / "__consumer_offsets-7"
    lg.close()


# -- migration of the JSON-lines logs of earlier versions -------------------------------------------------------
def write_lines(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_old_offsets_log_is_migrated(tmp_path: Path) -> None:
    old = tmp_path / "__consumer_offsets" / "offsets.log"
    write_lines(old, [
        {"t": "g", "g": "g1", "pt": "consumer", "gen": 2},
        {"t": "o", "g": "g1", "tp": "t", "p": 0, "o": 9, "e": 1, "m": "x", "ct": 100, "xt": None},
        {"t": "o", "g": "g1", "tp": "t", "p": 1, "o": 3, "e": -1, "m": "", "ct": 100, "xt": 900},
        {"t": "x", "g": "g1", "tp": "t", "p": 1},
        {"t": "g", "g": "kip848", "pt": "consumer", "gen": 5, "gt": "consumer"},
        {"t": "o", "g": "dead", "tp": "t", "p": 0, "o": 1, "e": -1, "m": "", "ct": 1, "xt": None},
        {"t": "d", "g": "dead"},
        {"t": "to", "g": "g1", "pid": 4, "tp": "t", "p": 1, "o": 40, "e": -1, "m": "", "ct": 2, "xt": None},
        {"t": "to", "g": "g1", "pid": 5, "tp": "t", "p": 1, "o": 50, "e": -1, "m": "", "ct": 2, "xt": 70},
        {"t": "te", "g": "g1", "pid": 4, "c": True},
    ])
    groups = OffsetLog(tmp_path).load()
    assert not old.exists() and not old.parent.exists()
    assert set(groups) == {"g1", "kip848"}
    g1 = groups["g1"]
    assert (g1.protocol_type, g1.generation_id) == ("consumer", 2)
    assert g1.offsets == {TP0: OffsetAndMetadata(9, 1, "x", 100), TP1: OffsetAndMetadata(40, -1, "", 2)}
    assert g1.pending_txn_offsets == {5: {TP1: OffsetAndMetadata(50, -1, "", 2, 70)}}
    assert (groups["kip848"].group_type, groups["kip848"].generation_id) == ("consumer", 5)
    # Migrated once: a second load reads the new log alone.
    again = OffsetLog(tmp_path)
    assert again.load() == groups
    again.close()


def test_old_transaction_log_is_migrated(tmp_path: Path) -> None:
    ongoing = TransactionMetadata("tx", 1000, 4, 60_000, S.ONGOING, 999, 3, {TP0}, {"g"}, 10, 20, 2)
    empty = TransactionMetadata("idle", 1001, 0, 30_000, S.EMPTY, last_update_ms=5)
    old = tmp_path / "__transaction_state" / "transactions.log"
    write_lines(old, [ongoing.to_json(), empty.to_json(), {"id": "expired", "pid": 1, "epoch": 0, "timeout": 1,
                                                           "state": "Empty"}, {"id": "expired", "dead": True}])
    loaded = TransactionStateLog(tmp_path, offsets_topic_partitions=50).load()
    assert not old.exists() and (tmp_path / "__transaction_state-0").is_dir()
    assert set(loaded) == {"tx", "idle"}
    tx = loaded["tx"]
    assert (tx.producer_id, tx.producer_epoch, tx.state, tx.partitions, tx.start_ms, tx.last_update_ms) == \
        (1000, 4, S.ONGOING, {TP0}, 10, 20)
    assert (tx.last_producer_id, tx.last_producer_epoch, tx.client_version) == (999, 3, 2)
    assert tx.groups == set() and len(tx.offsets_partitions) == 1  # the group's __consumer_offsets partition
    assert loaded["idle"] == empty


def test_transaction_state_log_tombstones_and_epochs(tmp_path: Path) -> None:
    log = TransactionStateLog(tmp_path)
    log.load()
    fresh = TransactionMetadata("a", 7, 0, 1000, S.EMPTY, last_update_ms=1)
    log.write(fresh)
    log.write(TransactionMetadata("b", 8, 0, 1000, S.EMPTY, last_update_ms=1))
    log.remove("b")
    overflowed = TransactionMetadata("c", 20, 0, 1000, S.COMPLETE_COMMIT, 19, 32766, set(), set(), 1, 2, 2)
    log.write(overflowed)
    log.close()
    loaded = TransactionStateLog(tmp_path).load()
    assert set(loaded) == {"a", "c"}
    assert loaded["a"] == fresh  # epoch 0 of a new id: no last epoch
    assert loaded["c"] == overflowed  # epoch 0 after an overflow: the last epoch of the previous id


def test_old_share_state_log_is_migrated(tmp_path: Path) -> None:
    metadata = ClusterMetadata([0])
    topic_id = metadata.create_topic("t", 2, 1).topic_id
    old = tmp_path / "__share_group_state" / "state.log"
    write_lines(old, [
        {"g": "g", "t": "t", "p": 0, "s": 5, "e": 1, "b": [[5, 6, 2, 1]]},
        {"g": "g", "t": "t", "p": 1, "s": 0, "e": 0, "b": []},
        {"g": "g", "t": "t", "p": 1, "d": 1},
        {"g": "g", "t": "deleted-topic", "p": 0, "s": 1, "e": 0, "b": []},
    ])
    store = ShareStateStore(tmp_path, metadata)
    assert not old.exists()
    assert store.keys() == [ShareStateKey("g", "t", 0)]
    assert store.get(ShareStateKey("g", "t", 0)) == PersistedShareState(5, 1, ((5, 6, 2, 1),))
    store.put(ShareStateKey("g", "t", 0), PersistedShareState(7, 1, ()))
    store.close()
    # The records carry the topic id and one more snapshot epoch per write.
    lg = CoordinatorLog(tmp_path, "__share_group_state", 0, compacted_log_config(1 << 20))
    values = []
    lg.replay(lambda h, k, v: values.append(decode_share_record(k, v)))
    lg.close()
    assert [(k.topic_id, v.snapshot_epoch if v else None) for k, v in values] == [(topic_id, 0), (topic_id, 1)]
    assert ShareStateStore(tmp_path, metadata).get(ShareStateKey("g", "t", 0)) == PersistedShareState(7, 1, ())


def test_share_state_of_a_deleted_topic_is_ignored_on_load(tmp_path: Path) -> None:
    metadata = ClusterMetadata([0])
    metadata.create_topic("t", 1, 1)
    store = ShareStateStore(tmp_path, metadata)
    store.put(ShareStateKey("g", "t", 0), PersistedShareState(3, 0, ()))
    store.close()
    metadata.delete_topic("t")
    metadata.create_topic("t", 1, 1)  # the same name, a new id
    assert ShareStateStore(tmp_path, metadata).keys() == []
    with pytest.raises(ValueError):
        ShareStateStore(tmp_path)  # the records name topics by id


# -- a broker restarted over its data dir ----------------------------------------------------------------------
async def begin(c: KafkaConnection, tid: str, group: str) -> tuple[int, int]:
    init = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": tid, "transaction_timeout_ms": 60_000})
    assert init.error_code == 0
    add = await c.request(K.ADD_OFFSETS_TO_TXN, 3, {"transactional_id": tid, "producer_id": init.producer_id,
                                                   "producer_epoch": init.producer_epoch, "group_id": group})
    assert add.error_code == 0
    return init.producer_id, init.producer_epoch


async def txn_commit(c: KafkaConnection, tid: str, group: str, pid: int, epoch: int, offset: int) -> int:
    r = await c.request(K.TXN_OFFSET_COMMIT, 3, {
        "transactional_id": tid, "group_id": group, "producer_id": pid, "producer_epoch": epoch,
        "generation_id": -1, "member_id": "", "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                 "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
    return r.topics[0].partitions[0].error_code


async def end_txn(c: KafkaConnection, tid: str, pid: int, epoch: int, commit: bool, done: str) -> None:
    r = await c.request(K.END_TXN, 3, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                      "committed": commit})
    assert r.error_code == 0

    async def reached() -> bool:
        return await txn_state(c, tid) == done

    await wait_until(reached, what=f"{tid} to reach {done}")


async def txn_state(c: KafkaConnection, tid: str) -> str:
    r = await c.request(K.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [tid]})
    return r.transaction_states[0].transaction_state


async def committed(c: KafkaConnection, group: str) -> dict[int, int]:
    r = await c.request(K.OFFSET_FETCH, 8, {"groups": [{"group_id": group, "topics": None}], "require_stable": True})
    return {p.partition_index: p.committed_offset for t in r.groups[0].topics for p in t.partitions}


async def share_start_offsets(c: KafkaConnection, group: str) -> dict[int, int]:
    r = await c.request(K.DESCRIBE_SHARE_GROUP_OFFSETS, 0, {"groups": [{"group_id": group, "topics": None}]})
    return {p.partition_index: p.start_offset for t in r.groups[0].topics for p in t.partitions}


def test_broker_thread_restart_keeps_offsets_transactions_and_share_state(tmp_path: Path) -> None:
    config = BrokerConfig(port=0, data_dir=tmp_path, group_initial_rebalance_delay_ms=0)
    with BrokerThread(config) as b:
        async def before() -> tuple[int, int]:
            async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
                await create(c, "t", 2)
                for i in range(4):
                    await produce(c, "t", batch([b"r%d" % i]))
                r = await c.request(K.OFFSET_COMMIT, 8, {"group_id": "plain", "generation_id_or_member_epoch": -1,
                                                         "member_id": "", "topics": [{"name": "t", "partitions": [
                                                             {"partition_index": 1, "committed_offset": 3}]}]})
                assert r.topics[0].partitions[0].error_code == 0
                pid, epoch = await begin(c, "done", "txg")
                assert await txn_commit(c, "done", "txg", pid, epoch, 2) == 0
                await end_txn(c, "done", pid, epoch, True, "CompleteCommit")
                pid, epoch = await begin(c, "aborted", "txg")
                assert await txn_commit(c, "aborted", "txg", pid, epoch, 4) == 0
                await end_txn(c, "aborted", pid, epoch, False, "CompleteAbort")
                # Left open across the restart, its offsets pending.
                open_pid, open_epoch = await begin(c, "open", "pending")
                assert await txn_commit(c, "open", "pending", open_pid, open_epoch, 3) == 0
                # A share group that left, its start offset altered.
                hb = await c.request(K.SHARE_GROUP_HEARTBEAT, 1, {"group_id": "sg", "member_id": str(uuid.uuid4()),
                                                                 "member_epoch": 0, "subscribed_topic_names": ["t"]})
                assert hb.error_code == 0
                left = await c.request(K.SHARE_GROUP_HEARTBEAT, 1, {"group_id": "sg", "member_id": hb.member_id,
                                                                   "member_epoch": -1})
                assert left.error_code == 0
                alter = await c.request(K.ALTER_SHARE_GROUP_OFFSETS, 0, {"group_id": "sg", "topics": [
                    {"topic_name": "t", "partitions": [{"partition_index": 0, "start_offset": 2}]}]})
                assert alter.error_code == 0 and alter.responses[0].partitions[0].error_code == 0
                return open_pid, open_epoch

        open_pid, open_epoch = trio.run(before)
        b.restart()

        async def after() -> None:
            async with await KafkaConnection.connect("127.0.0.1", b.port) as c:
                assert await committed(c, "plain") == {1: 3}
                assert await committed(c, "txg") == {0: 2}  # the aborted transaction's offset is gone
                r = await c.request(K.OFFSET_FETCH, 8, {"groups": [{"group_id": "pending", "topics": [
                    {"name": "t", "partition_indexes": [0]}]}], "require_stable": True})
                assert r.groups[0].topics[0].partitions[0].error_code != 0  # UNSTABLE_OFFSET_COMMIT
                assert await txn_state(c, "done") == "CompleteCommit"
                assert await txn_state(c, "open") == "Ongoing"
                # The open transaction carries on: its group is found again, and it commits.
                assert await txn_commit(c, "open", "pending", open_pid, open_epoch, 4) == 0
                await end_txn(c, "open", open_pid, open_epoch, True, "CompleteCommit")
                assert await committed(c, "pending") == {0: 4}
                assert await share_start_offsets(c, "sg") == {0: 2}
                init = await c.request(K.INIT_PRODUCER_ID, 4, {"transactional_id": "done",
                                                               "transaction_timeout_ms": 60_000})
                assert init.error_code == 0 and init.producer_epoch == 1  # the same id, its epoch bumped

        trio.run(after)
        # The groups, transactions and share-partition states on the broker's replicas of __consumer_offsets,
        # __transaction_state and __share_group_state; no local log of a coordinator used on its own.
        for topic in ("__consumer_offsets", "__transaction_state", "__share_group_state"):
            assert any((tmp_path / "logs").glob(f"{topic}-*"))
            assert not (tmp_path / f"{topic}-0").exists()
        assert not (tmp_path / "__consumer_offsets").exists()
