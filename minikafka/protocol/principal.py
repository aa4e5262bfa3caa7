"""A principal as an Envelope carries it: Kafka's ``DefaultPrincipalData`` (``DefaultKafkaPrincipalBuilder``).

A version (int16, 0), then the flexible struct: the principal's type and name as compact strings, whether it
logged in with a delegation token, and an empty tagged-field section.  ``User:alice`` is type ``User``, name
``alice``.
"""

from __future__ import annotations

import struct

from .exceptions import MalformedMessage
from .types import uvarint_at, write_uvarint


def _compact(text: str) -> bytes:
    raw = text.encode()
    return write_uvarint(len(raw) + 1) + raw


def encode_principal(principal: str, token_authenticated: bool = False) -> bytes:
    """``Type:Name`` as DefaultPrincipalData v0."""
    kind, _, name = principal.partition(":")
    return b"\x00\x00" + _compact(kind) + _compact(name) + (b"\x01" if token_authenticated else b"\x00") + b"\x00"


def decode_principal(data: bytes | bytearray | memoryview) -> str:
    """``Type:Name`` from DefaultPrincipalData v0; MalformedMessage when it does not parse."""
    buf = bytes(data)
    try:
        (version,) = struct.unpack_from(">h", buf, 0)
        if version != 0:
            raise MalformedMessage(f"DefaultPrincipalData v{version} is not supported")
        pos, parts = 2, []
        for _ in range(2):
            size, pos = uvarint_at(buf, pos)
            if size == 0 or pos + size - 1 > len(buf):
                raise MalformedMessage("a principal's type or name is null or truncated")
            parts.append(buf[pos:pos + size - 1].decode())
            pos += size - 1
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise MalformedMessage(f"not a DefaultPrincipalData: {exc}") from None
    return f"{parts[0]}:{parts[1]}"
