"""SASL authentication of one connection (Kafka's ``SaslServerAuthenticator``, server side of KIP-43,
KIP-152 and KIP-368).

A connection on a SASL_PLAINTEXT or SASL_SSL listener must authenticate before
anything else.  The socket server hands every frame to :meth:`SaslServerAuthenticator.receive`
until :attr:`~SaslServerAuthenticator.complete`; it answers with an :class:`AuthAction`:
frames to send, whether KafkaApis should answer the request (ApiVersions, the one
other request allowed first), and whether to close the connection.  No I/O here.

The states are Kafka's:

* ``INITIAL_REQUEST`` / ``HANDSHAKE_OR_VERSIONS_REQUEST``: ApiVersions (once) or
  SaslHandshake; after ApiVersions, ``HANDSHAKE_REQUEST``: SaslHandshake only.
  Any other request closes the connection ("Unexpected Kafka request of type
  METADATA during SASL handshake."), without a response.
* SaslHandshake names the mechanism: one not enabled gets
  UNSUPPORTED_SASL_MECHANISM with the enabled list, then the connection closes.
  Handshake v0: the tokens that follow are raw size-prefixed frames; v1: they come
  in SaslAuthenticate requests (v0-2; v1+ answers carry ``session_lifetime_ms``).
* ``AUTHENTICATE``: tokens go to the mechanism.  A failure is answered
  SASL_AUTHENTICATION_FAILED with the mechanism's message (or Kafka's generic
  "Authentication failed during authentication due to invalid credentials with SASL
  mechanism X" for any other error), then the connection closes; with raw tokens
  it just closes.
* ``COMPLETE``: the principal is ``User:<authorization id>`` (a delegation token's owner, marked
  :attr:`~SaslServerAuthenticator.token_authenticated`, after a SCRAM ``tokenauth`` login).  With
  ``connections.max.reauth.ms`` or an expiring credential the session has a
  lifetime (the smaller of the two); a SaslHandshake on an authenticated connection
  starts a re-authentication (``REAUTH_PROCESS_HANDSHAKE``; at most one a second,
  the same mechanism and the same principal, else it fails), and the server closes
  a connection whose session expired when its next request arrives.

Deliberate differences: no GSSAPI (so no pre-KIP-43 client whose first packet is a
Kerberos token); the enabled mechanisms are listed in configuration order.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ...common import Clock
from ...protocol.api import APIS, ApiKey
from ...protocol.errors import ErrorCode
from ...protocol.exceptions import ProtocolError
from ...protocol.headers import encode_response_header, parse_request_header, response_header_version
from ..error_responses import error_response

log = logging.getLogger(__name__)

MIN_REAUTH_INTERVAL_NS = 1_000_000_000  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
WRONG_PROTOCOL = ("Invalid request, potential reasons: kafka client configured with the wrong security protocol, "
                  "it does not support KIP-43 or it is not a kafka client.")


class SaslServerMechanism(Protocol):
    """One SASL exchange on the server side (Java's ``SaslServer``), made per authentication by the
    mechanism factory: tokens in, challenges out, raising ``SaslAuthenticationError`` when it fails."""

    def evaluate(self, token: bytes) -> bytes: ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def session_lifetime_ms(self) -> int | None:
        """How long the credential stays valid from now (an OAUTHBEARER token's expiry), None: forever."""
        ...

    @property
    def token_authenticated(self) -> bool:
        """Whether the client logged in with a delegation token (SCRAM's ``tokenauth`` extension)."""
        ...


MechanismFactory = Callable[[str], SaslServerMechanism]


class SaslState(enum.Enum):
    INITIAL_REQUEST = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS_REQUEST = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE_REQUEST = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"
    REAUTH_PROCESS_HANDSHAKE = "REAUTH_PROCESS_HANDSHAKE"
    REAUTH_BAD_MECHANISM = "REAUTH_BAD_MECHANISM"


@dataclass(slots=True)
class AuthAction:
    """What the server does with a frame during authentication: send ``response`` (frame segments
    without the size prefix), hand the request to KafkaApis (``forward``), then close the connection
    when ``close`` gives a reason (logged once)."""

    response: list[bytes] | None = None
    forward: bool = False
    close: str | None = None


class _Failed(Exception):
    """Authentication failed: answer with ``response`` (if any), then close for ``reason``."""

    def __init__(self, reason: str, response: list[bytes] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.response = response


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


class SaslServerAuthenticator:
    """The SASL state of one connection: initial authentication, then any re-authentications."""

    def __init__(self, listener: str, mechanisms: list[str], new_mechanism: MechanismFactory,
                 max_reauth_ms: Callable[[str], int], clock: Clock,
                 authentication_error: type[Exception] = Exception) -> None:
        """``mechanisms``: the enabled ones; ``new_mechanism(name)`` makes the server side of one exchange;
        ``max_reauth_ms(name)``: ``connections.max.reauth.ms`` for it (0: none); ``authentication_error``:
        what a mechanism raises for a refused credential (its message goes to the client)."""
        self.listener = listener
        self.mechanisms = list(mechanisms)
        self.new_mechanism = new_mechanism
        self.max_reauth_ms = max_reauth_ms
        self.clock = clock
        self.authentication_error = authentication_error
        self.state = SaslState.INITIAL_REQUEST
        self.headers = False  # SaslHandshake v1+: tokens come wrapped in SaslAuthenticate requests
        self.mechanism_name: str | None = None
        self.mechanism: SaslServerMechanism | None = None
        self.principal: str | None = None
        # Kafka's KafkaPrincipal.tokenAuthenticated: the principal logged in with a delegation token (KIP-48).
        self.token_authenticated = False
        self.session_expiration_ns: int | None = None
        self.session_lifetime_ms = 0
        self.client_supports_reauthentication = False
        self.authentications = 0  # completed authentications on this connection (the first and re-authentications)
        self._previous: tuple[str, str] | None = None  # (mechanism, principal) while re-authenticating
        self._bad_mechanism = ""
        self._last_reauth_start_ns = 0

    # -- state -----------------------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._previous is not None

    @property
    def _text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    def session_expired(self, now_ns: int) -> bool:
        """Kafka's ``KafkaChannel.serverAuthenticationSessionExpired``."""
        return self.session_expiration_ns is not None and now_ns - self.session_expiration_ns > 0

    def maybe_begin_reauthentication(self, now_ns: int) -> bool:
        """A SaslHandshake arrived on the authenticated connection: start re-authenticating (True), or let
        KafkaApis answer it (ILLEGAL_SASL_STATE) when sessions do not expire or the last re-authentication
        began less than a second ago (Kafka's ``KafkaChannel.maybeBeginServerReauthentication``)."""
        if not self.complete or self.session_expiration_ns is None:
            return False
        if self._last_reauth_start_ns and now_ns - self._last_reauth_start_ns < MIN_REAUTH_INTERVAL_NS:
            return False
        self._last_reauth_start_ns = now_ns
        assert self.mechanism_name is not None and self.principal is not None
        self._previous = (self.mechanism_name, self.principal)
        self.state = SaslState.REAUTH_PROCESS_HANDSHAKE
        self.headers = False
        self.mechanism = None
        self.session_expiration_ns = None
        return True

    # -- frames ----------------------------------------------------------------------------------------
    def receive(self, frame: bytes | bytearray) -> AuthAction:
        """Handle one frame received before authentication completed."""
        state = self.state
        try:
            if state in (SaslState.INITIAL_REQUEST, SaslState.HANDSHAKE_OR_VERSIONS_REQUEST,
                         SaslState.HANDSHAKE_REQUEST, SaslState.REAUTH_PROCESS_HANDSHAKE):
                return self._kafka_request(frame)
            if state is SaslState.AUTHENTICATE:
                return self._token(frame)
            if state is SaslState.REAUTH_BAD_MECHANISM:
                raise _Failed(self._bad_mechanism)
            raise _Failed(f"unexpected frame in SASL state {state.value}")
        except _Failed as exc:
            self.state = SaslState.FAILED
            return AuthAction(exc.response, close=exc.reason)

    def _kafka_request(self, frame: bytes | bytearray) -> AuthAction:
        initial = self.state is SaslState.INITIAL_REQUEST

        def failed(reason: object) -> _Failed:
            return _Failed(f"{WRONG_PROTOCOL} ({reason})" if initial else str(reason))

        try:
            hdr = parse_request_header(frame)
        except ProtocolError as exc:
            raise failed(exc) from None
        api_key = hdr.api_key
        if api_key not in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            raise failed(f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake.")
        api = APIS[api_key]
        supported = api.request.supports(hdr.api_version)
        body = None
        if api_key == ApiKey.SASL_HANDSHAKE:
            if not supported:
                raise failed(f"Version {hdr.api_version} is not supported for apiKey SASL_HANDSHAKE")
            try:
                body = api.request.parse(memoryview(frame)[hdr.body_offset:], hdr.api_version)
            except ProtocolError as exc:
                raise failed(exc) from None
        if initial:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if api_key == ApiKey.API_VERSIONS:
            if self.state is not SaslState.HANDSHAKE_OR_VERSIONS_REQUEST:
                raise _Failed(f"Unexpected ApiVersions request received during SASL authentication state "
                              f"{self.state.value}")
            if supported:  # an unsupported version is answered UNSUPPORTED_VERSION and may be retried
                self.state = SaslState.HANDSHAKE_REQUEST
            return AuthAction(forward=True)
        assert body is not None
        return self._handshake(hdr.correlation_id, hdr.api_version, body["mechanism"])

    def _handshake(self, correlation_id: int, version: int, mechanism: str) -> AuthAction:
        if version >= 1:
            self.headers = True
        if mechanism not in self.mechanisms:
            raise _Failed(f"Unsupported SASL mechanism {mechanism}",
                          self._respond(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                        {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                         "mechanisms": self.mechanisms}))
        response = self._respond(ApiKey.SASL_HANDSHAKE, version, correlation_id,
                                 {"error_code": ErrorCode.NONE, "mechanisms": self.mechanisms})
        if self._previous is not None and self._previous[0] != mechanism:
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._previous[0]}'")
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return AuthAction(response)
        try:
            self.mechanism = self.new_mechanism(mechanism)
        except Exception as exc:  # a mechanism that cannot be set up (its configuration) fails this connection
            log.warning("cannot start SASL mechanism %s on listener %s: %s", mechanism, self.listener, exc)
            raise _Failed(f"cannot start SASL mechanism {mechanism}: {exc}") from None
        self.mechanism_name = mechanism
        self.state = SaslState.AUTHENTICATE
        return AuthAction(response)

    def _token(self, frame: bytes | bytearray) -> AuthAction:
        mech = self.mechanism
        assert mech is not None and self.mechanism_name is not None
        if not self.headers:  # SaslHandshake v0: raw tokens both ways, no error response
            try:
                challenge = mech.evaluate(bytes(frame))
                if mech.complete:
                    self._completed(mech)
            except Exception as exc:  # the mechanism refused the token (or failed): authentication fails, as Kafka
                raise _Failed(self._failure(exc)[1]) from None
            return AuthAction([challenge] if challenge is not None else None)
        try:
            hdr = parse_request_header(frame)
        except ProtocolError as exc:
            raise _Failed(f"malformed request header during SASL {self._text} ({exc})") from None
        api_key, version = hdr.api_key, hdr.api_version
        api = APIS.get(api_key)
        if api_key != ApiKey.SASL_AUTHENTICATE:
            reason = f"Unexpected Kafka request of type {_api_name(api_key)} during SASL {self._text}."
            raise _Failed(reason, self._illegal_state_response(frame, hdr.correlation_id, api_key, version,
                                                               hdr.body_offset))
        assert api is not None
        if not api.request.supports(version):
            raise _Failed(f"Version {version} is not supported for apiKey SASL_AUTHENTICATE")
        try:
            body = api.request.parse(memoryview(frame)[hdr.body_offset:], version)
        except ProtocolError as exc:
            raise _Failed(f"malformed SaslAuthenticate v{version} request: {exc}") from None
        if version > 0:
            self.client_supports_reauthentication = True
        try:
            challenge = mech.evaluate(bytes(body["auth_bytes"] or b""))
            lifetime = 0
            if mech.complete:
                self._completed(mech)
                lifetime = self.session_lifetime_ms
        except Exception as exc:  # the mechanism refused the token (or failed): SASL_AUTHENTICATION_FAILED, as Kafka
            message, reason = self._failure(exc)
            raise _Failed(reason, self._respond(ApiKey.SASL_AUTHENTICATE, version, hdr.correlation_id, {
                "error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message,
                "auth_bytes": b"", "session_lifetime_ms": 0})) from None
        return AuthAction(self._respond(ApiKey.SASL_AUTHENTICATE, version, hdr.correlation_id, {
            "error_code": ErrorCode.NONE, "error_message": None, "auth_bytes": challenge or b"",
            "session_lifetime_ms": lifetime}))

    def _failure(self, exc: Exception) -> tuple[str, str]:
        """(what the client is told, what the log says).  A mechanism's refusal carries both (its
        ``client_message`` and ``detail``, as ``sasl.SaslAuthenticationError`` does); anything else (a broker
        bug) gets Kafka's message that gives nothing away."""
        if isinstance(exc, self.authentication_error):
            client_message = getattr(exc, "client_message", None)
            message = client_message(self.reauthenticating) if callable(client_message) else str(exc)
            return message, str(getattr(exc, "detail", None) or message)
        log.warning("SASL %s with %s failed: %r", self._text, self.mechanism_name, exc)
        message = (f"Authentication failed during {self._text} due to invalid credentials with SASL mechanism "
                   f"{self.mechanism_name}")
        return message, f"{message} ({exc!r})"

    def _completed(self, mech: SaslServerMechanism) -> None:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs`` plus ``ensurePrincipalUnchanged``."""
        principal = f"User:{mech.authorization_id}"
        if self._previous is not None and self._previous[1] != principal:
            old, new = self._previous[1].split(":", 1), principal.split(":", 1)
            raise self.authentication_error(
                f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: {new[0]}.{new[1]}")
        assert self.mechanism_name is not None
        credential_ms = mech.session_lifetime_ms
        max_reauth_ms = self.max_reauth_ms(self.mechanism_name)
        lifetime = 0
        expiration: int | None = None
        if credential_ms is not None or max_reauth_ms > 0:
            if credential_ms is None:
                lifetime = max(max_reauth_ms, 0)
            elif max_reauth_ms <= 0:
                lifetime = max(credential_ms, 0)
            else:
                lifetime = max(min(credential_ms, max_reauth_ms), 0)
            expiration = self.clock.monotonic_ns() + lifetime * 1_000_000
        self.session_lifetime_ms = lifetime
        self.session_expiration_ns = expiration
        self.principal = principal
        self.token_authenticated = bool(getattr(mech, "token_authenticated", False))
        self.authentications += 1
        self._previous = None
        self.state = SaslState.COMPLETE

    # -- responses ---------------------------------------------------------------------------------------
    @staticmethod
    def _respond(api_key: int, version: int, correlation_id: int, body: dict[str, Any]) -> list[bytes]:
        api = APIS[api_key]
        header = encode_response_header(correlation_id, response_header_version(api_key, api.is_flexible(version)))
        return [header, api.response.build(body, version)]

    def _illegal_state_response(self, frame: bytes | bytearray, correlation_id: int, api_key: int, version: int,
                                body_offset: int) -> list[bytes] | None:
        """Kafka answers a request other than SaslAuthenticate during authentication with its error response
        (ILLEGAL_SASL_STATE) before closing; None when the request cannot even be parsed."""
        api = APIS.get(api_key)
        if api is None or not api.request.supports(version):
            return None
        try:
            request = api.request.parse(memoryview(frame)[body_offset:], version)
        except ProtocolError:
            return None
        body = error_response(api_key, version, request, ErrorCode.ILLEGAL_SASL_STATE)
        return self._respond(api_key, version, correlation_id, body)
