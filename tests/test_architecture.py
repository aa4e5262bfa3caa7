"""The package's dependency rules, checked on the AST of every import (module- and function-level,
``TYPE_CHECKING`` blocks included).

* No import cycle among minikafka's modules.
* ``protocol`` is pure wire format: it imports nothing outside itself and never Trio.
* ``common`` and ``metrics`` import no other minikafka package (but metrics reads ``common.clock``) and no
  Trio; the client never imports the broker, nor do the command-line tools (``tools``).
* Handlers never touch sockets and never see the whole broker: they import neither the socket server,
  the broker, the cluster nor Trio's socket module.
* Packages (``minikafka.<name>``, a module of the top level counting as a package of its own): each imports
  only the packages :data:`ALLOWED` lists for it, every package is in that table, and neither the table nor
  the package graph has a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "minikafka"


def _modules() -> dict[str, tuple[Path, str]]:
    """module name -> (file, package its relative imports start from)."""
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
            package = ".".join(parts)
        else:
            package = ".".join(parts[:-1])
        out[".".join(parts)] = (path, package)
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The minikafka module an imported name lives in (None outside minikafka)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Every name ``module`` imports (absolute, dotted), wherever the import statement is."""
    path, package = MODULES[module]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                full = ".".join(base + ([node.module] if node.module else []))
            else:
                full = node.module or ""
            names.add(full)
            names.update(f"{full}.{a.name}" for a in node.names)
    return names


