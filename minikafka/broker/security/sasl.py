"""SASL mechanisms on the broker side, sans-I/O: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER.

Models Kafka's ``SaslServer`` implementations and the parts of ``SaslServerAuthenticator`` that choose
them: one :class:`SaslMechanism` object per authentication exchange takes the client's tokens
(:meth:`~SaslMechanism.evaluate`) and answers the server's challenges, until it is
:attr:`~SaslMechanism.complete` with an :attr:`~SaslMechanism.authorization_id` (the user name; the
caller makes ``User:<name>`` of it).  Nothing here does I/O: the socket server feeds the bytes from
SaslAuthenticate requests (or raw v0 frames) and sends back what comes out.

* :class:`PlainSaslServer` (Kafka's ``PlainSaslServer`` + ``PlainServerCallbackHandler``): users from the
  ``PlainLoginModule`` JAAS options ``user_<name>="<password>"``, passwords compared in constant time.
* :class:`ScramSaslServer` (Kafka's ``ScramSaslServer``, RFC 5802/7677): the exchange runs on the
  ``scramp`` library's server, behind Kafka's own message formats and checks; credentials (salted) come
  from the :class:`~minikafka.broker.security.scram.ScramCredentialStore`.  With the ``tokenauth=true``
  extension the user name is a delegation token's id and the password its HMAC (Base64): the credential
  comes from the :class:`~minikafka.broker.security.delegation_token.DelegationTokenManager`, the
  authenticated user is the token's owner, the connection is token-authenticated
  (:attr:`ScramSaslServer.token_authenticated`) and the token's expiry bounds the session (KIP-48).
* :class:`OAuthBearerSaslServer` (Kafka's ``OAuthBearerSaslServer`` with the default
  ``OAuthBearerUnsecuredValidatorCallbackHandler``): an unsecured JWT (``alg`` ``none``, no signature)
  whose principal claim (``sub``, or ``unsecuredValidatorPrincipalClaimName``) is the user; ``exp`` is
  required and must not have passed (``unsecuredValidatorAllowableClockSkewMs``), ``iat`` if present must
  not be in the future, ``unsecuredValidatorRequiredScope`` is checked against the scope claim.  A token
  that fails gets Kafka's JSON error challenge (``{"status":"invalid_token"}``); the client's ``%x01``
  answer to it then fails the exchange with that JSON as the message.  The token's expiry bounds the
  session (KIP-368): :attr:`OAuthBearerSaslServer.session_lifetime_ms`.

Errors: :class:`SaslAuthenticationError`.  Where Kafka throws ``SaslAuthenticationException`` its message
goes to the client as it is; where Kafka throws a plain ``SaslException`` (unknown user, wrong proof,
malformed token) the client is only told "Authentication failed during authentication due to invalid
credentials with SASL mechanism <name>" and the reason stays in :attr:`SaslAuthenticationError.detail`
for the log, as ``SaslServerAuthenticator.handleSaslToken`` does.

Which mechanisms a listener offers (:func:`enabled_mechanisms`): ``listener.name.<listener>.sasl.enabled.mechanisms``,
else ``sasl.enabled.mechanisms``, else (minikafka's default; Kafka's is GSSAPI, which minikafka does not
implement) PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER, leaving PLAIN out when no
``PlainLoginModule`` JAAS configuration applies to the listener (it could authenticate nobody).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import re
import secrets
from collections.abc import Mapping
from typing import Any, Protocol

from ...common import Clock
from ..config import BrokerConfig, ConfigError, is_jaas_config_key
from .jaas import JaasConfigError, JaasEntry, parse_jaas_config, server_jaas_entries
from .delegation_token import DelegationTokenManager
from .scram import MIN_ITERATIONS, ScramCredential, ScramCredentialStore, ScramMechanism

log = logging.getLogger(__name__)

__all__ = ["SaslMechanism", "SaslAuthenticationError", "UnsupportedSaslMechanism", "PlainSaslServer",
           "ScramSaslServer", "OAuthBearerSaslServer", "SUPPORTED_MECHANISMS", "DEFAULT_MECHANISMS",
           "enabled_mechanisms", "create_mechanism", "invalid_credentials_message", "validate_jaas_configs"]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
DEFAULT_MECHANISMS = SUPPORTED_MECHANISMS
"""minikafka's default ``sasl.enabled.mechanisms`` (before leaving out unusable ones)."""


