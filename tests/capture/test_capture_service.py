"""The broker's capture writer task: never blocks the request path, drops and counts when behind."""

from __future__ import annotations

import logging
from pathlib import Path

import trio
import trio.testing
from helpers import wait_until

from minikafka.broker.request import RequestContext
from minikafka.capture import read_capture
from minikafka.capture.service import CaptureService


def ctx(i: int) -> RequestContext:
    return RequestContext(api_key=18, api_version=3, correlation_id=i, client_id="c", connection_id="0-1",
                          peer="127.0.0.1:1234", received_ns=i)


async def test_full_channel_drops_and_counts(tmp_path: Path, caplog) -> None:
    svc = CaptureService(tmp_path, 0, "127.0.0.1:9092", queue_size=3)
    with caplog.at_level(logging.WARNING, "minikafka.capture.service"):
        for i in range(10):
            svc.record(ctx(i), b"req%d" % i, [b"resp", memoryview(b"%d" % i)])  # no writer running: fills up
    assert svc.dropped == 7
    assert "dropped" in caplog.text
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run)
        await trio.testing.wait_all_tasks_blocked()  # the writer task took the three queued records
        for i in range(10, 13):
            svc.record(ctx(i), b"req%d" % i, None)
        assert svc.dropped == 7  # the queue had room again
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    recs = list(read_capture([tmp_path]))
    assert [r.correlation_id for r in recs] == [0, 1, 2, 10, 11, 12]
    assert recs[1].response == b"resp1" and recs[1].request == b"req1" and recs[3].response is None
    assert svc.writer.records_written == 6


async def test_timer_flushes_a_partial_block(tmp_path: Path) -> None:
    svc = CaptureService(tmp_path, 3, flush_interval=0.05)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run)
        svc.record(ctx(1), b"x", [b"y"])
        await wait_until(lambda: [r.correlation_id for r in read_capture([tmp_path])] == [1],
                         what="the timer to write the partial block")  # written before shutdown
        nursery.cancel_scope.cancel()


def test_produce_frame_kept_as_received_without_copy() -> None:
    from helpers import batch

    from minikafka.capture.produce import original_frame_parts
    from minikafka.protocol.api import APIS
    from minikafka.protocol.headers import RequestHeader, request_body_offset
    from minikafka.protocol.records import assign_offsets, iter_batches

    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [
        {"name": "a", "partition_data": [{"index": 0, "records": batch([b"x"]) + batch([b"y", b"z"])},
                                         {"index": 1, "records": batch([b"w"])}]},
        {"name": "b", "partition_data": [{"index": 0, "records": None}]}]}
    api = APIS[0]
    frame = bytearray(RequestHeader.build({"request_api_key": 0, "request_api_version": 9, "correlation_id": 7,
                                           "client_id": "c"}, 2) + api.request.build(body, 9))
    original = bytes(frame)
    off = request_body_offset(frame)
    req = api.request.parse(memoryview(frame)[off:], 9)
    parts = original_frame_parts(frame, req)
    assert isinstance(parts, list) and len(parts) == 7  # three batches patched, frame sliced around them
    for td in req.topic_data:
        for pd in td.partition_data:
            for i, (_h, view) in enumerate(iter_batches(pd.records or b"")):
                assign_offsets(view, 100 + i, 5)  # what the broker does in place
    assert bytes(frame) != original
    assert b"".join(parts) == original


async def test_pending_bytes_bound(tmp_path: Path) -> None:
    svc = CaptureService(tmp_path, 0, max_pending_bytes=1000, flush_interval=0.01)
    for i in range(5):
        svc.record(ctx(i), b"r" * 600, None)  # the first one fits; the others would pass the bound
    assert (svc.dropped, svc.pending_bytes) == (4, 600)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run)
        await wait_until(lambda: svc.pending_bytes == 0, what="the writer to take the pending record")
        svc.record(ctx(9), [b"r" * 300, memoryview(b"s" * 300)], [b"x"])
        nursery.cancel_scope.cancel()
    assert [(r.correlation_id, len(r.request)) for r in read_capture([tmp_path])] == [(0, 600), (9, 600)]


async def test_a_full_block_is_written_when_the_stop_comes_before_its_write(tmp_path: Path) -> None:
    """The broker stops just as a record fills a block: the writer is cancelled before its thread write
    starts, and the block (here the record that filled it) is still written when it stops."""
    svc = CaptureService(tmp_path, 0, block_bytes=64, flush_interval=60)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(svc.run)
        await trio.testing.wait_all_tasks_blocked()  # the writer waits for a record
        svc.record(ctx(1), b"r" * 100, [b"s" * 100])  # fills the block ...
        nursery.cancel_scope.cancel()  # ... and the stop comes before the writer resumes
    assert [(r.correlation_id, len(r.response or b"")) for r in read_capture([tmp_path])] == [(1, 100)]
    assert svc.writer.records_written == 1
