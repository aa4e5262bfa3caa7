"""The client side of Kafka's security protocols: TLS contexts and SASL authentication on Trio.

Models what a Kafka client's ``security.protocol`` / ``sasl.mechanism`` / ``ssl.*`` settings do on a
connection (Java's ``SaslClientAuthenticator`` and ``SslFactory`` in client mode, librdkafka's
``rdkafka_sasl*.c``):

* :func:`client_ssl_context` builds an ``ssl.SSLContext`` from PEM files: the CA to trust
  (``ssl.truststore.location`` / ``ssl.ca.location``), and for mutual TLS the client's certificate
  chain and key (``ssl.keystore.location`` / ``ssl.certificate.location`` + ``ssl.key.location``);
  the host name is checked unless ``ssl.endpoint.identification.algorithm`` is empty ("none").
* :func:`open_stream` opens a TCP connection, with the TLS handshake done when given a context.
* :func:`sasl_authenticate` runs the SASL exchange of KIP-152: SaslHandshake v1 naming the mechanism,
  then SaslAuthenticate requests carrying the tokens (v2, whose answer holds KIP-368's
  ``session_lifetime_ms``).  PLAIN is one token (``authzid NUL user NUL password``, RFC 4616);
  SCRAM-SHA-256/512 (RFC 5802/7677) are two round trips, computed with ``scramp``, the server's
  final signature checked.  The same function re-authenticates (KIP-368: a new SaslHandshake on the
  authenticated connection).  With ``token_auth`` it logs in with a delegation token (KIP-48, Java's
  ``ScramLoginModule`` option ``tokenauth=true``): the user name is the token id, the password its HMAC
  in Base64, and the client-first message carries the ``tokenauth=true`` extension (computed here:
  ``scramp`` has no SCRAM extensions).

Requests go through any ``request(api_key, version, body)`` coroutine, e.g.
:meth:`~minikafka.client.connection.KafkaConnection.request`, so a caller that owns the connection's
reads (wire replay) can run the exchange through its own dispatch.  Used by the inter-broker
connector (brokers authenticating to each other) and by wire replay against secured targets.

Deliberate differences: no GSSAPI (Kerberos) and no OAUTHBEARER client (token retrieval is out of
scope); SaslHandshake v0 (raw tokens) is never used, as no current Kafka client does.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import secrets
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio

from ..protocol.api import ApiKey
from ..protocol.errors import ErrorCode

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: ``request(api_key, version, body)``: sends one request on the connection and returns its parsed response.
RequestFn = Callable[[int, int, dict], Awaitable[Any]]


class SaslAuthenticationError(ConnectionError):
    """The broker refused the SASL exchange (unsupported mechanism, wrong credentials, bad server signature)."""


def uses_tls(security_protocol: str) -> bool:
    return security_protocol in ("SSL", "SASL_SSL")


def uses_sasl(security_protocol: str) -> bool:
    return security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True)
class SaslSession:
    """A completed authentication: the mechanism, the user name sent, and the session lifetime the broker
    granted (KIP-368; 0 = no limit: the client need not re-authenticate)."""

    mechanism: str
    username: str
    session_lifetime_ms: int = 0


def client_ssl_context(cafile: str | None = None, certfile: str | None = None, keyfile: str | None = None,
                       key_password: str | None = None, check_hostname: bool = True) -> ssl.SSLContext:
    """A client TLS context: trust ``cafile`` (PEM; the system's CAs when None), present ``certfile``
    (a PEM certificate chain, with its key in it or in ``keyfile``) for mutual TLS, check the broker's
    host name unless ``check_hostname`` is False (Kafka's empty ``ssl.endpoint.identification.algorithm``)."""
    ctx = ssl.create_default_context(cafile=cafile)
    if not check_hostname:
        ctx.check_hostname = False
    if certfile:
        ctx.load_cert_chain(certfile, keyfile or None, key_password)
    elif keyfile:
        raise ValueError("a TLS key file needs its certificate (certfile)")
    return ctx


async def open_stream(host: str, port: int, ssl_context: ssl.SSLContext | None = None,
                      server_hostname: str | None = None) -> trio.abc.Stream:
    """A TCP stream to ``host:port``; with ``ssl_context`` a ``trio.SSLStream`` whose handshake is done
    (``server_hostname``, default ``host``, is what the certificate is checked against)."""
    if ssl_context is None:
        return await trio.open_tcp_stream(host, port)
    tcp = await trio.open_tcp_stream(host, port)
    tls = trio.SSLStream(tcp, ssl_context, server_hostname=server_hostname or host, https_compatible=True)
    try:
        await tls.do_handshake()
    except BaseException:
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(tls)
        raise
    return tls


async def sasl_authenticate(request: RequestFn, mechanism: str, username: str, password: str, *,
                            token_auth: bool = False) -> SaslSession:
    """Authenticate (or re-authenticate) the connection ``request`` sends on; raises
    :class:`SaslAuthenticationError` when the broker refuses (the broker then closes the connection).
    ``token_auth``: a delegation token login (SCRAM only; ``username`` the token id, ``password`` its HMAC)."""
    if mechanism not in SASL_MECHANISMS:
        raise ValueError(f"SASL mechanism {mechanism!r} is not supported (supported: {', '.join(SASL_MECHANISMS)})")
    if token_auth and not mechanism.startswith("SCRAM-"):
        raise ValueError(f"delegation tokens log in with SCRAM-SHA-256 or SCRAM-SHA-512, not {mechanism}")
    resp = await request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mechanism})
    if resp.error_code:
        raise SaslAuthenticationError(f"SaslHandshake for {mechanism} failed: {_error_name(resp.error_code)} "
                                      f"(enabled: {', '.join(resp.mechanisms or []) or 'none'})")
    if mechanism == "PLAIN":
        _, lifetime = await _exchange(request, f"\0{username}\0{password}".encode())
        return SaslSession(mechanism, username, lifetime)
    if token_auth:
        return await _scram_with_extensions(request, mechanism, username, password, {"tokenauth": "true"})
    import scramp

    client = scramp.ScramClient([mechanism], username, password)
    server_first, _ = await _exchange(request, client.get_client_first().encode())
    try:
        client.set_server_first(server_first.decode())
    except scramp.ScramException as exc:
        raise SaslAuthenticationError(f"the broker's SCRAM first message is invalid: {exc}") from None
    server_final, lifetime = await _exchange(request, client.get_client_final().encode())
    try:
        client.set_server_final(server_final.decode())
    except scramp.ScramException as exc:
        raise SaslAuthenticationError(f"the broker's SCRAM signature is wrong: {exc}") from None
    return SaslSession(mechanism, username, lifetime)


