"""Console API: the message browser (what a consumer reads) and producing one record (what a producer writes).

``GET /console/api/messages/{topic}``: records read from the partition leaders' logs, as a consumer would
get them: batches decoded with :mod:`minikafka.protocol.records` (compressed ones decompressed), control
batches skipped, and with ``isolation=read_committed`` only up to the last stable offset and without the
records of aborted transactions (the consumer's aborted-transactions filter).  Query parameters:

* ``partition``: a partition number, or ``all`` (default);
* ``seek``: ``beginning``, ``end`` (the last ``limit`` records), ``offset`` (with ``offset=N``) or
  ``timestamp`` (with ``timestamp=<ms>``: ListOffsets' earliest offset whose timestamp is at or after it);
  or ``positions=0:12,1:40`` to go on from where a previous answer's ``next`` left off (follow live);
* ``limit`` (records, at most :data:`MAX_RECORDS`), ``max_bytes`` (at most :data:`MAX_BYTES` of batches read).

Both limits are for the whole call, however many partitions it reads: the partitions are read in rounds,
each round a share of the records and bytes left from every partition not read to its end, until the
call has its records or its bytes.  The answer merges the partitions by timestamp, each partition
contributing a prefix in offset order, so ``next`` (per partition: the first offset not returned) never
skips a record, whatever the timestamps of a partition (CreateTime need not rise with offsets).

Keys, values and header values are base64 (null stays null); the page shows them as text, JSON or hex.

``POST /console/api/messages/{topic}`` ``{"value", "key"?, "headers"?: [[k, v]...], "partition"?}``: one
record in one batch through the broker's Produce handler (acks=all, CRC and validation as for any client);
without a partition, a keyed record goes where Kafka's default partitioner puts it (murmur2).
"""

from __future__ import annotations

import base64
import heapq
import itertools
import math
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from ...common.hashing import murmur2_partition
from ...protocol.api import ApiKey
from ...protocol.records import AbortedTransactions, CorruptRecordError, Record, build_batch, decode_records
from ...protocol.types import ZERO_UUID
from ..handlers.list_offsets import lookup_offset
from ..log.unified import OffsetOutOfRangeError
from ..partition import Partition
from ..security.acl import AclOperation, ResourceType
from .context import ConsoleContext, ConsoleError, api, read_json
from .kafka import call, check, field
from .state import leader_broker, require_leader

MAX_RECORDS = 500
DEFAULT_RECORDS = 50
MAX_BYTES = 4 << 20
READ_COMMITTED, READ_UNCOMMITTED = 1, 0
MAX_PRODUCE_BYTES = 1 << 20
_round_robin = itertools.count()


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def read_partition(part: Partition, start: int, limit: int, max_bytes: int, isolation: int
                   ) -> tuple[list[dict[str, Any]], int, int]:
    """Up to ``limit`` records of ``part`` from offset ``start`` (clamped to the log), as a consumer with
    ``isolation`` sees them, reading about ``max_bytes`` of batches (at least one); returns them, the
    offset to read from next and the bytes of batches read."""
    lg = part.log
    end = part.last_stable_offset if isolation == READ_COMMITTED else lg.high_watermark
    pos = max(start, lg.log_start_offset)
    out: list[dict[str, Any]] = []
    if pos >= end:
        return out, min(pos, end), 0
    committed = isolation == READ_COMMITTED
    skipped = AbortedTransactions([(t.producer_id, t.first_offset) for t in lg.txn_index.collect_aborted(pos, end)]
                                  if committed else (), committed)
    budget = max_bytes
    try:
        for h, view in lg.iter_batches_from(pos, chunk_bytes=min(max_bytes, 1 << 20)):
            if h.base_offset >= end or len(out) >= limit or budget <= 0:
                break
            budget -= h.size
            try:
                if skipped.skips(h, view):
                    pos = h.next_offset
                    continue
                records = decode_records(view, check_crc=False)
            except CorruptRecordError:  # cannot happen to a stored batch; skip it rather than fail the page
                pos = h.next_offset
                continue
            for r in records:
                if r.offset < pos:
                    continue
                if r.offset >= end or len(out) >= limit:
                    return out, pos, max_bytes - budget
                out.append({"partition": part.index, "offset": r.offset, "timestamp": r.timestamp,
                            "timestamp_type": "LogAppendTime" if r.timestamp_type else "CreateTime",
                            "key": b64(r.key), "value": b64(r.value),
                            "headers": [[k, b64(v)] for k, v in r.headers], "size": h.size})
                pos = r.offset + 1
            pos = max(pos, min(h.next_offset, end))
    except OffsetOutOfRangeError:  # the log start moved (retention) while reading: what was read stands
        pass
    return out, pos, max_bytes - budget