# -- the contract --------------------------------------------------------------------------------------------
class SaslMechanism(Protocol):
    """One authentication exchange on the server side (Java's ``SaslServer``)."""

    def evaluate(self, response: bytes) -> bytes:
        """The client's token in, the server's challenge out (b"" when there is none).
        Raises :class:`SaslAuthenticationError`."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user name (once complete)."""
        ...

    @property
    def session_lifetime_ms(self) -> int | None:
        """How long the credential stays valid from now (OAUTHBEARER's token expiry, KIP-368, a delegation
        token's expiry), else None."""
        ...

    @property
    def token_authenticated(self) -> bool:
        """Whether the client authenticated with a delegation token (Kafka's ``KafkaPrincipal.tokenAuthenticated``)."""
        ...


def invalid_credentials_message(mechanism: str, reauthentication: bool = False) -> str:
    """What Kafka tells a client whose exchange failed with a ``SaslException`` (reason withheld)."""
    during = "re-authentication" if reauthentication else "authentication"
    return f"Authentication failed during {during} due to invalid credentials with SASL mechanism {mechanism}"


class SaslAuthenticationError(Exception):
    """The exchange failed: answer SASL_AUTHENTICATION_FAILED with :meth:`client_message`, then close.

    ``str(exc)`` is the message for a first authentication.  ``detail`` is the reason, for the log; when
    ``withheld_for`` names a mechanism the reason is not the client's business (Kafka's ``SaslException``)
    and :meth:`client_message` is Kafka's generic "invalid credentials" text.
    """

    def __init__(self, message: str, *, detail: str | None = None, withheld_for: str | None = None) -> None:
        super().__init__(message)
        self.detail = detail or message
        self.withheld_for = withheld_for

    @classmethod
    def withheld(cls, mechanism: str, detail: str) -> SaslAuthenticationError:
        """A failure whose reason stays on the server (Kafka's ``SaslException`` path)."""
        return cls(invalid_credentials_message(mechanism), detail=detail, withheld_for=mechanism)

    def client_message(self, reauthentication: bool = False) -> str:
        """The ``error_message`` of the SaslAuthenticate response."""
        if self.withheld_for is not None:
            return invalid_credentials_message(self.withheld_for, reauthentication)
        return str(self)


class UnsupportedSaslMechanism(Exception):
    """The client asked for a mechanism this listener does not enable (UNSUPPORTED_SASL_MECHANISM)."""

    def __init__(self, mechanism: str, enabled: list[str]) -> None:
        super().__init__(f"Unsupported SASL mechanism {mechanism}")
        self.mechanism = mechanism
        self.enabled = enabled


class _Exchange:
    """What every mechanism here shares: completion, the user, the absence of a session bound."""

    mechanism_name = ""

    def __init__(self) -> None:
        self._complete = False
        self._authorization_id: str | None = None

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        if not self._complete or self._authorization_id is None:
            raise RuntimeError("Authentication exchange has not completed")
        return self._authorization_id

    @property
    def session_lifetime_ms(self) -> int | None:
        return None

    @property
    def token_authenticated(self) -> bool:
        return False

    def _done(self, user: str) -> None:
        self._authorization_id = user
        self._complete = True


# -- PLAIN ---------------------------------------------------------------------------------------------------
class PlainSaslServer(_Exchange):
    """Kafka's ``PlainSaslServer`` with ``PlainServerCallbackHandler``: ``[authzid] NUL user NUL password``.

    ``users`` maps a user name to its password (the ``user_<name>`` JAAS options).
    """

    mechanism_name = "PLAIN"

    def __init__(self, users: Mapping[str, str]) -> None:
        super().__init__()
        self._users = dict(users)

    @classmethod
    def from_jaas(cls, entries: list[JaasEntry]) -> PlainSaslServer:
        users: dict[str, str] = {}
        for entry in entries:
            for key, value in entry.options.items():
                if key.startswith("user_"):
                    users.setdefault(key[len("user_"):], value)
        return cls(users)

    def evaluate(self, response: bytes) -> bytes:
        if self._complete:
            raise SaslAuthenticationError("Unexpected SASL/PLAIN response after authentication completed")
        text = bytes(response).decode("utf-8", errors="replace")
        parts = text.split("\0")
        if len(parts) != 3:  # Kafka reads at most four NUL-separated tokens
            raise SaslAuthenticationError(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compare even for an unknown user, so the time taken does not tell which users exist.
        ok = hmac.compare_digest(password.encode("utf-8"), (expected if expected is not None else "\0").encode())
        if not ok or expected is None:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password",
                                          detail=f"Authentication failed: Invalid username or password "
                                                 f"(user {username!r})")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._done(username)
        return b""


