"""KIP-714 client metrics over the wire: CLIENT_METRICS subscriptions (Incremental/AlterConfigs,
DescribeConfigs, ListConfigResources), GetTelemetrySubscriptions matching and PushTelemetry with Kafka's
errors, OTLP payloads (every codec) decoded onto the Prometheus ``/metrics`` rendering.  Brokers run on the
test's loop with a manual clock, so push intervals pass without sleeping."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.common.v1 import common_pb2 as C
from opentelemetry.proto.metrics.v1 import metrics_pb2 as M
from prometheus_client.parser import text_string_to_metric_families

from minikafka.broker.broker import Broker, serve_broker
from minikafka.broker.client_metrics.configs import ClientMetricsConfigStore
from minikafka.broker.client_metrics.manager import compute_subscription_id, java_uuid_hash
from minikafka.broker.client_metrics.receiver import kafka_uuid_str
from minikafka.broker.config import BrokerConfig
from minikafka.broker.handlers.config_resources import ListConfigResourcesHandler
from minikafka.broker.handlers.configs import DescribeConfigsHandler
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.prometheus import render
from minikafka.broker.request import RequestContext
from minikafka.broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType
from minikafka.broker.security.authorizer import StandardAuthorizer
from minikafka.client.connection import KafkaConnection
from minikafka.common import ManualClock
from minikafka.protocol.api import ApiKey as K
from minikafka.protocol.compression import compress
from minikafka.protocol.errors import ErrorCode as E
from minikafka.protocol.types import ZERO_UUID

CLIENT_METRICS = 16
SET, DELETE, APPEND = 0, 1, 2
ZSTD, LZ4, GZIP, SNAPPY, NONE = 4, 3, 1, 2, 0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[Broker]:
    async with serve_broker(BrokerConfig(port=0, telemetry_max_bytes=4096), clock=clock) as b:
        yield b


async def connect(broker: Broker, client_id: str, software: bool = True) -> KafkaConnection:
    conn = await KafkaConnection.connect("127.0.0.1", broker.port, client_id=client_id)
    if software:
        await conn.negotiate()  # ApiVersions v3: client_software_name "minikafka", version "0.1"
    return conn


async def alter(conn: KafkaConnection, name: str, *ops: tuple[str, int, str | None], resource_type: int = CLIENT_METRICS
                ) -> tuple[int, str | None]:
    resp = await conn.request(K.INCREMENTAL_ALTER_CONFIGS, 1, {"resources": [{
        "resource_type": resource_type, "resource_name": name,
        "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in ops]}], "validate_only": False})
    r = resp.responses[0]
    return r.error_code, r.error_message


async def describe(conn: KafkaConnection, name: str) -> tuple[int, dict[str, tuple[str, int]]]:
    resp = await conn.request(K.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": CLIENT_METRICS, "resource_name": name, "configuration_keys": None}]})
    r = resp.results[0]
    return r.error_code, {c.name: (c.value, c.config_source) for c in r.configs}


async def list_resources(conn: KafkaConnection, version: int, types: list[int] | None = None
                         ) -> tuple[int, list[tuple[int, str]]]:
    resp = await conn.request(K.LIST_CONFIG_RESOURCES, version, {"resource_types": types or []})
    return resp.error_code, [(r.resource_type, r.resource_name) for r in resp.config_resources]


async def subscribe(conn: KafkaConnection, instance_id: uuid.UUID = ZERO_UUID) -> Any:
    return await conn.request(K.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": instance_id})


async def push(conn: KafkaConnection, sub: Any, payload: bytes, codec: int = NONE, terminating: bool = False,
               subscription_id: int | None = None) -> int:
    resp = await conn.request(K.PUSH_TELEMETRY, 0, {
        "client_instance_id": sub.client_instance_id,
        "subscription_id": sub.subscription_id if subscription_id is None else subscription_id,
        "terminating": terminating, "compression_type": codec,
        "metrics": compress(codec, payload) if codec in (GZIP, SNAPPY, LZ4, ZSTD) else payload})
    return resp.error_code


def otlp(latency: float, connections: int, *, temporality: int = 1, histogram: tuple[int, float] = (2, 5.0)) -> bytes:
    """A MetricsData as a Kafka client pushes it: a gauge per node, a monotonic delta sum, a histogram."""
    data = M.MetricsData()
    rm = data.resource_metrics.add()
    rm.resource.attributes.add(key="client_rack", value=C.AnyValue(string_value="r1"))
    sm = rm.scope_metrics.add()
    gauge = sm.metrics.add(name="org.apache.kafka.producer.node.request.latency.avg",
                           description="The average request latency in ms for a node.")
    for node in ("0", "1"):
        p = gauge.gauge.data_points.add(as_double=latency, time_unix_nano=1)
        p.attributes.add(key="node.id", value=C.AnyValue(string_value=node))
    total = sm.metrics.add(name="org.apache.kafka.producer.connection.creation.total")
    total.sum.is_monotonic = True
    total.sum.aggregation_temporality = temporality
    total.sum.data_points.add(as_int=connections)
    hist = sm.metrics.add(name="org.apache.kafka.producer.record.queue.time")
    hist.histogram.aggregation_temporality = temporality
    hist.histogram.data_points.add(count=histogram[0], sum=histogram[1])
    return data.SerializeToString()


def scrape(broker: Broker) -> dict[str, list[Any]]:
    """``/metrics`` as rendered for this broker: family name -> samples."""
    text = render(lambda: {broker.node_id: broker}).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def by_labels(samples: list[Any], **labels: str) -> list[Any]:
    return [s for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]


# -- subscriptions as config resources ------------------------------------------------------------------
async def test_subscriptions_are_client_metrics_config_resources(broker: Broker) -> None:
    async with await connect(broker, "admin") as conn:
        assert await alter(conn, "producers", ("metrics", SET, "org.apache.kafka.producer."),
                           ("interval.ms", SET, "1000"), ("match", SET, "client_id=prod.*")) == (E.NONE, None)
        assert await alter(conn, "producers", ("metrics", APPEND, "org.apache.kafka.consumer.")) == (E.NONE, None)
        code, configs = await describe(conn, "producers")
        assert code == E.NONE
        assert configs == {"metrics": ("org.apache.kafka.producer.,org.apache.kafka.consumer.", 7),
                           "interval.ms": ("1000", 7), "match": ("client_id=prod.*", 7)}
        assert await describe(conn, "nothing") == (E.NONE, {})  # as Kafka: no error, no configs
        assert (await describe(conn, ""))[0] == E.INVALID_REQUEST
        # AlterConfigs replaces the whole set.
        resp = await conn.request(K.ALTER_CONFIGS, 2, {"resources": [{
            "resource_type": CLIENT_METRICS, "resource_name": "all",
            "configs": [{"name": "metrics", "value": "*"}]}], "validate_only": False})
        assert resp.responses[0].error_code == E.NONE
        assert await list_resources(conn, 0) == (E.NONE, [(CLIENT_METRICS, "all"), (CLIENT_METRICS, "producers")])
        # Deleting every key removes the subscription.
        assert await alter(conn, "all", ("metrics", DELETE, None)) == (E.NONE, None)
        assert await list_resources(conn, 1, [CLIENT_METRICS]) == (E.NONE, [(CLIENT_METRICS, "producers")])


@pytest.mark.parametrize("ops, code", [
    ([("unknown.key", SET, "1")], E.INVALID_REQUEST),
    ([("interval.ms", SET, "99")], E.INVALID_REQUEST),
    ([("interval.ms", SET, "3600001")], E.INVALID_REQUEST),
    ([("interval.ms", SET, "soon")], E.INVALID_CONFIG),
    ([("match", SET, "client_colour=red")], E.INVALID_CONFIG),
    ([("match", SET, "client_id")], E.INVALID_CONFIG),
    ([("match", SET, "client_id=[")], E.INVALID_CONFIG),
    ([("interval.ms", APPEND, "5")], E.INVALID_CONFIG),
])
async def test_invalid_subscriptions_are_refused_as_kafka(broker: Broker, ops: list, code: E) -> None:
    async with await connect(broker, "admin") as conn:
        assert (await alter(conn, "s", *ops))[0] == code
        assert (await alter(conn, "", ("metrics", SET, "*")))[0] == E.INVALID_REQUEST
        assert await list_resources(conn, 0) == (E.NONE, [])


async def test_subscriptions_survive_a_restart(tmp_path: Path) -> None:
    async with serve_broker(BrokerConfig(port=0, data_dir=tmp_path)) as b:
        async with await connect(b, "admin") as conn:
            assert await alter(conn, "s", ("metrics", SET, "org."), ("interval.ms", SET, "500")) == (E.NONE, None)
    metadata = ClusterMetadata([0], tmp_path)  # ConfigRecords of resource type CLIENT_METRICS in the metadata log
    store = ClientMetricsConfigStore(tmp_path, metadata)
    assert store.names() == ["s"] and store.configs("s") == {"metrics": "org.", "interval.ms": "500"}
    metadata.close()
    assert not (tmp_path / "client-metrics-configs.json").exists()
    async with serve_broker(BrokerConfig(port=0, data_dir=tmp_path)) as b:
        async with await connect(b, "admin") as conn:
            assert (await describe(conn, "s"))[1] == {"metrics": ("org.", 7), "interval.ms": ("500", 7)}
            assert (await subscribe(conn)).push_interval_ms == 500


# -- GetTelemetrySubscriptions --------------------------------------------------------------------------
async def test_subscriptions_match_clients(broker: Broker, clock: ManualClock) -> None:
    async with await connect(broker, "admin") as admin:
        assert (await alter(admin, "producers", ("metrics", SET, "org.apache.kafka.producer."),
                            ("interval.ms", SET, "1000"), ("match", SET, "client_id=prod.*")))[0] == E.NONE
        assert (await alter(admin, "minikafka", ("metrics", SET, "org.apache.kafka.consumer.,org.apache.kafka.x"),
                            ("interval.ms", SET, "2000"),
                            ("match", SET, "client_software_name=minikafka,client_software_version=0\\..*")))[0] == 0
        assert (await alter(admin, "elsewhere", ("metrics", SET, "*"), ("match", SET,
                                                                          "client_source_address=10\\..*")))[0] == 0
    async with await connect(broker, "producer-1") as conn:
        sub = await subscribe(conn)
        assert sub.error_code == E.NONE and sub.client_instance_id != ZERO_UUID
        assert sorted(sub.requested_metrics) == ["org.apache.kafka.consumer.", "org.apache.kafka.producer.",
                                                 "org.apache.kafka.x"]
        assert sub.push_interval_ms == 1000  # the lowest interval of the matching subscriptions
        assert list(sub.accepted_compression_types) == [ZSTD, LZ4, GZIP, SNAPPY]
        assert sub.telemetry_max_bytes == 4096 and sub.delta_temporality is True
        assert sub.subscription_id == compute_subscription_id(list(sub.requested_metrics), 1000, sub.client_instance_id)
        # Asking again before the push interval is throttled; once it passed the same instance answers.
        assert (await subscribe(conn, sub.client_instance_id)).error_code == E.THROTTLING_QUOTA_EXCEEDED
        clock.sleep(1000)
        again = await subscribe(conn, sub.client_instance_id)
        assert (again.error_code, again.client_instance_id, again.subscription_id) == (
            E.NONE, sub.client_instance_id, sub.subscription_id)
    # No software name (no ApiVersions v3) and another client id: no subscription matches.
    async with await connect(broker, "other", software=False) as conn:
        sub = await subscribe(conn)
        assert (sub.error_code, list(sub.requested_metrics), sub.push_interval_ms) == (E.NONE, [], 300000)
    # "*" asks for everything, alone.
    async with await connect(broker, "admin") as admin:
        assert (await alter(admin, "all", ("metrics", SET, "*,org.apache.kafka.producer.")))[0] == E.NONE
    async with await connect(broker, "producer-2") as conn:
        assert list((await subscribe(conn)).requested_metrics) == ["*"]


async def test_subscription_change_is_seen_at_once(broker: Broker, clock: ManualClock) -> None:
    async with await connect(broker, "app") as conn:
        first = await subscribe(conn)
        assert list(first.requested_metrics) == []
        assert (await alter(conn, "s", ("metrics", SET, "org.apache.kafka."), ("interval.ms", SET, "100")))[0] == 0
        # Not throttled: the instance is re-evaluated against the changed subscriptions.
        second = await subscribe(conn, first.client_instance_id)
        assert second.error_code == E.NONE and list(second.requested_metrics) == ["org.apache.kafka."]
        assert second.subscription_id != first.subscription_id and second.push_interval_ms == 100
        # A push with the stale subscription id.
        assert await push(conn, first, otlp(1.0, 1)) == E.UNKNOWN_SUBSCRIPTION_ID
        # After UNKNOWN_SUBSCRIPTION_ID the client may ask again at once (within the push interval), and push.
        clock.sleep(1)
        third = await subscribe(conn, first.client_instance_id)
        assert third.error_code == E.NONE and third.subscription_id == second.subscription_id
        assert await push(conn, third, otlp(1.0, 1)) == E.NONE


def test_subscription_id_is_kafkas_formula() -> None:
    # Uuid.hashCode(): (int) (h >> 32) ^ (int) h with h = msb ^ lsb, Java's arithmetic shift.
    assert java_uuid_hash(uuid.UUID(int=0x0000000100000002 << 64)) == 3
    assert java_uuid_hash(uuid.UUID(int=(0x8000000000000000 << 64) | 0x5)) == -2147483648 ^ 5
    instance = uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")
    assert compute_subscription_id(["b", "a"], 1000, instance) == compute_subscription_id(["a", "b"], 1000, instance)
    assert compute_subscription_id(["a"], 1000, instance) != compute_subscription_id(["a"], 2000, instance)


# -- PushTelemetry ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
async def test_pushed_metrics_appear_on_prometheus(broker: Broker, clock: ManualClock, codec: int) -> None:
    async with await connect(broker, "admin") as admin:
        assert (await alter(admin, "all", ("metrics", SET, "*"), ("interval.ms", SET, "1000")))[0] == E.NONE
    async with await connect(broker, "telemetry-app") as conn:
        sub = await subscribe(conn)
        assert await push(conn, sub, otlp(2.5, 3), codec) == E.NONE
        instance = kafka_uuid_str(sub.client_instance_id)
        families = scrape(broker)
        latency = families["org_apache_kafka_producer_node_request_latency_avg"]
        assert {(s.labels["node_id"], s.value) for s in by_labels(latency, client_instance_id=instance,
                                                                  client_id="telemetry-app")} == {("0", 2.5), ("1", 2.5)}
        created = by_labels(families["org_apache_kafka_producer_connection_creation"], client_instance_id=instance)
        assert [(s.name, s.value) for s in created] == [("org_apache_kafka_producer_connection_creation_total", 3)]
        # The next push, a push interval later: the gauge is replaced, the delta sum and histogram add up.
        clock.sleep(1000)
        assert await push(conn, sub, otlp(4.0, 2, histogram=(3, 1.0)), codec) == E.NONE
        families = scrape(broker)
        assert {s.value for s in by_labels(families["org_apache_kafka_producer_node_request_latency_avg"],
                                           client_instance_id=instance)} == {4.0}
        assert [s.value for s in by_labels(families["org_apache_kafka_producer_connection_creation"],
                                           client_instance_id=instance)] == [5]
        queue = {s.name: s.value for s in by_labels(families["org_apache_kafka_producer_record_queue_time"],
                                                    client_instance_id=instance)}
        assert queue == {"org_apache_kafka_producer_record_queue_time_count": 5,
                         "org_apache_kafka_producer_record_queue_time_sum": 6.0}
        assert [s.value for s in families["kafka_server_client_metrics_plugin_export"]] == [2]
        [client] = broker.client_telemetry.as_json(instance)
        assert client["client_software_name"] == "minikafka" and client["resource"] == {"client_rack": "r1"}
        assert client["pushes"] == 2


async def test_cumulative_sums_are_taken_as_pushed(broker: Broker, clock: ManualClock) -> None:
    async with await connect(broker, "cumulative") as conn:
        assert (await alter(conn, "all", ("metrics", SET, "*"), ("interval.ms", SET, "100")))[0] == E.NONE
        sub = await subscribe(conn)
        for total in (3, 7):
            assert await push(conn, sub, otlp(1.0, total, temporality=2)) == E.NONE
            clock.sleep(100)
        created = scrape(broker)["org_apache_kafka_producer_connection_creation"]
        assert [s.value for s in created] == [7]


async def test_push_errors_as_kafka(broker: Broker, clock: ManualClock) -> None:
    async with await connect(broker, "pusher") as conn:
        assert (await alter(conn, "all", ("metrics", SET, "*"), ("interval.ms", SET, "1000")))[0] == E.NONE
        sub = await subscribe(conn)
        # A client instance id of zero.
        zero = type("Sub", (), {"client_instance_id": ZERO_UUID, "subscription_id": sub.subscription_id})
        assert await push(conn, zero, b"") == E.INVALID_REQUEST
        # An unknown codec, a payload over telemetry.max.bytes (4096 here), one that does not decode.
        assert await push(conn, sub, b"", codec=7) == E.UNSUPPORTED_COMPRESSION_TYPE
        clock.sleep(1000)
        assert await push(conn, sub, bytes(5000)) == E.TELEMETRY_TOO_LARGE
        clock.sleep(1000)
        assert await push(conn, sub, b"\xff\xff\xff not protobuf", codec=NONE) == E.INVALID_RECORD
        clock.sleep(1000)
        assert await push(conn, sub, b"not zstd", codec=ZSTD) == E.INVALID_RECORD
        clock.sleep(1000)
        # A compression bomb: 3 KB that would be 100 MiB is refused, not decompressed.
        bomb = compress(ZSTD, bytes(100 << 20))
        assert len(bomb) < 4096 and await push(conn, sub, bomb, codec=ZSTD) == E.INVALID_RECORD
        clock.sleep(1000)
        assert await push(conn, sub, otlp(1.0, 1), subscription_id=sub.subscription_id + 1) == \
            E.UNKNOWN_SUBSCRIPTION_ID
        clock.sleep(1000)
        assert await push(conn, sub, otlp(1.0, 1)) == E.NONE
        # Too soon after the last push...
        clock.sleep(999)
        assert await push(conn, sub, otlp(1.0, 1)) == E.THROTTLING_QUOTA_EXCEEDED
        # ...except the terminating push, after which nothing more is accepted.
        assert await push(conn, sub, otlp(9.0, 1), terminating=True) == E.NONE
        clock.sleep(1000)
        assert await push(conn, sub, otlp(1.0, 1)) == E.INVALID_REQUEST
        [client] = broker.client_telemetry.as_json()
        assert client["terminating"] is True and client["pushes"] == 2
        metrics = broker.metrics()
        assert metrics["kafka.server:type=client-metrics,name=throttle-total"] == 1
        assert metrics["kafka.server:type=client-metrics,name=unknown-subscription-request-total"] == 1
        assert metrics["kafka.server:type=client-metrics,name=plugin-error-total"] == 3


async def test_a_closed_connection_forgets_its_instance(broker: Broker) -> None:
    async with await connect(broker, "short-lived") as conn:
        await subscribe(conn)
        assert broker.metrics()["kafka.server:type=client-metrics,name=instance-count"] == 1
    from helpers import wait_until
    await wait_until(lambda: broker.metrics()["kafka.server:type=client-metrics,name=instance-count"] == 0,
                     what="the instance forgotten")


# -- ListConfigResources ----------------------------------------------------------------------------------
async def test_list_config_resources_v1_lists_every_type(broker: Broker) -> None:
    broker.create_topic("orders", 1)
    async with await connect(broker, "admin") as conn:
        assert (await alter(conn, "subs", ("metrics", SET, "*")))[0] == E.NONE
        assert (await alter(conn, "g1", ("consumer.session.timeout.ms", SET, "50000"), resource_type=32))[0] == 0
        code, listed = await list_resources(conn, 1)
        assert code == E.NONE
        assert listed[:4] == [(32, "g1"), (CLIENT_METRICS, "subs"), (8, "0"), (4, "0")]
        assert (2, "orders") in listed[4:] and {t for t, _ in listed[4:]} == {2}
        assert await list_resources(conn, 1, [4, 2, 2]) == (E.NONE, [(4, "0")] + listed[4:])
        assert await list_resources(conn, 1, [32]) == (E.NONE, [(32, "g1")])
        assert await list_resources(conn, 1, [2, 1]) == (E.UNSUPPORTED_VERSION, [])
        assert await list_resources(conn, 0) == (E.NONE, [(CLIENT_METRICS, "subs")])


async def test_list_config_resources_and_client_metrics_configs_need_cluster_describe_configs() -> None:
    metadata = ClusterMetadata([0])
    metadata.broker_started(0, "127.0.0.1", 9092)
    store = ClientMetricsConfigStore()
    store.set("subs", {"metrics": "*"})
    authorizer = StandardAuthorizer()

    class Groups:
        def group_ids(self) -> list[str]:
            return []

    handler = ListConfigResourcesHandler(metadata, store, Groups(), authorizer=authorizer)  # type: ignore[arg-type]
    describe_handler = DescribeConfigsHandler(metadata, None, BrokerConfig(), authorizer=authorizer,  # type: ignore
                                              client_metrics=store)
    ctx = RequestContext(api_key=K.LIST_CONFIG_RESOURCES, api_version=1, correlation_id=1, client_id="c",
                         connection_id="c1", peer="127.0.0.1:5000", principal="User:alice")
    describe_req = {"resources": [{"resource_type": CLIENT_METRICS, "resource_name": "subs",
                                   "configuration_keys": None}], "include_synonyms": False}
    resp = await handler.handle(ctx, {"resource_types": []})
    assert (resp["error_code"], resp["config_resources"]) == (E.CLUSTER_AUTHORIZATION_FAILED, [])
    assert (await describe_handler.handle(ctx, describe_req))["results"][0]["error_code"] == \
        E.CLUSTER_AUTHORIZATION_FAILED
    authorizer.create_acls([AclBinding.of(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:alice",
                                          "*", AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)])
    resp = await handler.handle(ctx, {"resource_types": [CLIENT_METRICS]})
    assert (resp["error_code"], resp["config_resources"]) == (
        E.NONE, [{"resource_name": "subs", "resource_type": CLIENT_METRICS}])
    result = (await describe_handler.handle(ctx, describe_req))["results"][0]
    assert (result["error_code"], [(c["name"], c["value"]) for c in result["configs"]]) == (E.NONE, [("metrics", "*")])


# -- a cluster ------------------------------------------------------------------------------------------
async def test_a_cluster_shares_subscriptions_and_pushed_metrics(tmp_path: Path) -> None:
    from minikafka.broker.cluster import serve_cluster

    async with serve_cluster(2, data_dir=tmp_path) as cluster:
        b0, b1 = cluster.brokers[0], cluster.brokers[1]
        async with await connect(b0, "admin") as admin:
            assert (await alter(admin, "all", ("metrics", SET, "*")))[0] == E.NONE
        async with await connect(b1, "app") as conn:  # the subscription set through broker 0 applies on broker 1
            sub = await subscribe(conn)
            assert list(sub.requested_metrics) == ["*"]
            assert await push(conn, sub, otlp(1.0, 1)) == E.NONE
        async with await connect(b0, "admin") as admin:
            assert await list_resources(admin, 0) == (E.NONE, [(CLIENT_METRICS, "all")])
        text = render(lambda: dict(cluster.brokers)).decode()
        latency = {f.name: f.samples for f in text_string_to_metric_families(text)}[
            "org_apache_kafka_producer_node_request_latency_avg"]
        assert len(latency) == 2 and all("broker" not in s.labels for s in latency)  # once, not per broker
    metadata = ClusterMetadata([0, 1], tmp_path)
    assert ClientMetricsConfigStore(tmp_path, metadata).names() == ["all"]
    metadata.close()


def test_an_earlier_versions_file_is_carried_over_into_the_metadata_log(tmp_path: Path) -> None:
    ClientMetricsConfigStore(tmp_path).set("s", {"metrics": "org.", "interval.ms": "500"})  # the file, as before
    assert (tmp_path / "client-metrics-configs.json").exists()
    metadata = ClusterMetadata([0], tmp_path)
    store = ClientMetricsConfigStore(tmp_path, metadata)
    assert store.configs("s") == {"metrics": "org.", "interval.ms": "500"}
    assert not (tmp_path / "client-metrics-configs.json").exists()
    store.set("s", {})  # removed: each config written as null
    metadata.close()
    metadata = ClusterMetadata([0], tmp_path)
    assert ClientMetricsConfigStore(tmp_path, metadata).names() == []
    assert metadata.replayed_configs(16) == {}  # every config of the subscription removed: it is gone
    metadata.close()


# -- bounds: the instance cache, the series kept, what a payload may decompress to --------------------------
def gauges(n: int, *, name: str = "org.apache.kafka.producer.node.request.latency.avg", description: str = "",
           value: float = 0.0) -> bytes:
    """A MetricsData with one gauge of ``n`` data points (``n`` series: node.id 0 .. n-1)."""
    data = M.MetricsData()
    gauge = data.resource_metrics.add().scope_metrics.add().metrics.add(name=name, description=description)
    for i in range(n):
        p = gauge.gauge.data_points.add(as_double=value + i)
        p.attributes.add(key="node.id", value=C.AnyValue(string_value=str(i)))
    return data.SerializeToString()


async def test_zero_id_subscriptions_stay_within_the_instance_cache(broker: Broker) -> None:
    from helpers import wait_until

    from minikafka.broker.client_metrics.manager import CLIENT_METRICS_INSTANCE_CACHE_SIZE as CAP

    manager = broker.client_metrics
    assert CAP == 16384  # Kafka's ClientMetricsManager.CACHE_MAX_SIZE
    assert manager not in broker.apis.observers  # the software name comes with ApiVersions, not from every request
    async with await connect(broker, "churner") as conn:
        ids = set()
        for done in range(1000, 20_001, 1000):  # 1000 requests in flight at a time, zero ids: a new instance each
            for _ in range(1000):
                await conn.send(K.GET_TELEMETRY_SUBSCRIPTIONS, 0, {"client_instance_id": ZERO_UUID})
            for _ in range(1000):
                sub = await conn.receive(K.GET_TELEMETRY_SUBSCRIPTIONS, 0)
                assert sub.error_code == E.NONE
                ids.add(sub.client_instance_id)
            assert len(manager.instances) == min(done, CAP)
            assert sum(len(s) for s in manager._connections.values()) == len(manager.instances)
        assert len(ids) == 20_000
        metrics = broker.metrics()
        assert metrics["kafka.server:type=client-metrics,name=instance-count"] == CAP
        assert metrics["kafka.server:type=client-metrics,name=instance-eviction-total"] == 20_000 - CAP
        # The most recent instance is still known: its first push is accepted.
        assert await push(conn, sub, otlp(1.0, 1)) == E.NONE
    await wait_until(lambda: len(manager.instances) == 0 and not manager._connections,
                     what="every instance of the connection forgotten")


async def test_a_closed_connection_forgets_every_instance_it_used(broker: Broker) -> None:
    from helpers import wait_until

    count = "kafka.server:type=client-metrics,name=instance-count"
    async with await connect(broker, "a") as a, await connect(broker, "b") as b:
        subs = [await subscribe(a) for _ in range(3)]
        await subscribe(b)
        assert broker.metrics()[count] == 4
        assert await push(b, subs[0], otlp(1.0, 1)) == E.NONE  # b uses one of a's instances too
        await a.aclose()
        await wait_until(lambda: broker.metrics()[count] == 2, what="a's own instances forgotten")
        assert subs[0].client_instance_id in broker.client_metrics.instances  # b still uses it
    await wait_until(lambda: broker.metrics()[count] == 0, what="every instance forgotten")


async def test_a_push_over_the_series_cap_keeps_the_cap(clock: ManualClock) -> None:
    from minikafka.broker.client_metrics.receiver import MAX_SERIES_PER_CLIENT as CAP

    async with serve_broker(BrokerConfig(port=0), clock=clock) as broker:
        async with await connect(broker, "a") as admin:
            assert (await alter(admin, "all", ("metrics", SET, "*")))[0] == E.NONE
        family = "org_apache_kafka_producer_node_request_latency_avg"
        async with await connect(broker, "wide") as conn:
            sub = await subscribe(conn)
            assert await push(conn, sub, gauges(CAP + 500), codec=ZSTD) == E.NONE
            [client] = broker.client_telemetry.as_json()
            assert (client["series"], client["series_dropped"]) == (CAP, 500)
            assert len(scrape(broker)[family]) == CAP
            # The next push updates the series kept; new ones (another metric too) are still dropped.
            clock.sleep(sub.push_interval_ms)
            payload = M.MetricsData.FromString(gauges(CAP + 500, value=1000.0))
            payload.resource_metrics[0].scope_metrics[0].metrics.add(name="other.metric").gauge.data_points.add()
            assert await push(conn, sub, payload.SerializeToString(), codec=ZSTD) == E.NONE
            [client] = broker.client_telemetry.as_json()
            assert (client["series"], client["series_dropped"]) == (CAP, 1001)
            assert [m["name"] for m in client["metrics"]] == ["org.apache.kafka.producer.node.request.latency.avg"]
            samples = scrape(broker)[family]
            assert len(samples) == CAP and by_labels(samples, node_id="0")[0].value == 1000.0
            assert broker.metrics()["kafka.server:type=client-metrics,name=series-dropped-total"] == 1001


def test_the_store_forgets_the_clients_that_pushed_least_recently() -> None:
    from minikafka.broker.client_metrics.receiver import ClientIdentity, ClientTelemetryStore

    clock = ManualClock(time_ms=0)
    store = ClientTelemetryStore(clock, max_clients=3, max_series_per_client=10, max_series=25)
    clients = [ClientIdentity(uuid.uuid4(), f"c{i}") for i in range(5)]

    def export(i: int, series: int) -> None:
        clock.sleep(1)
        store.export(clients[i], NONE, gauges(series))

    export(0, 12)  # two over the per-client cap
    export(1, 10)
    export(2, 10)  # 30 series in all, over 25: c0, the least recent, goes
    assert [c["client_id"] for c in store.as_json()] == ["c1", "c2"] and store.total_series == 20
    export(1, 10)  # c1 is the most recent now
    export(3, 4)
    export(4, 1)  # a fourth client, over 3: c2 goes
    assert [c["client_id"] for c in store.as_json()] == ["c1", "c3", "c4"]
    assert store.total_series == 15 == len(list(store.series())) and store.series_dropped == 2
    clock.sleep(60_001)  # nothing pushed for a minute: all expire
    assert store.as_json() == [] and store.total_series == 0


@pytest.mark.parametrize("codec", [ZSTD, GZIP])
async def test_a_payload_decompressing_beyond_the_bound_is_invalid_record(broker: Broker, clock: ManualClock,
                                                                          codec: int) -> None:
    from minikafka.broker.client_metrics.receiver import MAX_TEXT_CHARS, max_decompressed_bytes

    bound = broker.client_metrics.max_decompressed_bytes
    assert bound == max_decompressed_bytes(4096) == 1 << 20  # 8 x telemetry.max.bytes, 1 MiB at least
    assert max_decompressed_bytes(1 << 20) == 8 << 20
    async with await connect(broker, "bomb") as conn:
        sub = await subscribe(conn)
        too_big = gauges(1, description="d" * bound)  # a few hundred bytes compressed, over 1 MiB plain
        assert len(compress(codec, too_big)) <= 4096 < bound < len(too_big)
        assert await push(conn, sub, too_big, codec=codec) == E.INVALID_RECORD
        assert broker.client_telemetry.as_json() == []
        clock.sleep(sub.push_interval_ms)
        within = gauges(1, description="d" * (bound - 1000))
        assert await push(conn, sub, within, codec=codec) == E.NONE
        [client] = broker.client_telemetry.as_json()
        assert len(client["metrics"][0]["description"]) == MAX_TEXT_CHARS  # kept cut short
        assert broker.metrics()["kafka.server:type=client-metrics,name=plugin-error-total"] == 1
