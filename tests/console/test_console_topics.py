"""The console's topics page and API: create, list, describe, alter configs and delete through the broker's
own CreateTopics / IncrementalAlterConfigs / DeleteTopics handlers (Kafka's validation and errors), seen by
a real Kafka client; bad input answers 400/404 JSON and the broker carries on."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource

from console_helpers import console_url, http
from minikafka.testing import BrokerThread
from waiting import wait_for




def topic_configs(broker: BrokerThread, name: str) -> dict[str, str]:
    """The topic's configs as a Kafka client describes them (non-default only)."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    found = admin.describe_configs([resource])[resource].result(timeout=30)
    return {k: v.value for k, v in found.items() if not v.is_default}


def test_topic_created_altered_and_deleted_in_the_browser(console_broker: BrokerThread, page: Any) -> None:
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto(console_url(console_broker, "/#/topics"))
    form = page.locator("#topic-create")
    form.locator("input[name=name]").fill("orders")
    form.locator("input[name=partitions]").fill("3")
    form.locator("textarea[name=configs]").fill("retention.ms=3600000\ncleanup.policy=compact")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#topics a.mk-topic:text-is('orders')")
    row = page.locator("#topics tbody tr", has=page.locator("a.mk-topic:text-is('orders')"))
    assert row.locator("td").nth(1).inner_text() == "3"
    # The broker made it as CreateTopics would: a Kafka client sees the partitions and configs.
    admin = AdminClient({"bootstrap.servers": console_broker.bootstrap})
    assert len(admin.list_topics(timeout=30).topics["orders"].partitions) == 3
    assert topic_configs(console_broker, "orders") == {"retention.ms": "3600000", "cleanup.policy": "compact"}

    # The detail view: partitions with their offsets, configs with their source.
    row.locator("a.mk-topic").click()
    page.wait_for_selector("#partitions tbody tr >> nth=2")
    assert page.locator("#page-topics h1").inner_text() == "Topic orders"
    configs = page.locator("#configs tbody tr", has=page.locator("td:text-is('retention.ms')"))
    assert "3600000" in configs.inner_text() and "DYNAMIC_TOPIC_CONFIG" in configs.inner_text()

    # Alter: a bad value is refused with Kafka's message; a good one lands in the broker.
    alter = page.locator("#config-alter")
    alter.locator("input[name=name]").fill("retention.ms")
    alter.locator("input[name=value]").fill("soon")
    alter.locator("button[type=submit]").click()
    page.wait_for_selector("#mk-toast.mk-error:has-text('Invalid value soon for configuration retention.ms')")
    alter.locator("input[name=value]").fill("7200000")
    alter.locator("button[type=submit]").click()
    page.wait_for_selector("#configs tbody tr:has(td:text-is('retention.ms')) td:text-is('7200000')")
    assert topic_configs(console_broker, "orders")["retention.ms"] == "7200000"
    alter.locator("input[name=name]").fill("cleanup.policy")
    alter.locator("select[name=op]").select_option("delete")
    alter.locator("button[type=submit]").click()
    page.wait_for_selector("#configs tbody tr:has(td:text-is('cleanup.policy')) :text('DEFAULT_CONFIG')")
    assert "cleanup.policy" not in topic_configs(console_broker, "orders")

    # Delete (confirmed in the dialog): gone from the list and from the broker.
    page.locator("#topic-delete").click()
    page.wait_for_selector("#topics")
    page.wait_for_selector("#topics a.mk-topic:text-is('orders')", state="detached")
    wait_for(lambda: "orders" not in admin.list_topics(timeout=30).topics, 30, "the topic to be deleted")


def test_topics_list_shows_messages_and_sizes(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("filled", partitions=2)
    for i in range(5):
        assert http(console_broker, "POST", "/console/api/messages/filled",
                    {"key": f"k{i}", "value": "x" * 100})[0] == 200
    status, listed = http(console_broker, "GET", "/console/api/topics")
    assert status == 200
    (entry,) = [t for t in listed["topics"] if t["name"] == "filled"]
    assert entry["messages"] == 5 and entry["size"] > 500 and entry["partitions"] == 2
    status, detail = http(console_broker, "GET", "/console/api/topics/filled")
    assert sum(p["high_watermark"] for p in detail["partition_details"]) == 5
    assert all(p["log_start_offset"] == 0 and p["last_stable_offset"] == p["high_watermark"]
               for p in detail["partition_details"])
    page.goto(console_url(console_broker, "/#/topics"))
    row = page.locator("#topics tbody tr", has=page.locator("a.mk-topic:text-is('filled')"))
    row.wait_for()
    assert row.locator("td").nth(4).inner_text() == "5"


def test_bad_requests_answer_json_errors_and_the_broker_carries_on(console_broker: BrokerThread) -> None:
    assert http(console_broker, "POST", "/console/api/topics", b"{not json")[0] == 400
    assert http(console_broker, "POST", "/console/api/topics", [1, 2])[1]["error"] == "INVALID_REQUEST"
    assert http(console_broker, "POST", "/console/api/topics", {"name": "x", "partitions": "many"})[0] == 400
    status, body = http(console_broker, "POST", "/console/api/topics", {"name": "bad name!"})
    assert (status, body["error"]) == (400, "INVALID_TOPIC_EXCEPTION")
    status, body = http(console_broker, "POST", "/console/api/topics", {"name": "rf", "replication_factor": 3})
    assert (status, body["error"]) == (400, "INVALID_REPLICATION_FACTOR")
    status, body = http(console_broker, "POST", "/console/api/topics", {"name": "cfg", "configs": {"nope.x": "1"}})
    assert status == 400 and body["message"]
    assert http(console_broker, "POST", "/console/api/topics", {"name": "twice"})[0] == 200
    assert http(console_broker, "POST", "/console/api/topics", {"name": "twice"})[1]["error"] == "TOPIC_ALREADY_EXISTS"
    assert http(console_broker, "GET", "/console/api/topics/missing") == (
        404, {"error": "UNKNOWN_TOPIC_OR_PARTITION", "message": "no topic 'missing'"})
    assert http(console_broker, "DELETE", "/console/api/topics/missing")[0] == 404
    assert http(console_broker, "POST", "/console/api/topics/missing/configs", {"set": {"retention.ms": "1"}})[0] == 404
    assert http(console_broker, "POST", "/console/api/topics/twice/configs", {"set": "retention.ms"})[0] == 400
    assert http(console_broker, "POST", "/console/api/topics/twice/configs", {})[0] == 400
    # A page of another site cannot drive the console (cross-site request forgery): its Origin is refused.
    forged = urllib.request.Request(console_url(console_broker, "/console/api/topics"), method="POST",
                                    data=b'{"name": "forged"}', headers={"Origin": "http://evil.example"})
    try:
        urllib.request.urlopen(forged, timeout=30)
        raise AssertionError("a cross-origin call was answered")
    except urllib.error.HTTPError as exc:
        assert (exc.code, json.load(exc)["error"]) == (403, "CROSS_ORIGIN")
    # The broker still answers Kafka clients and the console.
    admin = AdminClient({"bootstrap.servers": console_broker.bootstrap})
    topics = admin.list_topics(timeout=30).topics
    assert "twice" in topics and "forged" not in topics
    assert http(console_broker, "GET", "/console/api/topics")[0] == 200
