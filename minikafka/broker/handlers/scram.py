"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM credentials at run time (KIP-554).

Kafka's ``KafkaApis`` answers Describe from the metadata image and forwards Alter to the controller; here
both go to the cluster's :class:`~minikafka.broker.services.ScramCredentials` store, which applies Kafka's
rules and messages.  The request carries salted passwords only (``Hi(password, salt, iterations)``); the
store keeps the stored and server keys derived from them.  With an authorizer, Describe needs DESCRIBE and
Alter ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, as Kafka answers).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..security.scram import Deletion, Upsertion
from ..services import Authorizer, ScramCredentials
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)


class DescribeUserScramCredentialsHandler:
    def __init__(self, credentials: ScramCredentials, *, authorizer: Authorizer | None = None) -> None:
        self.credentials = credentials
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeUserScramCredentialsRequestBody
                     ) -> B.DescribeUserScramCredentialsResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE):
            return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": None, "results": []}
        users = req["users"]
        names = None if users is None else [u["name"] for u in users]
        results: list[B.DescribeUserScramCredentialsResponseResults] = [
            {"user": r.user, "error_code": r.error_code, "error_message": r.error_message,
             "credential_infos": [{"mechanism": int(i.mechanism), "iterations": i.iterations}
                                  for i in r.credential_infos]}
            for r in self.credentials.describe_credentials(names)
        ]
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results}


class AlterUserScramCredentialsHandler:
    def __init__(self, credentials: ScramCredentials, *, authorizer: Authorizer | None = None) -> None:
        self.credentials = credentials
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.AlterUserScramCredentialsRequestBody
                     ) -> B.AlterUserScramCredentialsResponseBody:
        if not authorize(self.authorizer, ctx, AclOperation.ALTER):
            users = dict.fromkeys([d["name"] for d in req["deletions"]] + [u["name"] for u in req["upsertions"]])
            return {"throttle_time_ms": 0, "results": [
                {"user": user, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None}
                for user in users]}
        deletions = [Deletion(d["name"], d["mechanism"]) for d in req["deletions"]]
        upsertions = [Upsertion(u["name"], u["mechanism"], u["iterations"], bytes(u["salt"]),
                                bytes(u["salted_password"])) for u in req["upsertions"]]
        results = self.credentials.alter_credentials(deletions, upsertions)
        for r in results:
            if r.error_code:
                log.info("AlterUserScramCredentials for user %s from client %r refused: %s", r.user, ctx.client_id,
                         r.error_message)
        return {"throttle_time_ms": 0,
                "results": [{"user": r.user, "error_code": r.error_code, "error_message": r.error_message}
                            for r in results]}
