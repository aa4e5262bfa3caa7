"""Bad bytes into protocol/'s parse entry points raise ProtocolError subclasses, never the parsers' own
KeyError / IndexError / struct.error / construct errors (issue 29: callers catch ProtocolError and only it).

Inputs are deterministic: every truncation of a few real frames, batches, payloads and records, plus
seeded random byte flips."""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from construct import StreamError

from minikafka.protocol import compression as C
from minikafka.protocol import coordinator_records as CR
from minikafka.protocol import headers as H
from minikafka.protocol import records as R
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.exceptions import (CompressionError, CoordinatorRecordError, CorruptRecordError,
                                           FastPathError, FrameError, FrameTooLarge, InvalidFrameSize,
                                           InvalidRecordError, MalformedMessage, ProtocolError, TruncatedFrame,
                                           UnknownApi, UnknownFieldError, UnsupportedCodecError,
                                           UnsupportedVersion)
from minikafka.protocol.framing import CLOSED, NEED_DATA, Frame, FrameDecoder, encode_frame
from minikafka.protocol.record_filter import scan_records
from minikafka.common.clock import SYSTEM_CLOCK


def _mutants(data: bytes, seed: int, flips: int = 40) -> Iterator[bytes]:
    """Every proper prefix of ``data``, then ``flips`` copies with 1-3 bytes set to seeded random values."""
    for i in range(len(data)):
        yield data[:i]
    rng = random.Random(seed)
    for _ in range(flips):
        b = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        yield bytes(b)


def _outcomes(fn: Callable[[bytes], Any], inputs: Iterator[bytes]) -> tuple[int, int]:
    """(inputs that parsed, inputs that raised a ProtocolError); any other exception fails the test."""
    parsed = refused = 0
    for data in inputs:
        try:
            result = fn(data)
            if isinstance(result, Iterator):
                list(result)
            parsed += 1
        except ProtocolError:
            refused += 1
        except Exception as exc:  # noqa: BLE001 - the point of the test: name the input that leaked it
            pytest.fail(f"{type(exc).__name__} (not a ProtocolError) for {data[:64]!r}: {exc}")
    return parsed, refused


def _request_frame(api_key: int, version: int) -> bytes:
    api = APIS[api_key]
    header = H.RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                    "correlation_id": 7, "client_id": "fuzz"}, 2 if api.is_flexible(version) else 1)
    return header + api.request.build(api.request.default(), version)


def test_hierarchy() -> None:
    for cls in (MalformedMessage, FastPathError, UnknownApi, UnsupportedVersion, UnknownFieldError,
                CorruptRecordError, InvalidRecordError, CompressionError, UnsupportedCodecError, FrameError,
                FrameTooLarge, InvalidFrameSize, TruncatedFrame, CoordinatorRecordError):
        assert issubclass(cls, ProtocolError) and issubclass(cls, ValueError), cls
    assert issubclass(UnknownApi, KeyError) and issubclass(MalformedMessage, StreamError)
    assert CorruptRecordError.error_code == InvalidRecordError.error_code == ErrorCode.CORRUPT_MESSAGE
    assert str(UnknownApi(999)) == "unknown api key 999"


@pytest.mark.parametrize("api_key", [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS,
                                     ApiKey.JOIN_GROUP, ApiKey.CREATE_TOPICS])
def test_request_frames_truncated_or_garbled(api_key: int) -> None:
    api = APIS[api_key]
    for version in (api.request.min_version, api.request.max_version):
        frame = _request_frame(api_key, version)
        assert H.parse_request_frame(frame)[0].api_key == api_key
        parsed, refused = _outcomes(H.parse_request_frame, _mutants(frame, seed=api_key * 100 + version))
        assert refused > 0
        _outcomes(H.request_body_offset, _mutants(frame, seed=version))
        _outcomes(lambda d, v=version: api.request.parse_construct(d, v), _mutants(frame[10:], seed=version))


def test_every_request_truncated() -> None:
    """Every truncation of the newest version of every api's default request."""
    for api_key, api in sorted(APIS.items()):
        frame = _request_frame(api_key, api.request.max_version)
        _outcomes(H.parse_request_frame, (frame[:i] for i in range(len(frame))))


def test_random_request_frames() -> None:
    rng = random.Random(29)
    frames = (bytes(rng.randrange(256) for _ in range(rng.randrange(48))) for _ in range(2000))
    assert _outcomes(H.parse_request_frame, frames)[1] > 0


def test_request_errors_are_precise() -> None:
    with pytest.raises(MalformedMessage, match="too short"):
        H.parse_request_header(b"\x00\x03")
    unknown = struct.pack(">hhih", 9999, 0, 1, -1)
    with pytest.raises(UnknownApi) as info:
        H.parse_request_frame(unknown)
    assert info.value.api_key == 9999
    with pytest.raises(KeyError):  # what callers of the KeyError era catch
        H.parse_request_frame(unknown)
    with pytest.raises(UnsupportedVersion) as version_info:
        H.parse_request_frame(struct.pack(">hhih", ApiKey.METADATA, 999, 1, -1) + b"\x00")
    assert (version_info.value.api_key, version_info.value.api_version) == (ApiKey.METADATA, 999)
    flexible = _request_frame(ApiKey.METADATA, APIS[ApiKey.METADATA].request.max_version)
    with pytest.raises(MalformedMessage):  # cut inside the header's tagged fields
        H.parse_request_header(flexible[:14])  # 10-byte header prefix + "fuzz": the tag section is missing
    with pytest.raises(MalformedMessage):
        APIS[ApiKey.METADATA].request.parse(b"\x00", 12)


