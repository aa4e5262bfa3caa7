"""MkDocs hooks of minikafka's documentation site (``hooks:`` in mkdocs.yml).

At build time they

- run the tutorial scripts of examples/ (TUTORIALS: in subprocesses, in parallel, each with a timeout) with
  ``--out DIR``, and substitute what each run measured into the pages: ``{{ figure:NAME.KEY }}`` is a figure of
  NAME's ``NAME.json``, ``{{ output:NAME }}`` what the script printed, ``{{ command:NAME }}`` how it was run;
  the charts it drew become ``charts/NAME-*.svg`` and its figures ``figures/NAME.json`` in the site;
- generate the reference pages from the code: ``reference/configuration.md`` (BrokerConfig's keys, defaults and
  comments), ``reference/cli.md`` (every command's --help) and ``reference/api-versions.md`` (what a broker's
  ApiVersions offers, asked of a broker started for the purpose).

``MINIKAFKA_DOCS_FIGURES=DIR`` keeps the tutorial runs in DIR and reuses those newer than their scripts (for
``mkdocs serve`` while writing); ``MINIKAFKA_DOCS_TIMEOUT`` is each run's timeout in seconds (default 180).
"""

from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.minikafka")

ROOT = Path(__file__).resolve().parents[1]

#: Tutorial name (its figures file and placeholder prefix) -> the script and its arguments.
TUTORIALS: dict[str, list[str]] = {
    "fetch_sessions": ["examples/fetch_session_seed.py"],
    "quotas": ["examples/quota_live.py", "--seconds", "13", "--window-num", "3"],
    "replication": ["examples/replication_quotas.py"],
    "producer": ["examples/producer_batching.py"],
    "consumer": ["examples/consumer_lag.py"],
}

PLACEHOLDER = re.compile(r"\{\{\s*(figure|output|command):([\w.\-]+)\s*\}\}")

_state: dict[str, Any] = {}


class DocsError(Exception):
    """A tutorial run or a placeholder that failed (the build stops)."""


# -- the tutorial runs ---------------------------------------------------------------------------------------

