"""Group traffic of a capture: classic, KIP-848 consumer and KIP-932 share groups.

The counting of share-group acquisitions and acknowledgements is shared with the analysis tables
(:mod:`minikafka.analysis.decode`); :class:`GroupSummary` is ``minikafka capture show --groups``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..protocol.errors import ErrorCode
from ..protocol.exceptions import ProtocolError
from .format import CaptureRecord

#: Kafka's AcknowledgeType values counted: ACCEPT 1, RELEASE 2, REJECT 3 (GAP 0 and RENEW 4 are not).
ACCEPT, RELEASE, REJECT = 1, 2, 3

_CLASSIC = frozenset({11, 12, 13, 14})  # JoinGroup, Heartbeat, LeaveGroup, SyncGroup
_CONSUMER = frozenset({68, 69})  # ConsumerGroupHeartbeat, ConsumerGroupDescribe
_SHARE = frozenset({76, 77, 78, 79, 90, 91, 92})
_HEARTBEATS = frozenset({12, 68, 76})
_COMMITS = frozenset({8, 28})  # OffsetCommit, TxnOffsetCommit
_SHARE_FETCH, _SHARE_ACKNOWLEDGE = 78, 79
_GROUP_APIS = _CLASSIC | _CONSUMER | _SHARE | _COMMITS | {9}  # and OffsetFetch


def acknowledged(batches: Any, acc: list[int]) -> None:
    """Adds to ``acc`` the offsets ``batches`` (AcknowledgementBatch entries) acknowledge as ACCEPT, RELEASE and
    REJECT (``acc[0..2]``): a batch with one type covers ``first_offset..last_offset``, one with several
    has one type per offset (KIP-932)."""
    for b in batches or ():
        types = b["acknowledge_types"]
        if not types:
            continue
        if len(types) == 1:
            t = types[0]
            if ACCEPT <= t <= REJECT:
                n = b["last_offset"] - b["first_offset"] + 1
                if n > 0:
                    acc[t - 1] += n
        else:
            for t in types:
                if ACCEPT <= t <= REJECT:
                    acc[t - 1] += 1


def acquired(ranges: Any) -> tuple[int, int, int]:
    """(offsets acquired, of those in ranges delivered more than once, highest delivery count) of a ShareFetch
    partition's ``acquired_records``."""
    n = again = top = 0
    for a in ranges or ():
        k = a["last_offset"] - a["first_offset"] + 1
        if k <= 0:
            continue
        n += k
        dc = a["delivery_count"]
        if dc > 1:
            again += k
        top = max(top, dc)
    return n, again, top


def share_kind(epoch: int) -> str:
    """A share session request's kind by its ShareSessionEpoch (KIP-932): 0 opens ("full"), -1 closes,
    anything else continues the session ("incremental")."""
    if epoch == 0:
        return "full"
    if epoch == -1:
        return "close"
    return "incremental"


@dataclass
class GroupStats:
    """What one group's requests did."""

    protocols: set[str] = field(default_factory=set)
    members: set[str] = field(default_factory=set)
    requests: int = 0
    heartbeats: int = 0
    max_epoch: int = -1
    commits: int = 0
    errors: Counter = field(default_factory=Counter)
    share_fetches: int = 0
    share_acknowledges: int = 0
    acquired: int = 0
    redelivered: int = 0
    acks: list[int] = field(default_factory=lambda: [0, 0, 0])  # accepted, released, rejected
    acknowledge_errors: int = 0


@dataclass
class GroupSummary:
    """Group traffic per group id (``minikafka capture show --groups``): the protocols its requests used
    (classic, consumer, share), members, heartbeats, the highest member epoch or generation handed out,
    offset commits, error codes; for share groups the ShareFetch/ShareAcknowledge requests, the records
    acquired (redelivered: delivery count above 1) and acknowledged as accepted, released or rejected."""

    groups: dict[str, GroupStats] = field(default_factory=dict)
    undecodable: int = 0

    def add(self, r: CaptureRecord) -> None:
        """Count one captured request/response (group apis only)."""
        key = r.api_key
        if key not in _GROUP_APIS:
            return
        from ..protocol.headers import parse_request_frame, parse_response_frame

        try:
            _hdr, req = parse_request_frame(r.request)
            resp = None if r.response is None else parse_response_frame(r.response, key, r.api_version)[1]
        except ProtocolError:  # a frame that does not parse is counted, not fatal
            self.undecodable += 1
            return
        gid = req.get("group_id")
        if not gid:
            groups = req.get("groups")  # OffsetFetch v8+
            gid = groups[0].get("group_id") if groups and len(groups) == 1 and hasattr(groups[0], "get") else None
        if not gid:
            return
        g = self.groups.get(gid)
        if g is None:
            g = self.groups[gid] = GroupStats()
        g.requests += 1
        g.protocols.add("classic" if key in _CLASSIC else "consumer" if key in _CONSUMER else
                        "share" if key in _SHARE else "")
        g.protocols.discard("")
        member = req.get("member_id") or (resp.get("member_id") if resp is not None else None)
        if member:
            g.members.add(member)
        g.heartbeats += key in _HEARTBEATS
        g.commits += key in _COMMITS
        if resp is not None:
            epoch = resp.get("member_epoch") if key in (68, 76) else resp.get("generation_id") if key == 11 else None
            if isinstance(epoch, int):
                g.max_epoch = max(g.max_epoch, epoch)
            code = resp.get("error_code")
            if code:
                g.errors[code] += 1
        if key == _SHARE_FETCH or key == _SHARE_ACKNOWLEDGE:
            g.share_fetches += key == _SHARE_FETCH
            g.share_acknowledges += key == _SHARE_ACKNOWLEDGE
            for t in req["topics"]:
                for p in t["partitions"]:
                    acknowledged(p["acknowledgement_batches"], g.acks)
            for t in resp["responses"] if resp is not None else ():
                for p in t["partitions"]:
                    if key == _SHARE_FETCH:
                        n, again, _top = acquired(p["acquired_records"])
                        g.acquired += n
                        g.redelivered += again
                        g.acknowledge_errors += bool(p["acknowledge_error_code"])
                    else:
                        g.acknowledge_errors += bool(p["error_code"])

    def lines(self) -> list[str]:
        """The summary as text lines."""
        out = [f"groups: {len(self.groups)} group(s)"]
        if not self.groups:
            return out
        width = max(24, *(len(g) for g in self.groups))
        out.append(f"  {'group':<{width}} {'protocol':<16} {'members':>7} {'requests':>8} {'heartbeats':>10} "
                   f"{'max epoch':>9} {'commits':>7}  errors")
        for gid, g in sorted(self.groups.items()):
            errors = ", ".join(f"{_name(c)}={n}" for c, n in sorted(g.errors.items()))
            out.append(f"  {gid:<{width}} {','.join(sorted(g.protocols)) or '-':<16} {len(g.members):>7} "
                       f"{g.requests:>8} {g.heartbeats:>10} {g.max_epoch:>9} {g.commits:>7}  {errors}")
        for gid, g in sorted(self.groups.items()):
            if g.share_fetches or g.share_acknowledges:
                out.append(f"  share group {gid}: {g.share_fetches} ShareFetch, {g.share_acknowledges} "
                           f"ShareAcknowledge; {g.acquired} record(s) acquired ({g.redelivered} redelivered), "
                           f"{g.acks[0]} accepted, {g.acks[1]} released, {g.acks[2]} rejected, "
                           f"{g.acknowledge_errors} acknowledgement error(s)")
        if self.undecodable:
            out.append(f"  {self.undecodable} group request(s) did not parse")
        return out


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
