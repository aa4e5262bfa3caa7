"""A Kafka protocol connection on Trio (the wire half of Kafka's ``NetworkClient``).

Sends requests declared in :mod:`minikafka.protocol` and matches responses by
correlation id; requests may be pipelined.  Used by minikafka's own clients
and by the tests to drive a broker with raw requests.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any

import trio

from ..protocol.api import APIS, ApiKey
from ..protocol.headers import RequestHeader, request_header_version, response_header_version

_SIZE = struct.Struct(">i")


class KafkaConnection:
    """One TCP connection to a broker."""

    def __init__(self, stream: trio.SocketStream, client_id: str | None = "minikafka") -> None:
        self.stream = stream
        self.client_id = client_id
        self._corr = itertools.count(1)
        self._buf = bytearray()
        self.api_versions: dict[int, tuple[int, int]] = {}

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str | None = "minikafka") -> "KafkaConnection":
        stream = await trio.open_tcp_stream(host, port)
        return cls(stream, client_id)

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def __aenter__(self) -> "KafkaConnection":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def encode_request(self, api_key: int, version: int, body: dict | None, correlation_id: int) -> bytes:
        """Header + body, without the size prefix."""
        api = APIS[api_key]
        hv = request_header_version(api_key, api.is_flexible(version))
        header = RequestHeader.build(
            {"request_api_key": api_key, "request_api_version": version,
             "correlation_id": correlation_id, "client_id": self.client_id},
            hv,
        )
        return header + api.request.build(body or {}, version)

    async def send_raw(self, payload: bytes) -> None:
        """Send one frame (the size prefix is added)."""
        await self.stream.send_all(_SIZE.pack(len(payload)) + payload)

    async def receive_frame(self) -> bytes | None:
        """The next response frame (without size prefix), or None if the broker closed."""
        while len(self._buf) < 4:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self._buf += data
        (size,) = _SIZE.unpack_from(self._buf)
        while len(self._buf) < 4 + size:
            data = await self.stream.receive_some(max(65536, 4 + size - len(self._buf)))
            if not data:
                return None
            self._buf += data
        frame = bytes(self._buf[4:4 + size])
        del self._buf[:4 + size]
        return frame

    def decode_response(self, api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
        api = APIS[api_key]
        hv = response_header_version(api_key, api.is_flexible(version))
        corr = int.from_bytes(frame[:4], "big", signed=True)
        off = 4
        if hv >= 1:
            off += 1 if frame[4] == 0 else _skip_tags(frame, 4)
        return corr, api.response.parse(frame[off:], version)

    async def send(self, api_key: int, version: int, body: dict | None = None) -> int:
        """Send a request; returns its correlation id."""
        corr = next(self._corr)
        await self.send_raw(self.encode_request(api_key, version, body, corr))
        return corr

    async def receive(self, api_key: int, version: int) -> Any:
        frame = await self.receive_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        return self.decode_response(api_key, version, frame)[1]

    async def request(self, api_key: int, version: int, body: dict | None = None) -> Any:
        """Send a request and wait for its response body."""
        corr = await self.send(api_key, version, body)
        frame = await self.receive_frame()
        if frame is None:
            raise ConnectionError("broker closed the connection")
        got, resp = self.decode_response(api_key, version, frame)
        if got != corr:
            raise ConnectionError(f"correlation id mismatch: sent {corr}, got {got}")
        return resp

    async def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions: remember the broker's supported range per api key."""
        resp = await self.request(ApiKey.API_VERSIONS, 3,
                                  {"client_software_name": "minikafka", "client_software_version": "0.1"})
        self.api_versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        return self.api_versions


def _skip_tags(frame: bytes, off: int) -> int:
    from ..protocol.headers import skip_header_tags

    return skip_header_tags(frame, off) - off
