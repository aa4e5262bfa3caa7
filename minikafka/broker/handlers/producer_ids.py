"""InitProducerId (22): producer ids and epochs for idempotent producers."""

from __future__ import annotations

import logging

from ...protocol import bodies as B
from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..services import ProducerIdGenerator

log = logging.getLogger(__name__)


class InitProducerIdHandler:
    """Allocate a producer id (epoch 0), or bump the epoch of a known one (KIP-360, v3+).

    Transactions are not implemented: a transactional id is refused with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED rather than half-supported.
    """

    def __init__(self, producer_ids: ProducerIdGenerator) -> None:
        self.producer_ids = producer_ids

    async def handle(self, ctx: RequestContext, req: B.InitProducerIdRequestBody) -> B.InitProducerIdResponseBody:
        if req["transactional_id"] is not None:
            log.warning("InitProducerId with transactional id %r refused: transactions are not supported",
                        req["transactional_id"])
            return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    "producer_id": -1, "producer_epoch": -1}
        if ctx.api_version >= 3 and req["producer_id"] >= 0 and req["producer_epoch"] >= 0:
            epoch = req["producer_epoch"] + 1
            if epoch <= 32767:
                return {"throttle_time_ms": 0, "error_code": 0, "producer_id": req["producer_id"],
                        "producer_epoch": epoch}
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": self.producer_ids.generate(),
                "producer_epoch": 0}
