"""The console's page and static files, served from this package and :mod:`minikafka.web`."""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ... import web
from .context import AREAS

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


@cache
def _own(name: str) -> str | None:
    """The text of ``static/<name>`` (None when this package has no such file)."""
    if ".." in name or name.startswith("/"):
        return None
    path = files(__name__.rsplit(".", 1)[0]).joinpath("static", *name.split("/"))
    return path.read_text(encoding="utf-8") if path.is_file() else None


@cache
def index_html() -> str:
    """The one page: the shared assets, the console's core and one script per area."""
    scripts = "".join(f'<script src="/console/static/pages/{area}.js"></script>' for area in AREAS)
    return (_own("index.html") or "").replace("<!--PAGES-->", scripts)


async def _index(request: Request) -> Response:
    return HTMLResponse(index_html(), headers={"Cache-Control": "no-cache"})


async def _static(request: Request) -> Response:
    name: str = request.path_params["path"]
    text = web.asset(name) if name in web.ASSETS else _own(name)
    if text is None:
        return Response("not found", status_code=404, media_type="text/plain")
    suffix = name[name.rfind("."):]
    return Response(text, headers={"Content-Type": _TYPES.get(suffix, "text/plain; charset=utf-8"),
                                   "Cache-Control": "no-cache"})


def static_routes() -> list[BaseRoute]:
    return [Route("/", _index, methods=["GET"]), Route("/console", _index, methods=["GET"]),
            Route("/console/static/{path:path}", _static, methods=["GET"])]
