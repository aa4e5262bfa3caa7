"""The documentation site: ``mkdocs build --strict`` in a subprocess, as the docs tell a user to build it.

The build runs the tutorial scripts of examples/ (docs/hooks.py) and keeps their runs in a directory this test
reads (``MINIKAFKA_DOCS_FIGURES``): the pages must show the figures those runs printed, the fetch-session page
the seed's 12043/33-byte figures, and the generated reference pages the code's keys, commands and APIs.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from minikafka.broker.config import BrokerConfig
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import APIS
from minikafka.testing import BrokerThread

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL_PAGES = {"fetch_sessions": "flow/fetch-sessions", "quotas": "flow/client-quotas",
                  "replication": "flow/replication-quotas", "producer": "flow/producer", "consumer": "flow/consumer"}


def _words(text: str) -> str:
    return re.sub(r"\s+", " ", text)


class Site:
    def __init__(self, site: Path, figures: Path, seconds: float) -> None:
        self.dir, self.figures_dir, self.seconds = site, figures, seconds

    def text(self, page: str) -> str:
        """The page's article as text (tags dropped, entities decoded, white space collapsed)."""
        raw = (self.dir / page / "index.html").read_text(encoding="utf-8")
        article = raw[raw.index("<article"):raw.index("</article>")]
        return _words(html.unescape(re.sub(r"<[^>]+>", "", article)))

    def figures(self, name: str) -> dict:
        return json.loads((self.figures_dir / f"{name}.json").read_text(encoding="utf-8"))

    def printed(self, name: str) -> str:
        return (self.figures_dir / f"{name}.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    out = tmp_path_factory.mktemp("site")
    figures = tmp_path_factory.mktemp("figures")
    env = {**os.environ, "MINIKAFKA_DOCS_FIGURES": str(figures), "NO_MKDOCS_2_WARNING": "1"}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-5000:]
    print(f"\nmkdocs build --strict: {seconds:.1f} s")
    return Site(out, figures, seconds)


def test_fetch_session_page_shows_the_seed_figures_of_its_run(site: Site) -> None:
    figures = site.figures("fetch_sessions")
    assert (figures["v6_bytes"], figures["full_bytes"], figures["incremental_bytes"]) == (12031, 12043, 33)
    printed = site.printed("fetch_sessions")
    assert "saving per fetch: 12043 / 33 bytes = 365x" in printed
    page = site.text("flow/fetch-sessions")
    assert "12043 bytes" in page and "33 bytes" in page and "365x" in page
    assert "saving per fetch: 12043 / 33 bytes = 365x" in page  # the run's own output, embedded
    assert figures["broker_saw"][:4] == [12031, 12031, 12031, 12043]


def test_replication_page_shows_the_18_byte_answer_of_its_run(site: Site) -> None:
    figures = site.figures("replication")
    assert figures["phantom_bytes"] == 18 and figures["fetch_version"] == 8
    assert (figures["first_body"], figures["incremental_body"]) == (12043, 33)
    page = site.text("flow/replication-quotas")
    assert f"recorded {figures['phantom_bytes']} bytes" in page
    assert f"{figures['phantom_fetches']} fetches" in page
    assert f"caught up on fast in {figures['fast_seconds']:g} s" in page


@pytest.mark.parametrize("name", sorted(TUTORIAL_PAGES))
def test_tutorial_page_embeds_its_run(site: Site, name: str) -> None:
    """Each tutorial page shows what its script printed, its figures and its charts (present in the site)."""
    page = site.text(TUTORIAL_PAGES[name])
    printed = [_words(line.strip()) for line in site.printed(name).splitlines()
               if line.strip() and not line.startswith(("chart written", "figures written"))]
    missing = [line for line in printed if line not in page]
    assert not missing, missing[:5]
    assert "{{" not in page, "a placeholder left in the page"
    charts = sorted(p.name for p in (site.dir / "charts").glob(f"{name}-*.svg"))
    assert charts, f"no chart of {name}"
    raw = (site.dir / TUTORIAL_PAGES[name] / "index.html").read_text(encoding="utf-8")
    for chart in charts:
        assert f"charts/{chart}" in raw
        assert (site.dir / "charts" / chart).read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_quota_and_producer_figures_are_in_their_pages(site: Site) -> None:
    quotas = site.figures("quotas")
    page = site.text("flow/client-quotas")
    assert f"a quota of {quotas['quota']} B/s" in page
    assert f"delivered {quotas['avg_mb_s']:g} MB/s, {quotas['avg_ratio']:g} x the quota" in page
    assert quotas["avg_ratio"] <= 1.25  # not more than the quota on average over whole periods (a slow machine: less)
    producer = site.figures("producer")
    page = site.text("flow/producer")
    assert f"{producer['linger_0_requests']} Produce requests" in page
    assert producer["linger_20_requests"] <= producer["linger_0_requests"]  # lingering only merges batches


def test_configuration_reference_lists_every_key(site: Site) -> None:
    page = site.text("reference/configuration")
    for key in BrokerConfig.KEYS:
        assert key in page, key
    assert "max.incremental.fetch.session.cache.slots" in page and "client.quotas" in page
    cfg = BrokerConfig()
    row = re.search(r"num\.partitions (\S+) num_partitions", page)
    assert row is not None and row.group(1) == str(cfg.num_partitions)


def test_cli_reference_has_every_commands_help(site: Site) -> None:
    page = site.text("reference/cli")
    for command in ("minikafka serve", "minikafka topics", "minikafka consumer-groups", "minikafka quotas alter",
                    "minikafka capture show", "minikafka replay", "minikafka analyze", "minikafka faults add"):
        assert f"usage: {command}" in page, command
    assert "--http-port PORT" in page and "--version" in page


def test_api_versions_reference_lists_what_a_broker_offers(site: Site) -> None:
    async def ask(port: int) -> dict[int, tuple[int, int]]:
        async with await KafkaConnection.connect("127.0.0.1", port) as conn:
            return await conn.negotiate()

    with BrokerThread() as broker:
        offered = trio.run(ask, broker.port)
    raw = (site.dir / "reference/api-versions/index.html").read_text(encoding="utf-8")
    rows = {name: (int(lo), int(hi or lo)) for name, lo, hi in
            re.findall(r"<td>\d+</td>\s*<td>(\w+)</td>\s*<td>(\d+)(?:-(\d+))?</td>", raw)}
    assert rows == {APIS[key].name: versions for key, versions in offered.items()}


def test_build_time(site: Site) -> None:
    """The build (tutorials included) stays within what the suite can afford."""
    assert site.seconds < 300
