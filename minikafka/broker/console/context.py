"""What every console API handler receives: the broker or cluster, and the caller's permissions."""

from __future__ import annotations

import functools
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..admin_target import AdminTarget
from ..security.acl import AclOperation, ResourceType
from .auth import ConsoleAuth
from .httpio import MAX_BODY, ConsoleError, json_error, read_json

__all__ = ["AREAS", "MAX_BODY", "ConsoleContext", "ConsoleError", "api", "json_error", "read_json"]

log = logging.getLogger(__name__)

_error_ids = itertools.count(1)

#: The console's areas, each an API module ``api_<area>`` and a page ``static/pages/<area>.js``, in the
#: order the menu shows them.
AREAS = ("cluster", "topics", "messages", "groups", "transactions", "live", "faults", "captures")


@dataclass(slots=True)
class ConsoleContext:
    """The console's collaborators: what the HTTP port works on, and who may do what."""

    target: AdminTarget
    auth: ConsoleAuth

    def principal(self, request: Request) -> str | None:
        """The caller's Kafka principal (``User:alice``), or None when the console needs no login."""
        return self.auth.principal(request)

    def allowed(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the caller may do ``operation`` on the resource (always, without an authorizer)."""
        return self.auth.allowed(request, operation, resource_type, name)

    def require(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
        """Raise a 403 :class:`ConsoleError` unless :meth:`allowed`."""
        if not self.allowed(request, operation, resource_type, name):
            raise ConsoleError(403, "AUTHORIZATION_FAILED",
                               f"{self.principal(request)} may not {operation.name} {resource_type.name} {name!r}")


def api(ctx: ConsoleContext, fn: Callable[[Request], Awaitable[Any]]) -> Callable[[Request], Awaitable[Response]]:
    """Wrap an HTTP API handler (console and ``/v1``): it returns JSON-able data (or a Response); a
    :class:`ConsoleError` becomes its status, a missing login 401, and any other failure a logged 500
    (the details only in the broker's log), never a dead broker."""

    @functools.wraps(fn)
    async def handle(request: Request) -> Response:
        try:
            ctx.auth.check_request(request)
            if not await ctx.auth.authenticate(request):
                raise ConsoleError(401, "NOT_AUTHENTICATED", "log in with a Kafka user and password")
            result = await fn(request)
        except ConsoleError as exc:
            resp: Response = json_error(exc.status, exc.error, exc.message)
            if exc.status == 401 and request.url.path.startswith("/v1/"):
                resp.headers["WWW-Authenticate"] = 'Basic realm="minikafka", charset="UTF-8"'
            return resp
        except Exception:  # a console bug must not take the broker's HTTP port down
            error_id = next(_error_ids)
            log.exception("HTTP API %s %s failed (error id %d)", request.method, request.url.path, error_id)
            return json_error(500, "INTERNAL_ERROR", f"see the broker's log, error id {error_id}")
        return result if isinstance(result, Response) else JSONResponse(result)

    return handle
