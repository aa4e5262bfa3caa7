"""A client's security settings as Kafka client properties say them, and connecting with them.

Kafka's tools take a ``--command-config`` properties file for the admin client they run; its security part
is what this module reads (Java's ``AdminClientConfig`` security settings, with librdkafka's spellings too):

* ``security.protocol``: PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL;
* ``sasl.mechanism`` (default GSSAPI in Kafka, which minikafka has not: PLAIN here) and the credentials,
  from ``sasl.jaas.config`` (``... PlainLoginModule required username="alice" password="secret";``, the
  same for ``ScramLoginModule``, whose ``tokenauth="true"`` logs in with a delegation token: user name the
  token id, password its HMAC, KIP-48) or librdkafka's ``sasl.username`` / ``sasl.password``;
* TLS: ``ssl.truststore.location`` / ``ssl.ca.location`` (a PEM CA file; Kafka also reads JKS/PKCS12,
  which minikafka does not), ``ssl.keystore.location`` / ``ssl.certificate.location`` with
  ``ssl.key.location`` and ``ssl.key.password`` for mutual TLS, ``ssl.endpoint.identification.algorithm``
  (empty: the broker's host name is not checked).

:meth:`ClientSecurity.connect` opens a :class:`~minikafka.client.connection.KafkaConnection` that has done
the TLS handshake and SASL authentication (:func:`~minikafka.client.security.sasl_authenticate`).
Other properties are the caller's business (``from_properties`` ignores them).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

import trio

from .connection import KafkaConnection
from .security import (SASL_MECHANISMS, SECURITY_PROTOCOLS, client_ssl_context, open_stream, sasl_authenticate,
                       uses_sasl, uses_tls)

# One ``name=value`` option of a JAAS login module entry (value quoted with " or ', or a bare word).
_JAAS_OPTION = re.compile(r"""([A-Za-z_][\w.\-]*)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;"']+)""")


def jaas_options(value: str) -> dict[str, str]:
    """The options of a ``sasl.jaas.config`` value (``LoginModule required k="v" ...;``), unquoted."""
    out: dict[str, str] = {}
    for name, raw in _JAAS_OPTION.findall(value):
        if raw[:1] in ("'", '"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        out[name] = raw
    return out


@dataclass(frozen=True)
class ClientSecurity:
    """How a client reaches a broker's listener: protocol, SASL mechanism and credentials, TLS files."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    token_auth: bool = False  # SCRAM with a delegation token (the ScramLoginModule option tokenauth="true")

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security.protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                             f"not {self.security_protocol!r}")
        if uses_sasl(self.security_protocol):
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(f"sasl.mechanism {self.sasl_mechanism!r} is not supported "
                                 f"(supported: {', '.join(SASL_MECHANISMS)})")
            if self.username is None or self.password is None:
                raise ValueError(f"{self.security_protocol} needs a user name and password (sasl.jaas.config with "
                                 "username=\"...\" password=\"...\", or sasl.username and sasl.password)")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "ClientSecurity":
        """The security part of Kafka client properties (ValueError when it is inconsistent)."""
        protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
        jaas = jaas_options(props.get("sasl.jaas.config", ""))
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
        return cls(
            security_protocol=protocol,
            sasl_mechanism=props.get("sasl.mechanism", props.get("sasl.mechanisms", "PLAIN")).strip().upper(),
            username=jaas.get("username", props.get("sasl.username")),
            password=jaas.get("password", props.get("sasl.password")),
            ssl_cafile=props.get("ssl.truststore.location") or props.get("ssl.ca.location") or None,
            ssl_certfile=props.get("ssl.keystore.location") or props.get("ssl.certificate.location") or None,
            ssl_keyfile=props.get("ssl.key.location") or None,
            ssl_key_password=props.get("ssl.key.password") or None,
            ssl_check_hostname=algorithm not in ("", "none"),
            token_auth=jaas.get("tokenauth", "false").strip().lower() == "true")

    @property
    def is_plaintext(self) -> bool:
        return self.security_protocol == "PLAINTEXT"

    def ssl_context(self) -> ssl.SSLContext | None:
        if not uses_tls(self.security_protocol):
            return None
        return client_ssl_context(self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile, self.ssl_key_password,
                                  check_hostname=self.ssl_check_hostname)

    async def connect(self, host: str, port: int, client_id: str | None) -> KafkaConnection:
        """A connection to ``host:port`` that has done the TLS handshake and the SASL exchange if due
        (:class:`~minikafka.client.security.SaslAuthenticationError` when the broker refuses the login)."""
        stream = await open_stream(host, port, self.ssl_context())
        conn = KafkaConnection(stream, client_id)
        try:
            if uses_sasl(self.security_protocol):
                assert self.username is not None and self.password is not None
                await sasl_authenticate(conn.request, self.sasl_mechanism, self.username, self.password,
                                        token_auth=self.token_auth)
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise
        return conn


__all__ = ["ClientSecurity", "jaas_options"]