def test_response_frames_truncated_or_garbled() -> None:
    for api_key in (ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.FIND_COORDINATOR):
        api = APIS[api_key]
        for version in (api.response.min_version, api.response.max_version):
            frame = H.response_header_bytes(7, api_key, version) + api.response.build(api.response.default(), version)
            assert H.parse_response_frame(frame, api_key, version)[0] == 7
            _outcomes(lambda d, k=api_key, v=version: H.parse_response_frame(d, k, v),
                      _mutants(frame, seed=api_key + version))
    with pytest.raises(UnknownApi):
        H.parse_response_frame(b"\x00\x00\x00\x07", 9999, 0)


_RECORDS = [R.Record(key=b"k%d" % i, value=b"v" * (i * 7), headers=[("h", b"x")]) for i in range(6)]


@pytest.mark.parametrize("codec", [C.NONE, C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
def test_record_batches_truncated_or_garbled(codec: int) -> None:
    batch = R.build_batch(_RECORDS, compression=codec, base_timestamp=SYSTEM_CLOCK.time_ms())
    assert len(R.decode_records(batch)) == len(_RECORDS)
    inputs = list(_mutants(batch, seed=codec, flips=150))
    assert _outcomes(lambda d: R.iter_batches(d), iter(inputs))[1] > 0
    _outcomes(lambda d: R.decode_records(d, check_crc=False), iter(inputs))
    _outcomes(lambda d: R.recover_batches(d, check_crc=False), iter(inputs))
    _outcomes(R.count_records, iter(inputs))
    _outcomes(lambda d: R.iter_batches(d, check_crc=False, allow_truncated_tail=True), iter(inputs))
    with pytest.raises(CorruptRecordError):
        flipped = bytearray(batch)
        flipped[-1] ^= 0xFF
        R.validate_batch(flipped)


def test_raw_records_truncated_or_garbled() -> None:
    raw = R.encode_records(_RECORDS)
    _outcomes(lambda d: R.decode_raw_records(d, len(_RECORDS)), _mutants(raw, seed=5, flips=300))
    _outcomes(lambda d: scan_records(d, len(_RECORDS)), _mutants(raw, seed=6, flips=300))
    with pytest.raises(InvalidRecordError):
        R.decode_raw_records(raw[:-1], len(_RECORDS))


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4, C.ZSTD])
def test_compressed_payloads_truncated_or_garbled(codec: int) -> None:
    payload = C.compress(codec, b"minikafka " * 200)
    inputs = list(_mutants(payload, seed=codec, flips=200))
    assert _outcomes(lambda d: C.decompress(codec, d), iter(inputs))[1] > 0
    _outcomes(lambda d: C.decompress_bounded(codec, d, 1 << 12), iter(inputs))
    with pytest.raises(UnsupportedCodecError):
        C.decompress(7, payload)


def _coordinator_records() -> list[tuple[Callable[[bytes, bytes | None], Any], tuple[bytes, bytes | None]]]:
    member = CR.GroupMemberMetadata("m-1", "c", "/127.0.0.1", 10_000, b"\x00\x01sub", b"\x00\x01asg", 30_000, "i")
    return [
        (CR.decode_group_record, CR.encode_record(CR.OffsetCommitKey("g", "t", 3),
                                                  CR.OffsetCommitValue(42, "meta", 1000, 5))),
        (CR.decode_group_record, CR.encode_record(CR.GroupMetadataKey("g"),
                                                  CR.GroupMetadataValue("consumer", 4, "range", "m-1", 99,
                                                                        (member,)))),
        (CR.decode_transaction_record, CR.encode_record(
            CR.TransactionLogKey("tx"),
            CR.TransactionLogValue(7, 1, 60_000, 1, (CR.TransactionPartitions("t", (0, 1)),), 5, 4))),
        (CR.decode_share_record, CR.encode_record(
            CR.ShareSnapshotKey("sg", uuid.UUID(int=12345), 2),
            CR.ShareSnapshotValue(1, 1, 0, 10, (CR.ShareStateBatch(10, 20, 0, 1),)))),
    ]


def test_coordinator_records_truncated_or_garbled() -> None:
    for n, (decode, (key, value)) in enumerate(_coordinator_records()):
        assert value is not None
        decode(key, value)
        _outcomes(lambda k: decode(k, value), _mutants(key, seed=n))
        parsed, refused = _outcomes(lambda v: decode(key, v), _mutants(value, seed=n + 10, flips=100))
        assert refused > 0
        with pytest.raises(CoordinatorRecordError):
            decode(key, value[:1])


def _frames_of(stream: bytes, max_frame_size: int = 1 << 20) -> list[bytes]:
    decoder = FrameDecoder(max_frame_size)
    decoder.receive_data(stream)
    decoder.receive_data(b"")
    out = []
    while True:
        event = decoder.next_event()
        if event is CLOSED:
            return out
        assert event is not NEED_DATA
        assert isinstance(event, Frame)
        out.append(bytes(event.payload))


def test_frames_truncated_or_garbled() -> None:
    stream = b"".join(encode_frame(_request_frame(k, APIS[k].request.max_version))
                      for k in (ApiKey.METADATA, ApiKey.API_VERSIONS))
    assert len(_frames_of(stream)) == 2
    parsed, refused = _outcomes(lambda d: _frames_of(d, 4096), _mutants(stream, seed=3, flips=200))
    assert refused > 0
    with pytest.raises(TruncatedFrame):
        _frames_of(stream[:-1])
    with pytest.raises(InvalidFrameSize):
        _frames_of(b"\xff\xff\xff\xff")
    with pytest.raises(FrameTooLarge):
        _frames_of(b"\x00\x01\x00\x00", 100)
