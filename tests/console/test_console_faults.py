"""The console's fault rules page: a rule added through the form, seen matching a real client's requests
(its matched count rises), invalid rules refused with the reason, rules removed (real broker, Chromium)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from console_helpers import call, console_url
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.clients




def test_rule_added_in_the_browser_matches_a_producer(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("faulted", partitions=1)
    page.goto(console_url(console_broker, "/#/faults"))
    page.wait_for_selector("#faults-none", state="visible")
    page.fill("#faults-form input[name=api]", "Produce")
    page.fill("#faults-form input[name=topic]", "faulted")
    page.fill("#faults-form input[name=error]", "NOT_LEADER_OR_FOLLOWER")
    page.fill("#faults-form input[name=count]", "2")
    page.click("#faults-form button[type=submit]")
    page.wait_for_selector('.mk-matched[data-rule="1"]')
    assert page.inner_text('.mk-matched[data-rule="1"]') == "0"
    assert "api=Produce topic=faulted" in page.inner_text("#faults-table")

    # A producer's first two Produce requests get the error; it retries and gets through.
    producer = Producer({"bootstrap.servers": console_broker.bootstrap, "retry.backoff.ms": 50, "linger.ms": 0})
    producer.produce("faulted", b"x")
    assert producer.flush(30) == 0
    page.wait_for_function("() => document.querySelector('.mk-matched[data-rule=\"1\"]')?.textContent === '2'")
    row = page.inner_text('#faults-table tbody tr')
    assert "error=NOT_LEADER_OR_FOLLOWER" in row
    (rule,) = call(console_broker, "faults")[1]["rules"]
    assert rule["matched"] == 2 and rule["remaining"] == 0

    page.click('.mk-remove[data-rule="1"]')
    page.wait_for_selector("#faults-none", state="visible")
    assert call(console_broker, "faults")[1]["rules"] == []


def test_invalid_rule_shows_the_reason(console_broker: BrokerThread, page: Any) -> None:
    page.goto(console_url(console_broker, "/#/faults"))
    page.wait_for_selector("#faults-form")
    page.fill("#faults-form input[name=api]", "Produce")
    page.click("#faults-form button[type=submit]")  # no action
    page.wait_for_function("() => document.querySelector('#faults-error')?.textContent.includes('needs an action')")
    page.fill("#faults-form input[name=latency_ms]", "soon")
    page.click("#faults-form button[type=submit]")
    page.wait_for_function(
        "() => document.querySelector('#faults-error')?.textContent.includes('latency_ms must be a number')")
    page.fill("#faults-form input[name=latency_ms]", "5")
    page.check("#faults-form input[name=hold]")
    page.fill("#faults-form input[name=probability]", "0.5")
    page.click("#faults-form button[type=submit]")
    page.wait_for_selector('.mk-matched[data-rule="1"]')
    (rule,) = call(console_broker, "faults")[1]["rules"]
    assert (rule["api"], rule["latency_ms"], rule["hold"], rule["probability"]) == ("Produce", 5, True, 0.5)
    call(console_broker, "faults", "POST", {"api": "Fetch", "latency_ms": 1})
    page.wait_for_selector('.mk-matched[data-rule="2"]')
    page.click("#faults-clear")
    page.wait_for_selector("#faults-none", state="visible")


def test_api_answers_bad_rules_with_400(console_broker: BrokerThread) -> None:
    for body in ({"api": "Nope", "error": "NOT_LEADER_OR_FOLLOWER"}, {"bogus": 1}, {"api": "Produce"},
                 {"latency_ms": "x"}, {"partition": 0, "error": "UNKNOWN_SERVER_ERROR"}, [1], "text"):
        status, answer = call(console_broker, "faults", "POST", body)
        assert status == 400 and answer["error"] in ("INVALID_RULE", "INVALID_REQUEST"), (body, answer)
    assert call(console_broker, "faults/7", "DELETE")[0] == 404
    assert call(console_broker, "faults", "DELETE") == (200, {"removed": 0})
