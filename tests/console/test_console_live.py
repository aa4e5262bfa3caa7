"""The console's live flow-control page: a client quota throttling a confluent_kafka producer, visible in
its charts; fetch-session numbers moving as consumers fetch (librdkafka's sessionless fetches, kafka-python's
incremental sessions); the replication quota's empty 18-byte answers in a cluster; requests per API; the
"none yet" states (real brokers and clients, headless Chromium)."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from console_helpers import console_url, wait_until
from minikafka.broker.config import BrokerConfig
from minikafka.testing import BrokerThread, ClusterThread

pytestmark = pytest.mark.clients

CHART = "document.querySelector('.mk-chart[data-title=\"{title}\"]').mkChart"


def live(broker: BrokerThread | ClusterThread) -> Any:
    with urllib.request.urlopen(console_url(broker, "/console/api/live"), timeout=10) as resp:
        return json.load(resp)




def series(page: Any, title: str) -> dict[str, list[float | None]]:
    """A chart's series by label."""
    return page.evaluate(f"""() => {{ const c = {CHART.format(title=title)};
        return Object.fromEntries(c.plot().series.slice(1).map((s, i) => [s.label, c.data()[i + 1]])); }}""")


def nonzero(values: list[float | None]) -> list[float]:
    return [v for v in values if v]


def test_quota_throttling_a_producer_is_charted(page: Any) -> None:
    config = BrokerConfig(port=0, quota_window_num=2, quota_window_size_seconds=1,
                          client_quotas=["client-id=slowpoke:producer_byte_rate=20000"])
    with BrokerThread(config, http_port=0) as broker:
        broker.create_topic("quota-topic", partitions=1)
        page.goto(console_url(broker, "/#/live"))
        page.wait_for_selector("#live-quotas-none", state="visible")
        assert page.is_visible("#live-client-metrics-none")

        producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "slowpoke", "linger.ms": 5,
                             "batch.size": 16384})
        try:
            for _ in range(150):
                producer.produce("quota-topic", b"q" * 1000)
                producer.poll(0)
            page.wait_for_function(f"""() => {{ const c = {CHART.format(title="Throttle time (ms)")};
                return c.data().length > 1 && c.data()[1].some(v => v > 0); }}""")
            page.wait_for_function(f"() => {CHART.format(title='Produce byte rate against quota')}"
                                   ".data()[0].length >= 2")
            rates = series(page, "Produce byte rate against quota")
            assert nonzero(rates["slowpoke rate"]) and set(nonzero(rates["slowpoke quota"])) == {20000}
            throttle = series(page, "Throttle time (ms)")
            assert nonzero(throttle["Produce slowpoke"])
            assert "slowpoke" in page.inner_text("#live-quota-table")
            # The average throttle time covers only the last two 1-s windows: wait for a window that has some.
            entry = wait_until(lambda: next((q for q in live(broker)["brokers"][0]["quotas"]
                                             if q["type"] == "Produce" and q["throttle_time_ms"] > 0), None),
                               "a Produce throttle time in the API")
            assert entry["client_id"] == "slowpoke" and entry["quota"] == 20000
        finally:
            producer.purge()
            producer.flush(5)