# -- SCRAM ---------------------------------------------------------------------------------------------------
# Kafka's ScramMessages patterns (Java's [a&&[^b]] written out as ranges).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
# Patterns stay strings until first used (``re`` caches what it compiles): a broker without SASL never pays.
_CLIENT_FIRST = (
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})"
_TOKEN_AUTH = "tokenauth"


class ScramSaslServer(_Exchange):
    """Kafka's ``ScramSaslServer`` (states RECEIVE_CLIENT_FIRST_MESSAGE, RECEIVE_CLIENT_FINAL_MESSAGE,
    COMPLETE, FAILED) over ``scramp``'s RFC 5802 server.

    Kafka's checks come first, with its messages: the client-first format (gs2 flag ``n`` only, no
    channel binding), the user's credential (a delegation token's with ``tokenauth=true``),
    an authorization id other than the user (told to the client), the iteration minimum; then the
    client-final format and nonce.  ``scramp`` computes and checks the proofs.  Differences, all from
    ``scramp``'s stricter RFC 5802 reading: an authorization id in the gs2 header (even the user's own)
    and extensions other than single letters are refused, user names go through SASLprep, and a salt must
    have at least 12 bytes.  Such an exchange fails as a wrong password does (the reason in
    :attr:`SaslAuthenticationError.detail`).  No Kafka client sends an authorization id or an extension
    outside delegation tokens, and their salts are longer (Java's ~26 bytes, kafka-python's 24, minikafka's 32).

    A delegation token exchange (``tokenauth=true``, whose extension name ``scramp`` refuses) runs without
    ``scramp``: the server-first message and the proof check are RFC 5802's, computed here as Kafka's
    ``ScramSaslServer`` does, over the messages as the client sent them (extensions included).
    """

    def __init__(self, mechanism: str, credentials: ScramCredentialStore,
                 tokens: DelegationTokenManager | None = None) -> None:
        super().__init__()
        self.mechanism = ScramMechanism.from_mechanism_name(mechanism)
        if self.mechanism is ScramMechanism.UNKNOWN:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism_name = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._token_expiry_ms: int | None = None  # a delegation token's expiry timestamp (tokenauth)
        self._session_lifetime_ms: int | None = None
        self._state = "RECEIVE_CLIENT_FIRST_MESSAGE"
        self._server: Any = None  # scramp.ScramServer
        self._server_nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    def evaluate(self, response: bytes) -> bytes:
        try:
            if self._state == "RECEIVE_CLIENT_FIRST_MESSAGE":
                return self._client_first(bytes(response))
            if self._state == "RECEIVE_CLIENT_FINAL_MESSAGE":
                return self._client_final(bytes(response))
            raise SaslAuthenticationError(f"Unexpected challenge in Sasl server state {self._state}")
        except SaslAuthenticationError:
            self._state = "FAILED"
            self._server = None
            raise

    def _fail(self, detail: str) -> SaslAuthenticationError:
        return SaslAuthenticationError.withheld(self.mechanism_name, detail)

    def _client_first(self, response: bytes) -> bytes:
        text = response.decode("utf-8", errors="replace")
        m = re.fullmatch(_CLIENT_FIRST, text)
        if m is None:
            raise self._fail(f"Invalid SCRAM client first message format: {text}")
        extensions = dict(kv.split("=", 1) for kv in m["extensions"].split(",")[1:])
        username = m["saslname"].replace("=2C", ",").replace("=3D", "=")
        if extensions.get(_TOKEN_AUTH, "").lower() == "true":
            return self._token_client_first(text, m, username)
        credential = self._credentials.credential(username, self.mechanism)
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        authzid = m["authzid"] or ""
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise self._fail(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                             f"for {self.mechanism_name}")
        import scramp  # only when a SCRAM exchange starts

        server = scramp.ScramMechanism(self.mechanism_name).make_server(_auth_fn(credential))
        try:
            server.set_client_first(text)
            challenge = server.get_server_first()
        except scramp.ScramException as exc:
            raise self._fail(f"Authentication failed: the SCRAM server (scramp) refused the client first "
                             f"message: {exc}") from None
        self._server = server
        self._server_nonce = str(server.nonce)
        self._client_first_bare = text[m.start("saslname") - 2:]
        self._server_first = challenge
        self._credential = credential
        self._authorization_id = username
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return challenge.encode("utf-8")

    def _token_client_first(self, text: str, m: re.Match[str], token_id: str) -> bytes:
        """The client-first message of a delegation token login: the token's credential and owner (Kafka's
        ``DelegationTokenCredentialCallback``), then RFC 5802's server-first message."""
        tokens = self._tokens
        owner = tokens.owner(token_id) if tokens is not None and tokens.enabled else None
        info = tokens.token(token_id) if tokens is not None else None
        if tokens is None or owner is None or info is None:
            raise self._fail(f"Token Authentication failed: Invalid tokenId : {token_id}")
        credential = tokens.credential(token_id, self.mechanism)
        if credential is None:
            raise self._fail("Authentication failed: Invalid user credentials")
        authzid = m["authzid"] or ""
        if authzid and authzid != token_id:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._server_nonce = m["nonce"] + secrets.token_urlsafe(24)
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._server_nonce},s={salt},i={credential.iterations}"
        self._client_first_bare = text[m.start("saslname") - 2:]
        self._credential = credential
        self._authorization_id = owner
        self._token_expiry_ms = info.expiry_timestamp
        self._state = "RECEIVE_CLIENT_FINAL_MESSAGE"
        return self._server_first.encode("utf-8")

    @property
    def token_authenticated(self) -> bool:
        return self._complete and self._token_expiry_ms is not None

    @property
    def session_lifetime_ms(self) -> int | None:
        return self._session_lifetime_ms

    def _done(self, user: str) -> None:
        if self._token_expiry_ms is not None and self._tokens is not None:
            # Kafka's CREDENTIAL_LIFETIME_MS negotiated property: the token's expiry bounds the session.
            self._session_lifetime_ms = max(0, self._token_expiry_ms - self._tokens.clock.time_ms())
        super()._done(user)

    def _client_final(self, response: bytes) -> bytes:
        text = response.decode("utf-8", errors="replace")
        m = re.fullmatch(_CLIENT_FINAL, text)
        if m is None:
            raise self._fail(f"Invalid SCRAM client final message format: {text}")
        if m["nonce"] != self._server_nonce or self._server is None:
            if not m["nonce"].endswith(self._server_nonce):
                raise self._fail("Invalid client nonce in the final client message.")
            # librdkafka before 2.6.1 (librdkafka#4895, e.g. Debian's kcat) repeats the client nonce here;
            # Kafka 3.8.1-3.9 accepted it (an ``endsWith`` check): verify the proof over the message as sent.
            # A delegation token exchange (no scramp server) is always verified here.
            return self._client_final_as_sent(text, m)
        import scramp

        try:
            self._server.set_client_final(text)
            final = self._server.get_server_final()
        except scramp.ScramException as exc:
            raise self._fail(f"Invalid client credentials ({exc})") from None
        self._server = None
        self._state = "COMPLETE"
        assert self._authorization_id is not None
        self._done(self._authorization_id)
        return final.encode("utf-8")


    def _client_final_as_sent(self, text: str, m: re.Match[str]) -> bytes:
        """RFC 5802 verification (``ScramSaslServer.verifyClientProof``) over the client's own final message."""
        credential = self._credential
        assert credential is not None
        name = self.mechanism.hash_name
        without_proof = text[:text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode("utf-8")
        signature = hmac.new(credential.stored_key, auth_message, name).digest()
        try:
            proof = base64.b64decode(m["proof"], validate=True)
        except ValueError:
            raise self._fail("Invalid client proof encoding") from None
        if len(proof) != len(signature):
            raise self._fail("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), credential.stored_key):
            raise self._fail("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, name).digest()
        self._server = None
        self._state = "COMPLETE"
        assert self._authorization_id is not None
        self._done(self._authorization_id)
        return b"v=" + base64.b64encode(server_signature)


def _auth_fn(credential: ScramCredential) -> Any:
    """scramp's credential callback: the salted credential, whatever the (already checked) name."""
    def auth_fn(_username: str) -> tuple[bytes, bytes, bytes, int]:
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations
    return auth_fn


# -- OAUTHBEARER -----------------------------------------------------------------------------------------------
_KEY = r"[A-Za-z]+"
_KV_VALUE = r"[\x21-\x7E \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_KV_VALUE}\x01)*)\x01"
_AUTH = r"(?a)(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)"
_CONTROL_A = b"\x01"


class _IllegalToken(Exception):
    """Kafka's ``OAuthBearerIllegalTokenException``: the reason, and the scope that was missing."""

    def __init__(self, reason: str, failure_scope: str | None = None) -> None:
        super().__init__(reason)
        self.failure_scope = failure_scope


def _b64url_json(split: str) -> dict[str, Any]:
    """One JWS section: Base64URL (padding optional) of a JSON object, its values as Kafka converts them."""
    try:
        raw = base64.urlsafe_b64decode(split + "=" * (-len(split) % 4))
    except (binascii.Error, ValueError):
        raise _IllegalToken("malformed Base64 URL encoded value") from None
    try:
        node = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise _IllegalToken("malformed JSON") from None
    if not isinstance(node, dict):
        return {}
    return {k: _convert(v) for k, v in node.items()}


def _convert(value: Any) -> Any:
    """Jackson's view as ``OAuthBearerUnsecuredJws.convert``: arrays of text, numbers, else text."""
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _as_text(value)


def _as_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return ""
    return str(value)


def _java_type(value: Any) -> str:
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, str):
        return "String"
    if isinstance(value, float):
        return "Double"
    return "Integer" if -2**31 <= value < 2**31 else "Long"


class UnsecuredJws:
    """Kafka's ``OAuthBearerUnsecuredJws``: an unsecured JWT's header, claims, principal, scope, lifetime."""

    def __init__(self, compact: str, principal_claim: str = "sub", scope_claim: str = "scope") -> None:
        if ".." in compact:
            raise _IllegalToken("Malformed compact serialization contains '..'")
        splits = compact.split(".")
        if len(splits) != 3:
            raise _IllegalToken("Unsecured JWS compact serializations must have 3 dot-separated "
                                "Base64URL-encoded values")
        self.header = _b64url_json(splits[0])
        self.claims = _b64url_json(splits[1])
        alg = self.header.get("alg")
        if alg is None:
            raise _IllegalToken("JWS header must have an Algorithm value")
        if str(alg) != "none":
            raise _IllegalToken("Unsecured JWS must have 'none' for an algorithm")
        if splits[2]:
            raise _IllegalToken("Unsecured JWS must not contain a digital signature")
        self.principal_claim = principal_claim
        self.scope_claim = scope_claim
        self.scope = self._scope()
        exp = self.number_claim("exp")
        if exp is None:
            raise _IllegalToken("No expiration time in JWT")
        self.lifetime_ms = round(exp * 1000)
        principal = self.claim(principal_claim, str)
        if principal is None or not principal.strip():
            raise _IllegalToken(f"No principal name in JWT claim: {principal_claim}")
        self.principal_name: str = principal
        iat = self.number_claim("iat")
        self.start_time_ms = None if iat is None else round(iat * 1000)

    def claim(self, name: str, kind: type) -> Any:
        value = self.claims.get(name)
        if value is not None and not isinstance(value, kind):
            type_name = "String" if kind is str else "List" if kind is list else kind.__name__
            raise _IllegalToken(f"The '{name}' claim was not of type {type_name}: {_java_type(value)}")
        return value

    def number_claim(self, name: str) -> float | None:
        value = self.claims.get(name)
        if value is not None and not isinstance(value, (int, float)):
            raise _IllegalToken(f"The '{name}' claim was not of type Number: {_java_type(value)}")
        return value

    def _scope(self) -> set[str]:
        value = self.claims.get(self.scope_claim)
        if isinstance(value, str):
            return {value.strip()} if value.strip() else set()
        values = self.claim(self.scope_claim, list)
        return {s.strip() for s in values or [] if s and s.strip()}


class OAuthBearerSaslServer(_Exchange):
    """Kafka's ``OAuthBearerSaslServer`` with the unsecured validator (see the module docstring).

    ``options`` are the ``OAuthBearerLoginModule`` JAAS options (``unsecuredValidator*``).
    """

    mechanism_name = "OAUTHBEARER"

    def __init__(self, options: Mapping[str, str], clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub"
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope"
        self.required_scope = options.get("unsecuredValidatorRequiredScope", "").split()
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        self._config_problem: str | None = None
        try:
            self.allowable_clock_skew_ms = int(skew) if skew else 0
            if self.allowable_clock_skew_ms < 0:
                raise ValueError(f"Allowable clock skew millis must not be negative: {skew}")
        except ValueError as exc:
            self.allowable_clock_skew_ms = 0
            self._config_problem = str(exc)
        self._error_message: str | None = None
        self.credential_expiration_ms: int | None = None  # the token's exp, in ms since the epoch
        self._completed_at_ms: int | None = None
        self.extensions: dict[str, str] = {}
        self.token: UnsecuredJws | None = None

    @property
    def session_lifetime_ms(self) -> int | None:
        if self.credential_expiration_ms is None or self._completed_at_ms is None:
            return None
        return max(0, self.credential_expiration_ms - self._completed_at_ms)

    def evaluate(self, response: bytes) -> bytes:
        response = bytes(response)
        if self._complete:
            raise SaslAuthenticationError("Unexpected OAUTHBEARER response after authentication completed")
        if response == _CONTROL_A and self._error_message is not None:
            raise SaslAuthenticationError(self._error_message)
        self._error_message = None
        text = response.decode("utf-8", errors="replace")
        m = re.fullmatch(_CLIENT_INITIAL_RESPONSE, text)
        if m is None:
            raise SaslAuthenticationError.withheld(self.mechanism_name, "Invalid OAUTHBEARER client first message")
        pairs = [kv.split("=", 1) for kv in m["kvpairs"].split("\x01") if kv]
        properties = {k: v for k, v in pairs}
        auth = properties.pop("auth", None)
        if auth is None:
            raise SaslAuthenticationError.withheld(
                self.mechanism_name, "Invalid OAUTHBEARER client first message: 'auth' not specified")
        am = re.fullmatch(_AUTH, auth)
        if am is None:
            raise SaslAuthenticationError.withheld(
                self.mechanism_name, "Invalid OAUTHBEARER client first message: invalid 'auth' format")
        if am["scheme"].lower() != "bearer":
            raise SaslAuthenticationError.withheld(
                self.mechanism_name, f"Invalid scheme in OAUTHBEARER client first message: {am['scheme']}")
        if self._config_problem is not None:
            log.error("OAUTHBEARER validator misconfigured: %s", self._config_problem)
            raise SaslAuthenticationError.withheld(
                self.mechanism_name, "Authentication could not be performed due to an internal error on the "
                                     f"server: {self._config_problem}")
        try:
            token = self._validate(am["token"])
        except _IllegalToken as exc:
            status = "insufficient_scope" if exc.failure_scope is not None else "invalid_token"
            error = f'{{"status":"{status}"'
            if exc.failure_scope is not None:
                error += f', "scope":"{exc.failure_scope}"'
            self._error_message = error + "}"
            log.debug("OAUTHBEARER token refused: %s", exc)
            return self._error_message.encode("utf-8")
        authzid = m["authzid"] or ""
        if authzid and authzid != token.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({token.principal_name})")
        self.token = token
        self.extensions = properties  # the unsecured validator accepts every extension
        self.credential_expiration_ms = token.lifetime_ms
        self._completed_at_ms = self.clock.time_ms()
        self._done(token.principal_name)
        log.info("Successfully validated token with principal %s", token.principal_name)
        return b""

    def _validate(self, value: str) -> UnsecuredJws:
        """``OAuthBearerUnsecuredValidatorCallbackHandler.handleCallback``: raises :class:`_IllegalToken`."""
        jwt = UnsecuredJws(value, self.principal_claim, self.scope_claim)
        now = self.clock.time_ms()
        skew = self.allowable_clock_skew_ms
        iat = jwt.number_claim("iat")
        if iat is not None and 1000 * iat > now + skew:
            raise _IllegalToken(f"The Issued At value ({iat:f} seconds) was after the indicated time ({now} ms) "
                                f"plus allowable clock skew ({skew} ms)")
        exp = jwt.number_claim("exp")
        assert exp is not None
        if now - skew >= 1000 * exp:
            raise _IllegalToken(f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or "
                                f"after the Expiration Time value ({exp:f} seconds)")
        if iat is not None and exp <= iat:
            raise _IllegalToken(f"The Expiration Time time ({exp:f} seconds) was not after the Issued At time "
                                f"({iat:f} seconds)")
        for element in self.required_scope:
            if element not in jwt.scope:
                required = "[" + ", ".join(self.required_scope) + "]"
                raise _IllegalToken(f"The provided scope ([{', '.join(sorted(jwt.scope))}]) was missing a required "
                                    f"scope ({element}).  All required scope elements: {required}",
                                    failure_scope=required)
        return jwt


# -- which mechanisms, and making one ----------------------------------------------------------------------
def _listed(value: str) -> list[str]:
    out: list[str] = []
    for name in (n.strip() for n in value.split(",")):
        if name and name not in out:
            out.append(name)
    return out


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> list[JaasEntry]:
    try:
        return server_jaas_entries(config.extra, listener, mechanism)
    except JaasConfigError as exc:
        log.error("JAAS configuration for %s on listener %s does not parse: %s", mechanism, listener, exc)
        return []


def enabled_mechanisms(config: BrokerConfig, listener: str) -> list[str]:
    """The SASL mechanisms ``listener`` offers, in configured order (see the module docstring).

    Mechanisms minikafka does not implement (GSSAPI) are left out with a warning.
    """
    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    value = config.extra.get(key, config.extra.get("sasl.enabled.mechanisms"))
    if value is None:
        return [m for m in DEFAULT_MECHANISMS if m != "PLAIN" or _jaas(config, listener, "PLAIN")]
    names = _listed(value)
    unknown = [n for n in names if n not in SUPPORTED_MECHANISMS]
    if unknown:
        log.warning("SASL mechanism(s) %s enabled on listener %s are not implemented by minikafka; ignored "
                    "(supported: %s)", ", ".join(unknown), listener, ", ".join(SUPPORTED_MECHANISMS))
    return [n for n in names if n in SUPPORTED_MECHANISMS]


def create_mechanism(name: str, listener: str, config: BrokerConfig, scram: ScramCredentialStore,
                     clock: Clock, tokens: DelegationTokenManager | None = None) -> SaslMechanism:
    """A new server-side exchange for mechanism ``name`` on ``listener`` (:class:`UnsupportedSaslMechanism`
    if the listener does not enable it); SCRAM logs delegation tokens in from ``tokens``."""
    enabled = enabled_mechanisms(config, listener)
    if name not in enabled:
        raise UnsupportedSaslMechanism(name, enabled)
    if name == "PLAIN":
        entries = _jaas(config, listener, name)
        if not entries:
            log.warning("PLAIN is enabled on listener %s but no PlainLoginModule JAAS configuration applies: "
                        "no user can authenticate", listener)
        return PlainSaslServer.from_jaas(entries)
    if name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramSaslServer(name, scram, tokens)
    options: dict[str, str] = {}
    for entry in _jaas(config, listener, name):
        options.update(entry.options)
    return OAuthBearerSaslServer(options, clock)


def validate_jaas_configs(settings: Mapping[str, str]) -> None:
    """Parse every ``*sasl.jaas.config`` value at start-up (:class:`~minikafka.broker.config.ConfigError` for
    the first that does not parse), so a typo stops the broker rather than every login."""
    for key, value in settings.items():
        if is_jaas_config_key(key):
            try:
                parse_jaas_config(value)
            except JaasConfigError as exc:
                raise ConfigError(key, "[hidden]", str(exc)) from None
