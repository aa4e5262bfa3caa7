"""Headless Firefox for the web console's cross-browser test, driven over WebDriver BiDi.

Debian's ``firefox-esr`` (installed by ``scripts/install-test-tools``) speaks WebDriver BiDi itself
(``--remote-debugging-port``), so no geckodriver is needed (Debian has none, and Playwright's Firefox is a
patched build this machine cannot download).  :class:`Firefox` is the few BiDi commands a test needs:
navigate, evaluate a script, wait for a condition.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from waiting import wait_for

_LISTENING = re.compile(rb"WebDriver BiDi listening on (ws://\S+)")


def firefox_path() -> str | None:
    return os.environ.get("MINIKAFKA_FIREFOX") or shutil.which("firefox-esr") or shutil.which("firefox")


_RECORD_ERRORS = """() => {
  window.__errors = [];
  window.addEventListener("error", e => window.__errors.push(String(e.message)));
  window.addEventListener("unhandledrejection", e => window.__errors.push(String(e.reason)));
}"""


class BiDiError(Exception):
    """An error answer to a WebDriver BiDi command."""


class Firefox:
    """One headless Firefox and one browsing context."""

    def __init__(self, path: str, timeout: float = 60.0) -> None:
        from websockets.sync.client import connect

        self._profile = tempfile.mkdtemp(prefix="minikafka-firefox-")
        with open(os.path.join(self._profile, "user.js"), "w") as prefs:  # no network but localhost
            prefs.write('user_pref("network.proxy.type", 0);\nuser_pref("app.update.enabled", false);\n'
                        'user_pref("browser.shell.checkDefaultBrowser", false);\n'
                        'user_pref("datareporting.policy.dataSubmissionEnabled", false);\n')
        self._proc = subprocess.Popen([path, "--headless", "--no-remote", "--profile", self._profile,
                                       "--remote-debugging-port=0", "about:blank"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert self._proc.stderr is not None
        url = None
        deadline = time.monotonic() + timeout
        while url is None and time.monotonic() < deadline:
            line = self._proc.stderr.readline()
            if not line and self._proc.poll() is not None:
                raise RuntimeError(f"firefox exited with {self._proc.returncode}")
            if (m := _LISTENING.search(line)) is not None:
                url = m.group(1).decode()
        if url is None:
            self.close()
            raise RuntimeError("firefox did not start WebDriver BiDi")
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        self._ws = self._stack.enter_context(connect(url.rstrip("/") + "/session", max_size=None,
                                                     open_timeout=timeout))
        self.command("session.new", {"capabilities": {}})
        tree = self.command("browsingContext.getTree", {})
        self.context = tree["contexts"][0]["context"]
        # Every page records its uncaught errors in window.__errors (see errors()).
        self.command("script.addPreloadScript", {"functionDeclaration": _RECORD_ERRORS})

    def command(self, method: str, params: dict[str, Any]) -> Any:
        """Send one BiDi command and return its result (events in between are ignored)."""
        cid = next(self._ids)
        self._ws.send(json.dumps({"id": cid, "method": method, "params": params}))
        while True:
            msg = json.loads(self._ws.recv(timeout=60))
            if msg.get("id") == cid:
                if msg.get("type") == "error":
                    raise BiDiError(f"{method}: {msg.get('error')}: {msg.get('message')}")
                return msg["result"]

    def goto(self, url: str) -> None:
        self.command("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def evaluate(self, expression: str) -> Any:
        """The JSON value of ``expression`` (awaited if a promise) in the page."""
        result = self.command("script.evaluate", {
            "expression": f"(async () => JSON.stringify(await ({expression})))()",
            "target": {"context": self.context}, "awaitPromise": True})
        if result.get("type") == "exception":
            raise BiDiError(str(result.get("exceptionDetails", {}).get("text")))
        value = result["result"].get("value")
        return None if value is None else json.loads(value)

    def errors(self) -> list[str]:
        """The page's uncaught JavaScript errors and unhandled promise rejections so far."""
        return self.evaluate("window.__errors || []")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        return wait_for(lambda: self.evaluate(expression), timeout, f"{expression} to be true", interval=0.05)

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            try:
                self.command("session.end", {})
            except Exception:
                pass
            self._stack.close()
        self._proc.kill()
        self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


@pytest.fixture(scope="module")
def firefox() -> Iterator[Firefox]:
    """A headless Firefox (skipped when none is installed)."""
    path = firefox_path()
    if path is None:
        pytest.skip("firefox is not installed (scripts/install-test-tools installs Debian's firefox-esr)")
    pytest.importorskip("websockets")
    browser = Firefox(path)
    try:
        yield browser
    finally:
        browser.close()
