"""Real clients on Kafka 4.2's features and the cluster/transaction admin APIs that came with it:

* kafka-python 3's ``describe_features`` (ApiVersions v4 features) and ``update_features`` (UpdateFeatures v2,
  upgrade and safe downgrade, ``validate_only``, a refused update);
* kafka-python's ``describe_cluster`` (DescribeCluster v2 with ``include_fenced_brokers``) on a 3-broker
  cluster with a broker stopped;
* kafka-python's ``list_transactions(transactional_id_pattern=...)`` (ListTransactions v2, KIP-1152);
* confluent-kafka (librdkafka 2.16), a transaction-version-1 client (EndTxn v1, AddPartitionsToTxn v0), on a
  broker that finalizes transaction.version 2: its transactions keep their epoch, as Kafka keeps them.
  (No client here sends EndTxn v5; tests/broker/test_transaction_version_2.py drives it over the wire.)
"""

from __future__ import annotations

import uuid
import warnings

import pytest
from confluent_kafka import Producer

from clients_common import report_client_versions  # noqa: F401  (session fixture, used via pytestmark)
from minikafka.broker.request import ObserverBase, Request
from minikafka.protocol.api import ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import BrokerThread, ClusterThread

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.errors as kerrors
    from kafka import KafkaAdminClient, KafkaProducer

pytestmark = [pytest.mark.clients, pytest.mark.usefixtures("report_client_versions")]


def kp_admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kp-features", request_timeout_ms=10000)


class Versions(ObserverBase):
    """The versions each api key was asked at by clients (not by the brokers themselves)."""

    def __init__(self) -> None:
        self.seen: dict[int, set[int]] = {}

    def on_request(self, request: Request) -> None:
        if not (request.context.client_id or "").startswith("broker-"):
            self.seen.setdefault(request.context.api_key, set()).add(request.context.api_version)


def test_kafka_python_describes_and_updates_features(broker_thread: BrokerThread) -> None:
    admin = kp_admin(broker_thread.bootstrap)
    try:
        described = admin.describe_features()
        assert {name: f["supported"] for name, f in described.items()} == {
            "metadata.version": (7, 29), "kraft.version": (0, 1), "transaction.version": (0, 2),
            "group.version": (0, 1), "eligible.leader.replicas.version": (0, 1), "share.version": (0, 1)}
        assert {name: f["finalized"] for name, f in described.items()} == {
            "metadata.version": (29, 29), "kraft.version": (1, 1), "transaction.version": (2, 2),
            "group.version": (1, 1), "eligible.leader.replicas.version": (1, 1), "share.version": (1, 1)}
        epoch = described["transaction.version"]["finalized_epoch"]
        assert epoch is not None and epoch >= 0

        # validate_only changes nothing; then a safe downgrade does.
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}, validate_only=True) == {
            "transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
        assert admin.update_features({"transaction.version": ("SAFE_DOWNGRADE", 1)}) == {"transaction.version": "OK"}
        after = admin.describe_features()["transaction.version"]
        assert after["finalized"] == (1, 1) and after["finalized_epoch"] > epoch
        # An upgrade past what the broker supports is refused as a whole.
        with pytest.raises(kerrors.InvalidUpdateVersionError):
            admin.update_features({"transaction.version": 3})
        assert admin.update_features({"transaction.version": 2}) == {"transaction.version": "OK"}
        assert admin.describe_features()["transaction.version"]["finalized"] == (2, 2)
    finally:
        admin.close()


def test_kafka_python_describe_cluster_shows_a_stopped_broker_fenced() -> None:
    with ClusterThread(3) as cluster:
        versions = Versions()
        for b in cluster.running_brokers:
            cluster.call(lambda b=b: cluster.cluster.broker(b).observe(versions))
        cluster.stop_broker(1)
        admin = kp_admin(cluster.bootstrap)
        try:
            described = admin.describe_cluster()
        finally:
            admin.close()
        brokers = {b["broker_id"]: b["is_fenced"] for b in described["brokers"]}
        assert brokers == {0: False, 1: True, 2: False}
        assert 2 in versions.seen[ApiKey.DESCRIBE_CLUSTER]


def test_kafka_python_lists_transactions_by_transactional_id_pattern(broker_thread: BrokerThread) -> None:
    prefix = f"orders-{uuid.uuid4().hex[:6]}"
    producers = [KafkaProducer(bootstrap_servers=broker_thread.bootstrap, transactional_id=tid)
                 for tid in (f"{prefix}-1", f"{prefix}-22", f"payments-{prefix}")]
    try:
        for p in producers:
            p.init_transactions()
        admin = kp_admin(broker_thread.bootstrap)
        try:
            listed = admin.list_transactions(transactional_id_pattern=f"{prefix}-\\d+")
            assert sorted(t.transactional_id for ts in listed.values() for t in ts) == [f"{prefix}-1", f"{prefix}-22"]
            everything = admin.list_transactions()
            assert len([t for ts in everything.values() for t in ts if prefix in t.transactional_id]) == 3
            with pytest.raises(kerrors.BrokerResponseError) as refused:  # kafka-python has no class for it
                admin.list_transactions(transactional_id_pattern="orders-(")
            assert refused.value.errno == ErrorCode.INVALID_REGULAR_EXPRESSION
        finally:
            admin.close()
    finally:
        for p in producers:
            p.close()


def test_librdkafka_transactions_keep_their_epoch_on_a_transaction_version_2_broker(
        broker_thread: BrokerThread) -> None:
    assert broker_thread.broker is not None
    versions = broker_thread.call(lambda: broker_thread.broker.observe(Versions()))  # type: ignore[union-attr]
    broker_thread.create_topic("ck-tv", 1)
    tid = f"ck-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": broker_thread.bootstrap, "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(10)
    coordinator = broker_thread.broker.txn_coordinator
    epoch = coordinator.describe(tid).producer_epoch
    for i in range(3):
        producer.begin_transaction()
        producer.produce("ck-tv", b"v%d" % i)
        if i == 1:
            producer.abort_transaction(10)
        else:
            producer.commit_transaction(10)
    producer.flush(10)
    meta = coordinator.describe(tid)
    assert (meta.producer_epoch, meta.client_version) == (epoch, 0)  # no bump: a transaction-version-1 client
    assert max(versions.seen[ApiKey.END_TXN]) < 5 and max(versions.seen[ApiKey.ADD_PARTITIONS_TO_TXN]) <= 3
    part = broker_thread.call(lambda: broker_thread.broker.replica_manager.get("ck-tv", 0))  # type: ignore[union-attr]
    assert part.producers.producers[meta.producer_id].epoch == epoch
