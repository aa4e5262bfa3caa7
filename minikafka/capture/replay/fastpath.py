"""Byte-level fast paths of the replay's hot API, Fetch: rewriting a request and comparing an answer without
decoding them.

A consumer's Fetch requests carry two mapped values, its KIP-227 session id (at a fixed offset of the body from
v7 on) and, from v13 on, topic ids (16 raw bytes each); their answers the same, plus the throttle time.  Patching
those bytes in place gives the frame the decode-rewrite-encode path would build, at a fraction of the cost; an
answer equal byte for byte once the captured values are mapped is equal field by field.  Anything else (a value
not mapped yet, records whose producer ids are mapped, a different length) returns None/False and the caller
takes the general path, which also learns the maps.
"""

from __future__ import annotations

import struct
from typing import Any

from ...protocol.headers import request_body_offset, response_body_offset
from .rewrite import _Mapper

_FETCH = 1
_I32 = struct.Struct(">i")
#: Offsets of SessionId in a Fetch request body (after ReplicaId, MaxWaitMs, MinBytes, MaxBytes, IsolationLevel;
#: ReplicaId moved into a tagged field at v15) and in a Fetch response body (after ThrottleTimeMs, ErrorCode).
_REQUEST_SESSION_AT = {True: 17, False: 13}
_RESPONSE_THROTTLE_AT, _RESPONSE_SESSION_AT = 0, 6
#: Above this many mapped topic ids the byte replacement costs more than decoding.
MAX_TOPIC_IDS = 64


def _replace_ids(frame: bytearray, start: int, ids: list[tuple[bytes, bytes]]) -> bytearray:
    if not ids:
        return frame
    head, body = frame[:start], bytes(frame[start:])
    for old, new in ids:
        body = body.replace(old, new)
    return head + body


def _map_ids(frame: bytearray, body: int, session_at: int, version: int, broker: int,
             mapper: _Mapper) -> bytearray | None:
    """``frame`` with the session id at ``session_at`` and (v13+) the topic ids after ``body`` mapped; None if
    one is not mapped (yet) or there are too many topic ids."""
    sid = _I32.unpack_from(frame, session_at)[0]
    if sid:
        new = mapper.values.get(("session", broker, sid))
        if new is None:
            return None
        _I32.pack_into(frame, session_at, new)
    if version >= 13:
        if len(mapper.changed_topic_ids) > MAX_TOPIC_IDS:
            return None
        frame = _replace_ids(frame, body, mapper.changed_topic_ids)
    return frame


def zero_max_wait(frame: bytearray, version: int) -> None:
    """A Fetch request frame's MaxWaitMs set to 0 (after ReplicaId before v15; first from v15 on)."""
    _I32.pack_into(frame, request_body_offset(frame) + (4 if version < 15 else 0), 0)


def fetch_request(frame: bytearray, version: int, broker: int, mapper: _Mapper) -> bytearray | None:
    """A Fetch request frame (correlation id already set) with its session id and topic ids mapped, or None when
    it needs the general path (a version without sessions, a session id not mapped)."""
    if version < 7:
        return None
    body = request_body_offset(frame)
    return _map_ids(frame, body, body + _REQUEST_SESSION_AT[version < 15], version, broker, mapper)


def fetch_answer_equal(captured: bytes | bytearray | memoryview, replayed: bytes | bytearray, version: int,
                       broker: int, mapper: _Mapper, expected: Any) -> bool:
    """Whether a Fetch answer equals the captured one once throttle time, session id and topic ids are mapped
    (``expected``, a Counter, counts a differing throttle time as the comparison would)."""
    if version < 7 or len(captured) != len(replayed):
        return False
    cap = bytearray(captured)
    cap[:4] = replayed[:4]
    body = response_body_offset(cap, _FETCH, version)
    throttle = body + _RESPONSE_THROTTLE_AT
    if cap[throttle:throttle + 4] != replayed[throttle:throttle + 4]:
        cap[throttle:throttle + 4] = replayed[throttle:throttle + 4]
        throttled = True
    else:
        throttled = False
    mapped = _map_ids(cap, body, body + _RESPONSE_SESSION_AT, version, broker, mapper)
    if mapped is None or mapped != replayed:
        return False
    if throttled:
        expected["throttle_time_ms"] += 1
    return True
