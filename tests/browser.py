"""Headless Chromium for the tests of the web console and the analysis report.

Debian's ``chromium`` (installed by ``scripts/install-test-tools``) driven by Playwright's Python API
(``playwright`` from the test extra; no browser download: it launches ``/usr/bin/chromium``).  The
flags keep Chromium off the network this machine does not have.  Playwright's sync API runs in the
test's thread, so a broker under test runs on a :class:`~minikafka.testing.BrokerThread`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    """The Chromium binary (``MINIKAFKA_CHROMIUM`` overrides), or None when none is installed."""
    return os.environ.get("MINIKAFKA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A Playwright ``Browser`` on headless Chromium, shared by a module's tests."""
    path = chromium_path()
    if path is None:
        pytest.skip("chromium is not installed (scripts/install-test-tools installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    """A fresh page (its own context: no cookies shared between tests) that fails the test on a
    JavaScript error."""
    context = chromium.new_context()
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(30_000)
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"
