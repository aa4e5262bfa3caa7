"""The console's captures page: a capture started and stopped at run time, its file downloaded as a pcap
that dpkt reads back as Kafka over TCP; the analysis' refusals (real broker and client, headless Chromium)."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from console_helpers import call, console_url, http, wait_until
from minikafka.testing import BrokerThread

pytestmark = pytest.mark.clients

dpkt = pytest.importorskip("dpkt")




def kafka_requests(pcap: bytes, port: int) -> list[tuple[int, int]]:
    """(api key, api version) of every Kafka request in the pcap's client-to-broker TCP payloads (one
    request per segment: the export writes frames smaller than its MSS one segment each)."""
    import io

    out = []
    for _, frame in dpkt.pcapng.Reader(io.BytesIO(pcap)) if pcap[:4] == b"\x0a\x0d\x0d\x0a" else \
            dpkt.pcap.Reader(io.BytesIO(pcap)):
        tcp = dpkt.ethernet.Ethernet(frame).data.data
        if isinstance(tcp, dpkt.tcp.TCP) and tcp.dport == port and len(tcp.data) >= 8:
            size, key, version = struct.unpack(">ihh", tcp.data[:8])
            assert size == len(tcp.data) - 4
            out.append((key, version))
    return out


def test_capture_start_stop_download_pcap(tmp_path: Path, page: Any) -> None:
    with BrokerThread(http_port=0, data_dir=tmp_path) as broker:
        broker.create_topic("captured", partitions=1)
        page.goto(console_url(broker, "/#/captures"))
        # The page's first answer is shown (the "no files" line is there before it, the button states are not).
        page.wait_for_function("() => document.querySelector('#capture-state')?.textContent.includes('not capturing')")
        assert page.is_visible("#capture-none")
        assert page.is_disabled("#capture-stop") and not page.is_disabled("#capture-start")
        assert str(tmp_path / "captures") in page.inner_text("#capture-state")

        page.click("#capture-start")
        page.wait_for_function("() => document.querySelector('#capture-state')?.textContent.includes('capturing into')")
        producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "captured-producer"})
        producer.produce("captured", b"hello")
        assert producer.flush(30) == 0
        page.click("#capture-stop")
        # The file written while capturing may be listed before the stop is done: wait for the stop itself.
        page.wait_for_function("() => document.querySelector('#capture-stop')?.disabled")
        page.wait_for_selector(".mk-pcap")
        status, state = call(broker, "captures")
        assert status == 200 and not state["capturing"]
        (f,) = state["files"]
        assert f["broker"] == 0 and f["size"] > 0 and not f["writing"]
        assert (tmp_path / "captures" / f["name"]).is_file()

        with page.expect_download() as download_info:
            page.click(f'.mk-pcap[data-file="{f["name"]}"]')
        download = download_info.value
        assert download.suggested_filename == f["name"].removesuffix(".mkcap") + ".pcap"
        pcap = Path(download.path()).read_bytes()
        requests = kafka_requests(pcap, broker.port)
        assert (0, max(v for k, v in requests if k == 0)) in requests  # a Produce
        assert any(k == 18 for k, _ in requests)  # ApiVersions

        # Captures restart into the same directory, in a new file; "all" exports every file as one pcap.
        page.click("#capture-start")
        page.wait_for_function("() => document.querySelector('#capture-start')?.disabled")
        producer.produce("captured", b"again")
        assert producer.flush(30) == 0
        assert call(broker, "captures/start", "POST")[0] == 409  # already capturing
        page.click("#capture-stop")
        page.wait_for_function("() => document.querySelector('#capture-stop')?.disabled")
        page.wait_for_function("() => document.querySelectorAll('.mk-pcap').length === 2")
        status, everything = http(broker, "GET", "/console/api/captures/files/all/pcap")
        assert status == 200
        assert len(kafka_requests(everything, broker.port)) > len(requests)
        assert call(broker, "captures/stop", "POST")[0] == 409  # not capturing


def test_capture_api_refusals(console_broker: BrokerThread) -> None:
    for name in ("capture-0-000009.mkcap", "x", "..", "capture-0-000000.mkcap.."):
        status, answer = call(console_broker, f"captures/files/{name}/pcap")
        assert status == 404 and answer["error"] == "UNKNOWN_CAPTURE", name
    # A path out of the directory is no route at all.
    assert http(console_broker, "GET", "/console/api/captures/files/..%2Fx.mkcap/pcap")[0] == 404
    assert call(console_broker, "captures/report")[0] == 404
    status, answer = call(console_broker, "captures/analyze", "POST")
    assert status == 409 and answer["error"] in ("NO_CAPTURE", "PYSPARK_NOT_INSTALLED")


def test_a_failing_capture_stops_and_the_broker_carries_on(tmp_path: Path) -> None:
    """A capture whose writes fail (the disk full, injected into the capture writer) is stopped and logged;
    the broker serves on, and a new capture can start."""
    with BrokerThread(http_port=0, data_dir=tmp_path) as broker:
        broker.create_topic("full-disk", partitions=1)
        assert call(broker, "captures/start", "POST")[0] == 200
        assert broker.broker is not None and broker.broker.capture is not None
        writer = broker.broker.capture.writer

        def disk_full(*args: Any) -> None:
            raise OSError(28, "No space left on device")

        broker.call(lambda: setattr(writer, "write_parts", disk_full))
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("full-disk", b"lost in capture")
        assert producer.flush(30) == 0
        wait_until(lambda: not call(broker, "captures")[1]["capturing"], "the failed capture to stop")
        producer.produce("full-disk", b"still served")
        assert producer.flush(30) == 0
        assert call(broker, "captures/start", "POST")[0] == 200
        assert call(broker, "captures/stop", "POST")[0] == 200


@pytest.mark.slow
def test_analysis_of_a_capture_run_from_the_console(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    with BrokerThread(http_port=0, data_dir=tmp_path) as broker:
        broker.create_topic("analysed", partitions=1)
        assert call(broker, "captures/analyze", "POST")[0] == 409  # nothing captured yet
        assert call(broker, "captures/start", "POST")[0] == 200
        producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": "analysed-producer"})
        for i in range(20):
            producer.produce("analysed", b"record-%d" % i)
        assert producer.flush(30) == 0
        assert call(broker, "captures/stop", "POST")[0] == 200
        assert call(broker, "captures/analyze", "POST", {"jobs": "traffic"})[0] == 400
        status, state = call(broker, "captures/analyze", "POST", {"jobs": ["traffic"]})
        assert status == 200 and state["analysis"]["state"] == "running"
        assert call(broker, "captures/analyze", "POST")[0] == 409  # one run at a time
        done = wait_until(lambda: (s := call(broker, "captures")[1]["analysis"])["state"] != "running" and s,
                          "the analysis to finish", timeout=600)
        assert done["state"] == "done", done
        status, html = http(broker, "GET", "/console/api/captures/report")
        assert status == 200
        text = html if isinstance(html, str) else html.decode()
        assert "Traffic" in text and "analysed-producer" in text