class PartitionRead:
    """One partition's part of a browse call: where it started, the records read so far (in offset order),
    where to go on reading, and whether it reached its end."""

    __slots__ = ("part", "start", "pos", "records", "done")

    def __init__(self, part: Partition, start: int) -> None:
        self.part, self.start, self.pos = part, start, start
        self.records: list[dict[str, Any]] = []
        self.done = False


def read_partitions(reads: list[PartitionRead], limit: int, max_bytes: int, isolation: int) -> None:
    """Read ``reads`` in rounds sharing ``limit`` records and ``max_bytes`` bytes for the whole call: each
    round gives every partition not yet at its end an equal share of what is left (at least one record and
    one batch), until the call has ``limit`` records or has read ``max_bytes``."""
    budget, total = max_bytes, 0
    while total < limit and budget > 0:
        active = [r for r in reads if not r.done]
        if not active:
            return
        records_each = max(1, math.ceil((limit - total) / len(active)))
        bytes_each = max(1, budget // len(active))
        for r in active:
            got, after, used = read_partition(r.part, r.pos, records_each, bytes_each, isolation)
            r.records += got
            total += len(got)
            budget -= used
            r.done = (not got and after <= r.pos) or used == 0
            r.pos = after
            if total >= limit or budget <= 0:
                return


def merge(reads: list[PartitionRead], limit: int, newest: bool) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The records to answer, merged by timestamp taking each partition's records in offset order (so each
    partition contributes a prefix of what was read: the first ``limit``, or with ``newest`` the last), and
    per partition the offset the next call goes on from (its first record not returned)."""
    merged = list(heapq.merge(*[r.records for r in reads], key=lambda rec: (rec["timestamp"], rec["partition"])))
    if newest:  # the newest records, and following goes on after everything read
        return merged[-limit:], {r.part.index: r.pos for r in reads}
    taken = merged[:limit]
    count: dict[int, int] = {}
    for rec in taken:
        count[rec["partition"]] = count.get(rec["partition"], 0) + 1
    nxt = {}
    for r in reads:
        kept = count.get(r.part.index, 0)
        nxt[r.part.index] = r.pos if kept == len(r.records) else r.records[kept]["offset"]
    return taken, nxt


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    md = ctx.target.metadata

    def positions(text: str) -> dict[int, int]:
        try:
            pairs = [item.split(":") for item in text.split(",") if item]
            return {int(p): int(o) for p, o in pairs}
        except ValueError:
            raise ConsoleError(400, "INVALID_REQUEST", f"positions must be partition:offset,... (got {text!r})") \
                from None

    async def browse(request: Request) -> dict[str, Any]:
        name = request.path_params["topic"]
        q = request.query_params
        ctx.require(request, AclOperation.READ, ResourceType.TOPIC, name)
        topic = md.get_topic(name)
        if topic is None:
            raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name!r}")
        limit = field(dict(q), "limit", int, DEFAULT_RECORDS, low=1, high=MAX_RECORDS)
        max_bytes = field(dict(q), "max_bytes", int, MAX_BYTES, low=1, high=MAX_BYTES)
        isolation_name = q.get("isolation", "read_uncommitted")
        if isolation_name not in ("read_committed", "read_uncommitted"):
            raise ConsoleError(400, "INVALID_REQUEST", "isolation is read_committed or read_uncommitted")
        isolation = READ_COMMITTED if isolation_name == "read_committed" else READ_UNCOMMITTED
        wanted = q.get("partition", "all")
        if wanted in ("all", ""):
            indexes = [p.partition for p in topic.partitions]
        else:
            index = field({"partition": wanted}, "partition", int, low=0)
            if topic.partition(index) is None:
                raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no partition {name}-{index}")
            indexes = [index]
        seek = q.get("seek", "beginning")
        follow = positions(q["positions"]) if "positions" in q else None
        if follow is None and seek not in ("beginning", "end", "offset", "timestamp"):
            raise ConsoleError(400, "INVALID_REQUEST", "seek is beginning, end, offset or timestamp")
        offset = field(dict(q), "offset", int, 0, low=0) if seek == "offset" else 0
        timestamp = field(dict(q), "timestamp", int, 0, low=0) if seek == "timestamp" else 0
        reads: list[PartitionRead] = []
        ends: dict[int, dict[str, int]] = {}
        newest = seek == "end" and follow is None
        newest_each = max(1, math.ceil(limit / len(indexes)))
        for index in indexes:
            part = require_leader(ctx.target, name, index)
            lg = part.log
            end = part.last_stable_offset if isolation == READ_COMMITTED else lg.high_watermark
            ends[index] = {"log_start_offset": lg.log_start_offset, "end_offset": end}
            if follow is not None:  # following: by offset from where the previous answer left off
                start = follow.get(index, end)
            elif seek == "beginning":
                start = lg.log_start_offset
            elif seek == "end":
                start = max(lg.log_start_offset, end - newest_each)
            elif seek == "offset":
                start = min(max(offset, lg.log_start_offset), end)
            else:  # ListOffsets by timestamp: the first offset at or after it, else the end (nothing to read)
                found = lookup_offset(part, timestamp, isolation)[1]
                start = end if found < 0 else found
            reads.append(PartitionRead(part, start))
        read_partitions(reads, limit, max_bytes, isolation)
        merged, next_positions = merge(reads, limit, newest)
        return {"topic": name, "isolation": isolation_name, "records": merged,
                "next": {str(k): v for k, v in sorted(next_positions.items())},
                "partitions": {str(k): v for k, v in sorted(ends.items())}}

    async def produce(request: Request) -> dict[str, Any]:
        name = request.path_params["topic"]
        ctx.require(request, AclOperation.WRITE, ResourceType.TOPIC, name)
        topic = md.get_topic(name)
        if topic is None:
            raise ConsoleError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"no topic {name!r}")
        data = await read_json(request)
        value = data.get("value")
        key = data.get("key")
        if value is not None and not isinstance(value, str) or key is not None and not isinstance(key, str):
            raise ConsoleError(400, "INVALID_REQUEST", "key and value are strings (or null)")
        raw_headers = data.get("headers") or []
        if isinstance(raw_headers, dict):
            raw_headers = list(raw_headers.items())
        if not isinstance(raw_headers, list) or not all(
                isinstance(h, (list, tuple)) and len(h) == 2 and isinstance(h[0], str)
                and (h[1] is None or isinstance(h[1], str)) for h in raw_headers):
            raise ConsoleError(400, "INVALID_REQUEST", 'headers are [["name", "value"], ...] or {"name": "value"}')
        key_bytes = None if key is None or key == "" else key.encode()
        value_bytes = None if value is None else value.encode()
        headers = [(str(k), None if v is None else v.encode()) for k, v in raw_headers]
        size = len(key_bytes or b"") + len(value_bytes or b"") + sum(len(k) + len(v or b"") for k, v in headers)
        if size > MAX_PRODUCE_BYTES:
            raise ConsoleError(400, "RECORD_TOO_LARGE", f"at most {MAX_PRODUCE_BYTES} bytes from the console")
        n = topic.num_partitions
        index = field(data, "partition", int, None, low=0, high=max(n - 1, 0))
        if index is None:
            index = murmur2_partition(key_bytes, n) if key_bytes is not None else next(_round_robin) % n
        batch = build_batch([Record(key=key_bytes, value=value_bytes, headers=headers)],
                            base_timestamp=ctx.target.clock.time_ms())
        broker = leader_broker(ctx.target, name, index)
        resp = await call(ctx, request, ApiKey.PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout_ms": 30_000,
            "topic_data": [{"name": name, "topic_id": ZERO_UUID,
                            "partition_data": [{"index": index, "records": batch}]}]}, broker=broker)
        result = resp["responses"][0]["partition_responses"][0]
        check(result["error_code"], result.get("error_message"), f"produce to {name}-{index}")
        return {"topic": name, "partition": index, "offset": result["base_offset"],
                "timestamp": result.get("log_append_time_ms", -1)}

    return [Route("/console/api/messages/{topic}", api(ctx, browse), methods=["GET"]),
            Route("/console/api/messages/{topic}", api(ctx, produce), methods=["POST"])]
