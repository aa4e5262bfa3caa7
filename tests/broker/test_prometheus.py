"""``/metrics``: the brokers' Kafka metrics in the Prometheus text format, under the JMX exporter's names.

Each test renders the exposition (:func:`minikafka.broker.prometheus.render`), parses it with
``prometheus_client``'s own parser and checks that the counters moved by exactly what was produced
and fetched.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from minikafka.broker.broker import Broker, RequestStats, serve_broker
from minikafka.broker.broker_metrics import RESERVOIR_SIZE, TOPIC_METRICS, BrokerMetricsObserver, Histogram
from minikafka.broker.cluster import serve_cluster
from minikafka.broker.config import BrokerConfig
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.prometheus import CONTENT_TYPE, Series, render, series_of
from minikafka.broker.request import Request, RequestContext, Response
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import count_records

from helpers import batch, create, fetch, produce, wait_until

TOPIC_METRIC = "kafka_server_brokertopicmetrics_{}_total"


class Scrape:
    """One parsed exposition; :meth:`value` finds a sample by name and labels (absent = empty)."""

    def __init__(self, text: str) -> None:
        self.families = {f.name: f for f in text_string_to_metric_families(text)}
        self.samples = [s for f in self.families.values() for s in f.samples]

    def find(self, name: str, **labels: str) -> list[float]:
        want = {k: v for k, v in labels.items() if v}
        return [s.value for s in self.samples
                if s.name == name and {k: v for k, v in s.labels.items() if v} == want]

    def value(self, name: str, **labels: str) -> float:
        found = self.find(name, **labels)
        assert len(found) == 1, (name, labels, found)
        return found[0]

    def topic(self, meter: str, topic: str = "", **labels: str) -> float:
        return self.value(TOPIC_METRIC.format(meter), topic=topic, **labels)


def scrape(brokers: Callable[[], dict[int, Broker]]) -> Scrape:
    return Scrape(render(brokers).decode())


def one(broker: Broker) -> Scrape:
    return scrape(lambda: {broker.node_id: broker})


async def settle(conn: KafkaConnection) -> None:
    """One more request on ``conn``: once answered, the previous responses were sent and timed."""
    await conn.request(K.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})


# -- naming, without a broker -------------------------------------------------------------

@pytest.mark.parametrize("key, expected", [
    ("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec",
     Series("kafka_server_brokertopicmetrics_bytesin", "counter", "", ())),
    ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=t",
     Series("kafka_server_brokertopicmetrics_messagesin", "counter", "", (("topic", "t"),))),
    ("kafka.network:type=RequestMetrics,name=ErrorsPerSec,request=Fetch,error=NONE",
     Series("kafka_network_requestmetrics_errors", "counter", "", (("request", "Fetch"), ("error", "NONE")))),
    ("kafka.network:type=RequestMetrics,name=RequestsTotal,request=Produce",
     Series("kafka_network_requestmetrics_requests", "counter", "", (("request", "Produce"),))),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:99thPercentile",
     Series("kafka_network_requestmetrics_totaltimems", "summary", "", (("request", "Produce"),), "0.99")),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:999thPercentile",
     Series("kafka_network_requestmetrics_totaltimems", "summary", "", (("request", "Produce"),), "0.999")),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:Count",
     Series("kafka_network_requestmetrics_totaltimems", "summary", "", (("request", "Produce"),), "count")),
    ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce:Max", None),
    ("kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions",
     Series("kafka_server_replicamanager_underreplicatedpartitions", "gauge", "", ())),
    ("kafka.server:type=ReplicaManager,name=IsrShrinksTotal",
     Series("kafka_server_replicamanager_isrshrinks", "counter", "", ())),
    ("kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica",
     Series("kafka_server_replicafetchermanager_maxlag", "gauge", "", (("clientId", "Replica"),))),
    ("kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions",
     Series("kafka_server_fetchsessioncache_numincrementalfetchsessions", "gauge", "", ())),
    ("kafka.server:type=socket-server-metrics,name=connection-count,listener=PLAINTEXT",
     Series("kafka_server_socket_server_metrics_connection_count", "gauge", "", (("listener", "PLAINTEXT"),))),
    ("Produce:client-id=a,b,user=/byte-rate",
     Series("kafka_server_quota_byte_rate", "gauge", "",
            (("resource", "Produce"), ("user", ""), ("clientId", "a,b")))),
    ("Request:client-id=,user=alice/throttle-time",
     Series("kafka_server_quota_throttle_time", "gauge", "",
            (("resource", "Request"), ("user", "alice"), ("clientId", "")))),
    ("Produce:/queue-size", Series("kafka_server_produce_queue_size", "gauge", "", ())),
    ("LeaderReplication:/recorded-bytes-total",
     Series("kafka_server_leaderreplication_recorded_bytes", "counter", "", ())),
])
def test_names_follow_the_jmx_exporter_kafka_rules(key: str, expected: Series | None) -> None:
    got = series_of(key, {key: 0.0})
    if expected is None:
        assert got is None
    else:
        assert got is not None and (got.family, got.kind, got.labels, got.part) == (
            expected.family, expected.kind, expected.labels, expected.part)


def test_a_rate_with_a_total_sibling_is_left_to_the_total() -> None:
    rate = "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec"
    total = "kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsTotal"
    assert series_of(rate, {rate: 0.5, total: 3}) is None
    s = series_of(total, {rate: 0.5, total: 3})
    assert s is not None and s.family == "kafka_server_fetchsessioncache_incrementalfetchsessionevictions"


def test_histogram_percentiles_as_yammer_computes_them() -> None:
    h = Histogram()
    for v in range(1, 101):
        h.update(float(v))
    attrs = h.attributes()
    assert attrs["Count"] == 100 and attrs["Mean"] == 50.5 and attrs["Max"] == 100
    assert attrs["50thPercentile"] == 50.5 and attrs["99thPercentile"] == pytest.approx(99.99)
    assert attrs["999thPercentile"] == 100
    for _ in range(2 * RESERVOIR_SIZE):  # the reservoir slides: old values leave the percentiles
        h.update(1000.0)
    attrs = h.attributes()
    assert attrs["Count"] == 100 + 2 * RESERVOIR_SIZE and attrs["50thPercentile"] == 1000


def test_a_response_body_of_another_shape_is_not_counted_and_does_not_fail() -> None:
    observer = BrokerMetricsObserver(ClusterMetadata([0]))
    ctx = RequestContext(api_key=K.FETCH, api_version=12, correlation_id=1, client_id="c", connection_id="x")
    observer.on_response(Response(Request(ctx, {"replica_id": -1}, bytearray()), [b""], body={"odd": 1}))
    assert observer.metrics()[TOPIC_METRICS + "TotalFetchRequestsPerSec"] == 0


def test_count_records_reads_only_batch_headers() -> None:
    plain, gzipped = batch([b"a", b"b", b"c"]), batch([b"x" * 100] * 7, compression=1)
    assert count_records(plain + gzipped) == 10
    assert count_records(memoryview(plain + gzipped[:-1])) == 3  # a truncated tail counts nothing


# -- one broker ---------------------------------------------------------------------------

async def test_counters_move_with_produced_and_fetched_bytes(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "a")
    await create(conn, "b", 2)
    a1, a2 = batch([b"x" * 100] * 3), batch([b"y" * 50] * 2)
    b0, b1 = batch([b"z"] * 4), batch([b"q" * 1000] * 5, compression=1)  # gzip: counted from the header
    for topic, records, partition in [("a", a1, 0), ("a", a2, 0), ("b", b0, 0), ("b", b1, 1)]:
        assert (await produce(conn, topic, records, partition=partition)).error_code == 0
    await conn.send(K.PRODUCE, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": [
        {"name": "b", "partition_data": [{"index": 0, "records": b0}]}]})  # acks=0: no response
    got_a = (await fetch(conn, "a")).records
    topic_id = broker.metadata.get_topic("b").topic_id
    got_b = (await fetch(conn, "b", version=13, topic_id=topic_id)).records  # v13: by topic id
    await settle(conn)

    m = one(broker)
    assert m.topic("bytesin", "a") == len(a1) + len(a2)
    assert m.topic("bytesin", "b") == 2 * len(b0) + len(b1)
    assert m.topic("bytesin") == len(a1) + len(a2) + 2 * len(b0) + len(b1)
    assert (m.topic("messagesin", "a"), m.topic("messagesin", "b"), m.topic("messagesin")) == (5, 13, 18)
    assert (m.topic("totalproducerequests", "a"), m.topic("totalproducerequests", "b")) == (2, 3)
    assert len(got_a) == len(a1) + len(a2) and len(got_b) == 2 * len(b0)
    assert (m.topic("bytesout", "a"), m.topic("bytesout", "b")) == (len(got_a), len(got_b))
    assert m.topic("bytesout") == len(got_a) + len(got_b)
    assert m.topic("totalfetchrequests") == 2
    assert m.topic("failedproducerequests") == m.topic("failedfetchrequests") == 0
    assert m.topic("replicationbytesout") == 0

    requests = "kafka_network_requestmetrics_requests_total"
    assert m.value(requests, request="Produce") == 5 and m.value(requests, request="Fetch") == 2
    assert m.value("kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == 4
    assert m.value("kafka_network_requestmetrics_errors_total", request="CreateTopics", error="NONE") == 2
    # TotalTimeMs: a summary per request name (quantiles as the exporter's, plus _count and _sum).
    assert m.families["kafka_network_requestmetrics_totaltimems"].type == "summary"
    assert m.value("kafka_network_requestmetrics_totaltimems_count", request="Produce") == 5
    assert m.value("kafka_network_requestmetrics_totaltimems_count", request="Fetch") == 2
    assert m.value("kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") == 2
    assert m.value("kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    quantiles = {s.labels["quantile"]: s.value for s in m.samples
                 if s.name == "kafka_network_requestmetrics_totaltimems" and s.labels["request"] == "Produce"}
    assert set(quantiles) == {"0.50", "0.75", "0.95", "0.98", "0.99", "0.999"}
    assert 0 < quantiles["0.50"] <= quantiles["0.99"] <= quantiles["0.999"]


async def test_a_broker_without_request_metrics_counts_none_and_answers_alike() -> None:
    """``request_metrics=False`` (``minikafka serve`` without an HTTP port: nobody can read them): the per-request
    metrics are not counted, the other gauges are still there, and the requests are answered as with them."""
    async with serve_broker(BrokerConfig(port=0), request_metrics=False) as broker:
        assert not {type(o) for o in broker.apis.observers} & {BrokerMetricsObserver, RequestStats}
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="quiet") as conn:
            await create(conn, "q")
            records = batch([b"x" * 100] * 3)
            assert (await produce(conn, "q", records)).error_code == 0
            assert len((await fetch(conn, "q")).records) == len(records)
            await settle(conn)
            assert broker.request_stats == {} and broker.request_count == 0
            m = one(broker)
            assert not m.find("kafka_network_requestmetrics_requests_total", request="Produce")
            assert not m.find(TOPIC_METRIC.format("bytesin"), topic="q")
            assert m.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") == 1


async def test_failures_rejections_and_unknown_partitions(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "f")
    good = batch([b"ok"])
    assert (await produce(conn, "f", good)).error_code == 0
    corrupt = bytearray(batch([b"bad"]))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    assert (await produce(conn, "f", bytes(corrupt))).error_code == ErrorCode.CORRUPT_MESSAGE
    assert (await produce(conn, "f", good, partition=7)).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    first = batch([b"seq"], producer_id=4242, producer_epoch=0, base_sequence=0)
    assert (await produce(conn, "f", first)).error_code == 0
    out_of_order = batch([b"seq"], producer_id=4242, producer_epoch=0, base_sequence=5)
    code = (await produce(conn, "f", out_of_order)).error_code
    assert code not in (ErrorCode.NONE, ErrorCode.CORRUPT_MESSAGE)
    assert (await fetch(conn, "f", offset=99)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE

    m = one(broker)
    assert m.topic("bytesin", "f") == len(good) + len(first) and m.topic("messagesin", "f") == 2
    assert m.topic("bytesrejected", "f") == len(corrupt)  # Kafka's BytesRejectedPerSec
    # As in Kafka: an unknown partition is no produce request, a corrupt batch no *failed* one,
    # an out-of-order sequence is; an offset out of range is no failed fetch.
    assert m.topic("totalproducerequests", "f") == 4 and m.topic("failedproducerequests", "f") == 1
    assert m.topic("totalfetchrequests", "f") == 1 and m.topic("failedfetchrequests", "f") == 0
    errors = "kafka_network_requestmetrics_errors_total"
    assert m.value(errors, request="Produce", error="CORRUPT_MESSAGE") == 1
    assert m.value(errors, request="Produce", error="UNKNOWN_TOPIC_OR_PARTITION") == 1
    assert m.value(errors, request="Produce", error=ErrorCode(code).name) == 1
    assert m.value(errors, request="Fetch", error="OFFSET_OUT_OF_RANGE") == 1


async def test_a_deleted_topic_leaves_its_bytes_in_the_totals(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "gone")
    await create(conn, "kept")
    records = batch([b"v"] * 3)
    await produce(conn, "gone", records)
    await produce(conn, "kept", records)
    r = await conn.request(K.DELETE_TOPICS, 6, {"topics": [{"name": "gone"}], "timeout_ms": 1000})
    assert r.responses[0].error_code == 0
    m = one(broker)
    assert m.find(TOPIC_METRIC.format("bytesin"), topic="gone") == []
    assert m.topic("bytesin", "kept") == len(records) and m.topic("bytesin") == 2 * len(records)
    assert m.topic("messagesin") == 6


async def test_session_cache_connection_memory_and_purgatory_gauges(broker: Broker, conn: KafkaConnection) -> None:
    await create(conn, "s", 2)
    parts = [{"partition": p, "fetch_offset": 0, "partition_max_bytes": 1 << 20, "log_start_offset": -1}
             for p in (0, 1)]
    r = await conn.request(K.FETCH, 12, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "session_id": 0,
        "session_epoch": 0, "topics": [{"topic": "s", "partitions": parts}], "forgotten_topics_data": []})
    assert r.session_id > 0
    await wait_until(lambda: broker.pool.used == 0, what="the request's memory to be released")
    m = one(broker)
    assert m.value("kafka_server_fetchsessioncache_numincrementalfetchsessions") == 1
    assert m.value("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") == 2
    assert m.value("kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total") == 0
    assert m.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") == 1
    assert m.value("kafka_network_socketserver_memorypoolused") == 0  # no request in flight
    assert m.value("kafka_network_socketserver_memorypoolavailable") == broker.config.queued_max_request_bytes

    async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="poller") as poller:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch, poller, "s", 0, 0, 12, 10_000)  # a long poll at the log end
            await wait_until(lambda: broker.delayed_fetch.watched() == 1, what="the fetch to wait")
            m = one(broker)
            assert m.value("kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Fetch") == 1
            assert m.value("kafka_server_delayedoperationpurgatory_purgatorysize", delayedOperation="Produce") == 0
            assert m.value("kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") == 2
            assert m.value("kafka_network_socketserver_memorypoolused") > 0  # the waiting fetch's frame
            await produce(conn, "s", batch([b"wake"]))  # completes the long poll


async def test_quota_byte_rate_and_throttle_time_per_client() -> None:
    cfg = BrokerConfig(port=0, group_initial_rebalance_delay_ms=0, quota_window_num=3, quota_window_size_seconds=1,
                       client_quotas=["client-id=tiny:producer_byte_rate=900"])
    async with serve_broker(cfg) as broker:
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="setup") as setup:
            await create(setup, "q")
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="tiny") as conn:
            resp = await conn.request(K.PRODUCE, 9, {"acks": 1, "timeout_ms": 1000, "topic_data": [
                {"name": "q", "partition_data": [{"index": 0, "records": batch([b"v" * 3000])}]}]})
            assert resp.throttle_time_ms > 0
            m = one(broker)
            rate = broker.metrics()["Produce:client-id=tiny,user=/byte-rate"]
            entity = {"resource": "Produce", "clientId": "tiny"}
            assert m.value("kafka_server_quota_throttle_time", **entity) == resp.throttle_time_ms
            assert m.value("kafka_server_quota_byte_rate", **entity) == pytest.approx(rate, rel=0.05)
            assert rate > 900
            assert m.families["kafka_server_quota_byte_rate"].type == "gauge"


# -- a cluster ----------------------------------------------------------------------------

async def test_cluster_brokers_are_labelled_and_report_replication() -> None:
    fast = dict(replica_fetch_wait_max_ms=50, replica_fetch_backoff_ms=50, group_initial_rebalance_delay_ms=0,
                replica_lag_time_max_ms=300)
    async with serve_cluster(3, **fast) as cluster:
        cluster.broker(0).create_topic("r", 1, 3)
        assert cluster.leader("r", 0) == 0
        records = batch([b"r" * 200] * 4)
        async with await KafkaConnection.connect("127.0.0.1", cluster.configs[0].port, client_id="c") as conn:
            assert (await produce(conn, "r", records, acks=-1)).error_code == 0
        followers = [cluster.broker(1), cluster.broker(2)]
        await wait_until(lambda: all(b.fetcher_manager.replication_bytes_in == len(records) for b in followers),
                         what="replication")

        def brokers() -> dict[int, Broker]:
            return dict(cluster.brokers)

        m = scrape(brokers)
        assert all(s.labels.get("broker") in ("0", "1", "2") for s in m.samples)
        assert m.topic("bytesin", "r", broker="0") == len(records)
        assert m.topic("messagesin", "r", broker="0") == 4
        assert m.topic("replicationbytesin", broker="1") == m.topic("replicationbytesin", broker="2") == len(records)
        assert m.topic("replicationbytesout", broker="0") == 2 * len(records)
        assert m.topic("bytesout", broker="0") == 0  # follower fetches are replication traffic
        assert m.value("kafka_network_requestmetrics_totaltimems_count", request="FetchFollower", broker="0") > 0
        assert m.value("kafka_server_replicamanager_underreplicatedpartitions", broker="0") == 0
        assert m.value("kafka_server_replicamanager_leadercount", broker="0") == 1
        assert m.value("kafka_server_replicafetchermanager_maxlag", clientId="Replica", broker="1") == 0

        await cluster.stop_broker(2)
        under = "kafka_server_replicamanager_underreplicatedpartitions"
        await wait_until(lambda: scrape(brokers).value(under, broker="0") == 1, what="under-replication")
        m = scrape(brokers)
        assert {s.labels["broker"] for s in m.samples} == {"0", "1"}  # the stopped broker is gone


# -- a real client ------------------------------------------------------------------------

@pytest.mark.clients
def test_confluent_producer_bytes_equal_bytes_in(broker_thread) -> None:
    from confluent_kafka import Producer

    b = broker_thread
    b.call(lambda: b.broker.create_topic("ck", 1, 1))
    producer = Producer({"bootstrap.servers": b.bootstrap, "compression.type": "lz4", "linger.ms": 5,
                         "enable.idempotence": True})
    delivered: list[bool] = []
    for i in range(500):
        producer.produce("ck", value=b"m%05d" % i * 20, key=b"k%d" % i,
                         on_delivery=lambda err, msg: delivered.append(err is None))
        producer.poll(0)
    assert producer.flush(30) == 0 and delivered == [True] * 500

    def read() -> tuple[bytes, int, int]:
        lg = b.broker.replica_manager.get("ck", 0).log
        return render(lambda: {0: b.broker}), lg.size_in_bytes, lg.log_end_offset

    text, stored_bytes, messages = b.call(read)
    m = Scrape(text.decode())
    assert messages == 500
    assert m.topic("bytesin", "ck") == stored_bytes == m.topic("bytesin")
    assert m.topic("messagesin", "ck") == 500
    assert m.value("kafka_network_requestmetrics_requests_total", request="Produce") >= 1
    assert CONTENT_TYPE.startswith("text/plain")