GRAPH = {m: {r for n in _imports(m) if (r := _resolve(n)) and r != m} for m in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_imports() -> None:
    assert "minikafka.broker.apis" in GRAPH["minikafka.broker.server"]
    assert "minikafka.protocol.framing" in GRAPH["minikafka.broker.server"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


@pytest.mark.parametrize("package,allowed", [
    ("minikafka.protocol", ["minikafka.protocol"]),
    ("minikafka.common", ["minikafka.common"]),
    # Kafka's metrics read Kafka's Time: the one module of common/ metrics may import is the clock.
    ("minikafka.metrics", ["minikafka.metrics", "minikafka.common.clock"]),
    ("minikafka.client", ["minikafka.client", "minikafka.protocol", "minikafka.common", "minikafka.metrics",
                          "minikafka.iovec"]),
    # The command-line tools work against any Kafka broker: through the clients, never the broker.
    ("minikafka.tools", ["minikafka.tools", "minikafka.client", "minikafka.protocol", "minikafka.common",
                         "minikafka.metrics"]),
])
def test_layers_import_only_below_them(package: str, allowed: list[str]) -> None:
    bad = {(m, d) for m, deps in GRAPH.items() if _under(m, package) for d in deps
           if not any(_under(d, a) for a in allowed)}
    assert bad == set()


@pytest.mark.parametrize("package", ["minikafka.protocol", "minikafka.common", "minikafka.metrics"])
def test_pure_layers_never_import_trio(package: str) -> None:
    assert {m for m in MODULES if _under(m, package) and any(_under(n, "trio") for n in _imports(m))} == set()


def test_handlers_never_touch_sockets_or_the_broker() -> None:
    forbidden = ["minikafka.broker.server", "minikafka.broker.broker", "minikafka.broker.cluster",
                 "minikafka.broker.apis", "trio.socket", "socket"]
    bad = {(m, n) for m in MODULES if _under(m, "minikafka.broker.handlers") for n in _imports(m)
           if any(_under(n, f) for f in forbidden)}
    assert bad == set()


# -- packages -----------------------------------------------------------------------------------------------

ROOT_PACKAGE = "minikafka"  # minikafka/__init__.py: the version; ``from .. import web`` names it too


def _package(module: str) -> str:
    """``minikafka.<name>`` of a module (``minikafka`` itself for the package's ``__init__``)."""
    return ".".join(module.split(".")[:2])


#: Which packages each package may import (besides itself and the package root's version).  docs/architecture.md
#: draws its layers from this table; a new package needs a line here.
ALLOWED: dict[str, set[str]] = {
    # Pure layers: wire format, shared value types and the clock, Kafka's metrics, buffers, static assets.
    "protocol": set(),
    "common": set(),
    "metrics": {"common"},
    "iovec": set(),
    "web": set(),
    # Kafka's clients and the command-line tools built on them (they work against any Kafka broker).
    "client": {"protocol", "common", "metrics", "iovec"},
    "tools": {"client", "protocol", "common", "metrics"},
    # The broker (and its HTTP port and console); inter-broker traffic goes through the client's connection.
    # It never imports the capture: it is handed one (broker.recording.CaptureSupport) by whoever starts it.
    "broker": {"protocol", "common", "metrics", "iovec", "web", "client"},
    # Capture, pcap export and replay: a request observer of the broker, replaying through the client.
    "capture": {"broker", "client", "protocol", "common", "iovec", "tools"},
    # Analysis of captures with Spark: reads captures and replays them, reuses the broker's quota models.
    "analysis": {"capture", "broker", "protocol", "common", "metrics", "tools", "web"},
    # A cluster of processes (a controller and brokers, each a ``minikafka serve``): started and failed by signals.
    "supervisor": set(),
    # Composition roots: test helpers, the pytest plugin, the command line.
    "testing": {"broker", "capture"},
    "pytest_plugin": {"testing", "broker", "capture", "supervisor"},
    "cli": {"broker", "capture", "analysis", "client", "tools", "protocol", "common", "supervisor"},
    "__main__": {"cli"},
}

PACKAGES = sorted({_package(m).removeprefix(ROOT_PACKAGE).lstrip(".") for m in MODULES} - {""})


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {p: set() for p in PACKAGES}
    for module, deps in GRAPH.items():
        source = _package(module).removeprefix(ROOT_PACKAGE).lstrip(".")
        for dep in deps:
            target = _package(dep).removeprefix(ROOT_PACKAGE).lstrip(".")
            if source and target and target != source:
                graph[source].add(target)
    return graph


PACKAGE_GRAPH = _package_graph()


def _package_edges(source: str, target: str) -> set[tuple[str, str]]:
    """The module imports behind the package edge ``source -> target``."""
    return {(m, d) for m, deps in GRAPH.items() if _package(m) == f"{ROOT_PACKAGE}.{source}" for d in deps
            if _package(d) == f"{ROOT_PACKAGE}.{target}"}


def test_every_package_has_its_allowed_dependencies() -> None:
    assert sorted(ALLOWED) == PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_import_only_what_the_table_allows(package: str) -> None:
    bad = {dep: sorted(_package_edges(package, dep)) for dep in PACKAGE_GRAPH[package] - ALLOWED.get(package, set())}
    assert bad == {}


def test_the_table_allows_no_cycle() -> None:
    """The allowed table itself is a layering."""
    assert _sccs(ALLOWED) == []


def test_no_package_cycles() -> None:
    assert _sccs(PACKAGE_GRAPH) == []


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (iterative: the package graph is small)."""
    reach = {v: _reachable(graph, v) for v in graph}
    found = {tuple(sorted(w for w in reach[v] if v in reach[w])) for v in graph}
    return sorted(list(c) for c in found if len(c) > 1)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen = {start}
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_package_checker_sees_cycles() -> None:
    assert _sccs({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_broker_uses_the_client_only_for_inter_broker_connections() -> None:
    """The broker connects to other brokers with the client's connection (replica fetchers, transaction
    markers); wire formats they share are in protocol/ (the ConsumerProtocol) or common/ (murmur2)."""
    inter_broker = {"minikafka.client.connection", "minikafka.client.security", "minikafka.client.fetch_session"}
    assert {d for _, d in _package_edges("broker", "client")} - inter_broker == set()


def test_analysis_uses_the_broker_models_not_its_server() -> None:
    """The analysis replays the broker's own quota arithmetic (its quota managers, fetch response sizes); it
    never imports the broker's server, its composition roots, its console or its handlers."""
    forbidden = ["minikafka.broker.server", "minikafka.broker.broker", "minikafka.broker.cluster",
                 "minikafka.broker.apis", "minikafka.broker.console", "minikafka.broker.admin_http",
                 "minikafka.broker.handlers"]
    bad = {(m, d) for m, d in _package_edges("analysis", "broker") if any(_under(d, f) for f in forbidden)}
    assert bad == set()