async def _scram_with_extensions(request: RequestFn, mechanism: str, username: str, password: str,
                                 extensions: dict[str, str]) -> SaslSession:
    """RFC 5802's client side with SCRAM extensions in the client-first message (Java's ``ScramSaslClient``
    with ``ScramExtensions``); the server's final signature is checked."""
    digest = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    nonce = secrets.token_urlsafe(24)
    saslname = username.replace("=", "=3D").replace(",", "=2C")
    first_bare = f"n={saslname},r={nonce}" + "".join(f",{k}={v}" for k, v in extensions.items())
    server_first_bytes, _ = await _exchange(request, f"n,,{first_bare}".encode())
    server_first = server_first_bytes.decode("utf-8", errors="replace")
    try:
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        server_nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
    except (ValueError, KeyError) as exc:
        raise SaslAuthenticationError(f"the broker's SCRAM first message is invalid: {exc}") from None
    if not server_nonce.startswith(nonce) or iterations < 1:
        raise SaslAuthenticationError("the broker's SCRAM first message is invalid (nonce or iterations)")
    salted = hashlib.pbkdf2_hmac(digest, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c={base64.b64encode(b'n,,').decode()},r={server_nonce}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    server_final, lifetime = await _exchange(request, f"{without_proof},p={proof}".encode())
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    expected = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, digest).digest())
    if not hmac.compare_digest(bytes(server_final), expected):
        raise SaslAuthenticationError("the broker's SCRAM signature is wrong")
    return SaslSession(mechanism, username, lifetime)


async def _exchange(request: RequestFn, token: bytes) -> tuple[bytes, int]:
    """One SaslAuthenticate v2 round trip: the server's token and the session lifetime it announced."""
    resp = await request(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": token})
    if resp.error_code:
        raise SaslAuthenticationError(f"SASL authentication failed: {_error_name(resp.error_code)}: "
                                      f"{resp.error_message}")
    return bytes(resp.auth_bytes), int(resp.session_lifetime_ms or 0)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
