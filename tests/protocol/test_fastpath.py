"""The compiled fast path reads and writes exactly what the construct schemas do, for every API and version."""

from __future__ import annotations

import pytest
from construct import StreamError
from hypothesis import given
from hypothesis import strategies as st

from minikafka.protocol.messages.fetch import FetchRequest
from minikafka.protocol.messages.produce import ProduceRequest
from message_strategies import message_strategy
from test_roundtrip import CASES, FAST


@pytest.mark.parametrize("msg,version", CASES)
@FAST
@given(data=st.data())
def test_fast_path_equals_construct(msg, version, data) -> None:
    obj = data.draw(message_strategy(msg, version))
    reference = msg.build_construct(obj, version)
    assert msg.build(obj, version) == reference
    assert b"".join(bytes(s) for s in msg.build_segments(obj, version)) == reference
    assert msg.parse(reference, version) == msg.parse_construct(reference, version)


@pytest.mark.parametrize("version", [6, 12])
def test_truncated_input_raises_a_stream_error(version) -> None:
    body = FetchRequest.build({"replica_id": -1, "max_wait_ms": 1, "min_bytes": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 10}]}]}, version)
    for cut in (1, 5, len(body) // 2, len(body) - 1):
        with pytest.raises(StreamError):
            FetchRequest.parse(body[:cut], version)


def test_records_are_zero_copy_views_and_chunks_pass_by_reference() -> None:
    big = bytearray(b"r" * 100_000)
    body = {"acks": 1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [
        {"index": 0, "records": [memoryview(big)[:60_000], memoryview(big)[60_000:]]}]}]}
    segments = ProduceRequest.build_segments(body, 9)
    assert any(isinstance(s, memoryview) and s.obj is big for s in segments)  # not copied
    frame = bytearray(b"".join(bytes(s) for s in segments))
    parsed = ProduceRequest.parse(memoryview(frame), 9)
    records = parsed.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and bytes(records) == bytes(big)
