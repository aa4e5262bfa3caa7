"""The console's page and static files, served from this package and :mod:`minikafka.web`."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from ... import web
from .context import AREAS

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


def _listing() -> dict[str, Traversable]:
    """Every file under ``static/`` by its name there (``pages/topics.js``): listed once, so a URL can only
    name one of them (nothing is looked up, or kept, for any other name)."""
    out: dict[str, Traversable] = {}

    def walk(directory: Traversable, prefix: str) -> None:
        for entry in directory.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.is_file():
                out[prefix + entry.name] = entry

    walk(files(__name__.rsplit(".", 1)[0]).joinpath("static"), "")
    return out


_FILES = _listing()


@cache  # bounded: keyed only by the names in _FILES
def _read(name: str) -> str:
    return _FILES[name].read_text(encoding="utf-8")


def _own(name: str) -> str | None:
    """The text of ``static/<name>`` (None when this package has no such file)."""
    return _read(name) if name in _FILES else None


#: On the page and its files: scripts, styles and calls from this origin only, never framed (clickjacking).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@cache
def index_html() -> str:
    """The one page: the shared assets, the console's core and one script per area."""
    scripts = "".join(f'<script src="/console/static/pages/{area}.js"></script>' for area in AREAS)
    return (_own("index.html") or "").replace("<!--PAGES-->", scripts)


async def _index(request: Request) -> Response:
    return HTMLResponse(index_html(), headers={"Cache-Control": "no-cache", **SECURITY_HEADERS})


async def _static(request: Request) -> Response:
    name: str = request.path_params["path"]
    text = web.asset(name) if name in web.ASSETS else _own(name)
    if text is None:
        return Response("not found", status_code=404, media_type="text/plain")
    suffix = name[name.rfind("."):]
    return Response(text, headers={"Content-Type": _TYPES.get(suffix, "text/plain; charset=utf-8"),
                                   "Cache-Control": "no-cache", **SECURITY_HEADERS})


def static_routes() -> list[BaseRoute]:
    return [Route("/", _index, methods=["GET"]), Route("/console", _index, methods=["GET"]),
            Route("/console/static/{path:path}", _static, methods=["GET"])]