def _run_one(name: str, out: Path, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, *TUTORIALS[name], "--out", str(out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise DocsError(f"{' '.join(TUTORIALS[name])} did not finish in {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise DocsError(f"{' '.join(TUTORIALS[name])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    # librdkafka's informational log lines go to stderr; stdout is what the tutorial printed.
    (out / f"{name}.txt").write_text(proc.stdout, encoding="utf-8")
    log.info("tutorial %s ran in %.1f s", name, time.monotonic() - started)
    return json.loads((out / f"{name}.json").read_text(encoding="utf-8"))


def run_tutorials(out: Path, names: list[str] | None = None, timeout: float = 180.0) -> dict[str, dict[str, Any]]:
    """Run the tutorials (all at once, one process each) into ``out``; their figures by name."""
    names = list(TUTORIALS) if names is None else names
    out.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {name: pool.submit(_run_one, name, out, timeout) for name in names}
        return {name: future.result() for name, future in futures.items()}


def _fresh(out: Path, name: str) -> bool:
    """A kept run of ``name`` that is newer than its script (and the helpers the scripts share)."""
    files = [out / f"{name}.json", out / f"{name}.txt"]
    if not all(f.is_file() for f in files):
        return False
    sources = [ROOT / TUTORIALS[name][0], ROOT / "examples" / "_tutorial.py"]
    return min(f.stat().st_mtime for f in files) >= max(f.stat().st_mtime for f in sources)


def _figures(config: Any) -> tuple[Path, dict[str, dict[str, Any]]]:
    if "figures" not in _state:
        keep = os.environ.get("MINIKAFKA_DOCS_FIGURES")
        out = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="minikafka-docs-"))
        timeout = float(os.environ.get("MINIKAFKA_DOCS_TIMEOUT", "180"))
        have = {n for n in TUTORIALS if keep and _fresh(out, n)}
        figures = {n: json.loads((out / f"{n}.json").read_text(encoding="utf-8")) for n in have}
        missing = [n for n in TUTORIALS if n not in have]
        if missing:
            started = time.monotonic()
            figures.update(run_tutorials(out, missing, timeout))
            log.info("tutorials %s ran in %.1f s", ", ".join(missing), time.monotonic() - started)
        _state["figures"] = (out, figures)
    return _state["figures"]


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ", ".join(_format(v) for v in value)
    if value is None:
        return "n/a"
    return str(value)


def substitute(markdown: str, figures: dict[str, dict[str, Any]], outputs: dict[str, str], where: str) -> str:
    """Replace the placeholders of one page; an unknown one is an error (nothing figure-like is typed in)."""
    def replace(m: re.Match[str]) -> str:
        kind, ref = m.group(1), m.group(2)
        if kind == "figure":
            name, _, key = ref.partition(".")
            if name not in figures or key not in figures[name]:
                raise DocsError(f"{where}: no figure {ref!r} (tutorial {name!r} has {sorted(figures.get(name, {}))})")
            return _format(figures[name][key])
        if ref not in TUTORIALS:
            raise DocsError(f"{where}: no tutorial {ref!r}")
        if kind == "output":  # what the script printed, without the lines naming where --out wrote
            shown = [line for line in outputs[ref].rstrip().splitlines()
                     if not line.startswith(("chart written to ", "figures written to "))]
            return "```text\n" + "\n".join(shown) + "\n```"
        return "python " + " ".join(TUTORIALS[ref]) + " --out DIR"
    return PLACEHOLDER.sub(replace, markdown)


# -- reference pages -------------------------------------------------------------------------------------------

def _field_comments() -> dict[str, str]:
    """BrokerConfig's attribute -> the comment above or beside its declaration in config.py."""
    path = ROOT / "minikafka" / "broker" / "config.py"
    source = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(source))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BrokerConfig")
    comments: dict[str, str] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []  # the comment lines right above the declaration
            i = node.lineno - 2
            while i >= 0 and source[i].strip().startswith("#"):
                above.insert(0, source[i].strip().lstrip("#").strip())
                i -= 1
            line = source[node.lineno - 1]
            beside = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            comments[node.target.id] = _plain(" ".join(filter(None, [" ".join(above), beside])))
    return comments


def _plain(text: str) -> str:
    """reStructuredText roles and literals of a source comment as Markdown code."""
    text = re.sub(r":\w+:`~?\.?([^`]+)`", r"`\1`", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


#: Key prefix -> the page that describes it (first match wins), linked from the configuration reference.
KEY_PAGES = [
    (("log.cleaner", "log.cleanup", "minikafka.log.cleaner", "offsets.topic.segment", "transaction.state.log.segment",
      "share.coordinator.state.topic.segment"), "../storage.md#log-compaction", "Log compaction"),
    (("log.dirs", "log.dir", "replica.alter.log.dirs"), "../storage.md#log-directories", "Log directories"),
    (("log.", "message.max.bytes"), "../broker.md", "What the broker supports"),
    (("group.consumer", "group.share", "group.coordinator", "offsets.topic.num", "share.coordinator"), "../groups.md",
     "Group protocols"),
    (("group.", "offsets.retention"), "../groups.md", "Group protocols"),
    (("transaction",), "../transactions.md", "Transactions"),
    (("delegation.token",), "../security.md#delegation-tokens", "Delegation tokens"),
    (("authorizer", "super.users", "allow.everyone"), "../security.md#acls", "ACLs"),
    (("inter.broker", "security.inter.broker", "connections.max.reauth", "sasl."), "../security.md", "Security"),
    (("leader.replication", "follower.replication", "replication.quota"), "../clusters.md#replication-quotas",
     "Replication quotas"),
    (("replica.", "min.insync", "default.replication"), "../clusters.md", "Clusters"),
    (("quota.",), "../quotas.md", "Client quotas"),
    (("max.incremental.fetch.session", "min.incremental.fetch.session"), "../flow/fetch-sessions.md", "Fetch sessions"),
    (("queued.max", "max.connections", "connections.max.idle", "socket.request", "minikafka.max.partitions",
      "max.request.partition"), "../limits.md", "Limits"),
    (("telemetry",), "../metrics.md#what-the-clients-measured-kip-714-client-metrics", "Client metrics"),
    (("minikafka.bootstrap.features",), "../broker.md", "Features"),
]


def _key_page(key: str) -> str:
    for prefixes, link, title in KEY_PAGES:
        if key.startswith(prefixes):
            return f"[{title}]({link})"
    return ""


def configuration_markdown() -> str:
    """The configuration reference: every server.properties key BrokerConfig declares."""
    from minikafka.broker.config import BrokerConfig

    cfg = BrokerConfig()
    comments = _field_comments()
    fields = {f.name for f in dataclasses.fields(BrokerConfig)}
    rows = []
    for key in sorted(BrokerConfig.KEYS):
        attr = BrokerConfig.KEYS[key]
        assert attr in fields, (key, attr)
        default = getattr(cfg, attr)
        if default is None or default == []:
            shown = "none"
        elif isinstance(default, bool):
            shown = f"`{str(default).lower()}`"
        elif default == "":
            shown = "empty"
        else:
            shown = f"`{default}`"
        rows.append(f"| `{key}` | {shown} | `{attr}` | {_key_page(key)} | {_cell(comments.get(attr, ''))} |")
    special = [
        ("listeners", "one PLAINTEXT listener on `host:port`", "every listener `NAME://host:port` (see Security)"),
        ("advertised.listeners", "the listeners", "the addresses Metadata gives clients, per listener"),
        ("listener.security.protocol.map", "Kafka's", "listener name -> PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
        ("log.retention.hours, log.retention.minutes", "168 hours", "`log.retention.ms` in other units"),
        ("client.quotas", "none", "client quotas at start-up, `ENTITY:KEY=VALUE[,KEY=VALUE]` separated by `;`"),
        ("quota.producer.default, quota.consumer.default", "none",
         "Kafka's legacy static defaults: `client-id=<default>` quotas"),
        ("ssl.*, sasl.*, listener.name.<listener>.*", "none", "TLS and SASL settings, per listener if prefixed"),
    ]
    lines = [
        "# Configuration keys",
        "",
        "Generated from `minikafka/broker/config.py` when this site was built: the Kafka `server.properties` "
        "keys minikafka reads (in `--config FILE`, `-o KEY=VALUE`, `properties={...}` of `BrokerThread` / "
        "`ClusterThread`, or as `BrokerConfig` attributes), with their defaults. Other keys are kept as given "
        "and logged as not used.",
        "",
        f"{len(rows)} keys map one to one onto a `BrokerConfig` attribute:",
        "",
        "| key | default | `BrokerConfig` attribute | described in | notes from the code |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "## Keys read specially",
        "",
        "| key | default | meaning |",
        "|---|---|---|",
        *[f"| `{k}` | {d} | {m} |" for k, d, m in special],
        "",
    ]
    return "\n".join(lines)


def _walk_parsers(parser: Any, path: list[str]):
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk_parsers(sub, path + [name])


def cli_help() -> list[tuple[str, str]]:
    """(command, --help text) of ``minikafka`` and every command and subcommand, 100 columns wide."""
    from minikafka.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return [(" ".join(path), parser.format_help()) for path, parser in _walk_parsers(build_parser(), ["minikafka"])]
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def cli_markdown() -> str:
    helps = cli_help()
    lines = ["# Command line", "",
             "Generated from the argparse parsers of `minikafka/cli.py` when this site was built: the `--help` "
             f"of `minikafka` and of each of its {len(helps) - 1} commands and subcommands. "
             "`minikafka --version` prints the installed version.", ""]
    for command, text in helps:
        lines += [f"## {command}", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


#: The areas of the API reference (every API ApiVersions offers must be in one).
AREAS: dict[str, list[str]] = {
    "Produce and consume": ["Produce", "Fetch", "ListOffsets", "OffsetForLeaderEpoch", "DeleteRecords", "Metadata",
                            "DescribeTopicPartitions", "ApiVersions"],
    "Topics, configs and the cluster": [
        "CreateTopics", "DeleteTopics", "CreatePartitions", "DescribeConfigs", "AlterConfigs",
        "IncrementalAlterConfigs", "ListConfigResources", "DescribeCluster", "ElectLeaders",
        "AlterPartitionReassignments", "ListPartitionReassignments", "DescribeLogDirs", "AlterReplicaLogDirs",
        "DescribeQuorum", "UpdateFeatures", "UnregisterBroker"],
    "Groups": ["FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit", "OffsetFetch",
               "OffsetDelete", "ListGroups", "DescribeGroups", "DeleteGroups", "ConsumerGroupHeartbeat",
               "ConsumerGroupDescribe", "ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge",
               "DescribeShareGroupOffsets", "AlterShareGroupOffsets", "DeleteShareGroupOffsets"],
    "Transactions": ["InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn", "WriteTxnMarkers",
                     "TxnOffsetCommit", "DescribeProducers", "DescribeTransactions", "ListTransactions"],
    "Security, quotas and client metrics": [
        "SaslHandshake", "SaslAuthenticate", "DescribeAcls", "CreateAcls", "DeleteAcls",
        "DescribeUserScramCredentials", "AlterUserScramCredentials", "CreateDelegationToken",
        "RenewDelegationToken", "ExpireDelegationToken", "DescribeDelegationToken", "DescribeClientQuotas",
        "AlterClientQuotas", "GetTelemetrySubscriptions", "PushTelemetry"],
}

#: What a version range alone does not say.
API_NOTES = {
    "Produce": "v3 and later answered; v0 advertised as Kafka 4 does, so older librdkafka keeps compressing, and "
               "v0-2 requests refused",
    "Fetch": "v7+ incremental fetch sessions (KIP-227); v13+ names topics by id",
    "ListOffsets": "-4 (earliest local), -5 (latest tiered) and -6 (earliest pending upload) answered as Kafka does "
                   "for a topic without tiered storage",
    "Metadata": "v13 carries a top-level error_code (KIP-1102)",
    "ConsumerGroupHeartbeat": "KIP-848 consumer groups",
    "ShareGroupHeartbeat": "KIP-932 share groups",
    "EndTxn": "v5: transaction version 2 (KIP-890 part 2)",
    "GetTelemetrySubscriptions": "KIP-714 client metrics",
}


def offered_api_versions() -> tuple[dict[int, tuple[int, int]], dict[str, Any]]:
    """Ask a broker started for the purpose: ApiVersions' (min, max) per api key, and its features (v3)."""
    import trio

    from minikafka.client.connection import KafkaConnection
    from minikafka.protocol.api import ApiKey
    from minikafka.testing import BrokerThread

    async def ask(port: int) -> tuple[dict[int, tuple[int, int]], dict[str, Any]]:
        async with await KafkaConnection.connect("127.0.0.1", port, client_id="docs") as conn:
            offered = await conn.negotiate()
            resp = await conn.request(ApiKey.API_VERSIONS, 4, {"client_software_name": "minikafka-docs",
                                                               "client_software_version": "0"})
        features = {
            "supported": {f.name: (f.min_version, f.max_version) for f in resp.supported_features or []},
            "finalized": {f.name: f.max_version_level for f in resp.finalized_features or []},
            "epoch": resp.finalized_features_epoch,
        }
        return offered, features

    with BrokerThread() as broker:
        return trio.run(ask, broker.port)


def api_versions_markdown(offered: dict[int, tuple[int, int]], features: dict[str, Any] | None = None) -> str:
    """The API reference page: every offered API by area with its version range."""
    from minikafka.protocol.api import APIS

    by_name = {APIS[key].name: (key, lo, hi) for key, (lo, hi) in offered.items()}
    placed = {name for names in AREAS.values() for name in names}
    unplaced = sorted(set(by_name) - placed)
    if unplaced:
        raise DocsError(f"APIs offered but in no area of docs/hooks.py AREAS: {unplaced}")
    lines = ["# API versions", "",
             "Generated when this site was built from what a minikafka broker answers to ApiVersions: "
             f"{len(offered)} APIs, each of a Kafka 4.2 broker's client listener at Kafka 4.2's newest version "
             "(`tests/protocol/test_kafka42_api_versions.py` checks them against Kafka 4.2's table).", ""]
    for area, names in AREAS.items():
        rows = [n for n in names if n in by_name]
        if not rows:
            continue
        lines += [f"## {area}", "", "| key | API | versions | notes |", "|---|---|---|---|"]
        for name in rows:
            key, lo, hi = by_name[name]
            versions = f"{lo}-{hi}" if hi != lo else f"{lo}"
            lines.append(f"| {key} | {name} | {versions} | {API_NOTES.get(name, '')} |")
        lines.append("")
    if features:
        lines += ["## Features (KIP-584)", "",
                  "What ApiVersions v4 reports: the feature levels the broker supports and those a new cluster "
                  f"finalizes (epoch {features['epoch']}).", "",
                  "| feature | supported levels | finalized level |", "|---|---|---|"]
        for name, (lo, hi) in sorted(features["supported"].items()):
            lines.append(f"| `{name}` | {lo}-{hi} | {features['finalized'].get(name, 0)} |")
        lines.append("")
    return "\n".join(lines)


def api_versions_table(markdown: str) -> dict[str, tuple[int, int]]:
    """The API name -> (min, max) rows of an API reference page (what the tests read back)."""
    listed = {}
    for name, lo, hi in re.findall(r"^\| \d+ \| (\w+) \| (\d+)(?:-(\d+))? \|", markdown, re.MULTILINE):
        listed[name] = (int(lo), int(hi or lo))
    return listed


def reference_pages() -> dict[str, str]:
    if "reference" not in _state:
        offered, features = offered_api_versions()
        _state["reference"] = {
            "reference/configuration.md": configuration_markdown(),
            "reference/cli.md": cli_markdown(),
            "reference/api-versions.md": api_versions_markdown(offered, features),
        }
    return _state["reference"]


# -- MkDocs events -------------------------------------------------------------------------------------------

def on_pre_build(config: Any) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:  # the references while tutorials run
        refs = pool.submit(reference_pages)
        try:
            _figures(config)
        except DocsError as exc:
            from mkdocs.exceptions import PluginError

            raise PluginError(str(exc)) from exc
        refs.result()


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, content in reference_pages().items():
        files.append(File.generated(config, uri, content=content))
    out, figures = _figures(config)
    for path in sorted(out.glob("*.svg")):
        files.append(File.generated(config, f"charts/{path.name}", abs_src_path=str(path)))
    for name in figures:
        files.append(File.generated(config, f"figures/{name}.json", abs_src_path=str(out / f"{name}.json")))
        files.append(File.generated(config, f"figures/{name}.txt", abs_src_path=str(out / f"{name}.txt")))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    out, figures = _figures(config)
    outputs = {name: (out / f"{name}.txt").read_text(encoding="utf-8") for name in figures}
    try:
        return substitute(markdown, figures, outputs, page.file.src_uri)
    except DocsError as exc:
        from mkdocs.exceptions import PluginError

        raise PluginError(str(exc)) from exc
