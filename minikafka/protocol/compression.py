"""Record batch compression codecs (Kafka's ``CompressionType`` and its streams).

Codec ids are the values of the low three bits of a record batch's attributes:
0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.  Every codec is backed by ``cramjam``
(Rust/C), so nothing here compresses in pure Python.

Wire formats, as the Java client writes them:

* gzip  -- RFC 1952 gzip (``GZIPOutputStream``); multi-member input is accepted.
* snappy -- xerial ``SnappyOutputStream`` framing: the 16-byte header
  ``b"\\x82SNAPPY\\x00"`` + int32 version + int32 compatible version, then blocks
  of big-endian int32 length + raw snappy block, each holding at most 32 KiB of
  input.  Decoding also accepts raw (unframed) snappy, which librdkafka and
  some other clients send, and the official snappy framing format.
* lz4   -- LZ4 frame format with independent blocks (KIP-57,
  ``KafkaLZ4BlockOutputStream``); decoding takes any standard frame.
* zstd  -- standard zstd frames (``ZstdOutputStreamNoFinalizer``); frames
  without a content size (streaming compressors) are decoded too.

The old magic v0/v1 LZ4 framing with Kafka's broken header checksum is not
supported: minikafka only speaks record batch magic v2.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Union

import cramjam
from construct import StreamError

from .exceptions import CompressionError, UnsupportedCodecError
from .types import uvarint_at

__all__ = [
    "CompressionType", "CompressionError", "UnsupportedCodecError",
    "NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD", "CODEC_NAMES",
    "compress", "decompress", "decompress_bounded",
    "xerial_snappy_encode", "snappy_decode", "XERIAL_MAGIC", "XERIAL_BLOCK_SIZE",
]

Buffer = Union[bytes, bytearray, memoryview]


class CompressionType(IntEnum):
    """Kafka's ``CompressionType`` ids (attributes bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

#: Default levels of the Java client (KIP-390): gzip = Deflater default (6),
#: zstd 3; lz4's default uses the fast (non-HC) compressor.
GZIP_LEVEL = 6
ZSTD_LEVEL = 3

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_INT32 = struct.Struct(">i")


def xerial_snappy_encode(data: Buffer, block_size: int = XERIAL_BLOCK_SIZE) -> bytes:
    """Snappy in xerial ``SnappyOutputStream`` framing (what the Java client writes)."""
    mv = memoryview(data)
    n = len(mv)
    parts = [XERIAL_HEADER]
    append = parts.append
    pack = _INT32.pack
    compress_raw = cramjam.snappy.compress_raw
    for i in range(0, n, block_size):
        block = compress_raw(mv[i:i + block_size])
        append(pack(len(block)))
        append(bytes(block))
    return b"".join(parts)


#: The most a snappy byte can stand for: a 3-byte copy writes at most 64 bytes (the format's best ratio).
_SNAPPY_MAX_RATIO = 22


def _snappy_raw(mv: memoryview) -> bytes:
    """Raw snappy, refused before any allocation when its header declares more than the bytes that follow
    can encode (a 5-byte header may declare 4 GiB: the decoder would allocate it)."""
    try:
        declared, pos = uvarint_at(mv, 0)
    except (IndexError, StreamError) as exc:
        raise CompressionError(f"snappy: invalid length header ({exc or 'truncated'})") from None
    if declared > _SNAPPY_MAX_RATIO * (len(mv) - pos):
        raise CompressionError(f"snappy: declares {declared} bytes, more than {len(mv) - pos} bytes can encode")
    return bytes(cramjam.snappy.decompress_raw(mv))


def _xerial_decode(mv: memoryview) -> bytes:
    parts: list[bytes] = []
    append = parts.append
    decompress_raw = _snappy_raw
    unpack_from = _INT32.unpack_from
    pos = 16
    n = len(mv)
    while pos < n:
        if pos + 4 > n:
            raise CompressionError("truncated xerial snappy block length")
        (blen,) = unpack_from(mv, pos)
        pos += 4
        end = pos + blen
        if blen < 0 or end > n:
            raise CompressionError(f"invalid xerial snappy block length {blen}")
        append(decompress_raw(mv[pos:end]))
        pos = end
    return b"".join(parts)


def snappy_decode(data: Buffer) -> bytes:
    """Decode xerial-framed, official-framed or raw snappy (xerial ``SnappyInputStream``)."""
    mv = memoryview(data)
    try:
        if len(mv) >= 16 and mv[:8] == XERIAL_MAGIC:
            # version/compat ints are ignored: some producers write them little-endian.
            return _xerial_decode(mv)
        if mv[:10] == _SNAPPY_FRAMED_MAGIC:
            return bytes(cramjam.snappy.decompress(mv))
        return _snappy_raw(mv)
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"snappy: {exc}") from exc


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    # Kafka does not support linked (dependent) blocks: KIP-57.
    c = cramjam.lz4.Compressor(level=level, content_checksum=False, block_linked=False)
    c.compress(data if type(data) is bytes else bytes(data))  # Compressor wants bytes
    return bytes(c.finish())


def compress(codec: int, data: Buffer, level: int | None = None) -> bytes:
    """Compress ``data`` with codec id ``codec`` as Kafka's ``CompressionType.wrapForOutput``."""
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data, level=GZIP_LEVEL if level is None else level))
    if codec == SNAPPY:
        return xerial_snappy_encode(data)
    if codec == LZ4:
        return _lz4_compress(data, level)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVEL if level is None else level))
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress ``data`` as Kafka's ``CompressionType.wrapForInput``.

    Raises `CompressionError` for undecodable input and `UnsupportedCodecError`
    for an unknown codec id.
    """
    if codec == SNAPPY:
        return snappy_decode(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CompressionError(f"{CODEC_NAMES[codec]}: {exc}") from exc
    if codec == NONE:
        return bytes(data)
    raise UnsupportedCodecError(f"unknown compression codec {codec}")


_CRAMJAM_CODECS = {GZIP: cramjam.gzip, LZ4: cramjam.lz4, ZSTD: cramjam.zstd}
_FIRST_GUESS = 8  # output buffer tried first: this many times the input (at least 64 KiB), then x4 up to the bound


def decompress_bounded(codec: int, data: Buffer, max_size: int) -> bytes:
    """:func:`decompress`, refusing (`CompressionError`) what would decompress to more than ``max_size`` bytes.

    For input a peer sends whose size after decompression nothing bounds (a small compressed payload can
    stand for gigabytes): gzip, lz4 and zstd are decompressed into buffers that grow to ``max_size`` at most;
    snappy's expansion is bounded by its format, so it is decompressed and then checked.
    """
    if codec == SNAPPY or codec == NONE or codec not in _CRAMJAM_CODECS:
        out = decompress(codec, data)
        if len(out) > max_size:
            raise CompressionError(f"{CODEC_NAMES[codec]}: decompresses to more than {max_size} bytes")
        return out
    module = _CRAMJAM_CODECS[codec]
    size = min(max_size, max(1 << 16, _FIRST_GUESS * len(data)))
    while True:
        buf = bytearray(size)
        try:
            n = module.decompress_into(data, buf)
        except cramjam.DecompressionError as exc:
            if size >= max_size:  # corrupt, or larger than the bound: refused either way
                raise CompressionError(f"{CODEC_NAMES[codec]}: {exc} (or more than {max_size} bytes)") from exc
            size = min(max_size, size * 4)
            continue
        return bytes(memoryview(buf)[:n])

