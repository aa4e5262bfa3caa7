"""SaslHandshake (17) and SaslAuthenticate (36) when they reach KafkaApis: ILLEGAL_SASL_STATE.

As in Kafka's ``KafkaApis.handleSaslHandshakeRequest`` / ``handleSaslAuthenticateRequest``: while a
connection authenticates, the socket server's
:class:`~minikafka.broker.security.authenticator.SaslServerAuthenticator` answers these itself (and
re-authentication handshakes too); one that gets this far came on a listener without SASL, or after the
connection authenticated, and is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext

if TYPE_CHECKING:
    from ...protocol import bodies as B


class SaslHandshakeHandler:
    async def handle(self, ctx: RequestContext, req: B.SaslHandshakeRequestBody) -> B.SaslHandshakeResponseBody:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


class SaslAuthenticateHandler:
    async def handle(self, ctx: RequestContext, req: B.SaslAuthenticateRequestBody
                     ) -> B.SaslAuthenticateResponseBody:
        return {"error_code": ErrorCode.ILLEGAL_SASL_STATE,
                "error_message": "SaslAuthenticate request received after successful authentication",
                "auth_bytes": b"", "session_lifetime_ms": 0}
