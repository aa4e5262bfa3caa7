"""Console actions as Kafka requests: a request body handed to the broker's own handler (CreateTopics,
IncrementalAlterConfigs, Produce, ListOffsets ...), under the logged-in principal and the browser's address,
so validation, ACL checks and errors are exactly what a Kafka client would get."""

from __future__ import annotations

import itertools
from typing import Any

from starlette.requests import Request

from ...protocol.api import ApiKey
from ...protocol.errors import ErrorCode
from ..broker import Broker
from ..request import RequestContext
from .context import ConsoleContext, ConsoleError
from .state import any_broker

CLIENT_ID = "minikafka-console"
_correlation = itertools.count(1)


def request_context(ctx: ConsoleContext, request: Request, broker: Broker, api_key: ApiKey,
                    version: int) -> RequestContext:
    """What the handler knows of the call: the console user's principal, the browser's address, the
    broker's first listener."""
    client = request.client
    peer = f"{client.host}:{client.port}" if client else ""
    endpoint = broker.config.listener_endpoints()[0]
    return RequestContext(int(api_key), version, next(_correlation), CLIENT_ID, f"console-{id(request)}", peer,
                          principal=ctx.principal(request) or "User:ANONYMOUS", listener=endpoint.listener,
                          security_protocol=endpoint.security_protocol)


async def call(ctx: ConsoleContext, request: Request, api_key: ApiKey, version: int, body: dict[str, Any],
               broker: Broker | None = None) -> Any:
    """The response body of the broker's handler for ``api_key`` (``broker``: default any running one)."""
    broker = broker or any_broker(ctx.target)
    handler = broker.apis.handlers.get(int(api_key))
    if handler is None:
        raise ConsoleError(501, "UNSUPPORTED_VERSION", f"the broker has no {api_key.name} handler")
    return await handler(request_context(ctx, request, broker, api_key, version), body)


def http_status(code: int) -> int:
    """The HTTP status a Kafka error code answers with."""
    try:
        name = ErrorCode(code).name
    except ValueError:
        return 400
    if name.endswith("AUTHORIZATION_FAILED"):
        return 403
    if name in ("UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID"):
        return 404
    if name in ("TOPIC_ALREADY_EXISTS",):
        return 409
    if name in ("NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT",
                "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "BROKER_NOT_AVAILABLE"):
        return 503
    return 400


def check(code: int, message: str | None, what: str) -> None:
    """Raise the Kafka error ``code`` (non-zero) as a :class:`ConsoleError` about ``what``."""
    if code:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"ERROR_{code}"
        raise ConsoleError(http_status(code), name, f"{what}: {message or name}")


def field(data: dict[str, Any], name: str, kind: type, default: Any = ..., *, low: int | None = None,
          high: int | None = None) -> Any:
    """``data[name]`` as ``kind`` (int fields may come as strings of digits), within [low, high]; 400 otherwise."""
    value: Any = data.get(name)
    if value is None or (value == "" and kind is int):
        if default is ...:
            raise ConsoleError(400, "INVALID_REQUEST", f"missing field {name!r}")
        return default
    try:
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise ValueError(value)
            value = int(value)
        elif not isinstance(value, kind):
            raise ValueError(value)
    except ValueError:
        raise ConsoleError(400, "INVALID_REQUEST", f"field {name!r} must be {kind.__name__}, got {value!r}") from None
    if kind is int and ((low is not None and value < low) or (high is not None and value > high)):
        raise ConsoleError(400, "INVALID_REQUEST", f"field {name!r} must be in [{low}, {high}], got {value}")
    return value
