"""Console logins: with SASL or an authorizer configured, a Kafka user and password, checked as the
broker checks them, and that principal's ACLs for every call.  Without either, no login."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from ..admin_target import AdminTarget
from ..security.acl import AclOperation, ResourceType


class ConsoleAuth:
    """Who is logged in to the console, and what they may do.  (Skeleton: no login yet.)"""

    required = False

    @classmethod
    def for_target(cls, target: AdminTarget) -> ConsoleAuth:
        return cls()

    def routes(self) -> list[BaseRoute]:
        """``GET /console/api/whoami`` (and, when a login is required, ``POST login`` and ``logout``)."""

        async def whoami(request: Request) -> JSONResponse:
            return JSONResponse({"auth_required": self.required, "principal": self.principal(request)})

        return [Route("/console/api/whoami", whoami, methods=["GET"])]

    def logged_in(self, request: Request) -> bool:
        return True

    def principal(self, request: Request) -> str | None:
        return None

    def allowed(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        return True
