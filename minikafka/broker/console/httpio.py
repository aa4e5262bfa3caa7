"""The HTTP port's requests and errors: the one JSON body reader (bounded), and the error every API
call answers with (``{"error": ..., "message": ...}``)."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse


class ConsoleError(Exception):
    """An error a console API call answers with ``{"error": ..., "message": ...}`` and ``status``."""

    def __init__(self, status: int, error: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error, self.message = status, error, message


def json_error(status: int, error: str, message: str) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status_code=status)


#: The most a request body may hold (a console record is at most 1 MiB before JSON escaping).
MAX_BODY = 4 << 20
MUTATING = frozenset(("POST", "PUT", "PATCH", "DELETE"))


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request body, refused with 413 beyond ``limit`` bytes (declared or sent): never more is held."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ConsoleError(400, "INVALID_REQUEST", "bad Content-Length")
        if int(declared) > limit:
            raise ConsoleError(413, "REQUEST_TOO_LARGE", f"the body may hold at most {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ConsoleError(413, "REQUEST_TOO_LARGE", f"the body may hold at most {limit} bytes")
    return bytes(body)


async def read_json(request: Request, *, object_only: bool = True, limit: int = MAX_BODY) -> Any:
    """The request's JSON body (an empty body is ``{}``): 400 when it is not JSON (or, with ``object_only``,
    not an object), 413 when it is too large.  The one JSON body reader of the HTTP port."""
    raw = await read_body(request, limit)
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise ConsoleError(400, "INVALID_JSON", f"the body is not JSON: {exc}") from None
    if object_only and not isinstance(data, dict):
        raise ConsoleError(400, "INVALID_REQUEST", "expected a JSON object")
    return data


def has_body(request: Request) -> bool:
    return request.headers.get("content-length", "0").strip() not in ("", "0") \
        or "transfer-encoding" in request.headers
