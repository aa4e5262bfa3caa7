"""The command line's habits: ``minikafka --version``, and help texts in plain words (no reStructuredText)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import version

import pytest

from minikafka.cli import build_parser

FORBIDDEN = ("``", ":class:", ":func:", ":mod:", ":meth:", ":attr:")


def _commands(parser: argparse.ArgumentParser, path: list[str]):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, path + [name])


COMMANDS = [path for path, _ in _commands(build_parser(), [])]


def test_version_prints_the_installed_version() -> None:
    proc = subprocess.run([sys.executable, "-m", "minikafka", "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"minikafka {version('minikafka')}"


def test_every_command_is_covered() -> None:
    names = {tuple(path) for path in COMMANDS}
    for command in [(), ("serve",), ("topics",), ("capture", "show"), ("quotas", "alter"), ("faults", "add")]:
        assert command in names


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "minikafka")
def test_help_is_plain_words(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``minikafka ... --help`` as a user runs it: exits 0 and shows no reStructuredText markup."""
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*path, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: minikafka")
    found = [token for token in FORBIDDEN if token in out]
    assert not found, f"{' '.join(['minikafka', *path])} --help shows {found}"
