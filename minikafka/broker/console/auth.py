"""Console logins: with SASL or an authorizer configured, a Kafka user and password, checked as the
broker checks them, and that principal's ACLs for every call.  Without either, no login.

A password is checked by running the broker's own SASL server exchange for it (Kafka's ``PlainSaslServer``
with the listener's JAAS users, ``ScramSaslServer`` with the cluster's SCRAM credentials, a SCRAM client
answering for the user), for each mechanism a SASL listener enables (SCRAM only, against the credential
store, when an authorizer is configured without SASL listeners).  A login gets a random session token in an
``HttpOnly; SameSite=Strict`` cookie; sessions live in a bounded table and expire after an idle hour.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import logging
import secrets
import socket
from collections import OrderedDict
from dataclasses import dataclass

import scramp
import trio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ...common import SYSTEM_CLOCK, Clock
from ..admin_target import AdminTarget
from ..config import BrokerConfig
from ..security.acl import AclOperation, ResourceType
from ..security.authorizer import StandardAuthorizer
from ..security.sasl import SaslMechanism, ScramSaslServer, create_mechanism, enabled_mechanisms
from ..security.scram import ScramCredentialStore, ScramMechanism
from .httpio import MUTATING, ConsoleError, has_body, json_error, read_json

log = logging.getLogger(__name__)

COOKIE = "minikafka_console"
SESSION_IDLE_S = 3600.0
MAX_SESSIONS = 256
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: Failed logins (console or HTTP Basic) an address may make in :data:`FAILURE_WINDOW_S` before it must wait.
MAX_FAILURES = 10
FAILURE_WINDOW_S = 60.0
MAX_TRACKED_ADDRESSES = 4096


@dataclass(slots=True)
class Session:
    principal: str
    expires: float


def sasl_logins(config: BrokerConfig) -> list[tuple[str, str]]:
    """``(listener, mechanism)`` for every SASL listener's enabled mechanisms a password can log in with."""
    out: list[tuple[str, str]] = []
    try:
        endpoints = config.listener_endpoints()
    except Exception:  # noqa: BLE001 - bad listeners stop the broker at start-up, not here
        return out
    for e in endpoints:
        if e.security_protocol.startswith("SASL"):
            out += [(e.listener, m) for m in enabled_mechanisms(config, e.listener)
                    if m == "PLAIN" or m in SCRAM_MECHANISMS]
    return out


def _scram_exchange(server: SaslMechanism, mechanism: str, username: str, password: str) -> str | None:
    """Run a SCRAM client for ``username`` against the broker's server exchange; the authorized user or None."""
    client = scramp.ScramClient([mechanism], username, password)
    server_first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(server_final.decode())
    return server.authorization_id if server.complete else None


