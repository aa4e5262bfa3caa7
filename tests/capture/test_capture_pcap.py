"""``minikafka capture export --pcap``: tshark decodes the export as Kafka, api keys and correlation ids intact."""

from __future__ import annotations

import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import trio
from helpers import batch, create, fetch, produce

from minikafka.capture.recorder import CAPTURE
from minikafka.broker.broker import serve_broker
from minikafka.capture import read_capture
from minikafka.cli import main as cli_main
from minikafka.client.connection import KafkaConnection
from minikafka.protocol.api import ApiKey as K

ROOT = Path(__file__).resolve().parents[2]


def tshark() -> str:
    """tshark's path, installing it (scripts/install-test-tools) when missing; skip if that fails."""
    path = shutil.which("tshark")
    if path is None:
        subprocess.run([str(ROOT / "scripts" / "install-test-tools")], check=False, timeout=600)
        path = shutil.which("tshark")
    if path is None:
        pytest.skip("tshark is not installed and scripts/install-test-tools could not install it "
                    "(Debian package tshark)")
    return path


async def test_pcap_export_decoded_by_tshark(tmp_path: Path) -> None:
    cap = tmp_path / "cap"
    async with serve_broker(capture_dir=cap, captures=CAPTURE) as broker:
        port = broker.port
        for client in ("a", "b"):
            async with await KafkaConnection.connect("127.0.0.1", port, client_id=client) as conn:
                await conn.negotiate()
                await conn.request(K.METADATA, 12, {"topics": None})
                if client == "a":
                    await create(conn, "t")
                for i in range(3):
                    await produce(conn, "t", batch([b"x" * 50000, b"v%d" % i]), version=7)
                await fetch(conn, "t")  # a response larger than one synthesised segment
    recs = list(read_capture([cap]))
    pcap = tmp_path / "out.pcap"
    assert cli_main(["capture", "export", "--pcap", str(pcap), str(cap)]) == 0
    out = await trio.to_thread.run_sync(lambda: subprocess.run(
        [tshark(), "-r", str(pcap), "-d", f"tcp.port=={port},kafka", "-T", "fields", "-E", "separator=;",
         "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "kafka.api_key", "-e", "kafka.correlation_id",
         "-e", "_ws.expert"],
        capture_output=True, text=True, timeout=120, check=True).stdout)
    requests: dict[int, list[tuple[int, int]]] = defaultdict(list)
    responses: dict[int, list[int]] = defaultdict(list)
    for line in out.splitlines():
        src, dst, key, corr, _expert = line.split(";")
        if not corr:
            continue
        if int(dst) == port:
            requests[int(src)].append((int(key), int(corr)))
        else:
            responses[int(dst)].append(int(corr))
    want: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in recs:
        want[int(r.peer.rsplit(":", 1)[1])].append((r.api_key, r.correlation_id))
    assert len(want) == 2
    assert dict(requests) == dict(want)
    assert {k: v for k, v in responses.items()} == {k: [c for _, c in v] for k, v in want.items()}
