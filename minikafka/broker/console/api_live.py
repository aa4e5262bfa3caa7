"""Console API: live."""

from __future__ import annotations

from starlette.routing import BaseRoute

from .context import ConsoleContext


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    return []
