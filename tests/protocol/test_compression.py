"""Tests for minikafka.protocol.compression (Kafka's CompressionType codecs)."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    ZSTD,
    CompressionError,
    CompressionType,
    UnsupportedCodecError,
    compress,
    decompress,
    snappy_decode,
    xerial_snappy_encode,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
COMPRESSED = [GZIP, SNAPPY, LZ4, ZSTD]

# Compressible-ish payloads mixing repetition and noise.
payloads = st.one_of(
    st.binary(max_size=4096),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=64), st.integers(1, 3000)),
)


def test_codec_ids_match_kafka():
    assert [c.value for c in CompressionType] == [0, 1, 2, 3, 4]
    assert [c.name.lower() for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("codec", CODECS)
@given(data=payloads)
@settings(max_examples=60, deadline=None)
def test_round_trip(codec, data):
    out = compress(codec, data)
    assert isinstance(out, bytes)
    assert decompress(codec, out) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_accepts_buffer_types(codec, kind):
    data = bytes(range(256)) * 300
    comp = compress(codec, kind(data))
    assert decompress(codec, kind(comp)) == data
    # memoryview slices (how records.py hands over a batch's records section)
    padded = b"xx" + comp
    assert decompress(codec, memoryview(padded)[2:]) == data


@pytest.mark.parametrize("codec", CODECS)
def test_empty_and_large(codec):
    assert decompress(codec, compress(codec, b"")) == b""
    big = (b"kafka record payload " * 60000)[: 1 << 20] + bytes(range(256)) * 64
    comp = compress(codec, big)
    if codec:
        assert len(comp) < len(big) // 4
    assert decompress(codec, comp) == big


def test_unknown_codec():
    for codec in (5, 6, 7, -1):
        with pytest.raises(UnsupportedCodecError):
            compress(codec, b"x")
        with pytest.raises(UnsupportedCodecError):
            decompress(codec, b"x")


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("garbage", [b"", b"garbage!", bytes(range(200)),
                                     b"\x82SNAPPY\x00" + struct.pack(">iii", 1, 1, 1000) + b"zz"])
def test_garbage_raises_compression_error(codec, garbage):
    with pytest.raises(CompressionError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", COMPRESSED)
def test_truncated_raises_compression_error(codec):
    comp = compress(codec, bytes(range(256)) * 1000)
    with pytest.raises(CompressionError):
        decompress(codec, comp[: len(comp) // 2])


# ---------------------------------------------------------------- snappy


def _xerial(blocks: list[bytes], version: bytes = struct.pack(">ii", 1, 1)) -> bytes:
    out = [XERIAL_MAGIC, version]
    for blk in blocks:
        raw = bytes(cramjam.snappy.compress_raw(blk))
        out.append(struct.pack(">i", len(raw)))
        out.append(raw)
    return b"".join(out)


def test_xerial_hand_built_frame_several_blocks():
    blocks = [b"a" * 100, bytes(range(256)) * 10, b"", b"last block \x00\xff" * 7]
    frame = _xerial(blocks)
    assert frame[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    assert decompress(SNAPPY, frame) == b"".join(blocks)
    assert snappy_decode(bytearray(frame)) == b"".join(blocks)


def test_xerial_little_endian_version_tolerated():
    # Some producers (e.g. redpanda) wrote the version ints little-endian.
    frame = _xerial([b"hello ", b"world"], version=struct.pack("<ii", 1, 1))
    assert decompress(SNAPPY, frame) == b"hello world"


@given(st.lists(st.binary(max_size=3000), min_size=1, max_size=8))
@settings(max_examples=50, deadline=None)
def test_xerial_decode_random_blocks(blocks):
    assert decompress(SNAPPY, _xerial(blocks)) == b"".join(blocks)


def test_xerial_encode_layout_matches_java_snappy_output_stream():
    data = bytes(range(256)) * 400 + b"tail"  # 102404 bytes -> 4 blocks of <= 32 KiB
    enc = compress(SNAPPY, data)
    assert enc[:16] == XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    pos, sizes = 16, []
    while pos < len(enc):
        (blen,) = struct.unpack_from(">i", enc, pos)
        pos += 4
        sizes.append(len(bytes(cramjam.snappy.decompress_raw(enc[pos:pos + blen]))))
        pos += blen
    assert pos == len(enc)
    assert sizes == [XERIAL_BLOCK_SIZE] * 3 + [len(data) - 3 * XERIAL_BLOCK_SIZE]
    assert xerial_snappy_encode(data, block_size=1000)[:16] == enc[:16]
    assert decompress(SNAPPY, xerial_snappy_encode(data, block_size=1000)) == data


def test_snappy_raw_and_official_framed_decoded():
    data = b"raw snappy as librdkafka sends it " * 50
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress(data))) == data


def test_snappy_cross_check_aiokafka_codec():
    codec = pytest.importorskip("aiokafka.codec")
    data = bytes(range(256)) * 500
    assert codec.snappy_decode(compress(SNAPPY, data)) == data
    assert decompress(SNAPPY, codec.snappy_encode(data)) == data
    assert decompress(SNAPPY, codec.snappy_encode(data, xerial_compatible=False)) == data


# ---------------------------------------------------------------- lz4


def test_lz4_frame_flags_like_kafka_lz4_block_output_stream():
    enc = compress(LZ4, b"x" * 200000)
    assert enc[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg = enc[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence (KIP-57: no linked blocks)
    assert not flg & 0x01  # no dict id


def test_lz4_decodes_standard_frames():
    data = b"lz4 frame data " * 20000
    # linked blocks, content checksum, content size: all standard frame options
    assert decompress(LZ4, bytes(cramjam.lz4.compress(data))) == data
    c = cramjam.lz4.Compressor(level=9, content_checksum=True, block_linked=True)
    c.compress(data)
    assert decompress(LZ4, bytes(c.finish())) == data


# ---------------------------------------------------------------- zstd


def test_zstd_frame_without_content_size_and_multiple_frames():
    data = b"zstd streaming " * 10000
    c = cramjam.zstd.Compressor(level=3)
    c.compress(data)
    frame = bytes(c.finish())
    assert frame[:4] == b"\x28\xb5\x2f\xfd"
    fhd = frame[4]
    assert fhd >> 6 == 0 and not fhd & 0x20  # no Frame_Content_Size field
    assert decompress(ZSTD, frame) == data
    assert decompress(ZSTD, frame + compress(ZSTD, b"second")) == data + b"second"


# ---------------------------------------------------------------- gzip


def test_gzip_interop_with_stdlib():
    data = b"gzip interop " * 5000
    assert gzip.decompress(compress(GZIP, data)) == data
    assert decompress(GZIP, gzip.compress(data, mtime=0)) == data
    # multi-member gzip streams are legal (GZIPInputStream reads them all)
    assert decompress(GZIP, gzip.compress(b"one") + gzip.compress(b"two")) == b"onetwo"
    # zlib-produced gzip wrapper
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    assert decompress(GZIP, z.compress(data) + z.flush()) == data


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_decompress_bounded_refuses_more_than_its_bound(codec: int) -> None:
    from minikafka.protocol.compression import decompress_bounded

    data = b"abc" * 300_000  # 900 KB: more than the first buffer tried for a payload this compressible
    packed = compress(codec, data)
    assert decompress_bounded(codec, packed, len(data)) == data
    with pytest.raises(CompressionError):
        decompress_bounded(codec, packed, len(data) - 1)
    with pytest.raises(CompressionError):
        decompress_bounded(codec, b"\x00not compressed data" if codec != NONE else packed, 10)


def test_snappy_refuses_a_declared_length_its_bytes_cannot_encode() -> None:
    """A raw snappy header declaring 4 GiB over 2 bytes is refused before the decoder allocates it; the
    format's best ratio (a run: ~21x) still decodes, raw and xerial-framed."""
    with pytest.raises(CompressionError):
        snappy_decode(bytes.fromhex("ffffffff0f0061"))
    with pytest.raises(CompressionError):
        snappy_decode(XERIAL_MAGIC + bytes(8) + struct.pack(">i", 7) + bytes.fromhex("ffffffff0f0061"))
    run = b"x" * 5_000_000
    raw = bytes(cramjam.snappy.compress_raw(run))
    assert len(run) > 21 * len(raw) and snappy_decode(raw) == run
    assert snappy_decode(xerial_snappy_encode(run)) == run
