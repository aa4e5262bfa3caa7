"""UpdateFeatures (57, KIP-584): finalize cluster-wide feature levels (``kafka-features.sh``).

Kafka's brokers forward the request to the active controller (``ControllerApis.handleUpdateFeatures``);
here every broker changes the cluster's one :class:`~minikafka.broker.services.FinalizedFeatures`, as a
single-controller KRaft cluster would.  It needs ALTER on the CLUSTER (else CLUSTER_AUTHORIZATION_FAILED).
v0's ``allow_downgrade`` is a SAFE_DOWNGRADE, as Kafka reads it; v1+ give the upgrade type and
``validate_only``.  The outcome is one error for the whole request (INVALID_UPDATE_VERSION with the reason
when any update is refused, and then none applies); v0-v1 also repeat it for every feature named, v2 does not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..features import ApiError, FeatureUpdate, UpgradeType
from ..request import RequestContext
from ..services import Authorizer, FinalizedFeatures
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

#: The last version answering a result per feature.
LAST_VERSION_WITH_RESULTS = 1


class UpdateFeaturesHandler:
    def __init__(self, features: FinalizedFeatures, authorizer: Authorizer | None = None) -> None:
        self.features = features
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.UpdateFeaturesRequestBody) -> B.UpdateFeaturesResponseBody:
        v = ctx.api_version
        if not authorize(self.authorizer, ctx, AclOperation.ALTER):
            return {"throttle_time_ms": ctx.throttle_time_ms, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": "Cluster authorization failed.", "results": []}
        updates = []
        for u in req["feature_updates"]:
            if v == 0:
                kind = UpgradeType.SAFE_DOWNGRADE if u["allow_downgrade"] else UpgradeType.UPGRADE
            else:
                kind = UpgradeType.from_code(u["upgrade_type"])
            updates.append(FeatureUpdate(u["feature"], u["max_version_level"], kind))
        outcome: ApiError = self.features.update_features(updates, validate_only=v >= 1 and req["validate_only"])
        body: B.UpdateFeaturesResponseBody = {"throttle_time_ms": ctx.throttle_time_ms, "error_code": outcome.code,
                                              "error_message": outcome.message}
        if v <= LAST_VERSION_WITH_RESULTS:
            body["results"] = [{"feature": u.feature, "error_code": outcome.code, "error_message": outcome.message}
                               for u in updates]
        return body
