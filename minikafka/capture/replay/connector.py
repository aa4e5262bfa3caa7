"""Connections to the target in its security protocol (Kafka's ``ChannelBuilder`` and
``SaslClientAuthenticator`` on the client side): TCP, the TLS handshake, SASL authentication as the captured
connection's principal, and KIP-368 re-authentication when the session the target granted runs out.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import Mapping
from typing import NamedTuple

import trio

from ...client.connection import KafkaConnection
from ...client.security import (
    RequestFn,
    SaslAuthenticationError,
    SaslSession,
    client_ssl_context,
    open_stream,
    sasl_authenticate,
)
from .options import ConnKey, ReplaySecurity, SaslCredentials
from .report import ReplayReport
from .routing import CONNECTION_ERRORS


class Opened(NamedTuple):
    """A connection to the target, authenticated (``session``, ``credentials``) when the target uses SASL."""

    stream: trio.abc.Stream
    session: SaslSession | None
    credentials: SaslCredentials | None


class TargetConnector:
    """Opens and authenticates connections to the target; counts authentications in the report."""

    def __init__(self, security: ReplaySecurity, principals: Mapping[ConnKey, str], report: ReplayReport, *,
                 connect_timeout_s: float, timeout_s: float) -> None:
        self.security = security
        self.principals = principals  # captured connection -> the principal it authenticated as
        self.report = report
        self.connect_timeout_s = connect_timeout_s
        self.timeout_s = timeout_s
        self.ssl_context: ssl.SSLContext | None = None
        if security.tls:
            self.ssl_context = client_ssl_context(security.ssl_cafile, security.ssl_certfile, security.ssl_keyfile,
                                                  security.ssl_key_password, security.ssl_check_hostname)

    async def open(self, key: ConnKey, client_id: str | None, host: str, port: int) -> Opened:
        """A connection to ``host:port`` for the captured connection ``key``: TLS handshake, then SASL
        authentication as its principal.  Raises ConnectionError (reported)."""
        sec = self.security
        credentials: SaslCredentials | None = None
        if sec.sasl:
            principal = self.principals.get(key, "")
            credentials = sec.credentials_for(principal)
            if credentials is None:
                raise ConnectionError(f"no SASL credentials for the captured principal {principal or '(unknown)'} "
                                      "(give a credentials file entry or --sasl-username/--sasl-password)")
        try:
            with trio.fail_after(self.connect_timeout_s):
                stream = await open_stream(host, port, self.ssl_context)
        except CONNECTION_ERRORS as exc:
            cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
            raise ConnectionError(f"connect failed: {cause!r}") from exc
        if credentials is None:
            return Opened(stream, None, None)
        try:
            session = await self._authenticate(KafkaConnection(stream, client_id).request, credentials)
        except ConnectionError:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
        self.report.authenticated[(self.principals.get(key, ""), credentials.username)] += 1
        return Opened(stream, session, credentials)

    async def reauthenticate(self, request: RequestFn, credentials: SaslCredentials) -> SaslSession:
        """KIP-368: a new SaslHandshake + SaslAuthenticate exchange sent with ``request`` on a connection
        nothing else is in flight on.  Raises ConnectionError (reported)."""
        session = await self._authenticate(request, credentials, "re-authentication")
        self.report.reauthentications += 1
        return session

    async def _authenticate(self, request: RequestFn, credentials: SaslCredentials,
                            what: str = "authentication") -> SaslSession:
        try:
            with trio.fail_after(self.timeout_s):
                return await sasl_authenticate(request, self.security.sasl_mechanism or "",
                                               credentials.username, credentials.password)
        except (*CONNECTION_ERRORS, SaslAuthenticationError) as exc:
            if isinstance(exc, SaslAuthenticationError):
                self.report.authentication_failures += 1
            raise ConnectionError(f"SASL {what} as {credentials.username} failed: {exc}") from exc

    @staticmethod
    def renewal_time(session: SaslSession) -> float | None:
        """KIP-368: the Trio time at which to renew the session, between 85% and 95% of its lifetime as Kafka's
        clients do (None: it does not expire)."""
        if session.session_lifetime_ms > 0:
            return trio.current_time() + session.session_lifetime_ms / 1000 * (0.85 + 0.1 * random.random())
        return None
