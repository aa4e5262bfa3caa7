"""Values a broker makes up (session, topic, member, producer ids ...): mapped captured -> replayed.

:class:`_Mapper` holds the map and lets a request wait for a value it needs;
:func:`_mapped_fields` finds the mapped fields of a parsed body (for rewriting
requests and comparing responses); :func:`rewrite_producer_ids` rewrites the
producer id and epoch inside record batches, recomputing their CRC-32C.

KIP-848 consumer groups and KIP-932 share groups: member ids of ConsumerGroupHeartbeat v1
and ShareGroupHeartbeat are made by the client (a UUID sent with member epoch 0), so they
map to themselves -- but the heartbeat that joins with one *introduces* it: requests
naming that member (its ShareFetch, OffsetCommit...) wait for that heartbeat's answer, as a
SyncGroup waits for its JoinGroup's.  ConsumerGroupHeartbeat v0 and JoinGroup leave the
member id to the coordinator, mapped as before.  Member epochs (``member_epoch``, and
``generation_id_or_member_epoch``/``generation_id`` of a member that heartbeats with
member epochs) are the coordinator's and mapped per member: key ``("mepoch", member,
captured epoch)``; 0 (join), -1 (leave) and -2 (static leave) are the client's and kept.
A request carrying the epoch its member last got in the capture is sent with the epoch the
target last gave that member (what the client would send: how many epochs a member goes
through depends on when the others joined), any other with the epoch mapped.  Group epochs
(``group_epoch``, ``assignment_epoch`` of the describe responses) map per group:
``("gepoch", group, captured epoch)``.

KIP-714 client metrics: the ``client_instance_id`` a GetTelemetrySubscriptions answer assigns (the request
sends the zero id) and the ``subscription_id`` it names are the broker's, mapped (keys ``("instance", id)``
and ``("subscription", id)``) and rewritten in the client's later GetTelemetrySubscriptions and
PushTelemetry requests.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import trio
from crc32c import crc32c

from ...protocol.exceptions import ProtocolError
from ...protocol.records import iter_batches
from ...protocol.types import ZERO_UUID

_PID = struct.Struct(">q")
_EPOCH = struct.Struct(">h")
_CRC = struct.Struct(">I")
_BATCH_PID_OFFSET, _BATCH_EPOCH_OFFSET, _BATCH_CRC_OFFSET, _BATCH_ATTR_OFFSET = 43, 51, 17, 21

#: Fields holding values a broker makes up, compared (and rewritten in requests) through a map.
_MAPPED_KIND = {
    "session_id": "session", "topic_id": "topic", "member_id": "member", "leader": "member",
    "generation_id": "gen", "generation_id_or_member_epoch": "gen",
    "member_epoch": "mepoch", "group_epoch": "gepoch", "assignment_epoch": "gepoch",
    "producer_id": "pid", "producer_epoch": "epoch",
    "node_id": "node", "leader_id": "node", "controller_id": "node", "broker_id": "node",
    "replica_nodes": "node", "isr_nodes": "node", "offline_replicas": "node", "preferred_read_replica": "node",
    "client_instance_id": "instance", "subscription_id": "subscription",
    "token_id": "token", "hmac": "hmac",  # delegation tokens (KIP-48): random id, HMAC of it
}
#: The mapped fields rewritten in requests (node ids are only compared).
_REQUEST_KINDS = frozenset({"session", "topic", "member", "gen", "mepoch", "pid", "epoch", "instance",
                            "subscription", "hmac"})
#: Fields that carry a generation for classic members and a member epoch for members using member epochs.
_GEN_OR_EPOCH = frozenset({"generation_id", "generation_id_or_member_epoch"})


class _Mapper:
    """captured -> replayed values per key (``("session", broker, id)``, ``("member", id)`` ...).

    Keys some captured response is known to introduce are *expected*: a request
    that needs one waits until the record introducing it has been replayed.
    """

    def __init__(self) -> None:
        self.values: dict[tuple, Any] = {}
        #: The topic ids mapped to other ids, as raw bytes (captured, replayed): the Fetch fast path patches them.
        self.changed_topic_ids: list[tuple[bytes, bytes]] = []
        self._pending: dict[tuple, trio.Event] = {}
        #: Per member using member epochs: (the epoch it last got in the capture, the one the target gave).
        self.member_epochs: dict[str, tuple[int, int]] = {}
        #: Members whose ShareFetch acquired other records in the replay than in the capture, and their share
        #: groups (see compare).
        self.acquisition_diverged: set[str] = set()
        self.diverged_groups: set[str] = set()
        #: Groups several members heartbeated to in the capture (ConsumerGroupHeartbeat, ShareGroupHeartbeat).
        self.shared_groups: set[str] = set()
        #: Told every value learned here and every member epoch noted (a Spark task publishes them).
        self.on_learn: Callable[[tuple, Any], None] | None = None
        self.on_member_epoch: Callable[[str, tuple[int, int]], None] | None = None

    def member_epoch(self, key: tuple) -> Any:
        """The epoch to send for a ``("mepoch", member, captured)`` key (see the module docstring)."""
        latest = self.member_epochs.get(key[1])
        if latest is not None and latest[0] == key[2]:
            return latest[1]
        return self.values.get(key)

    def expect(self, key: tuple) -> None:
        self._pending.setdefault(key, trio.Event())

    def learn(self, key: tuple, value: Any) -> None:
        if self._store(key, value) and self.on_learn is not None:
            self.on_learn(key, value)

    def apply_remote(self, key: tuple, value: Any) -> None:
        """A value another Spark task learned (its connections introduced it)."""
        self._store(key, value)

    def _store(self, key: tuple, value: Any) -> bool:
        """Keep the first value of ``key`` (True if it is new) and wake what waits for it."""
        new = key not in self.values
        if new:
            self.values[key] = value
            if key[0] == "topic" and isinstance(key[1], uuid.UUID) and isinstance(value, uuid.UUID) \
                    and key[1] != value:
                self.changed_topic_ids.append((key[1].bytes, value.bytes))
        ev = self._pending.pop(key, None)
        if ev is not None:
            ev.set()
        return new

    def note_member_epoch(self, member: str, epochs: tuple[int, int], remote: bool = False) -> None:
        """After a heartbeat: (the epoch the member got in the capture, the one the target gave)."""
        self.member_epochs[member] = epochs
        if not remote and self.on_member_epoch is not None:
            self.on_member_epoch(member, epochs)

    def settle(self, keys: Iterable[tuple]) -> None:
        """The records introducing ``keys`` are done: stop waiting (unmapped keys stay as captured)."""
        for k in keys:
            ev = self._pending.pop(k, None)
            if ev is not None:
                ev.set()

    async def wait(self, keys: Iterable[tuple], timeout_s: float) -> None:
        with trio.move_on_after(timeout_s):
            for k in keys:
                ev = self._pending.get(k)
                if ev is not None:
                    await ev.wait()

    def summary(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for key, value in self.values.items():
            kind = key[0]
            m = out.setdefault(kind, {"mapped": 0, "changed": 0, "examples": []})
            m["mapped"] += 1
            captured = key[-1]
            if captured != value:
                m["changed"] += 1
                if len(m["examples"]) < 10:
                    m["examples"].append(f"{_jsonable(captured)} -> {_jsonable(value)}")
        return out

@dataclass
class _Ctx:
    broker: int
    group: str | None
    #: Member ids that heartbeat with member epochs (KIP-848/932): their generation fields are member epochs.
    epoch_members: frozenset[str] | set[str] = frozenset()
    api_key: int = -1
    member: str | None = None  # the request's member id (share requests: whose acquisitions these are)


def _key(kind: str, value: Any, ctx: _Ctx, pid: Any = None, owner: Any = None) -> tuple | None:
    """The map key of a mapped value, or None for "no value" sentinels (0 session, "" member, -1 ids, member
    epochs 0/-1/-2); ``owner`` is the struct holding the value (its member or group id keys epochs)."""
    if kind == "session":
        return None if not value else ("session", ctx.broker, value)
    if kind == "topic":
        return None if value is None or value == ZERO_UUID else ("topic", value)
    if kind == "member":
        return ("member", value) if value else None
    if kind == "gen":
        return None if value is None or value < 0 else ("gen", ctx.group, value)
    if kind == "pid":
        return None if value is None or value < 0 else ("pid", value)
    if kind == "epoch":
        return None if value is None or value < 0 or pid is None or pid < 0 else ("epoch", pid, value)
    if kind == "node":
        return None if value is None or value < 0 else ("node", value)
    if kind == "token":
        return ("token", value) if value else None
    if kind == "hmac":
        return ("hmac", bytes(value)) if value else None
    if kind == "mepoch":
        member = owner.get("member_id") if owner is not None else None
        return None if not member or value is None or value <= 0 else ("mepoch", member, value)
    if kind == "gepoch":
        group = (owner.get("group_id") if owner is not None else None) or ctx.group
        return None if value is None or value <= 0 else ("gepoch", group, value)
    if kind == "instance":
        return None if value is None or value == ZERO_UUID else ("instance", value)
    if kind == "subscription":
        # Only where a client instance is named (an error answer carries the zero id and subscription 0).
        instance = owner.get("client_instance_id") if owner is not None else None
        return None if value is None or instance is None or instance == ZERO_UUID else ("subscription", value)
    return None


def _kind_of(name: str, obj: Any, ctx: _Ctx) -> str | None:
    """The mapped kind of field ``name`` of struct ``obj``: a generation field of a member that uses member
    epochs holds a member epoch."""
    kind = _MAPPED_KIND.get(name)
    if kind == "gen" and name in _GEN_OR_EPOCH and ctx.epoch_members and obj.get("member_id") in ctx.epoch_members:
        return "mepoch"
    return kind


def _mapped_fields(obj: Any, ctx: _Ctx, kinds: frozenset[str]) -> Iterator[tuple[dict, str, tuple]]:
    """(container, field, key) of every mapped scalar field of a parsed body (records not entered)."""
    if isinstance(obj, dict):
        pid = obj.get("producer_id")
        for name, value in obj.items():
            kind = _kind_of(name, obj, ctx)
            if kind is not None and kind in kinds and not isinstance(value, list):
                key = _key(kind, value, ctx, pid, obj)
                if key is not None:
                    yield obj, name, key
            elif isinstance(value, (dict, list)):
                yield from _mapped_fields(value, ctx, kinds)
    elif isinstance(obj, list):
        for item in obj:
            if isinstance(item, (dict, list)):
                yield from _mapped_fields(item, ctx, kinds)


def _batch_producers(records: Any) -> Iterator[tuple[int, int]]:
    if records is None:
        return
    try:
        for h, _ in iter_batches(records, check_crc=False):
            if h.producer_id >= 0:
                yield h.producer_id, h.producer_epoch
    except ProtocolError:  # a malformed batch is sent as captured; the target will say so
        return


def rewrite_producer_ids(records: bytes | memoryview, mapping: dict[tuple[int, int], tuple[int, int]]) -> bytes | None:
    """Record batches with (producer id, epoch) pairs replaced per ``mapping``, CRC-32C recomputed.

    Returns None when no batch changes.  The producer id (int64 at batch offset
    43) and epoch (int16 at 51) are inside the CRC, which covers offset 21 to
    the end of the batch, so the CRC (uint32 at 17) is rewritten too.
    """
    buf: bytearray | None = None
    pos = 0
    for h, view in iter_batches(records, check_crc=False):
        new = mapping.get((h.producer_id, h.producer_epoch))
        if new is not None and new != (h.producer_id, h.producer_epoch):
            if buf is None:
                buf = bytearray(records)
            _PID.pack_into(buf, pos + _BATCH_PID_OFFSET, new[0])
            _EPOCH.pack_into(buf, pos + _BATCH_EPOCH_OFFSET, new[1])
            end = pos + len(view)
            _CRC.pack_into(buf, pos + _BATCH_CRC_OFFSET, crc32c(memoryview(buf)[pos + _BATCH_ATTR_OFFSET:end]))
        pos += len(view)
    return None if buf is None else bytes(buf)


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        b = bytes(v)
        return b.hex() if len(b) <= 32 else f"<{len(b)} bytes>"
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, tuple):
        return [_jsonable(x) for x in v]
    if isinstance(v, (list, dict)):
        return f"<{type(v).__name__} of {len(v)}>"
    return v
