"""GetTelemetrySubscriptions (71) and PushTelemetry (72): KIP-714 client metrics.

Both go to the broker's :class:`~minikafka.broker.services.ClientTelemetry` (Kafka's ``ClientMetricsManager``,
:mod:`minikafka.broker.client_metrics.manager` says what each check does); an error it raises becomes the
response's error code, as Kafka's ``getErrorResponse``.  Neither request checks an ACL (as Kafka).
Deliberate difference: Kafka offers the two APIs only when a ``ClientTelemetryReceiver`` plugin is
configured; minikafka always has its own receiver (pushed metrics appear on ``/metrics``), so always offers
them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ...protocol.types import ZERO_UUID
from ..client_metrics.manager import SUPPORTED_COMPRESSION_TYPES, TelemetryError
from ..request import RequestContext
from ..services import ClientTelemetry

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)


class GetTelemetrySubscriptionsHandler:
    def __init__(self, telemetry: ClientTelemetry) -> None:
        self.telemetry = telemetry

    async def handle(self, ctx: RequestContext, req: B.GetTelemetrySubscriptionsRequestBody
                     ) -> B.GetTelemetrySubscriptionsResponseBody:
        try:
            instance_id, instance = self.telemetry.get_telemetry_subscriptions(ctx, req["client_instance_id"])
        except TelemetryError as exc:
            log.debug("GetTelemetrySubscriptions from %r: %s", ctx.client_id, exc)
            return {"throttle_time_ms": 0, "error_code": exc.code, "client_instance_id": ZERO_UUID,
                    "subscription_id": 0, "accepted_compression_types": [], "push_interval_ms": 0,
                    "telemetry_max_bytes": 0, "delta_temporality": False, "requested_metrics": []}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "client_instance_id": instance_id,
                "subscription_id": instance.subscription_id,
                "accepted_compression_types": list(SUPPORTED_COMPRESSION_TYPES),
                "push_interval_ms": instance.push_interval_ms,
                "telemetry_max_bytes": self.telemetry.telemetry_max_bytes, "delta_temporality": True,
                "requested_metrics": list(instance.metrics)}


class PushTelemetryHandler:
    def __init__(self, telemetry: ClientTelemetry) -> None:
        self.telemetry = telemetry

    async def handle(self, ctx: RequestContext, req: B.PushTelemetryRequestBody) -> B.PushTelemetryResponseBody:
        try:
            self.telemetry.push_telemetry(ctx, req["client_instance_id"], req["subscription_id"], req["terminating"],
                                          req["compression_type"], bytes(req["metrics"]))
        except TelemetryError as exc:
            log.debug("PushTelemetry from %r: %s", ctx.client_id, exc)
            return {"throttle_time_ms": 0, "error_code": exc.code}
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE}
