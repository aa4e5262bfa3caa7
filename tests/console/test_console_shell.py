"""The console's page loads from the installed package: shared assets served, every area in the menu."""

from __future__ import annotations

from typing import Any

from console_helpers import console_url, http
from minikafka.broker.console.context import AREAS
from minikafka.testing import BrokerThread


def test_static_assets_served(console_broker: BrokerThread) -> None:
    for path in ("/console/static/vendor/uPlot.iife.min.js", "/console/static/tables.js",
                 "/console/static/app.js", "/console/static/style.css"):
        status, body = http(console_broker, "GET", path)
        assert status == 200 and len(body) > 500
    assert http(console_broker, "GET", "/console/api/whoami") == (200, {"auth_required": False, "principal": None})


def test_menu_lists_every_area(console_broker: BrokerThread, page: Any) -> None:
    page.goto(console_url(console_broker))
    page.wait_for_selector("#mk-nav a")
    assert page.eval_on_selector_all("#mk-nav a", "els => els.map(e => e.dataset.page)") == list(AREAS)
    assert page.evaluate("typeof uPlot") == "function"


def test_unknown_api_path_is_a_json_404(console_broker: BrokerThread) -> None:
    status, body = http(console_broker, "GET", "/console/api/no/such/thing")
    assert status == 404 and body["error"] == "NOT_FOUND"
