"""The console's page loads from the installed package: shared assets served, every area in the menu."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from console_helpers import console_url
from minikafka.broker.console.context import AREAS
from minikafka.testing import BrokerThread


def test_static_assets_served(console_broker: BrokerThread) -> None:
    for path in ("/console/static/vendor/uPlot.iife.min.js", "/console/static/tables.js",
                 "/console/static/app.js", "/console/static/style.css"):
        with urllib.request.urlopen(console_url(console_broker, path)) as resp:
            assert resp.status == 200 and len(resp.read()) > 500
    with urllib.request.urlopen(console_url(console_broker, "/console/api/whoami")) as resp:
        assert json.load(resp) == {"auth_required": False, "principal": None}


def test_menu_lists_every_area(console_broker: BrokerThread, page: Any) -> None:
    page.goto(console_url(console_broker))
    page.wait_for_selector("#mk-nav a")
    assert page.eval_on_selector_all("#mk-nav a", "els => els.map(e => e.dataset.page)") == list(AREAS)
    assert page.evaluate("typeof uPlot") == "function"
