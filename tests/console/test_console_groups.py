"""The console's groups page: a consumer group's lag shown and charted, offsets reset, groups deleted,
members and assignments of classic and KIP-848 groups (real broker, confluent_kafka, headless Chromium)."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from console_helpers import call, console_url, wait_until
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.clients






def produce(broker: BrokerThread, topic: str, per_partition: dict[int, int], idempotent: bool = False) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": idempotent})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, f"v{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def commit(broker: BrokerThread, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets for ``group`` as a consumer that never joins it (an admin-style commit)."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def lag_text(page: Any, tp: str) -> str:
    return str(page.inner_text(f'.mk-lag[data-tp="{tp}"]'))


def test_group_lag_shown_and_charted(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("lagged", partitions=2)
    produce(console_broker, "lagged", {0: 5, 1: 7})
    commit(console_broker, "lag-group", {("lagged", 0): 2, ("lagged", 1): 1})

    page.goto(console_url(console_broker, "/#/groups"))
    page.click("a.mk-group-link:text-is('lag-group')")
    page.wait_for_selector('.mk-lag[data-tp="lagged-1"]')
    assert lag_text(page, "lagged-0") == "3"
    assert lag_text(page, "lagged-1") == "6"
    assert page.inner_text('#group-summary [data-fact="Total lag"]') == "9"
    # The lag chart gains a point a second, one series per partition.
    page.wait_for_function("() => document.querySelector('#page-groups .mk-chart').dataset.points >= 3")
    series = page.evaluate("""() => { const c = document.querySelector('#page-groups .mk-chart').mkChart;
                                       return c.plot().series.slice(1).map(s => s.label); }""")
    assert series == ["lagged-0", "lagged-1"]
    assert page.evaluate("document.querySelector('#page-groups .mk-chart').mkChart.data()[1].slice(-1)[0]") == 3

    # More records: the page follows the lag without a reload.
    produce(console_broker, "lagged", {0: 4})
    page.wait_for_function("() => document.querySelector('.mk-lag[data-tp=\"lagged-0\"]')?.textContent === '7'")


def test_reset_offsets_of_an_empty_group_changes_its_lag(console_broker: BrokerThread, page: Any) -> None:
    console_broker.create_topic("resets", partitions=1)
    produce(console_broker, "resets", {0: 10})
    commit(console_broker, "reset-group", {("resets", 0): 4})

    page.goto(console_url(console_broker, "/#/groups/reset-group"))
    page.wait_for_selector('.mk-lag[data-tp="resets-0"]')
    assert lag_text(page, "resets-0") == "6"
    page.select_option("#group-reset select[name=to]", "latest")
    page.click("#group-reset button[type=submit]")
    page.wait_for_function("() => document.querySelector('.mk-lag[data-tp=\"resets-0\"]')?.textContent === '0'")

    page.select_option("#group-reset select[name=to]", "offset")
    page.fill("#group-reset input[name=value]", "1")
    page.click("#group-reset button[type=submit]")
    page.wait_for_function("() => document.querySelector('.mk-lag[data-tp=\"resets-0\"]')?.textContent === '9'")
    status, group = call(console_broker, "groups/reset-group")
    assert status == 200 and [o["committed"] for o in group["offsets"]] == [1]

    # A timestamp after every record: no offset at or after it, so the log end (as the tool does).
    status, body = call(console_broker, "groups/reset-group/reset-offsets", "POST",
                        {"to": "timestamp", "value": int(time.time() * 1000) + 3_600_000})
    assert status == 200 and body["reset"] == [{"topic": "resets", "partition": 0, "offset": 10}]
    # The earliest timestamp: the first record.
    status, body = call(console_broker, "groups/reset-group/reset-offsets", "POST", {"to": "timestamp", "value": 0})
    assert status == 200 and body["reset"][0]["offset"] == 0
    # Offsets beyond the log are clamped to it.
    status, body = call(console_broker, "groups/reset-group/reset-offsets", "POST", {"to": "offset", "value": 99})
    assert status == 200 and body["reset"][0]["offset"] == 10


def test_bad_input_answers_400_and_404(console_broker: BrokerThread) -> None:
    console_broker.create_topic("bad", partitions=1)
    commit(console_broker, "g-bad", {("bad", 0): 0})
    for body in ({"to": "sideways"}, {"to": "offset"}, {"to": "offset", "value": "x"}, {"to": "offset", "value": -1},
                 {"to": "earliest", "topic": 5}):
        status, answer = call(console_broker, "groups/g-bad/reset-offsets", "POST", body)
        assert status == 400 and answer["error"] == "INVALID_REQUEST", (body, answer)
    assert call(console_broker, "groups/g-bad/reset-offsets", "POST", b"{not json")[0] == 400
    assert call(console_broker, "groups/nope")[0] == 404
    assert call(console_broker, "groups/g-bad/reset-offsets", "POST", {"to": "earliest", "topic": "missing"})[0] == 404
    # Deleted: gone from the list.
    assert call(console_broker, "groups/g-bad", "DELETE") == (200, {"deleted": "g-bad"})
    assert call(console_broker, "groups")[1] == {"groups": []}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_members_and_assignment_and_no_reset_while_members(protocol: str, page: Any) -> None:
    with BrokerThread(http_port=0, group_initial_rebalance_delay_ms=0) as broker:
        broker.create_topic("members", partitions=2)
        produce(broker, "members", {0: 3, 1: 3})
        settings = {"bootstrap.servers": broker.bootstrap, "group.id": f"live-{protocol}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False, "client.id": f"console-{protocol}", "group.protocol": protocol}
        if protocol == "classic":
            settings["session.timeout.ms"] = 6000
        consumer = Consumer(settings)
        consumer.subscribe(["members"])
        try:
            def assigned() -> Any:
                consumer.poll(0.1)
                status, group = call(broker, f"groups/live-{protocol}")
                return status == 200 and group["members"] and group["members"][0]["assignment"] and group
            group = wait_until(assigned, "an assignment")
            assert group["type"] == protocol and not group["empty"]
            member = group["members"][0]
            assert member["client_id"] == f"console-{protocol}"
            assert member["assignment"] == [["members", 0], ["members", 1]]
            status, answer = call(broker, f"groups/live-{protocol}/reset-offsets", "POST", {"to": "earliest",
                                                                                        "topic": "members"})
            assert status == 409 and answer["error"] == "NON_EMPTY_GROUP"
            assert call(broker, f"groups/live-{protocol}", "DELETE")[0] == 409

            page.goto(console_url(broker, f"/#/groups/live-{protocol}"))
            page.wait_for_selector("#group-members td")
            assert f"console-{protocol}" in page.inner_text("#group-members")
            assert "members-0, members-1" in page.inner_text("#group-members")
            assert page.is_visible("#group-not-empty") and page.is_disabled("#group-delete")
            consumer.commit(offsets=[TopicPartition("members", 0, 1)], asynchronous=False)
            page.wait_for_function("() => document.querySelector('.mk-lag[data-tp=\"members-0\"]')?.textContent === '2'")
        finally:
            consumer.close()
        # Once the member left, the group is empty: its offsets can be reset.
        wait_until(lambda: call(broker, f"groups/live-{protocol}")[1]["empty"], "the member to leave")
        status, answer = call(broker, f"groups/live-{protocol}/reset-offsets", "POST", {"to": "earliest"})
        assert status == 200 and answer["reset"] == [{"topic": "members", "partition": 0, "offset": 0}]


def test_share_group_members_start_offsets_and_reset(console_broker: BrokerThread, page: Any) -> None:
    from confluent_kafka import ShareConsumer

    console_broker.create_topic("shared", partitions=1)
    produce(console_broker, "shared", {0: 5})
    consumer = ShareConsumer({"bootstrap.servers": console_broker.bootstrap, "group.id": "share-group",
                              "client.id": "share-client"})
    consumer.subscribe(["shared"])
    try:
        def initialized() -> Any:
            consumer.poll(0.2)
            status, group = call(console_broker, "groups/share-group")
            return status == 200 and group["members"] and group["offsets"] and group
        group = wait_until(initialized, "the share-partition to be initialized")
        assert (group["type"], group["state"], group["empty"]) == ("share", "Stable", False)
        assert group["members"][0]["client_id"] == "share-client"
        assert group["members"][0]["assignment"] == [["shared", 0]]
        # share.auto.offset.reset=latest: the share-partition starts at the log end.
        assert (group["offsets"][0]["committed"], group["offsets"][0]["lag"]) == (5, 0)
        status, answer = call(console_broker, "groups/share-group/reset-offsets", "POST", {"to": "earliest"})
        assert status == 409 and answer["error"] == "NON_EMPTY_GROUP"
    finally:
        consumer.close()
    wait_until(lambda: call(console_broker, "groups/share-group")[1]["empty"], "the share member to leave")

    page.goto(console_url(console_broker, "/#/groups"))
    page.wait_for_selector("#groups-table td")
    assert "share" in page.inner_text("#groups-table")
    page.click("a.mk-group-link:text-is('share-group')")
    page.wait_for_selector('.mk-lag[data-tp="shared-0"]')
    assert lag_text(page, "shared-0") == "0"
    page.click("#group-reset button[type=submit]")  # to earliest
    page.wait_for_function("() => document.querySelector('.mk-lag[data-tp=\"shared-0\"]')?.textContent === '5'")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#group-delete")
    page.wait_for_selector("#groups-none", state="visible")
    assert call(console_broker, "groups/share-group")[0] == 404


def test_acls_limit_what_a_login_sees_and_does() -> None:
    """With an authorizer, a console login sees the groups it may DESCRIBE, their offsets of the topics it may
    DESCRIBE, and may reset (READ) or delete (DELETE) a group, see the live view (DESCRIBE CLUSTER) or change
    fault rules and captures (ALTER CLUSTER) only when its ACLs say so."""
    import http.cookiejar

    from minikafka.broker.security.acl import (AccessControlEntry, AclBinding, AclOperation, AclPermissionType,
                                               PatternType, ResourcePattern, ResourceType)
    from minikafka.broker.security.authorizer import STANDARD_AUTHORIZER

    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
             "sasl.enabled.mechanisms": "SCRAM-SHA-256",
             "minikafka.scram.users": "alice:SCRAM-SHA-256:alice-secret",
             "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    with BrokerThread(properties=props, http_port=0) as broker:
        for topic in ("visible", "hidden"):
            broker.create_topic(topic)
        produce(broker, "visible", {0: 4}, idempotent=True)
        produce(broker, "hidden", {0: 4}, idempotent=True)
        for group in ("alice-group", "other-group"):
            commit(broker, group, {("visible", 0): 1, ("hidden", 0): 1})

        def allow(rtype: ResourceType, name: str, *ops: AclOperation) -> list[AclBinding]:
            return [AclBinding(ResourcePattern(rtype, name, PatternType.LITERAL),
                               AccessControlEntry("User:alice", "*", op, AclPermissionType.ALLOW)) for op in ops]
        acls = allow(ResourceType.TOPIC, "visible", AclOperation.DESCRIBE, AclOperation.READ) + \
            allow(ResourceType.GROUP, "alice-group", AclOperation.DESCRIBE)
        assert broker.broker is not None and broker.broker.authorizer is not None
        authorizer = broker.broker.authorizer
        broker.call(lambda: authorizer.create_acls(acls))

        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        def as_alice(path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
            return call(broker, path, method, body, opener=opener)

        assert as_alice("groups")[0] == 401
        assert as_alice("login", "POST", {"username": "alice", "password": "alice-secret"})[0] == 200
        status, listed = as_alice("groups")
        assert status == 200 and [g["group_id"] for g in listed["groups"]] == ["alice-group"]
        assert listed["groups"][0]["total_lag"] == 3  # of "visible" only
        status, group = as_alice("groups/alice-group")
        assert status == 200 and [o["topic"] for o in group["offsets"]] == ["visible"]
        assert as_alice("groups/other-group")[0] == 403
        assert as_alice("groups/alice-group/reset-offsets", "POST", {"to": "earliest"})[0] == 403
        assert as_alice("groups/alice-group", "DELETE")[0] == 403
        status, txns = as_alice("transactions")  # producers of the topics alice may READ only
        assert status == 200 and [p["topic"] for p in txns["producers"]] == ["visible"]
        for path, method in (("live", "GET"), ("faults", "GET"), ("faults", "POST"), ("faults", "DELETE"),
                             ("captures", "GET"), ("captures/start", "POST"), ("captures/analyze", "POST")):
            status, answer = as_alice(path, method, {} if method == "POST" else None)
            assert status == 403 and answer["error"] == "AUTHORIZATION_FAILED", (path, method)

        # READ on the group (and on the topic) lets alice reset its offsets; DELETE lets her delete it.
        more = allow(ResourceType.GROUP, "alice-group", AclOperation.READ, AclOperation.DELETE)
        broker.call(lambda: authorizer.create_acls(more))
        assert as_alice("groups/alice-group/reset-offsets", "POST", {"to": "earliest", "topic": "hidden"})[0] == 403
        status, answer = as_alice("groups/alice-group/reset-offsets", "POST", {"to": "latest", "topic": "visible"})
        assert status == 200 and answer["reset"] == [{"topic": "visible", "partition": 0, "offset": 4}]
        assert as_alice("groups/alice-group", "DELETE") == (200, {"deleted": "alice-group"})


def test_group_ids_with_a_slash(console_broker: BrokerThread, page: Any) -> None:
    """Group ids are any string: one with "/" is described, reset and deleted, in the API and the page."""
    console_broker.create_topic("slashed", partitions=1)
    produce(console_broker, "slashed", {0: 4})
    commit(console_broker, "team/a", {("slashed", 0): 1})
    path = "groups/" + urllib.parse.quote("team/a", safe="")
    status, group = call(console_broker, path)
    assert status == 200 and group["group_id"] == "team/a" and group["total_lag"] == 3
    status, reset = call(console_broker, path + "/reset-offsets", "POST", {"to": "latest"})
    assert status == 200 and reset["reset"] == [{"topic": "slashed", "partition": 0, "offset": 4}]
    page.goto(console_url(console_broker, "/#/groups"))
    page.click("a.mk-group-link:text-is('team/a')")
    page.wait_for_selector('.mk-lag[data-tp="slashed-0"]')
    assert lag_text(page, "slashed-0") == "0"
    assert call(console_broker, path, "DELETE") == (200, {"deleted": "team/a"})
    assert call(console_broker, path)[0] == 404
