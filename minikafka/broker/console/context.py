"""What every console API handler receives: the broker or cluster, and the caller's permissions."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..admin_target import AdminTarget
from ..security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from .auth import ConsoleAuth

log = logging.getLogger(__name__)

#: The console's areas, each an API module ``api_<area>`` and a page ``static/pages/<area>.js``, in the
#: order the menu shows them.
AREAS = ("cluster", "topics", "messages", "groups", "transactions", "live", "faults", "captures")


class ConsoleError(Exception):
    """An error a console API call answers with ``{"error": ..., "message": ...}`` and ``status``."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


def json_error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


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
    """Wrap a console API handler: it returns JSON-able data (or a Response); a :class:`ConsoleError`
    becomes its status, a missing login 401, and any other failure a logged 500, never a dead broker."""

    @functools.wraps(fn)
    async def handle(request: Request) -> Response:
        try:
            if not ctx.auth.logged_in(request):
                raise ConsoleError(401, "NOT_AUTHENTICATED", "log in with a Kafka user and password")
            result = await fn(request)
        except ConsoleError as exc:
            return json_error(exc.status, exc.error, exc.message)
        except Exception as exc:  # a console bug must not take the broker's HTTP port down
            log.exception("console API %s %s failed", request.method, request.url.path)
            return json_error(500, "INTERNAL_ERROR", f"{type(exc).__name__}: {exc}")
        return result if isinstance(result, Response) else JSONResponse(result)

    return handle
