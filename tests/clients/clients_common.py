"""Shared helpers for the real-client tests in tests/clients/.

Imported as ``clients_common`` (``tests/`` is on the pytest pythonpath; the
name is unique across the tree).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Iterable, TypeVar

import pytest

from minikafka.protocol.records import RecordBatchHeader, iter_batches
from minikafka.testing import BrokerThread

T = TypeVar("T")

KCAT = shutil.which("kcat")

# Record batch compression codec ids (attributes bits 0-2).
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(frozen=True)
class Msg:
    """One message as produced and as it must be consumed back."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


def make_messages(n: int, partitions: int, *, seed: int = 1, tag: str = "m") -> list[Msg]:
    """``n`` deterministic messages spread round-robin over ``partitions``.

    Keys, values and headers vary in size and content; a few keys and values
    are None (null key, tombstone) and a few messages carry no headers.
    """
    rnd = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"\x00\xff", "\u00e9t\u00e9".encode()]
    out = []
    for i in range(n):
        key = None if i % 89 == 7 else b"%s-key-%05d" % (tag.encode(), i)
        if i % 97 == 5:
            value = None
        else:
            value = b"%s-%d:" % (tag.encode(), i) + b" ".join(rnd.choice(words) for _ in range(rnd.randrange(0, 60)))
        if i % 31 == 3:
            headers: tuple[tuple[str, bytes], ...] = ()
        else:
            headers = (("idx", str(i).encode()), ("tag", tag.encode()))
            if i % 5 == 0:
                headers += (("bin", bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 16)))),)
            if i % 11 == 0:
                headers += (("idx", b"dup-name"),)  # repeated header names keep their order
        out.append(Msg(i % partitions, key, value, headers))
    return out


def by_partition(msgs: Iterable[Msg]) -> dict[int, list[Msg]]:
    out: dict[int, list[Msg]] = {}
    for m in msgs:
        out.setdefault(m.partition, []).append(m)
    return out


def wait_for(fn: Callable[[], T], timeout: float = 15, interval: float = 0.05, what: str = "condition") -> T:
    """Call ``fn`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def stored_batch_headers(b: BrokerThread, topic: str, partition: int) -> list[RecordBatchHeader]:
    """The headers of the batches the broker stores for ``topic``-``partition``."""

    def read() -> list[RecordBatchHeader]:
        part = b.broker.replica_manager.get(topic, partition)
        assert part is not None, f"{topic}-{partition} not hosted"
        lg = part.log
        info = lg.read(lg.log_start_offset, 1 << 30)
        return [h for chunk in info.chunks for h, _ in iter_batches(bytes(chunk))]

    return b.call(read)


def kcat_version() -> str:
    if KCAT is None:
        return "kcat not installed"
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=10).stdout
    m = re.search(r"Version (\S+) .*?librdkafka (\S+)", out)
    return f"{m.group(1)} (librdkafka {m.group(2)})" if m else out.strip()


def _version_str(v) -> str:
    return v[0] if isinstance(v, tuple) else str(v)


def client_versions() -> dict[str, str]:
    """Versions of every real client these tests drive."""
    import confluent_kafka

    with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' legacy API
        warnings.simplefilter("ignore", DeprecationWarning)
        import kafka

    return {
        "confluent-kafka": _version_str(confluent_kafka.version()),
        "librdkafka": confluent_kafka.libversion()[0],
        "kafka-python": kafka.__version__,
        "kcat": kcat_version(),
    }


_reported = False


@pytest.fixture(scope="session")
def report_client_versions(request: pytest.FixtureRequest, record_testsuite_property) -> dict[str, str]:
    """Write the client versions to the terminal once per session (and to junit xml)."""
    global _reported
    versions = client_versions()
    if not _reported:
        _reported = True
        line = "client versions: " + ", ".join(f"{k} {v}" for k, v in versions.items())
        tr = request.config.pluginmanager.getplugin("terminalreporter")
        capman = request.config.pluginmanager.getplugin("capturemanager")
        if tr is not None and capman is not None:
            with capman.global_and_fixture_disabled():
                tr.write_line("")
                tr.write_line(line)
        else:  # pragma: no cover
            print(line)
        for k, v in versions.items():
            record_testsuite_property(f"version.{k}", v)
    return versions
