"""Produce (0): append record batches, idempotent sequence checks, acks 0/1/all."""

from __future__ import annotations

import logging
import time

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles
from .common import lookup_topic

log = logging.getLogger(__name__)


def _max_message_bytes(broker, topic) -> int:
    value = topic.configs.get("max.message.bytes")
    return int(value) if value is not None else broker.config.message_max_bytes


@handles(ApiKey.PRODUCE)
async def handle_produce(broker, ctx, req) -> dict | None:
    acks = req.acks
    now_ms = int(time.time() * 1000)
    rm = broker.replica_manager
    responses = []
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
            result = rm.append_records(part, pd.records, now_ms, _max_message_bytes(broker, topic))
            if result.error:
                log.debug("produce to %s-%d failed: %s", td.name, pd.index, result.message)
            parts.append(
                {
                    "index": pd.index,
                    "error_code": result.error,
                    "base_offset": result.base_offset,
                    "log_append_time_ms": result.log_append_time,
                    "log_start_offset": result.log_start_offset,
                    "error_message": result.message if result.error else None,
                }
            )
        responses.append({"name": td.name, "partition_responses": parts})
    # Produce byte-rate quota on the request size; the request quota is not enforced for acks=0.
    ctx.throttle("Produce", broker.quotas.produce.maybe_record_and_get_throttle_time_ms(
        ctx.user, ctx.quota_client_id, ctx.request_size))
    ctx.exempt_request_quota = acks == 0
    if acks == 0:
        return None  # acks=0: Kafka sends no response at all (a throttle still mutes the connection)
    return {"responses": responses, "throttle_time_ms": 0}
