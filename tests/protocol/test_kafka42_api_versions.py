"""The broker's ApiVersions against Kafka 4.2's table (issue 23): every client-facing API of Kafka 4.2
(``yes`` in ``kafka-4.2-api-versions.txt``) is offered, at Kafka 4.2's newest version.

The table lists Kafka 4.2.0's broker-listener APIs with their newest version and whether they are in
the goal (``no``: inter-broker share-state, controller-quorum membership, the Kafka Streams group
protocol).  The failure message lists every API that is absent or behind, so the gap is visible at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey

from kafka_json import shared_dir

TABLE_NAME = "kafka-4.2-api-versions.txt"


def kafka42_table() -> list[tuple[int, str, int, bool]]:
    """(api key, Kafka's name, newest version, in goal) of every line of Kafka 4.2's table."""
    shared = shared_dir()
    path = shared / "kafka-protocol" / TABLE_NAME if shared is not None else None
    if path is None or not path.is_file():
        pytest.skip(f"{TABLE_NAME} is not available (../shared/kafka-protocol/)")
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, name, max_version, goal = line.split()
        assert goal in ("yes", "no"), line
        rows.append((int(key), name, int(max_version), goal == "yes"))
    return rows


def test_table_is_kafka_42s_68_client_apis() -> None:
    rows = kafka42_table()
    assert sum(goal for *_, goal in rows) == 68
    assert len({key for key, *_ in rows}) == len(rows)


async def test_every_kafka_42_api_offered_at_its_newest_version(conn: KafkaConnection) -> None:
    offered = await conn.negotiate()  # ApiVersions v3: key -> (min, max)
    missing: list[str] = []
    behind: list[str] = []
    for key, name, newest, goal in kafka42_table():
        if not goal:
            continue
        if key not in offered:
            missing.append(f"{name} ({key}) v{newest}")
        elif offered[key][1] != newest:
            behind.append(f"{name} ({key}): offered up to v{offered[key][1]}, Kafka 4.2 has v{newest}")
    goal_count = sum(goal for *_, goal in kafka42_table())
    at_newest = goal_count - len(missing) - len(behind)
    assert not missing and not behind, (
        f"{at_newest} of {goal_count} Kafka 4.2 client APIs offered at their newest version.\n"
        f"Absent ({len(missing)}): " + (", ".join(missing) or "none") + "\n"
        f"Behind ({len(behind)}):\n  " + ("\n  ".join(behind) or "none"))


async def test_offered_versions_are_ranges_minikafka_declares(conn: KafkaConnection) -> None:
    """What ApiVersions offers for the table's APIs starts no higher than it ends (a sane range)."""
    offered = await conn.negotiate()
    known = {int(k) for k in ApiKey}
    for key, (lo, hi) in offered.items():
        assert key in known and 0 <= lo <= hi, (key, lo, hi)


def _docs_hooks():
    """docs/hooks.py, which generates the site's API versions page (reference/api-versions.md)."""
    import importlib.util

    from kafka_json import REPO_ROOT

    spec = importlib.util.spec_from_file_location("minikafka_docs_hooks", REPO_ROOT / "docs" / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_api_versions_page_lists_every_offered_api_with_its_range(conn: KafkaConnection) -> None:
    """The documentation's API versions page (generated at build time, moved there from the README) puts every
    API ApiVersions offers into one of its areas and lists it with the offered range, and nothing else."""
    from minikafka.protocol.api import APIS

    hooks = _docs_hooks()
    offered = await conn.negotiate()
    page = hooks.api_versions_markdown(offered)  # raises when an offered API is in no area
    listed = hooks.api_versions_table(page)
    expected = {APIS[key].name: (lo, hi) for key, (lo, hi) in offered.items()}
    assert listed == expected
    placed = [name for names in hooks.AREAS.values() for name in names]
    assert len(placed) == len(set(placed)), "an API in two areas"
    assert set(placed) <= {api.name for api in APIS.values()}, "an area names an API minikafka does not know"
    assert len(listed) == sum(goal for *_, goal in kafka42_table())  # the 68 of Kafka 4.2's client listener
