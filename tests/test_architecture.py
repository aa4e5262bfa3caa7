"""The package's dependency rules, checked on the AST of every import (module- and function-level,
``TYPE_CHECKING`` blocks included).

* No import cycle among minikafka's modules.
* ``protocol`` is pure wire format: it imports nothing outside itself and never Trio.
* ``common`` and ``metrics`` import no other minikafka package and no Trio; the client never imports the
  broker, nor do the command-line tools (``tools``).
* Handlers never touch sockets and never see the whole broker: they import neither the socket server,
  the broker, the cluster nor Trio's socket module.
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
    ("minikafka.metrics", ["minikafka.metrics"]),
    ("minikafka.client", ["minikafka.client", "minikafka.protocol", "minikafka.common", "minikafka.metrics"]),
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
