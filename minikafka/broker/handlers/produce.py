"""Produce (0): append record batches, idempotent sequence checks, acks 0/1/all.

acks=all (-1) on a replicated partition is refused with NOT_ENOUGH_REPLICAS when
the ISR is smaller than ``min.insync.replicas``, and otherwise answered only
when the high watermark passes the appended batches (Kafka's ``DelayedProduce``)
or after the request's ``timeout_ms`` with REQUEST_TIMED_OUT.  acks=1 answers
at once.
"""

from __future__ import annotations

import logging
import time

import trio

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from .common import lookup_topic

log = logging.getLogger(__name__)


def _min_insync_replicas(broker, topic) -> int:
    value = topic.configs.get("min.insync.replicas")
    return int(value) if value is not None else broker.config.min_insync_replicas


async def _await_replication(broker, pending: list[tuple[dict, object, int, int]], timeout_ms: int) -> None:
    """Kafka's ``DelayedProduce``: complete each partition when its HW reaches the required
    offset (or leadership is lost); whatever is left at the deadline gets REQUEST_TIMED_OUT."""
    rm = broker.replica_manager
    deadline = trio.current_time() + max(timeout_ms, 0) / 1000

    def check() -> None:
        for item in list(pending):
            entry, part, required, min_isr = item
            if not part.is_leader or rm.get(part.topic, part.index) is not part:
                entry["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            elif part.log.high_watermark >= required:
                if len(rm.isr(part)) < min_isr:
                    entry["error_code"] = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            else:
                continue
            pending.remove(item)

    check()
    while pending:
        with trio.move_on_at(deadline) as scope:
            await rm.wait_for_append()
        check()
        if scope.cancelled_caught:
            break
    for entry, _, _, _ in pending:
        entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT


def _max_message_bytes(broker, topic) -> int:
    value = topic.configs.get("max.message.bytes")
    return int(value) if value is not None else broker.config.message_max_bytes


@handles(ApiKey.PRODUCE)
async def handle_produce(broker, ctx, req) -> dict | None:
    acks = req.acks
    now_ms = int(time.time() * 1000)
    rm = broker.replica_manager
    responses = []
    pending: list[tuple[dict, object, int, int]] = []  # acks=all partitions waiting for the HW
    for td in req.topic_data:
        parts = []
        code, topic = lookup_topic(broker, td.name, auto_create=True)
        for pd in td.partition_data:
            if acks not in (-1, 0, 1):
                parts.append({"index": pd.index, "error_code": ErrorCode.INVALID_REQUIRED_ACKS})
                continue
            part = rm.get(td.name, pd.index) if topic is not None else None
            if part is None:
                parts.append({"index": pd.index, "error_code": code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
                continue
            if not part.is_leader:
                parts.append({"index": pd.index, "error_code": ErrorCode.NOT_LEADER_OR_FOLLOWER})
                continue
            min_isr = _min_insync_replicas(broker, topic) if acks == -1 and part.is_replicated else 0
            if min_isr and len(rm.isr(part)) < min_isr:
                parts.append({"index": pd.index, "error_code": ErrorCode.NOT_ENOUGH_REPLICAS,
                              "error_message": f"ISR {rm.isr(part)} smaller than min.insync.replicas={min_isr}"})
                continue
            result = rm.append_records(part, pd.records, now_ms, _max_message_bytes(broker, topic))
            if result.error:
                log.debug("produce to %s-%d failed: %s", td.name, pd.index, result.message)
            entry = {
                "index": pd.index,
                "error_code": result.error,
                "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time,
                "log_start_offset": result.log_start_offset,
                "error_message": result.message if result.error else None,
            }
            parts.append(entry)
            if acks == -1 and not result.error and part.is_replicated:
                pending.append((entry, part, result.last_offset + 1, min_isr))
        responses.append({"name": td.name, "partition_responses": parts})
    if pending:
        await _await_replication(broker, pending, req.timeout_ms)
    # Produce byte-rate quota on the request size; the request quota is not enforced for acks=0.
    ctx.throttle("Produce", broker.quotas.produce.maybe_record_and_get_throttle_time_ms(
        ctx.user, ctx.quota_client_id, ctx.request_size))
    ctx.exempt_request_quota = acks == 0
    if acks == 0:
        return None  # acks=0: Kafka sends no response at all (a throttle still mutes the connection)
    return {"responses": responses, "throttle_time_ms": 0}
