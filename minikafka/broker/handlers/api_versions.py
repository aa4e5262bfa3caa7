"""ApiVersions (18): the api keys and version ranges this broker supports, and its features (KIP-584).

v3+ also carries the features (Kafka's ``ApiVersionManager.apiVersionResponse``): those the broker supports
with their level ranges, and the cluster's finalized levels (a feature finalized at 0 is left out) with
their epoch.  Before v4 a supported feature whose minimum level is 0 is left out (KAFKA-17011: older clients
cannot read it), so v3 lists ``metadata.version`` alone.

A v3+ request names the client software; it is kept as the connection's
:class:`~minikafka.broker.request.ClientInformation` (where Kafka's socket server registers it), for KIP-714
subscription matching.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..request import RequestContext
from ..services import FinalizedFeatures

if TYPE_CHECKING:
    from ...protocol import bodies as B

#: The first version whose supported features may have a minimum level of 0.
FEATURE_LEVEL_0_VERSION = 4


class ApiVersionsHandler:
    """Answers with every registered api and its version range (the list is built once) and, with
    ``features``, the supported and finalized feature levels."""

    def __init__(self, versions: list[B.ApiVersionsResponseApiKeys], features: FinalizedFeatures | None = None
                 ) -> None:
        self.versions = versions
        self.features = features

    async def handle(self, ctx: RequestContext, req: B.ApiVersionsRequestBody) -> B.ApiVersionsResponseBody:
        info = ctx.client_information
        if info is not None and ctx.api_version >= 3:
            name = req.get("client_software_name") or ""
            version = req.get("client_software_version") or ""
            if name or version:
                info.software_name, info.software_version = name, version
        body: B.ApiVersionsResponseBody = {"error_code": 0, "api_keys": self.versions, "throttle_time_ms": 0}
        if self.features is not None and ctx.api_version >= 3:
            body["supported_features"] = [
                {"name": name, "min_version": low, "max_version": high}
                for name, (low, high) in sorted(self.features.supported().items())
                if low > 0 or ctx.api_version >= FEATURE_LEVEL_0_VERSION]
            body["finalized_features_epoch"] = self.features.epoch
            body["finalized_features"] = [
                {"name": name, "max_version_level": level, "min_version_level": level}
                for name, level in sorted(self.features.finalized().items()) if level > 0]
        return body
