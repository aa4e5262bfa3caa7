"""The one error type of the wire-format layer: everything ``protocol`` raises for bytes it cannot read (or
values it cannot write) is a :class:`ProtocolError`, so callers around untrusted input catch that and only
that, and a bug elsewhere is not mistaken for malformed input.

The hierarchy (the modules that raise each class re-export it under its old name)::

    ProtocolError(ValueError)
    ├── MalformedMessage (also construct StreamError)   header/body/record that does not parse
    │   └── FastPathError                                the compiled parsers' variant
    ├── UnknownApi (also KeyError)                       api key minikafka does not know
    ├── UnsupportedVersion                               known api, version minikafka does not know
    ├── UnknownFieldError                                strict building: a key no version declares
    ├── CorruptRecordError                               batch CRC/decompression (CORRUPT_MESSAGE)
    │   └── InvalidRecordError                           structurally invalid batch or record
    ├── CompressionError                                 compressed data that does not decode
    ├── UnsupportedCodecError                            codec id outside 0-4
    ├── FrameError                                       a byte stream that cannot be framed
    │   ├── FrameTooLarge, InvalidFrameSize, TruncatedFrame
    └── CoordinatorRecordError                           a __consumer_offsets/... record that does not decode
"""

from __future__ import annotations

from typing import Any

from construct import StreamError

from .errors import ErrorCode

__all__ = [
    "CompressionError", "CoordinatorRecordError", "CorruptRecordError", "FastPathError", "FrameError",
    "FrameTooLarge", "InvalidFrameSize", "InvalidRecordError", "MalformedMessage", "MetadataRecordError",
    "ProtocolError", "TruncatedFrame", "UnknownApi", "UnknownFieldError", "UnsupportedCodecError", "UnsupportedVersion",
]


class ProtocolError(ValueError):
    """Bytes (or values) that are not valid Kafka wire format; a ``ValueError`` for callers that predate it."""


# -- messages (headers and bodies) ---------------------------------------------------------------------------

class MalformedMessage(ProtocolError, StreamError):
    """A request/response header or body that does not parse: truncated, bad lengths, bad varints, null where
    not nullable, bad UTF-8 (Kafka: ``SchemaException``).  Also a construct ``StreamError``, which is what
    the parsers raised before this hierarchy."""


class FastPathError(MalformedMessage):
    """The compiled fast path's input does not match the schema (truncated, or null where not nullable)."""


class UnknownApi(ProtocolError, KeyError):
    """A request header's api key is not one minikafka knows (Kafka: ``InvalidRequestException``).

    Also a ``KeyError`` (what ``APIS[key]`` raised before)."""

    def __init__(self, api_key: int) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UnsupportedVersion(ProtocolError):
    """A known api at a version minikafka does not implement (Kafka: ``UnsupportedVersionException``)."""

    def __init__(self, message: str, api_key: int | None = None, api_version: int | None = None) -> None:
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version


class UnknownFieldError(ProtocolError):
    """Strict mode: a body holds a key that is no field of its struct in any version."""

    def __init__(self, message: str, path: str, key: Any):
        super().__init__(f"{path}: unknown field {key!r} (no version of {message} declares it here)")
        self.message_name = message
        self.path = path
        self.key = key


# -- record batches and compression ----------------------------------------------------------------------------

class CorruptRecordError(ProtocolError):
    """Batch failed its CRC or could not be decompressed (``CorruptRecordException``).

    The broker answers CORRUPT_MESSAGE (2) for this and for its subclass `InvalidRecordError`.
    """

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(CorruptRecordError):
    """Structurally invalid batch: bad magic, length, truncation, bad record framing
    (``InvalidRecordException``)."""


class CompressionError(ProtocolError):
    """Compressed data could not be decoded (Kafka: ``KafkaException`` from the stream)."""


class UnsupportedCodecError(ProtocolError):
    """Codec id outside 0-4 (Kafka: ``IllegalArgumentException`` in ``CompressionType.forId``)."""


# -- framing ---------------------------------------------------------------------------------------------------

class FrameError(ProtocolError):
    """The byte stream cannot be framed; Kafka closes such a connection."""


class FrameTooLarge(FrameError):
    """A declared frame size above the configured maximum."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the maximum of {limit} (socket.request.max.bytes)")
        self.size = size
        self.limit = limit


class InvalidFrameSize(FrameError):
    """A negative declared frame size."""


class TruncatedFrame(FrameError):
    """The stream ended in the middle of a frame."""


# -- coordinator records ---------------------------------------------------------------------------------------

class CoordinatorRecordError(ProtocolError):
    """A coordinator record whose key or value does not decode (unknown record type or version, short data)."""


class MetadataRecordError(ProtocolError):
    """A KRaft metadata record that does not decode (unknown frame version, record type or version, short data)."""
