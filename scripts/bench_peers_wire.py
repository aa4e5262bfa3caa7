"""Small-request round trips for ``scripts/bench peers``: a raw, pipelining Kafka client on a plain socket.

Requests are encoded once with minikafka's protocol package (at the highest version both this package and
the broker support, asked with ApiVersions), then sent over and over with fresh correlation ids, ``depth``
in flight on one connection: each read counts the complete response frames it holds and the same number
of requests goes out in one ``send``, as a pipelining client does.  Responses are counted, not decoded
(one sample of each is decoded and its error codes checked), so the client costs little per request; its
thread's CPU time is returned beside the count, to tell when it, rather than the broker, set the pace.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.headers import RequestHeader, parse_response_frame, request_header_version

CLIENT_ID = "bench-peers"
_SIZE = struct.Struct(">i")
_CORR = struct.Struct(">i")


def encode_request(api_key: int, version: int, body: dict[str, Any], correlation_id: int) -> bytes:
    """A whole request frame: size prefix, header, body."""
    api = APIS[api_key]
    header = RequestHeader.build({"request_api_key": api_key, "request_api_version": version,
                                  "correlation_id": correlation_id, "client_id": CLIENT_ID},
                                 request_header_version(api_key, api.is_flexible(version)))
    payload = header + api.request.build(body, version)
    return _SIZE.pack(len(payload)) + payload


class WireClient:
    """One blocking connection sending one request at a time (set-up: ApiVersions, Metadata, samples)."""

    def __init__(self, bootstrap: str, timeout: float = 10) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._corr = 0
        self.versions: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def _read_exact(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            got = self.sock.recv(n - len(chunks))
            if not got:
                raise ConnectionError("broker closed the connection")
            chunks += got
        return bytes(chunks)

    def read_frame(self) -> bytes:
        """The next response frame, without its size prefix."""
        return self._read_exact(_SIZE.unpack(self._read_exact(4))[0])

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self._corr += 1
        self.sock.sendall(encode_request(api_key, version, body, self._corr))
        corr, resp = parse_response_frame(self.read_frame(), api_key, version)
        if corr != self._corr:
            raise ConnectionError(f"correlation id {corr}, expected {self._corr}")
        return resp

    def negotiate(self) -> dict[int, tuple[int, int]]:
        """ApiVersions (v3, else v0 as a broker that refuses v3 asks): the broker's range per api key."""
        resp = self.request(ApiKey.API_VERSIONS, 3, {"client_software_name": CLIENT_ID,
                                                     "client_software_version": "1"})
        if resp.error_code:
            resp = self.request(ApiKey.API_VERSIONS, 0, {})
        self.versions = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
        return self.versions

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` both minikafka's protocol package and the broker support."""
        ours = APIS[api_key]
        lo, hi = self.versions.get(api_key, (0, -1))
        best = min(ours.max_version, hi)
        if best < max(ours.min_version, lo):
            raise RuntimeError(f"no {ours.name} version in common (broker {lo}-{hi}, "
                               f"minikafka {ours.min_version}-{ours.max_version})")
        return best


@dataclass
class RoundTrip:
    """One request kind ready to pipeline: its api key, version, body and how to check a response."""

    name: str
    api_key: int
    version: int
    body: dict[str, Any]
    errors: Callable[[Any], list[int]]  # the non-zero error codes of a response body


def round_trips(client: WireClient, topic: str, group: str) -> dict[str, RoundTrip]:
    """Fetch (empty partition, max_wait_ms=0), Metadata (one topic) and OffsetCommit (one partition, simple
    commit: generation -1, no member) at the versions ``client``'s broker supports."""
    mv = client.version(ApiKey.METADATA)
    meta_topic: dict[str, Any] = {"name": topic, "topic_id": uuid.UUID(int=0)}
    metadata = {"topics": [meta_topic], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    resp = client.request(ApiKey.METADATA, mv, metadata)
    found = [t for t in resp.topics if t.name == topic]
    if not found or found[0].error_code:
        raise RuntimeError(f"topic {topic} not in the broker's metadata: {resp.topics}")
    topic_id = getattr(found[0], "topic_id", uuid.UUID(int=0))
    fetch = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
             "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
             "topics": [{"topic": topic, "topic_id": topic_id, "partitions": [
                 {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
    commit = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": [
        {"name": topic, "topic_id": topic_id, "partitions": [
            {"partition_index": 0, "committed_offset": 0, "committed_metadata": ""}]}]}
    return {
        "fetch": RoundTrip("Fetch", ApiKey.FETCH, client.version(ApiKey.FETCH), fetch,
                           lambda r: [c for c in [getattr(r, "error_code", 0)] if c]
                           + [p.error_code for t in r.responses for p in t.partitions if p.error_code]),
        "metadata": RoundTrip("Metadata", ApiKey.METADATA, mv, metadata,
                              lambda r: [t.error_code for t in r.topics if t.error_code]),
        "commit": RoundTrip("OffsetCommit", ApiKey.OFFSET_COMMIT, client.version(ApiKey.OFFSET_COMMIT), commit,
                            lambda r: [p.error_code for t in r.topics for p in t.partitions if p.error_code]),
    }


@dataclass
class PipelineResult:
    """Responses counted over ``seconds`` by ``connections`` connections; the client's CPU seconds."""

    responses: int
    seconds: float
    client_cpu: float
    connections: int
    sample: bytes  # the last response frame (without size prefix), to check

    @property
    def rate(self) -> float:
        return self.responses / self.seconds


def _pipeline(bootstrap: str, frame: bytes, depth: int, seconds: float) -> tuple[int, float, float, bytes]:
    """One connection keeping ``depth`` copies of ``frame`` (with fresh correlation ids) in flight for
    ``seconds``; (responses, elapsed, this thread's CPU seconds, last response frame)."""
    ring_size = 1024
    ring: list[bytes] = []
    for i in range(ring_size):
        f = bytearray(frame)
        _CORR.pack_into(f, 8, i)  # size prefix, api key, api version, then the correlation id
        ring.append(bytes(f))
    host, _, port = bootstrap.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    recv, send = sock.recv, sock.sendall
    buf = bytearray()
    cpu0, t0 = time.thread_time(), time.perf_counter()
    deadline = t0 + seconds
    send(b"".join(ring[:depth]))
    sent, done, counted, elapsed, sending = depth, 0, 0, 0.0, True
    while True:
        data = recv(1 << 20)
        if not data:
            raise ConnectionError("broker closed the connection")
        buf += data
        pos, n, start, end = 0, 0, 0, len(buf)
        while end - pos >= 4:
            size = _SIZE.unpack_from(buf, pos)[0]
            if end - pos - 4 < size:
                break
            start, pos, n = pos + 4, pos + 4 + size, n + 1
        if not n:
            continue
        done += n
        if sending:
            if time.perf_counter() < deadline:
                at = sent % ring_size
                send(b"".join(ring[at:at + n] if at + n <= ring_size else ring[at:] + ring[:at + n - ring_size]))
                sent += n
            else:  # stop counting; read what is still in flight
                sending, counted, elapsed = False, done, time.perf_counter() - t0
        if not sending and done >= sent:
            last = bytes(buf[start:pos])
            break
        del buf[:pos]
    cpu = time.thread_time() - cpu0
    sock.close()
    return counted, elapsed, cpu, last


def pipelined(bootstrap: str, rt: RoundTrip, seconds: float, depth: int = 5,
              connections: int = 1) -> PipelineResult:
    """``rt`` pipelined ``depth`` deep on ``connections`` connections (each in its own process when more
    than one) for ``seconds``; the responses counted until then, per second of the slowest connection."""
    frame = encode_request(rt.api_key, rt.version, rt.body, 0)
    if connections == 1:
        n, elapsed, cpu, last = _pipeline(bootstrap, frame, depth, seconds)
        return PipelineResult(n, elapsed, cpu, 1, last)
    # fork: the workers only run _pipeline on a socket of their own (no librdkafka in them)
    with ProcessPoolExecutor(connections, mp_context=get_context("fork")) as pool:
        runs = list(pool.map(_pipeline, [bootstrap] * connections, [frame] * connections, [depth] * connections,
                             [seconds] * connections))
    return PipelineResult(sum(r[0] for r in runs), max(r[1] for r in runs), sum(r[2] for r in runs),
                          connections, runs[-1][3])


def check_sample(rt: RoundTrip, frame: bytes) -> list[int]:
    """The error codes in a response frame to ``rt`` (empty: a good response)."""
    return rt.errors(parse_response_frame(frame, rt.api_key, rt.version)[1])