class ConsoleAuth:
    """Who is logged in to the console, and what they may do (their ACLs through the broker's authorizer)."""

    def __init__(self, config: BrokerConfig | None = None, authorizer: StandardAuthorizer | None = None,
                 credentials: ScramCredentialStore | None = None, target: AdminTarget | None = None,
                 clock: Clock | None = None) -> None:
        self.config = config
        self.authorizer = authorizer
        self.credentials = credentials
        self.target = target
        # Session and login-failure times are monotonic seconds on the broker's clock (default: the target's).
        self.clock = clock if clock is not None else target.clock if target is not None else SYSTEM_CLOCK
        self.logins = sasl_logins(config) if config is not None else []
        self.required = authorizer is not None or bool(self.logins)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._failures: OrderedDict[str, list[float]] = OrderedDict()
        self._password_limiter = trio.CapacityLimiter(1)  # PBKDF2 in one worker thread, never on the loop
        self.hostnames: set[str] = {"localhost", socket.gethostname().lower()}
        if config is not None:
            self.hostnames |= {config.host.lower(), config.advertised.lower()}

    @classmethod
    def for_target(cls, target: AdminTarget) -> ConsoleAuth:
        return cls(target.config, target.authorizer, target.scram_credentials, target)

    # -- passwords -------------------------------------------------------------------------------
    def check_password(self, username: str, password: str) -> str | None:
        """The principal (``User:<name>``) if some mechanism the broker offers accepts the password."""
        if not username or not password or self.config is None or self.credentials is None:
            return None
        attempts = self.logins or [("", m) for m in SCRAM_MECHANISMS]
        tried: set[tuple[str, str]] = set()
        for listener, mechanism in attempts:
            key = (listener if mechanism == "PLAIN" else "", mechanism)  # SCRAM: one store for every listener
            if key in tried:
                continue
            tried.add(key)
            try:
                if mechanism == "PLAIN":
                    server = create_mechanism("PLAIN", listener, self.config, self.credentials,
                                              self.clock)
                    server.evaluate(f"\0{username}\0{password}".encode())
                    user = server.authorization_id if server.complete else None
                else:
                    if self.credentials.credential(username, ScramMechanism.from_mechanism_name(mechanism)) is None:
                        continue
                    user = _scram_exchange(ScramSaslServer(mechanism, self.credentials), mechanism,
                                           username, password)
            except Exception as exc:  # noqa: BLE001 - a wrong password (SaslAuthenticationError, scramp errors)
                log.debug("console login of %r with %s refused: %s", username, mechanism, exc)
                continue
            if user:
                return f"User:{user}"
        return None

    async def verify_password(self, request: Request, username: str, password: str) -> str | None:
        """:meth:`check_password` in a worker thread, refused with 429 while the caller's address has failed
        too often (:data:`MAX_FAILURES` in :data:`FAILURE_WINDOW_S`); a failure counts against it."""
        address = request.client.host if request.client else ""
        now = self.clock.monotonic()
        recent = [t for t in self._failures.get(address, []) if t > now - FAILURE_WINDOW_S]
        if len(recent) >= MAX_FAILURES:
            raise ConsoleError(429, "TOO_MANY_LOGIN_FAILURES",
                               f"too many failed logins from {address}: wait a minute")
        principal = await trio.to_thread.run_sync(self.check_password, username, password,
                                                  limiter=self._password_limiter)
        if principal is None:
            self._failures[address] = [*recent, self.clock.monotonic()]
            self._failures.move_to_end(address)
            while len(self._failures) > MAX_TRACKED_ADDRESSES:
                self._failures.popitem(last=False)
            log.info("login refused for user %r from %s", username, address)
        return principal

    async def authenticate(self, request: Request) -> bool:
        """Whether the caller is logged in (always, when no login is needed): a console session cookie, or
        HTTP Basic credentials of a Kafka user (for scripts calling ``/v1``).  The principal is kept on the
        request for :meth:`principal`."""
        if not self.required:
            return True
        session = self._session(request)
        if session is not None:
            request.state.principal = session.principal
            return True
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            username, sep, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise ConsoleError(400, "INVALID_REQUEST", "malformed Basic credentials") from None
        principal = await self.verify_password(request, username, password) if sep else None
        if principal is None:
            raise ConsoleError(401, "SASL_AUTHENTICATION_FAILED", "Authentication failed: Invalid username or password")
        request.state.principal = principal
        return True

    def check_request(self, request: Request) -> None:
        """What every call of the HTTP API must pass before its handler runs (403, 415 otherwise):

        * its ``Host`` is a name this port answers to (DNS rebinding: another site's name resolving here);
        * a browser call comes from the console's own pages (``Origin``; cross-site request forgery);
        * a change (POST, PUT, PATCH, DELETE) with a body says ``Content-Type: application/json``, which a
          page elsewhere cannot send without a CORS preflight (this port answers none)."""
        if not self.known_host(request):
            raise ConsoleError(403, "UNKNOWN_HOST", "this port answers only its own host names")
        if not self.same_origin(request):
            raise ConsoleError(403, "CROSS_ORIGIN", "the HTTP API answers only its own pages")
        if request.method in MUTATING and has_body(request):
            media = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                raise ConsoleError(415, "UNSUPPORTED_MEDIA_TYPE", "send the body as Content-Type: application/json")

    def known_host(self, request: Request) -> bool:
        """Whether the ``Host`` header names this port: an IP address, ``localhost`` or a host name the broker
        is configured with or bound to (another name resolving here is DNS rebinding)."""
        host = request.headers.get("host")
        if not host:
            return True  # HTTP/1.0: no name to rebind
        name = host[1:host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0] if host.count(":") == 1 \
            else host
        name = name.lower().rstrip(".")
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            pass
        return name in self.hostnames or name.endswith(".localhost")

    # -- sessions --------------------------------------------------------------------------------
    def _session(self, request: Request) -> Session | None:
        token = request.cookies.get(COOKIE)
        if not token:
            return None
        session = self._sessions.get(token)
        now = self.clock.monotonic()
        if session is None or session.expires < now:
            self._sessions.pop(token, None)
            return None
        session.expires = now + SESSION_IDLE_S
        self._sessions.move_to_end(token)
        return session

    def _new_session(self, principal: str) -> str:
        now = self.clock.monotonic()
        for token in [t for t, s in self._sessions.items() if s.expires < now]:
            del self._sessions[token]
        while len(self._sessions) >= MAX_SESSIONS:
            self._sessions.popitem(last=False)  # the least recently used
        token = secrets.token_urlsafe(32)
        self._sessions[token] = Session(principal, now + SESSION_IDLE_S)
        return token

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    def routes(self) -> list[BaseRoute]:
        """``GET /console/api/whoami``, ``POST login`` (``{"username", "password"}``) and ``POST logout``."""

        async def whoami(request: Request) -> JSONResponse:
            return JSONResponse({"auth_required": self.required, "principal": self.principal(request)})

        async def login(request: Request) -> Response:
            try:
                self.check_request(request)
                data = await read_json(request)
                username, password = data.get("username"), data.get("password")
                if not isinstance(username, str) or not isinstance(password, str):
                    raise ConsoleError(400, "INVALID_REQUEST", 'expected {"username": ..., "password": ...} (strings)')
                if not self.required:
                    return JSONResponse({"auth_required": False, "principal": None})
                principal = await self.verify_password(request, username, password)
            except ConsoleError as exc:
                return json_error(exc.status, exc.error, exc.message)
            if principal is None:
                return JSONResponse({"error": "SASL_AUTHENTICATION_FAILED",
                                     "message": "Authentication failed: Invalid username or password"},
                                    status_code=401)
            resp = JSONResponse({"auth_required": True, "principal": principal})
            resp.set_cookie(COOKIE, self._new_session(principal), max_age=int(SESSION_IDLE_S) * 24, path="/",
                            httponly=True, samesite="strict")
            log.info("console login: %s", principal)
            return resp

        async def logout(request: Request) -> Response:
            try:
                self.check_request(request)
            except ConsoleError as exc:
                return json_error(exc.status, exc.error, exc.message)
            token = request.cookies.get(COOKIE)
            if token:
                self._sessions.pop(token, None)
            resp = JSONResponse({"auth_required": self.required, "principal": None})
            resp.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
            return resp

        return [Route("/console/api/whoami", whoami, methods=["GET"]),
                Route("/console/api/login", login, methods=["POST"]),
                Route("/console/api/logout", logout, methods=["POST"])]

    @staticmethod
    def same_origin(request: Request) -> bool:
        """False for a browser call from another site's page (its ``Origin`` is not this host): a page elsewhere
        must not drive the console of a broker on this machine (cross-site request forgery), login or not."""
        origin = request.headers.get("origin")
        if origin is None:
            return True  # not a cross-origin browser request (curl, urllib, same-origin navigation)
        return origin.partition("://")[2].rstrip("/") == request.headers.get("host", "")

    def logged_in(self, request: Request) -> bool:
        return not self.required or self._session(request) is not None

    def principal(self, request: Request) -> str | None:
        if not self.required:
            return None
        known = getattr(request.state, "principal", None)
        if known is not None:
            return str(known)
        session = self._session(request)
        return session.principal if session is not None else None

    def allowed(self, request: Request, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """Whether the logged-in principal may (the broker's authorizer, from the client's address)."""
        if self.authorizer is None:
            return True
        principal = self.principal(request)
        if principal is None:
            return False
        host = request.client.host if request.client else ""
        return self.authorizer.authorize(principal, host, operation, resource_type, name, False)


