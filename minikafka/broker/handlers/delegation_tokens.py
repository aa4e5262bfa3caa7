"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41): delegation tokens (KIP-48, KIP-373).

Kafka's ``KafkaApis`` checks first that the connection may ask for tokens at all (``allowTokenRequests``:
not over PLAINTEXT, not over SSL without a client certificate, not over a connection that itself logged in
with a token: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED), then forwards Create/Renew/Expire to the controller's
``DelegationTokenControlManager`` and answers Describe from its token cache.  Here every request goes to the
cluster's :class:`~minikafka.broker.services.DelegationTokens`, which applies the controller's rules.

ACLs, as Kafka checks them: creating a token for another owner (v3, KIP-373) needs CREATE_TOKENS on that
USER (DELEGATION_TOKEN_AUTHORIZATION_FAILED otherwise); Describe shows a principal the tokens it owns,
requested or may renew, and others' tokens with DESCRIBE on the DELEGATION_TOKEN (by token id) or
DESCRIBE_TOKENS on the owning USER.  Renew and Expire need no ACL: only the owner and the renewers may
(DELEGATION_TOKEN_OWNER_MISMATCH).

Deliberate difference: an owner named without a principal type (v3) is taken as a ``User``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..security.delegation_token import ERROR_TIMESTAMP, USER_TYPE, filter_token
from ..services import Authorizer, DelegationTokens
from .authorization import AclOperation, ResourceType, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

ANONYMOUS = "User:ANONYMOUS"


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's ``KafkaApis.allowTokenRequests``: token requests need an authenticated connection that did
    not itself log in with a token (SASL, or SSL with a client certificate)."""
    protocol = ctx.security_protocol
    return not (ctx.token_authenticated or protocol == "PLAINTEXT"
                or (protocol == "SSL" and ctx.principal == ANONYMOUS))


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


def _create_response(code: ErrorCode, owner: str, requester: str, issue: int = ERROR_TIMESTAMP,
                     expiry: int = ERROR_TIMESTAMP, max_timestamp: int = ERROR_TIMESTAMP, token_id: str = "",
                     mac: bytes = b"") -> B.CreateDelegationTokenResponseBody:
    """Kafka's ``CreateDelegationTokenResponse.prepareResponse``."""
    owner_type, owner_name = _split(owner)
    requester_type, requester_name = _split(requester)
    return {"error_code": code, "principal_type": owner_type, "principal_name": owner_name,
            "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
            "issue_timestamp_ms": issue, "expiry_timestamp_ms": expiry, "max_timestamp_ms": max_timestamp,
            "token_id": token_id, "hmac": mac, "throttle_time_ms": 0}


class CreateDelegationTokenHandler:
    def __init__(self, tokens: DelegationTokens, *, authorizer: Authorizer | None = None) -> None:
        self.tokens = tokens
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.CreateDelegationTokenRequestBody
                     ) -> B.CreateDelegationTokenResponseBody:
        requester = ctx.principal
        owner_name = req.get("owner_principal_name")
        owner = requester if not owner_name else f"{req.get('owner_principal_type') or USER_TYPE}:{owner_name}"
        renewers = [(r["principal_type"], r["principal_name"]) for r in req["renewers"]]
        if not allow_token_requests(ctx):
            return _create_response(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, owner, requester)
        if owner != requester and not authorize(self.authorizer, ctx, AclOperation.CREATE_TOKENS, ResourceType.USER,
                                                owner):
            return _create_response(ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED, owner, requester)
        if any(kind != USER_TYPE for kind, _ in renewers):
            return _create_response(ErrorCode.INVALID_PRINCIPAL_TYPE, owner, requester)
        r = self.tokens.create_token(owner, requester, renewers, req["max_lifetime_ms"])
        if r.error:
            return _create_response(r.error, r.owner, r.token_requester, 0, 0, 0)
        return _create_response(r.error, r.owner, r.token_requester, r.issue_timestamp, r.expiry_timestamp,
                                r.max_timestamp, r.token_id, r.hmac)


class _ExpiryChangeHandler:
    """Renew and Expire: a token named by its HMAC gets a new expiry from a period, answered with the new
    expiry timestamp; DELEGATION_TOKEN_REQUEST_NOT_ALLOWED first, as ``KafkaApis`` checks it before forwarding
    to the controller."""

    def __init__(self, tokens: DelegationTokens) -> None:
        self.tokens = tokens

    @staticmethod
    def _change(ctx: RequestContext, change: Callable[[str, bytes, int], tuple[ErrorCode, int]], mac: bytes,
                period_ms: int) -> tuple[ErrorCode, int]:
        if not allow_token_requests(ctx):
            return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP
        return change(ctx.principal, bytes(mac), period_ms)


class RenewDelegationTokenHandler(_ExpiryChangeHandler):
    async def handle(self, ctx: RequestContext, req: B.RenewDelegationTokenRequestBody
                     ) -> B.RenewDelegationTokenResponseBody:
        code, expiry = self._change(ctx, self.tokens.renew_token, req["hmac"], req["renew_period_ms"])
        return {"error_code": code, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


class ExpireDelegationTokenHandler(_ExpiryChangeHandler):
    async def handle(self, ctx: RequestContext, req: B.ExpireDelegationTokenRequestBody
                     ) -> B.ExpireDelegationTokenResponseBody:
        code, expiry = self._change(ctx, self.tokens.expire_token, req["hmac"], req["expiry_time_period_ms"])
        return {"error_code": code, "expiry_timestamp_ms": expiry, "throttle_time_ms": 0}


class DescribeDelegationTokenHandler:
    def __init__(self, tokens: DelegationTokens, *, authorizer: Authorizer | None = None) -> None:
        self.tokens = tokens
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeDelegationTokenRequestBody
                     ) -> B.DescribeDelegationTokenResponseBody:
        def answer(code: ErrorCode, described: list[B.DescribeDelegationTokenResponseTokens]
                   ) -> B.DescribeDelegationTokenResponseBody:
            return {"error_code": code, "tokens": described, "throttle_time_ms": 0}

        if not allow_token_requests(ctx):
            return answer(ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
        if not self.tokens.enabled:
            return answer(ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, [])
        requested = req["owners"]
        if requested is not None and not requested:
            return answer(ErrorCode.NONE, [])
        owners = None if requested is None else [f"{o['principal_type']}:{o['principal_name']}" for o in requested]
        authorizer = self.authorizer

        def authorize_token(token_id: str) -> bool:
            return authorize(authorizer, ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token_id)

        def authorize_requester(owner: str) -> bool:
            return authorize(authorizer, ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, owner)

        described: list[B.DescribeDelegationTokenResponseTokens] = []
        for token in self.tokens.tokens(lambda info: filter_token(ctx.principal, owners, info, authorize_token,
                                                                  authorize_requester)):
            info = token.info
            owner_type, owner_name = _split(info.owner)
            requester_type, requester_name = _split(info.token_requester)
            described.append({
                "principal_type": owner_type, "principal_name": owner_name,
                "token_requester_principal_type": requester_type, "token_requester_principal_name": requester_name,
                "issue_timestamp": info.issue_timestamp, "expiry_timestamp": info.expiry_timestamp,
                "max_timestamp": info.max_timestamp, "token_id": info.token_id, "hmac": token.hmac,
                "renewers": [{"principal_type": _split(r)[0], "principal_name": _split(r)[1]}
                             for r in info.renewers]})
        return answer(ErrorCode.NONE, described)
