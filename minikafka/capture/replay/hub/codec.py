"""The replay hub's wire format: messages of a 4-byte big-endian length and a JSON object, values in a tagged
JSON encoding (tuples, UUIDs, bytes, dicts; never pickle: nothing a peer sends is executed).

What a peer sends that cannot be read raises :class:`HubMessageError`, a
:class:`~minikafka.protocol.exceptions.ProtocolError`: the hub's connections catch that (and I/O errors), so a
bug elsewhere is not mistaken for a malformed message.
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import uuid
from typing import Any

import trio

from ....protocol.exceptions import ProtocolError

_LEN = struct.Struct(">I")
#: The largest message accepted (a snapshot of a big replay's map stays far below).
MAX_MESSAGE_BYTES = 256 << 20


class HubMessageError(ProtocolError):
    """A replay hub message that cannot be read: a bad frame, bad JSON, an unknown value tag, a bad field."""


def encode_value(v: Any) -> Any:
    """A JSON-able form of ``v`` (see the package docstring for the tags)."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, tuple):
        return {"t": [encode_value(x) for x in v]}
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    if isinstance(v, uuid.UUID):
        return {"u": v.hex}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"b": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dict):
        return {"d": [[encode_value(k), encode_value(x)] for k, x in v.items()]}
    raise TypeError(f"cannot send a {type(v).__name__} through the replay hub")


def decode_value(v: Any) -> Any:
    """The inverse of :func:`encode_value`; :class:`HubMessageError` for what it cannot have made."""
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if isinstance(v, dict):
        try:
            if "t" in v:
                return tuple(decode_value(x) for x in v["t"])
            if "u" in v:
                return uuid.UUID(hex=v["u"])
            if "b" in v:
                return base64.b64decode(v["b"])
            if "d" in v:
                return {decode_value(k): decode_value(x) for k, x in v["d"]}
        except HubMessageError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:  # binascii.Error is a ValueError
            raise HubMessageError(f"bad tagged value {v!r}: {exc}") from exc
        raise HubMessageError(f"unknown tag in {v!r}")
    return v


def as_int(v: Any) -> int:
    """A message field holding an integer."""
    try:
        return int(v)
    except (TypeError, ValueError) as exc:
        raise HubMessageError(f"not an integer: {v!r}") from exc


def int_list(v: Any) -> list[int]:
    """A message field holding connection indexes (None: none)."""
    if not isinstance(v, (list, type(None))):
        raise HubMessageError(f"not a list of integers: {v!r}")
    return [as_int(c) for c in v or []]


def frame(msg: dict) -> bytes:
    """One message as wire bytes."""
    data = json.dumps(msg, separators=(",", ":")).encode()
    return _LEN.pack(len(data)) + data


class MessageReader:
    """Length-prefixed JSON messages from a stream."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = bytearray()

    async def next(self) -> dict | None:
        """The next message, or None at a clean end of stream."""
        while True:
            if len(self._buf) >= 4:
                (size,) = _LEN.unpack_from(self._buf)
                if size > MAX_MESSAGE_BYTES:
                    raise HubMessageError(f"replay hub message of {size} bytes")
                if len(self._buf) >= 4 + size:
                    data = bytes(self._buf[4:4 + size])
                    del self._buf[:4 + size]
                    try:
                        msg = json.loads(data)
                    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                        raise HubMessageError(f"replay hub message is not JSON: {exc}") from exc
                    if not isinstance(msg, dict):
                        raise HubMessageError("replay hub message is not an object")
                    return msg
            chunk = await self._stream.receive_some(1 << 16)
            if not chunk:
                if self._buf:
                    raise HubMessageError("replay hub stream ended inside a message")
                return None
            self._buf += chunk


def nodelay(stream: trio.abc.Stream) -> None:
    """Small messages go out at once (a replay waits on other tasks' progress hop by hop)."""
    if isinstance(stream, trio.SocketStream):
        stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
