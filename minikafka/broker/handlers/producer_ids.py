"""InitProducerId (22): producer ids and epochs for idempotent producers."""

from __future__ import annotations

import logging

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..apis import handles

log = logging.getLogger(__name__)


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(broker, ctx, req) -> dict:
    """Allocate a producer id (epoch 0), or bump the epoch of a known one (KIP-360, v3+).

    Transactions are not implemented: a transactional id is refused with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED rather than half-supported.
    """
    if req.transactional_id is not None:
        log.warning("InitProducerId with transactional id %r refused: transactions are not supported",
                    req.transactional_id)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1, "producer_epoch": -1}
    if ctx.api_version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0:
        epoch = req.producer_epoch + 1
        if epoch > 32767:
            return {"throttle_time_ms": 0, "error_code": 0, "producer_id": broker.producer_ids.generate(),
                    "producer_epoch": 0}
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": req.producer_id, "producer_epoch": epoch}
    return {"throttle_time_ms": 0, "error_code": 0, "producer_id": broker.producer_ids.generate(),
            "producer_epoch": 0}
