"""The console's cluster page on a 3-broker cluster: brokers and partition leadership shown, a broker
stopped from the page (leadership moves, partitions under-replicated) and started again; a lone broker
offers no controls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from console_helpers import console_url, http
from minikafka.testing import BrokerThread, ClusterThread




@pytest.fixture(scope="module")
def cluster() -> Iterator[ClusterThread]:
    with ClusterThread(3, http_port=0) as c:
        yield c


def state_of(page: Any, broker_id: int) -> str:
    return page.locator("#brokers tbody tr").nth(broker_id).locator("td").nth(2).inner_text()


def test_cluster_page_stops_and_restarts_a_broker(cluster: ClusterThread, page: Any) -> None:
    assert cluster.call(lambda: cluster.cluster.metadata.create_topic("replicated", 3, 3)) is not None
    page.goto(console_url(cluster, "/#/cluster"))
    page.locator("#brokers tbody tr").nth(2).wait_for()
    assert page.locator("#cluster-id").inner_text() == "minikafka-cluster-0000"
    assert [state_of(page, i) for i in range(3)] == ["running"] * 3
    assert page.locator("#partitions tbody tr").count() == 3
    # Every broker offers a stop, a crash, a pause and an isolation; none a start, resume or heal (all running).
    actions = page.eval_on_selector_all("#brokers button.mk-action", "bs => bs.map(b => b.dataset.action)")
    assert sorted(actions) == ["crash"] * 3 + ["isolate"] * 3 + ["pause"] * 3 + ["stop"] * 3

    page.click("#brokers button[data-broker='2'][data-action='stop']")
    page.wait_for_selector("#brokers tbody tr:nth-child(3) :text('stopped')")
    assert cluster.running_brokers == [0, 1]
    # Leadership left broker 2, and its replicas are out of the ISR.
    page.wait_for_function("""() => [...document.querySelectorAll('#partitions tbody tr')].every(
        r => r.cells[2].textContent !== '2' && r.cells[6].textContent.includes('yes'))""")
    status, overview = http(cluster, "GET", "/console/api/cluster")
    assert status == 200 and all(p["leader"] != 2 and 2 not in p["isr"] for p in overview["partitions"])
    assert overview["brokers"][2]["leaders"] == 0

    page.click("#brokers button[data-broker='2'][data-action='start']")
    page.wait_for_selector("#brokers tbody tr:nth-child(3) :text('running')")
    assert cluster.running_brokers == [0, 1, 2]
    # The restarted follower catches up and rejoins the ISR.
    page.wait_for_function("""() => [...document.querySelectorAll('#partitions tbody tr')].every(
        r => r.cells[6].textContent.includes('no'))""", timeout=30_000)

    # A crash: the broker is gone at once, still registered (not fenced) until its session expires.
    page.click("#brokers button[data-broker='1'][data-action='crash']")
    page.wait_for_selector("#brokers tbody tr:nth-child(2) :text('crashed, not yet fenced')")
    assert cluster.running_brokers == [0, 2] and 1 in cluster.cluster.metadata.live
    page.click("#brokers button[data-broker='1'][data-action='start']")
    page.wait_for_selector("#brokers tbody tr:nth-child(2) :text('running')")
    assert cluster.running_brokers == [0, 1, 2]


def test_cluster_page_pauses_isolates_and_partitions_brokers(cluster: ClusterThread, page: Any) -> None:
    for i in cluster.broker_ids:  # whatever an earlier test of this module left stopped
        cluster.start_broker(i)
    page.goto(console_url(cluster, "/#/cluster"))
    page.locator("#brokers tbody tr").nth(2).wait_for()
    page.wait_for_function("() => document.querySelectorAll('#brokers button[data-action=pause]').length === 3")

    page.click("#brokers button[data-broker='1'][data-action='pause']")
    page.wait_for_selector("#brokers tbody tr:nth-child(2) :text('paused')")
    assert cluster.broker_state(1) == "paused"
    offered = page.eval_on_selector_all("#brokers button[data-broker='1']", "bs => bs.map(b => b.dataset.action)")
    assert sorted(offered) == ["crash", "resume"]  # a paused process is killed, not shut down
    page.click("#brokers button[data-broker='1'][data-action='resume']")
    page.wait_for_selector("#brokers tbody tr:nth-child(2) :text('running')")
    assert cluster.broker_state(1) == "running"

    # Isolated from the broker row, healed from the network partitions table.
    page.click("#brokers button[data-broker='2'][data-action='isolate']")
    page.wait_for_selector("#brokers tbody tr:nth-child(3) :text('partitioned')")
    row = page.locator("#network tbody tr").first
    assert row.locator("td").nth(1).inner_text() == "2 | 0 1 clients controller"
    assert row.locator("td").nth(2).inner_text() == "when healed"
    row.locator("button").click()
    page.wait_for_selector("#brokers tbody tr:nth-child(3) :text('running')")
    assert cluster.call(lambda: dict(cluster.cluster.links.partitions)) == {}

    # Any sides from the form, for a time.
    page.fill("#partition-sides", "0 | clients")
    page.fill("#partition-seconds", "600")
    page.click("#partition-form button[type=submit]")
    page.wait_for_selector("#network tbody tr")
    assert page.locator("#network tbody tr td").nth(1).inner_text() == "0 | clients"
    assert page.locator("#network tbody tr td").nth(2).inner_text().endswith(" s")
    assert cluster.broker_state(0) == "partitioned"
    cluster.heal_network()
    page.wait_for_function("() => document.querySelectorAll('#network tbody tr').length === 0", timeout=30_000)


def test_network_failures_over_the_http_port(cluster: ClusterThread) -> None:
    for i in cluster.broker_ids:
        cluster.start_broker(i)
    status, body = http(cluster, "POST", "/v1/network/partitions", {"sides": [[0], [1, "controller"]],
                                                                   "heal_after_s": 600})
    assert status == 201 and body["sides"] == [[0], [1, "controller"]] and 0 < body["heals_in_s"] <= 600
    status, net = http(cluster, "GET", "/v1/network")
    assert status == 200 and net["paused"] == [] and [p["id"] for p in net["partitions"]] == [body["id"]]
    assert http(cluster, "POST", "/v1/brokers/2/pause")[1] == {"id": 2, "state": "paused"}
    states = {b["id"]: b["state"] for b in http(cluster, "GET", "/v1/brokers")[1]["brokers"]}
    assert states == {0: "partitioned", 1: "partitioned", 2: "paused"}
    assert http(cluster, "POST", "/v1/brokers/2/resume")[1] == {"id": 2, "state": "running"}
    status, isolated = http(cluster, "POST", "/v1/brokers/2/isolate", {"heal_after_s": 600})
    assert status == 201 and isolated["sides"] == [[2], [0, 1, "clients", "controller"]]
    assert http(cluster, "POST", "/v1/brokers/2/heal")[1] == {"healed": [isolated["id"]]}
    assert http(cluster, "DELETE", f"/v1/network/partitions/{body['id']}")[1] == {"healed": [body["id"]]}
    assert http(cluster, "DELETE", f"/v1/network/partitions/{body['id']}")[0] == 404
    for bad in ({"sides": [[0]]}, {"sides": [[0], [9]]}, {"sides": "0|1"}, {"sides": [[0], [1]], "heal_after_s": -1},
                {"sides": [[0], ["nobody"]]}):
        status, err = http(cluster, "POST", "/v1/network/partitions", bad)
        assert (status, err["error"]) == (400, "INVALID_REQUEST"), bad
    assert http(cluster, "DELETE", "/v1/network/partitions")[1] == {"healed": []}
    assert http(cluster, "GET", "/v1/network")[1] == {"paused": [], "partitions": []}


def test_cluster_controls_refuse_bad_requests(cluster: ClusterThread) -> None:
    before = cluster.running_brokers  # whatever an earlier test of this module left running
    assert http(cluster, "POST", "/console/api/cluster/brokers/7/stop")[0] == 404
    status, body = http(cluster, "POST", "/console/api/cluster/brokers/1/explode")
    assert (status, body["error"]) == (404, "UNKNOWN_ACTION")
    assert http(cluster, "POST", "/console/api/cluster/brokers/x/stop")[0] == 404  # no route: not a broker id
    assert cluster.running_brokers == before  # nothing was stopped


def test_a_lone_broker_has_no_controls(console_broker: BrokerThread) -> None:
    status, overview = http(console_broker, "GET", "/console/api/cluster")
    assert status == 200 and overview["actions"] == [] and overview["is_cluster"] is False
    assert [b["running"] for b in overview["brokers"]] == [True]
    assert http(console_broker, "POST", "/console/api/cluster/brokers/0/stop")[0] == 409
