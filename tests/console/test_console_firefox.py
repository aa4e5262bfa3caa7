"""The console works in Firefox too: every page renders (its data, its live charts) with no JavaScript
error, in Debian's firefox-esr driven over WebDriver BiDi (tests/firefox.py)."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer

from console_helpers import console_url
from firefox import Firefox, firefox  # noqa: F401  (fixture)
from minikafka.broker.console.context import AREAS
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.clients


def test_every_page_renders_in_firefox(firefox: Firefox) -> None:  # noqa: F811
    with BrokerThread(http_port=0) as broker:
        broker.create_topic("ff-topic", partitions=2)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("ff-topic", key=b"k", value=json.dumps({"hello": "firefox"}).encode(), partition=0)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ff-group",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["ff-topic"])
        msg, deadline = None, time.monotonic() + 60
        while msg is None or msg.error():
            assert time.monotonic() < deadline, f"the consumer got no record ({msg and msg.error()})"
            msg = consumer.poll(5)
        consumer.commit(msg, asynchronous=False)
        consumer.close()

        for area in AREAS:
            firefox.goto(console_url(broker, f"/#/{area}"))
            firefox.wait_for(f"document.querySelector('#page-{area} h1') !== null")
            # the page's data arrived: its section holds more than its title, and no error was shown
            firefox.wait_for(f"document.querySelector('#page-{area}').children.length > 1")
            assert firefox.evaluate(f"document.querySelector('#page-{area} > p.mk-error')?.textContent ?? null") \
                is None, area
            assert firefox.errors() == [], (area, firefox.errors())

        firefox.goto(console_url(broker, "/#/topics"))
        firefox.wait_for("document.body.textContent.includes('ff-topic')")
        firefox.goto(console_url(broker, "/#/groups"))
        firefox.wait_for("document.body.textContent.includes('ff-group')")
        # a live chart is drawn by uPlot (a canvas of non-zero size) after a few one-second updates
        firefox.goto(console_url(broker, "/#/live"))
        firefox.wait_for("[...document.querySelectorAll('.mk-chart canvas')].some(c => c.width > 0 && c.height > 0)")
        assert firefox.errors() == []
