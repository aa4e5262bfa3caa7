"""No test waits a fixed time "for something to happen": it waits for the condition itself.

Scans every Python file under tests/ with ``ast`` for ``trio.sleep``/``time.sleep``/``asyncio.sleep``/``sleep``
and ``wait_for_timeout`` calls whose argument is not the constant 0 (``trio.sleep(0)`` is a checkpoint).  A call
is allowed when

- it runs on Trio's virtual clock: the enclosing top-level test or fixture takes the ``autojump_clock`` fixture
  (pytest-trio's ``MockClock(autojump_threshold=0)``), or is a helper of the module called only from such
  functions, so the "sleep" only moves virtual time; or
- its line carries ``# fixed wait: <why>`` (the few polling intervals of the shared wait helpers, and a wait
  that is itself the behaviour under test of a component without an injectable clock).

``clock.sleep(ms)`` on a :class:`minikafka.common.ManualClock` is not a wait (it moves a manual clock).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
JUSTIFICATION = "# fixed wait:"
WAIT_MODULES = {"trio", "time", "asyncio"}
VIRTUAL_CLOCK_FIXTURES = {"autojump_clock"}


def _is_wait_call(node: ast.Call) -> bool:
    f = node.func
    if isinstance(f, ast.Attribute):
        if f.attr == "wait_for_timeout":
            return True
        return f.attr == "sleep" and isinstance(f.value, ast.Name) and f.value.id in WAIT_MODULES
    return isinstance(f, ast.Name) and f.id == "sleep"


def _is_checkpoint(node: ast.Call) -> bool:
    return len(node.args) == 1 and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0


def _takes_virtual_clock(fn: ast.AST) -> bool:
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    a = fn.args
    return any(p.arg in VIRTUAL_CLOCK_FIXTURES for p in a.posonlyargs + a.args + a.kwonlyargs)


def _on_virtual_clock(functions: list[ast.AST]) -> set[str]:
    """Names of the module's functions that run on the virtual clock: those taking ``autojump_clock``, and
    helpers only ever called from such functions (to a fixpoint)."""
    named = {fn.name: fn for fn in functions if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))}
    virtual = {name for name, fn in named.items() if _takes_virtual_clock(fn)}
    callers: dict[str, set[str]] = {name: set() for name in named}
    for name, fn in named.items():
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in callers:
                callers[node.func.id].add(name)
    while True:
        more = {name for name, by in callers.items() if name not in virtual and by and by <= virtual}
        if not more:
            return virtual
        virtual |= more


def fixed_waits(path: Path) -> list[tuple[int, str]]:
    """(line, source line) of every unjustified fixed wait in ``path``."""
    text = path.read_text(encoding="utf-8")
    if "sleep(" not in text and "wait_for_timeout(" not in text:
        return []
    lines = text.splitlines()
    out = []
    functions = [fn for top in ast.parse(text, filename=str(path)).body
                 for fn in (top.body if isinstance(top, ast.ClassDef) else [top])]
    virtual = _on_virtual_clock(functions)
    for fn in functions:
        if getattr(fn, "name", None) in virtual:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and _is_wait_call(node) and not _is_checkpoint(node):
                line = lines[node.lineno - 1]
                if JUSTIFICATION not in line:
                    out.append((node.lineno, line.strip()))
    return sorted(out)


def python_sources() -> Iterator[Path]:
    """Every Python file under tests/ (not the Node clients' node_modules)."""
    for root, dirs, files in os.walk(TESTS):
        dirs[:] = sorted(d for d in dirs if d not in ("node_modules", "__pycache__"))
        yield from (Path(root) / f for f in sorted(files) if f.endswith(".py"))


def test_no_fixed_waits_in_tests() -> None:
    found = [f"{p.relative_to(TESTS.parent)}:{n}: {src}" for p in python_sources() for n, src in fixed_waits(p)]
    assert not found, "fixed waits (wait for the condition instead, or justify with '# fixed wait: <why>'):\n" \
        + "\n".join(found)


def test_the_scan_finds_waits_and_honours_justifications(tmp_path: Path) -> None:
    src = tmp_path / "sample.py"
    src.write_text(
        "import time, trio\n"
        "async def test_a():\n"
        "    await trio.sleep(0.3)\n"
        "    await trio.sleep(0)\n"
        "    time.sleep(DELAY)\n"
        "    page.wait_for_timeout(100)\n"
        "    clock.sleep(1000)\n"
        "    time.sleep(0.05)  # fixed wait: the interval under test\n"
        "async def test_b(autojump_clock):\n"
        "    await trio.sleep(30)\n"
        "class TestC:\n"
        "    def test_c(self):\n"
        "        time.sleep(1)\n"
        "async def helper(delay):\n"
        "    await trio.sleep(delay)\n"
        "async def test_d(autojump_clock):\n"
        "    await helper(5)\n"
        "async def shared():\n"
        "    await trio.sleep(1)\n"
        "async def test_e(autojump_clock):\n"
        "    await shared()\n"
        "async def test_f():\n"
        "    await shared()\n")
    assert [n for n, _ in fixed_waits(src)] == [3, 5, 6, 13, 19]


def test_the_justified_list_stays_tiny() -> None:
    """The polling intervals of tests/waiting.py, and waits that are the measured behaviour itself: a workload's
    pace or a rate window with third-party clients or captures, whose clocks cannot be mocked."""
    justified = [f"{p.relative_to(TESTS.parent)}: {line.strip()}" for p in python_sources()
                 if p != Path(__file__).resolve()
                 for line in p.read_text(encoding="utf-8").splitlines() if JUSTIFICATION in line]
    assert len(justified) <= 12, "\n".join(justified)
