"""ApiVersions (18): the api keys and version ranges this broker supports."""

from __future__ import annotations

from ...protocol import bodies as B
from ..request import RequestContext


class ApiVersionsHandler:
    """Answers with every registered api and its version range (the list is built once)."""

    def __init__(self, versions: list[B.ApiVersionsResponseApiKeys]) -> None:
        self.versions = versions

    async def handle(self, ctx: RequestContext, req: B.ApiVersionsRequestBody) -> B.ApiVersionsResponseBody:
        return {"error_code": 0, "api_keys": self.versions, "throttle_time_ms": 0}
