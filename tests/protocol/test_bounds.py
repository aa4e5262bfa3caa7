"""Every count a request carries is bounded by the frame: lengths beyond the bytes left are refused before
anything is allocated for them (Kafka's generated readers do the same)."""

from __future__ import annotations

import pytest
from construct import StreamError

from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.fastpath import FastPathError


@pytest.mark.parametrize("count", [0x7FFFFFFF, 5, 1_000_000])
def test_array_count_beyond_the_frame_is_refused(count: int) -> None:
    api = APIS[ApiKey.METADATA].request
    body = count.to_bytes(4, "big") + b"\x00\x01a"  # v1: topics array of `count`, then one 1-char name
    with pytest.raises(FastPathError, match="Tried to allocate a collection of size"):
        api.parse(body, 1)
    with pytest.raises(StreamError, match="Tried to allocate a collection of size"):
        api.parse_construct(body, 1)


def test_compact_array_count_beyond_the_frame_is_refused() -> None:
    api = APIS[ApiKey.METADATA].request
    body = b"\xff\xff\xff\xff\x07" + bytes(3)  # v12 compact topics array: varint count 2**31 - 1
    with pytest.raises(FastPathError, match="Tried to allocate a collection of size"):
        api.parse(body, 12)


def test_string_and_bytes_lengths_beyond_the_frame_are_refused() -> None:
    create = APIS[ApiKey.CREATE_TOPICS].request
    body = (1).to_bytes(4, "big") + (0x7FFF).to_bytes(2, "big") + b"abc"  # v0: one topic, name of 32767
    with pytest.raises(FastPathError, match="need 32767 bytes"):
        create.parse(body, 0)


def test_counts_that_fit_still_parse() -> None:
    api = APIS[ApiKey.METADATA].request
    body = (2).to_bytes(4, "big") + b"\x00\x01a\x00\x01b"
    assert [t.name for t in api.parse(body, 1).topics] == ["a", "b"]
