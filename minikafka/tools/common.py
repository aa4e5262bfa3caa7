"""What the command-line tools share: Kafka-style options and properties, running a tool, tables.

A tool is ``async def main(args) -> int``; :func:`run_tool` runs it on Trio and turns the
failures a user can cause (a bad option, an unreachable broker, a Kafka error) into one line
``minikafka: error: ...`` and exit status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Sequence

import trio

from ..common.reporting import find_error, run_reporting
from ..protocol.errors import ErrorCode

if TYPE_CHECKING:
    from rich.console import Console

    from ..client.security_config import ClientSecurity

log = logging.getLogger(__name__)

# Kafka's serializer settings: the tools always send and print bytes, so these are accepted and ignored.
IGNORED_CLIENT_SETTINGS = frozenset({"key.serializer", "value.serializer", "key.deserializer",
                                     "value.deserializer"})


class ToolError(Exception):
    """A failure to report as one line (``minikafka: error: <message>``) with exit status 1."""


def error_name(code: int) -> str:
    """Kafka's name of an error code (the number if minikafka does not know it)."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


def check(code: int, what: str, message: str | None = None) -> None:
    """Raise :class:`ToolError` for a non-zero error code of a response."""
    if code:
        raise ToolError(f"{what}: {error_name(code)}" + (f": {message}" if message else ""))


# -- options ----------------------------------------------------------------------------------------
def add_bootstrap(p: argparse.ArgumentParser, required: bool = True) -> None:
    """``--bootstrap-server HOST:PORT[,HOST:PORT]`` as Kafka's tools spell it."""
    p.add_argument("--bootstrap-server", required=required, metavar="HOST:PORT",
                   help="the broker(s) to connect to: HOST:PORT[,HOST:PORT...]")


def add_command_config(p: argparse.ArgumentParser) -> None:
    """``--command-config FILE``: the admin client's properties (Kafka's tools' option), of which the
    security settings are used (``security.protocol``, ``sasl.*``, ``ssl.*``)."""
    p.add_argument("--command-config", metavar="FILE", default=None,
                   help="a properties file for the admin client: security.protocol, sasl.mechanism, "
                        "sasl.jaas.config (or sasl.username/sasl.password), ssl.truststore.location...")


def command_security(config_file: str | None) -> ClientSecurity | None:
    """The security settings of a ``--command-config`` file (None: PLAINTEXT, no file)."""
    from ..client.security_config import ClientSecurity

    props = read_properties_file(config_file)
    security = ClientSecurity.from_properties(props)
    return None if security.is_plaintext else security


def split_pair(item: str, what: str) -> tuple[str, str]:
    """``key=value`` -> (key, value); ToolError if there is no ``=``."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ToolError(f"{what} expects KEY=VALUE, got {item!r}")
    return key.strip(), value


def parse_properties(items: Iterable[str], what: str = "--property") -> dict[str, str]:
    """``["k=v", ...]`` as a dict (the last value of a key wins)."""
    return dict(split_pair(item, what) for item in items)


def read_properties_file(path: str | Path | None) -> dict[str, str]:
    """A Java ``.properties`` file (``k=v`` or ``k: v`` lines, ``#``/``!`` comments); {} for None."""
    if path is None:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from None
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            out[line] = ""
        else:
            out[line[:cut].strip()] = line[cut + 1:].strip()
    return out


def client_properties(config_file: str | None, items: Iterable[str], what: str) -> dict[str, str]:
    """A client's properties: those of a ``--*.config`` file, overridden by ``KEY=VALUE`` options."""
    return {**read_properties_file(config_file), **parse_properties(items, what)}


def _coerce(annotation: str, value: str) -> Any:
    """``value`` as the first type in a dataclass field's annotation it converts to."""
    for name, convert in (("bool", _to_bool), ("int", int), ("float", float)):
        if name in annotation:
            try:
                return convert(value)
            except ValueError:
                continue
    if "list" in annotation:
        return [v.strip() for v in value.split(",") if v.strip()]
    return value


def _to_bool(value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise ValueError(value)
    return v == "true"


def client_settings(config_class: type, props: dict[str, str], what: str) -> dict[str, Any]:
    """Kafka client properties (``linger.ms=5``) as keyword settings of a client config dataclass,
    each value converted to the field's type; ToolError for a property the client does not have."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(config_class)}
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key in IGNORED_CLIENT_SETTINGS:
            log.info("ignoring %s=%s: the tools read and write bytes", key, value)
            continue
        name = key.replace(".", "_").replace("-", "_")
        if name not in fields or "Callable" in fields[name]:
            raise ToolError(f"unknown {what} property {key!r}")
        out[name] = _coerce(fields[name], value.strip())
    return out


# -- running ----------------------------------------------------------------------------------------
def reported_error(exc: BaseException) -> BaseException | None:
    """The error to report for ``exc`` (the first such one inside a Trio exception group), or None:
    ours, the clients' and the OS's, and ValueError (the clients' configs refuse bad values with it)."""
    from ..client.network import KafkaClientError
    from ..client.producer.errors import KafkaProducerError

    return find_error(exc, (ToolError, KafkaClientError, KafkaProducerError, OSError, ValueError))


def set_main(p: argparse.ArgumentParser, main: Callable[[argparse.Namespace], Awaitable[int]]) -> None:
    """Make ``main(args)`` the subcommand's work: ``args.run_tool(args)`` runs it with :func:`run_tool`."""
    p.set_defaults(run_tool=lambda args: run_tool(main, args))


def run_tool(main: Callable[..., Awaitable[int]], *args: Any) -> int:
    """Run ``await main(*args)`` on Trio; known failures print one line and give status 1."""
    return run_reporting(lambda: trio.run(main, *args), reported_error)


# -- output -----------------------------------------------------------------------------------------
def console() -> Console:
    """A rich console on stdout for plain output: no markup or highlighting, and unlimited width when
    not a terminal (so piped tables are never wrapped)."""
    from rich.console import Console

    width = None if sys.stdout.isatty() else 100_000
    return Console(file=sys.stdout, width=width, markup=False, highlight=False, emoji=False, soft_wrap=False)


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], out: Console | None = None) -> None:
    """Rows under upper-case column headers, aligned as Kafka's tools print them (no borders)."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for name in columns:
        table.add_column(name, no_wrap=True, overflow="ignore")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    out = out or console()
    with out.capture() as captured:
        out.print(table)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))