def test_fetch_session_numbers_follow_consumers(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("fetched", partitions=1)
    page.goto(console_url(console_broker, "/#/live"))
    page.wait_for_selector('[data-fact="sessionless fetches"]')
    assert page.inner_text('[data-fact="slots used"]') == "0 / 1000"
    assert page.inner_text('[data-fact="sessionless fetches"]') == "0"

    # librdkafka fetches without sessions (no KIP-227): full fetches outside the cache.
    consumer = Consumer({"bootstrap.servers": console_broker.bootstrap, "group.id": "fs", "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition("fetched", 0, 0)])
    try:
        wait_until(lambda: consumer.poll(0.05) is None and
                   live(console_broker)["brokers"][0]["fetch_sessions"]["requests"].get("sessionless", 0) >= 3,
                   "sessionless fetches")
        page.wait_for_function("() => Number(document.querySelector('[data-fact=\"sessionless fetches\"]')?.textContent) >= 3")
    finally:
        consumer.close()

    # kafka-python opens a session (one full fetch), then fetches incrementally in it.
    kafka = pytest.importorskip("kafka")
    kconsumer = kafka.KafkaConsumer(bootstrap_servers=console_broker.bootstrap, fetch_max_wait_ms=50)
    kconsumer.assign([kafka.TopicPartition("fetched", 0)])
    try:
        wait_until(lambda: not kconsumer.poll(50) and
                   live(console_broker)["brokers"][0]["fetch_sessions"]["requests"].get("incremental", 0) >= 3,
                   "incremental fetches")
        page.wait_for_function("() => document.querySelector('[data-fact=\"slots used\"]')?.textContent === '1 / 1000'")
        page.wait_for_function(f"""() => {{ const c = {CHART.format(title="Fetch requests per second by session kind")};
            const i = c.plot().series.findIndex(s => s.label === 'incremental');
            return i > 0 && c.data()[i].some(v => v > 0); }}""")
        assert int(page.inner_text('[data-fact="full fetches"]')) >= 1
        assert int(page.inner_text('[data-fact="partitions cached"]')) == 1
    finally:
        kconsumer.close()
    # Requests per API: the table lists Fetch with a latency.
    page.wait_for_function("() => document.querySelector('#live-request-table')?.textContent.includes('Fetch')")
    fetch = [r for r in live(console_broker)["brokers"][0]["requests"] if r["api"] == "Fetch"][0]
    assert fetch["count"] >= 6 and fetch["latency_ms"]["99thPercentile"] > 0


def test_replication_empty_answers_in_a_cluster(page: Any) -> None:
    with ClusterThread(2, http_port=0, replica_fetch_wait_max_ms=50) as cluster:
        cluster.create_topic("replicated", partitions=1, replication_factor=2)

        def empty_answers() -> int:
            return sum(b["replication"]["leader"]["empty_answers"] for b in live(cluster)["brokers"])
        wait_until(lambda: empty_answers() >= 3, "the followers' fetches")
        page.goto(console_url(cluster, "/#/live"))
        page.wait_for_selector("#live-broker")
        assert page.eval_on_selector_all("#live-broker option", "os => os.map(o => o.textContent)") == [
            "broker 0", "broker 1"]
        leader = next(b for b in live(cluster)["brokers"] if b["replication"]["leader"]["empty_answers"])
        page.select_option("#live-broker", str(leader["id"]))
        page.wait_for_function(
            "() => Number(document.querySelector('[data-fact=\"empty 18-byte answers\"]')?.textContent) > 0")
        page.wait_for_function(f"""() => {{ const c = {CHART.format(title="Empty (18-byte) leader answers per second")};
            return c.data().length > 1 && c.data()[1].some(v => v > 0); }}""")


def test_pushed_client_metrics_shown(console_broker: BrokerThread, page: Any) -> None:
    kafka_admin = pytest.importorskip("kafka.admin")
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=console_broker.bootstrap)
    try:  # a client-metrics subscription, as kafka-client-metrics.sh --alter sets it
        admin.alter_configs([kafka_admin.ConfigResource("CLIENT_METRICS", "console", configs={
            "metrics": "org.apache.kafka.producer.", "interval.ms": "500", "match": "client_id=pushing-producer"})],
            raise_on_unknown=False, incremental=True)
    finally:
        admin.close()
    console_broker.create_topic("telemetry")
    page.goto(console_url(console_broker, "/#/live"))
    page.wait_for_selector("#live-client-metrics-none", state="visible")
    producer = Producer({"bootstrap.servers": console_broker.bootstrap, "client.id": "pushing-producer"})
    try:
        def pushed() -> Any:
            producer.produce("telemetry", b"v")
            producer.poll(0.05)
            return live(console_broker)["client_metrics"]
        (client,) = wait_until(pushed, "a push of the producer's metrics", timeout=25)
        assert client["client_id"] == "pushing-producer" and client["client_software_name"]
        assert any(name.startswith("org.apache.kafka.producer.") for name in client["metrics"])
        page.wait_for_selector("#live-client-metrics details[data-client]")
        assert "pushing-producer" in page.inner_text("#live-client-metrics summary")
        assert page.is_hidden("#live-client-metrics-none")
    finally:
        producer.flush(10)
