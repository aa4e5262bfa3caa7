"""The console's message browser: records a real client (confluent_kafka) produced shown as text, JSON and
hex (compressed batches too); a record produced in the browser read by a real consumer; seek by offset and
by timestamp; follow live; read_committed hides aborted transactions; bad parameters answer 400."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from console_helpers import console_url, http
from minikafka.testing import BrokerThread




def produce(broker: BrokerThread, topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, **conf})
    for r in records:
        p.produce(topic, **r)
    assert p.flush(30) == 0


def test_client_records_shown_as_text_json_and_hex(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("events", partitions=1)
    produce(console_broker, "events", [
        {"key": b"order-1", "value": b'{"id": 1, "items": ["a", "b"]}', "headers": [("source", b"shop")]},
        {"key": None, "value": b"\x00\x01\xfe\xff plain"},
    ], **{"compression.type": "gzip", "linger.ms": 50})  # both in one gzip batch
    page.goto(console_url(console_broker, "/#/messages/events"))
    rows = page.locator("#records tbody tr")
    rows.nth(1).wait_for()
    assert rows.count() == 2
    first = rows.nth(0)
    assert first.locator(".mk-key").inner_text() == "order-1"
    assert first.locator(".mk-value").inner_text() == '{"id": 1, "items": ["a", "b"]}'
    assert "source: shop" in first.locator(".mk-header-entry").inner_text()
    assert rows.nth(1).locator(".mk-key").inner_text() == "null"

    page.select_option("#msg-view", "json")
    page.wait_for_selector("#records .mk-value.mk-json")
    assert json.loads(first.locator(".mk-value").inner_text()) == {"id": 1, "items": ["a", "b"]}
    assert first.locator(".mk-value").inner_text().startswith('{\n  "id": 1')  # pretty-printed

    page.select_option("#msg-view", "hex")
    page.wait_for_selector("#records .mk-value.mk-hex")
    assert first.locator(".mk-key").inner_text() == "6f 72 64 65 72 2d 31"  # "order-1"
    assert rows.nth(1).locator(".mk-value").inner_text().startswith("00 01 fe ff 20 70")


def test_record_produced_in_the_browser_is_read_by_a_kafka_consumer(console_broker: BrokerThread,
                                                                      page: Any) -> None:
    console_broker.create_topic("inbox", partitions=3)
    page.goto(console_url(console_broker, "/#/messages/inbox"))
    form = page.locator("#produce")
    form.locator("input[name=key]").fill("user-7")
    form.locator("textarea[name=value]").fill('{"hello": "kafka"}')
    form.locator("textarea[name=headers]").fill("trace=abc123\nkind=greeting")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#produce-result:has-text('offset 0')")
    consumer = Consumer({"bootstrap.servers": console_broker.bootstrap, "group.id": "console-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("inbox", p, 0) for p in range(3)])
        deadline = time.monotonic() + 30
        msg = None
        while msg is None or msg.error():
            assert time.monotonic() < deadline, "the consumer got no record"
            msg = consumer.poll(0.5)
        assert (msg.key(), msg.value()) == (b"user-7", b'{"hello": "kafka"}')
        assert msg.headers() == [("trace", b"abc123"), ("kind", b"greeting")]
        # The partition Kafka's default partitioner (murmur2) picks for the key, as a Java producer would.
        produce(console_broker, "inbox", [{"key": b"user-7", "value": b"again"}], partitioner="murmur2_random")
        second = None
        while second is None or second.error():
            assert time.monotonic() < deadline, "the consumer got no second record"
            second = consumer.poll(0.5)
        assert second.partition() == msg.partition()
    finally:
        consumer.close()
    # The browser reads it back from the log.
    page.click("#msg-load")
    page.wait_for_selector("#records .mk-value:text-is('{\"hello\": \"kafka\"}')")


def test_seek_by_offset_and_timestamp(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("timed", partitions=1)
    base = int(time.time() * 1000) - 60_000
    produce(console_broker, "timed", [{"value": f"r{i}".encode(), "timestamp": base + i * 1000} for i in range(6)])
    status, body = http(console_broker, "GET", f"/console/api/messages/timed?seek=timestamp&timestamp={base + 2500}")
    assert status == 200 and [r["offset"] for r in body["records"]] == [3, 4, 5]
    status, body = http(console_broker, "GET", f"/console/api/messages/timed?seek=timestamp&timestamp={base + 99_000}")
    assert status == 200 and body["records"] == [] and body["next"] == {"0": 6}
    status, body = http(console_broker, "GET", "/console/api/messages/timed?seek=offset&offset=4&partition=0")
    assert [r["offset"] for r in body["records"]] == [4, 5]
    status, body = http(console_broker, "GET", "/console/api/messages/timed?seek=end&limit=2")
    assert [r["offset"] for r in body["records"]] == [4, 5]

    page.goto(console_url(console_broker, "/#/messages/timed"))
    page.locator("#records tbody tr").nth(5).wait_for()
    page.select_option("#msg-seek", "timestamp")
    page.fill("#msg-timestamp", str(base + 1000))
    page.click("#msg-load")
    page.wait_for_function("() => document.querySelectorAll('#records tbody tr').length === 5")
    assert page.locator("#records tbody tr").nth(0).locator(".mk-value").inner_text() == "r1"
    page.select_option("#msg-seek", "offset")
    page.fill("#msg-offset", "5")
    page.click("#msg-load")
    page.wait_for_function("() => document.querySelectorAll('#records tbody tr').length === 1")
    assert page.locator("#records .mk-value").inner_text() == "r5"


def test_follow_live_shows_records_produced_after_the_page_opened(console_broker: BrokerThread,
                                                                   page: Any) -> None:
    console_broker.create_topic("live", partitions=2)
    produce(console_broker, "live", [{"value": b"before", "partition": 0}])
    page.goto(console_url(console_broker, "/#/messages/live"))
    page.wait_for_selector("#records .mk-value:text-is('before')")
    page.check("#msg-follow")
    page.wait_for_selector("#records-count:has-text('following')")
    produce(console_broker, "live", [{"value": b"after-1", "partition": 1}])
    page.wait_for_selector("#records .mk-value:text-is('after-1')", timeout=30_000)
    produce(console_broker, "live", [{"value": b"after-2", "partition": 0}])
    page.wait_for_selector("#records .mk-value:text-is('after-2')", timeout=30_000)
    values = page.locator("#records .mk-value").all_inner_texts()
    assert values == ["before", "after-1", "after-2"]  # each record once


def test_read_committed_hides_aborted_transactions(console_broker: BrokerThread) -> None:
    console_broker.create_topic("txn", partitions=1)
    p = Producer({"bootstrap.servers": console_broker.bootstrap, "transactional.id": "console-txn", "linger.ms": 0})
    p.init_transactions(30)
    for value, commit in ((b"kept-1", True), (b"dropped", False), (b"kept-2", True)):
        p.begin_transaction()
        p.produce("txn", value=value)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)

    def values(isolation: str) -> list[str]:
        status, body = http(console_broker, "GET", f"/console/api/messages/txn?isolation={isolation}")
        assert status == 200
        return [base64.b64decode(r["value"]).decode() for r in body["records"]]

    assert values("read_committed") == ["kept-1", "kept-2"]  # control batches skipped, aborted data hidden
    assert values("read_uncommitted") == ["kept-1", "dropped", "kept-2"]


def test_bad_message_requests(console_broker: BrokerThread) -> None:
    console_broker.create_topic("small", partitions=1)
    assert http(console_broker, "GET", "/console/api/messages/small?limit=100000")[0] == 400
    assert http(console_broker, "GET", "/console/api/messages/small?limit=abc")[0] == 400
    assert http(console_broker, "GET", "/console/api/messages/small?seek=sideways")[0] == 400
    assert http(console_broker, "GET", "/console/api/messages/small?positions=x:y")[0] == 400
    assert http(console_broker, "GET", "/console/api/messages/small?partition=9")[0] == 404
    assert http(console_broker, "GET", "/console/api/messages/small?isolation=maybe")[0] == 400
    assert http(console_broker, "GET", "/console/api/messages/nowhere")[0] == 404
    assert http(console_broker, "POST", "/console/api/messages/nowhere", {"value": "x"})[0] == 404
    assert http(console_broker, "POST", "/console/api/messages/small", {"value": 5})[0] == 400
    assert http(console_broker, "POST", "/console/api/messages/small", {"value": "x", "partition": 3})[0] == 400
    assert http(console_broker, "POST", "/console/api/messages/small", {"value": "x", "headers": "h"})[0] == 400
    status, body = http(console_broker, "POST", "/console/api/messages/small", {"value": "ok", "headers": {"a": "b"}})
    assert (status, body["offset"]) == (200, 0)
    status, body = http(console_broker, "GET", "/console/api/messages/small?limit=1")
    assert status == 200 and base64.b64decode(body["records"][0]["value"]) == b"ok"


def test_paging_by_next_positions_never_skips_records_with_skewed_timestamps(console_broker: BrokerThread) -> None:
    """Timestamps need not rise with offsets (CreateTime from several producers): paging through a topic with
    ``next`` returns every record exactly once, each partition in offset order, whatever the limit cuts."""
    console_broker.create_topic("skew", partitions=2)
    base = int(time.time() * 1000) - 60_000
    stamps = {0: [5000, 1000, 4000, 2000, 3000, 6000], 1: [1500, 3500, 5500, 500]}
    produce(console_broker, "skew", [{"value": f"{p}-{i}".encode(), "partition": p, "timestamp": base + ts}
                                     for p, times in stamps.items() for i, ts in enumerate(times)])
    seen: list[tuple[int, int]] = []
    status, page = http(console_broker, "GET", "/console/api/messages/skew?seek=beginning&limit=3")
    for _ in range(20):
        assert status == 200 and len(page["records"]) <= 3
        seen += [(r["partition"], r["offset"]) for r in page["records"]]
        if not page["records"]:
            break
        positions = ",".join(f"{p}:{o}" for p, o in page["next"].items())
        status, page = http(console_broker, "GET", f"/console/api/messages/skew?positions={positions}&limit=3")
    assert sorted(seen) == [(p, o) for p, times in stamps.items() for o in range(len(times))]
    for p in stamps:
        offsets = [o for q, o in seen if q == p]
        assert offsets == sorted(offsets)
