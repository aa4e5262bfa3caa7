"""Running the Node.js Kafka clients (``@platformatic/kafka``, KafkaJS) from tests.

The clients are npm packages that ``scripts/install-test-tools`` installs into ``tests/node/node_modules``
(pinned by ``tests/node/package-lock.json``); small scripts there (``platformatic.mjs``, ``kafkajs.mjs``,
``delegation_tokens.mjs``, sharing ``common.mjs``) take an action and a JSON spec and print the client's
answers as JSON.  :class:`RequestLog` records the requests the broker answered, so tests can say which API
versions a client negotiated and as which principal it acted.

Imported as ``node_clients`` (``tests/`` is on the pytest pythonpath).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import trio

from minikafka.broker.request import RequestContext, ResponseObserver
from minikafka.common import TopicPartition
from minikafka.protocol.api import APIS
from minikafka.testing import BrokerThread
from clients_common import unique_name

NODE = shutil.which("node")
NODE_DIR = Path(__file__).resolve().parents[1] / "node"
NODE_TIMEOUT_S = 60
DEFAULT_NODE_MIN = (20, 19)  # when package.json's engines.node is not a plain ">=major.minor[.patch]"


def node_minimum() -> tuple[int, ...]:
    """The lowest Node.js version ``tests/node/package.json`` accepts (its ``engines.node``, ``>=X.Y``)."""
    engines = json.loads((NODE_DIR / "package.json").read_text(encoding="utf-8")).get("engines", {})
    m = re.fullmatch(r"\s*>=\s*v?(\d+(?:\.\d+){0,2})\s*", str(engines.get("node", "")))
    return tuple(int(n) for n in m.group(1).split(".")) if m else DEFAULT_NODE_MIN


@functools.cache
def node_version() -> tuple[int, ...] | None:
    """The installed Node.js version (``node --version``), None when it cannot be told."""
    if NODE is None:
        return None
    try:
        out = subprocess.run([NODE, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.fullmatch(r"\s*v?(\d+)\.(\d+)\.(\d+)\S*\s*", out)
    return tuple(int(n) for n in m.groups()) if m else None


def package_dir(package: str) -> Path:
    return NODE_DIR / "node_modules" / package


def package_version(package: str) -> str | None:
    """The installed version of an npm package in tests/node, or None when it is not installed."""
    manifest = package_dir(package) / "package.json"
    if not manifest.is_file():
        return None
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def require_package(package: str) -> str:
    """Skip the test unless Node.js (at least the version package.json's ``engines`` names) and ``package``
    are installed; the package's version."""
    if NODE is None:
        pytest.skip("node is not installed")
    have, need = node_version(), node_minimum()
    if have is None or have < need:
        shown = "unknown" if have is None else ".".join(map(str, have))
        pytest.skip(f"Node.js {shown} is older than the {'.'.join(map(str, need))} tests/node/package.json needs")
    version = package_version(package)
    if version is None:
        pytest.skip(f"npm package {package} is not installed in tests/node (scripts/install-test-tools installs it)")
    return version


def run_node(script: str, action: str, spec: dict[str, Any], timeout: float = NODE_TIMEOUT_S) -> Any:
    """Run ``node tests/node/<script> <action> '<spec JSON>'`` and return its JSON answer; fail the test
    with the script's output when it exits non-zero."""
    assert NODE is not None
    proc = subprocess.run([NODE, script, action, json.dumps(spec)], cwd=NODE_DIR, capture_output=True, text=True,
                          timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        pytest.fail(f"{script} {action} exited {proc.returncode}:\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return json.loads(lines[-1])


def run_script(script: str, client_prefix: str, action: str, broker: BrokerThread, **spec: Any) -> Any:
    """:func:`run_node` against ``broker`` (its bootstrap in the spec), with a fresh client id starting with
    ``client_prefix`` and the action unless the spec names one."""
    spec.setdefault("clientId", unique_name(client_prefix + action))
    return run_node(script, action, {"bootstrap": broker.bootstrap, **spec})


def ok_result(results: list[dict[str, Any]], i: int) -> Any:
    """What call ``i`` of an ``admin`` action answered; fails the test with its error if it failed."""
    assert "ok" in results[i], (i, results[i])
    return results[i]["ok"]


def committed(broker: BrokerThread, group: str) -> dict[TopicPartition, int]:
    """The group's committed offsets, read with minikafka's admin client."""
    from minikafka.tools.admin import AdminClient

    async def main() -> dict[TopicPartition, int]:
        async with AdminClient(broker.bootstrap) as admin:
            return await admin.committed_offsets(group)
    return trio.run(main)


class Answered(NamedTuple):
    """One request the broker answered, as the tests look at it."""

    client_id: str
    api_key: int
    api_version: int
    principal: str
    token_authenticated: bool


class RequestLog:
    """Every request the broker answered (:class:`Answered`), filled on the broker's thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Answered] = []

    def on_response(self, ctx: RequestContext, frame: bytearray, segments: list | None) -> None:
        with self.lock:
            self.requests.append(Answered(ctx.client_id or "", ctx.api_key, ctx.api_version, ctx.principal,
                                          ctx.token_authenticated))

    def install(self, broker: BrokerThread) -> "RequestLog":
        b = broker.broker
        assert b is not None
        broker.call(lambda: b.observe(ResponseObserver(self.on_response)))
        return self

    def answered(self) -> list[Answered]:
        with self.lock:
            return list(self.requests)

    def versions(self, client_prefix: str) -> dict[str, set[int]]:
        """API name -> the versions requests from clients whose id starts with ``client_prefix`` used."""
        out: dict[str, set[int]] = defaultdict(set)
        for r in self.answered():
            if r.client_id.startswith(client_prefix):
                out[APIS[r.api_key].name if r.api_key in APIS else str(r.api_key)].add(r.api_version)
        return dict(sorted(out.items()))


def kebab(name: str) -> str:
    """``ListOffsets`` -> ``list-offsets`` (the file names of @platformatic/kafka's API modules)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


def platformatic_versions() -> dict[str, set[int]]:
    """API name (Kafka's, as minikafka spells it) -> the versions @platformatic/kafka implements, read from
    its ``dist/apis/<group>/<api>-v<N>.js`` modules."""
    by_file: dict[str, set[int]] = defaultdict(set)
    for path in (package_dir("@platformatic/kafka") / "dist" / "apis").glob("*/*-v*.js"):
        m = re.fullmatch(r"(.+)-v(\d+)\.js", path.name)
        if m:
            by_file[m.group(1)].add(int(m.group(2)))
    return {api.name: by_file[kebab(api.name)] for api in APIS.values() if kebab(api.name) in by_file}


def offered_versions(broker: BrokerThread) -> dict[int, tuple[int, int]]:
    """api key -> (min, max) version the broker offers in ApiVersions."""
    from minikafka.client.connection import KafkaConnection

    async def ask() -> dict[int, tuple[int, int]]:
        async with await KafkaConnection.connect("127.0.0.1", broker.port, client_id="versions") as conn:
            return await conn.negotiate()
    return trio.run(ask)
