"""Kafka 4.2's APIs and versions in captured traffic: each request captured, decoded (record by record and
through Spark's data source) and replayed against a fresh broker, answered as in the capture."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from minikafka.capture.recorder import CAPTURE
from minikafka.analysis.decode import REQUEST_COLUMNS, RecordDecoder
from minikafka.broker.broker import serve_broker
from minikafka.broker.config import BrokerConfig
from minikafka.capture import read_capture
from minikafka.capture.replay import ReplayOptions, run_replay
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import APIS
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.records import Record, build_batch
from minikafka.protocol.types import ZERO_UUID
from minikafka.testing import BrokerThread
from minikafka.common.clock import SYSTEM_CLOCK

TOPIC = "k42"
GROUP = "k42-group"

#: The APIs and versions Kafka 4.2 added over what minikafka offered before (issue 23), each sent below.
NEW = {K.PRODUCE: 13, K.FETCH: 18, K.LIST_OFFSETS: 11, K.METADATA: 13, K.FIND_COORDINATOR: 6, K.API_VERSIONS: 4,
       K.WRITE_TXN_MARKERS: 2, K.DESCRIBE_CLUSTER: 2, K.LIST_TRANSACTIONS: 2, K.ALTER_REPLICA_LOG_DIRS: 2,
       K.DESCRIBE_LOG_DIRS: 4, K.CREATE_DELEGATION_TOKEN: 3, K.RENEW_DELEGATION_TOKEN: 2,
       K.EXPIRE_DELEGATION_TOKEN: 2, K.DESCRIBE_DELEGATION_TOKEN: 3, K.ELECT_LEADERS: 2,
       K.ALTER_PARTITION_REASSIGNMENTS: 1, K.LIST_PARTITION_REASSIGNMENTS: 0, K.OFFSET_DELETE: 0,
       K.DESCRIBE_QUORUM: 2, K.UPDATE_FEATURES: 2, K.UNREGISTER_BROKER: 0, K.GET_TELEMETRY_SUBSCRIPTIONS: 0,
       K.LIST_CONFIG_RESOURCES: 1, K.DESCRIBE_TOPIC_PARTITIONS: 0}


async def _exchange(conn: KafkaConnection) -> None:
    """One request of each new API and version, each answered as expected."""
    async def call(key: K, body: dict[str, Any]) -> Any:
        return await conn.request(key, NEW[key], body)

    await call(K.API_VERSIONS, {"client_software_name": "k42", "client_software_version": "1"})
    created = await conn.request(K.CREATE_TOPICS, 7, {
        "topics": [{"name": TOPIC, "num_partitions": 2, "replication_factor": 1}], "timeout_ms": 5000})
    assert created.topics[0].error_code == E.NONE
    md = await call(K.METADATA, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False})
    assert md.error_code == E.NONE
    topic_id = md.topics[0].topic_id
    batch = build_batch([Record(offset_delta=i, value=b"v%d" % i) for i in range(3)],
                        base_timestamp=SYSTEM_CLOCK.time_ms())
    produced = await call(K.PRODUCE, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": 0, "records": batch}]}]})
    assert produced.responses[0].partition_responses[0].error_code == E.NONE
    fetched = await call(K.FETCH, {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0,
                                   "session_epoch": -1, "topics": [{"topic_id": topic_id, "partitions": [
                                       {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}]}]})
    assert fetched.responses[0].partitions[0].high_watermark == 3
    listed = await call(K.LIST_OFFSETS, {"replica_id": -1, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0, "timestamp": ts} for ts in (-4, -5, -6)]}], "timeout_ms": 1000})
    assert [p.offset for p in listed.topics[0].partitions] == [0, -1, -1]
    found = await call(K.FIND_COORDINATOR, {"key_type": 0, "coordinator_keys": [GROUP]})
    assert found.coordinators[0].error_code == E.NONE
    committed = await conn.request(K.OFFSET_COMMIT, 9, {"group_id": GROUP, "generation_id_or_member_epoch": -1,
                                                        "member_id": "", "topics": [{"name": TOPIC, "partitions": [
                                                            {"partition_index": 0, "committed_offset": 2}]}]})
    assert committed.topics[0].partitions[0].error_code == E.NONE
    deleted = await call(K.OFFSET_DELETE, {"group_id": GROUP, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 0}]}]})
    assert deleted.error_code == E.NONE and deleted.topics[0].partitions[0].error_code == E.NONE
    markers = await call(K.WRITE_TXN_MARKERS, {"markers": []})
    assert markers.markers == []
    cluster = await call(K.DESCRIBE_CLUSTER, {"include_fenced_brokers": True})
    assert [b.is_fenced for b in cluster.brokers] == [False]
    txns = await call(K.LIST_TRANSACTIONS, {"transactional_id_pattern": "k42-.*"})
    assert txns.error_code == E.NONE and txns.transaction_states == []
    page = await call(K.DESCRIBE_TOPIC_PARTITIONS, {"topics": [{"name": TOPIC}], "response_partition_limit": 1})
    assert len(page.topics[0].partitions) == 1 and page.next_cursor.partition_index == 1
    rest = await call(K.DESCRIBE_TOPIC_PARTITIONS, {"topics": [{"name": TOPIC}], "response_partition_limit": 1,
                                                    "cursor": {"topic_name": TOPIC, "partition_index": 1}})
    assert [p.partition_index for p in rest.topics[0].partitions] == [1] and rest.next_cursor is None
    elected = await call(K.ELECT_LEADERS, {"election_type": 0, "topic_partitions": [
        {"topic": TOPIC, "partitions": [0]}], "timeout_ms": 5000})
    assert elected.replica_election_results[0].partition_result[0].error_code == E.ELECTION_NOT_NEEDED
    moved = await call(K.ALTER_PARTITION_REASSIGNMENTS, {"timeout_ms": 5000, "topics": [{"name": TOPIC, "partitions": [
        {"partition_index": 1, "replicas": [0]}]}]})
    assert moved.error_code == E.NONE and moved.responses[0].partitions[0].error_code == E.NONE
    ongoing = await call(K.LIST_PARTITION_REASSIGNMENTS, {"timeout_ms": 5000, "topics": None})
    assert ongoing.error_code == E.NONE and ongoing.topics == []
    dirs = await call(K.DESCRIBE_LOG_DIRS, {"topics": None})
    (logdir,) = dirs.results
    assert {t.name for t in logdir.topics} == {TOPIC, "__consumer_offsets"}  # the group's commit made the latter
    altered = await call(K.ALTER_REPLICA_LOG_DIRS, {"dirs": [{"path": logdir.log_dir, "topics": [
        {"name": TOPIC, "partitions": [0]}]}]})
    assert altered.results[0].partitions[0].error_code == E.NONE
    # No delegation.token.secret.key: tokens are disabled (and asked over PLAINTEXT they are refused anyway).
    token = await call(K.CREATE_DELEGATION_TOKEN, {"owner_principal_type": None, "owner_principal_name": None,
                                                   "renewers": [], "max_lifetime_ms": -1})
    assert token.error_code in (E.DELEGATION_TOKEN_AUTH_DISABLED, E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    for key, body in ((K.RENEW_DELEGATION_TOKEN, {"hmac": b"h", "renew_period_ms": -1}),
                      (K.EXPIRE_DELEGATION_TOKEN, {"hmac": b"h", "expiry_time_period_ms": -1}),
                      (K.DESCRIBE_DELEGATION_TOKEN, {"owners": None})):
        assert (await call(key, body)).error_code != E.NONE
    quorum = await call(K.DESCRIBE_QUORUM, {"topics": [{"topic_name": "__cluster_metadata", "partitions": [
        {"partition_index": 0}]}]})
    assert quorum.error_code == E.NONE and quorum.topics[0].partitions[0].leader_id == 0
    features = await call(K.UPDATE_FEATURES, {"timeout_ms": 5000, "validate_only": True, "feature_updates": [
        {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": 1}]})
    assert features.error_code == E.NONE
    unregistered = await call(K.UNREGISTER_BROKER, {"broker_id": 7})
    assert unregistered.error_code == E.BROKER_ID_NOT_REGISTERED
    sub = await call(K.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": ZERO_UUID})
    assert sub.error_code == E.NONE and sub.client_instance_id != ZERO_UUID
    resources = await call(K.LIST_CONFIG_RESOURCES, {"resource_types": []})
    assert resources.error_code == E.NONE and TOPIC in {r.resource_name for r in resources.config_resources}


async def _capture(cap: Path) -> None:
    async with serve_broker(BrokerConfig(port=0, capture_dir=cap), captures=CAPTURE) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="k42-client") as conn:
            await _exchange(conn)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cap = tmp_path_factory.mktemp("k42") / "cap"
    trio.run(_capture, cap)
    return cap


def test_every_new_version_is_captured_and_decoded(capture: Path) -> None:
    records = list(read_capture([capture]))
    assert {(r.api_key, r.api_version) for r in records} >= set(NEW.items())
    dec = RecordDecoder("k42")
    names = [c for c, _ in REQUEST_COLUMNS]
    rows = [dict(zip(names, row)) for row in dec.iter_rows(records, "requests")]
    assert all(row["decode_error"] is None and row["has_response"] for row in rows), \
        [(row["api_name"], row["decode_error"]) for row in rows if row["decode_error"]]
    seen = {(row["api_name"], row["api_version"]) for row in rows}
    assert seen >= {(APIS[k].name, v) for k, v in NEW.items()}
    by_api = {row["api_name"]: row for row in rows}
    assert by_api["UnregisterBroker"]["error_name"] == "BROKER_ID_NOT_REGISTERED"
    assert by_api["OffsetDelete"]["group_id"] == GROUP


@pytest.mark.slow
def test_spark_reads_every_new_version(spark: Any, capture: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    from minikafka.analysis.tables import read_table

    rows = read_table(spark, str(capture), "requests").select("api_name", "api_version", "decode_error").collect()
    assert all(r.decode_error is None for r in rows)
    assert {(r.api_name, r.api_version) for r in rows} >= {(APIS[k].name, v) for k, v in NEW.items()}


def test_replay_answers_every_new_version_as_captured(capture: Path) -> None:
    with BrokerThread(BrokerConfig(port=0)) as target:
        report = run_replay([capture], ReplayOptions("127.0.0.1", target.port, speed=None))
    assert report.failed == 0, report.summary()
    for key in NEW:
        st = report.by_name(APIS[key].name)
        assert st.sent >= 1 and st.differing == 0, (APIS[key].name, st.to_dict())
