"""Requests one broker sends another (Kafka's ``NodeToNodeChannelManager`` / ``InterBrokerSendThread``).

One connection per target broker, opened on first use, one request at a time
on it (a lock per target), reopened after any error.  Used by the transaction
marker channel (WriteTxnMarkers) and by the produce path's KIP-890
verification (AddPartitionsToTxn with ``verify_only``).

Connections go to the other broker's inter-broker listener (``inter.broker.listener.name``
or ``security.inter.broker.protocol``) and speak its security protocol
(:class:`InterBrokerConnector`, shared with the replica fetchers): TLS with the
listener's ``ssl.*`` settings (trust store, key store for mutual TLS, host name
check per ``ssl.endpoint.identification.algorithm``), and on SASL listeners a
SaslHandshake v1 + SaslAuthenticate exchange with
``sasl.mechanism.inter.broker.protocol`` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; Kafka's
default, GSSAPI, is not implemented) and the ``username``/``password`` options of
the mechanism's JAAS configuration, as a Kafka broker logs in to its peers.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from typing import Any

import trio

from ..client.connection import KafkaConnection
from ..common import Node
from .config import BrokerConfig, ConfigError
from .network_links import NetworkLinks, NodeName
from .security.listeners import EndPoint

log = logging.getLogger(__name__)

#: What a failed inter-broker request raises: the target is down, went away, or is too slow.
CHANNEL_ERRORS = (OSError, ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError,
                  LookupError)


class InterBrokerConnector:
    """Opens connections to other brokers through the inter-broker listener's security protocol."""

    def __init__(self, config: BrokerConfig, links: NetworkLinks | None = None,
                 source: Callable[[], NodeName] | None = None) -> None:
        """``links`` and ``source``: each connection is tagged as coming from the node ``source()`` names, so that
        the other broker knows it from a client (:class:`~.network_links.NetworkLinks`)."""
        self.links = links
        self.source = source
        self.local_address = config.source_address or None  # minikafka.source.address
        self.endpoint: EndPoint = config.inter_broker_endpoint()
        self.ssl_context: ssl.SSLContext | None = None
        if self.endpoint.tls:  # (TLS and SASL modules are loaded only by the listeners that use them)
            from .security.ssl import client_context

            self.ssl_context = client_context(config, self.endpoint)
        self.mechanism = ""
        self.username = self.password = ""
        if self.endpoint.sasl:
            self._sasl_credentials(config)

    def _sasl_credentials(self, config: BrokerConfig) -> None:
        from ..client.security import SASL_MECHANISMS
        from .security.jaas import JaasConfigError, server_jaas_entries

        key = "sasl.mechanism.inter.broker.protocol"
        mechanism = (config.extra.get(key) or "").strip()
        if not mechanism:
            raise ConfigError(key, "", f"the inter-broker listener {self.endpoint.listener} uses SASL: set "
                              f"{key} to one of {', '.join(SASL_MECHANISMS)} (Kafka's default GSSAPI is "
                              "not implemented)")
        if mechanism not in SASL_MECHANISMS:
            raise ConfigError(key, mechanism, f"minikafka brokers log in to each other with "
                              f"{', '.join(SASL_MECHANISMS)}")
        try:
            entries = server_jaas_entries(config.extra, self.endpoint.listener, mechanism)
        except JaasConfigError as exc:
            raise ConfigError(f"listener.name.{self.endpoint.listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                              "[hidden]", str(exc)) from None
        options: dict[str, str] = {}
        for entry in entries:
            options.update(entry.options)
        if not options.get("username") or "password" not in options:
            raise ConfigError(f"listener.name.{self.endpoint.listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
                              "[hidden]", "the inter-broker login needs username and password options")
        self.mechanism, self.username, self.password = mechanism, options["username"], options["password"]

    async def connect(self, host: str, port: int, client_id: str) -> KafkaConnection:
        """A connection to ``host:port`` that has done the TLS handshake and SASL authentication if due."""
        tcp = await trio.open_tcp_stream(host, port, local_address=self.local_address)
        if self.links is not None and self.source is not None:
            self.links.tag(tcp.socket, self.source())
        stream: trio.abc.Stream = tcp
        try:
            if self.ssl_context is not None:
                tls = trio.SSLStream(tcp, self.ssl_context, server_hostname=host, https_compatible=True)
                stream = tls
                await tls.do_handshake()
            conn = KafkaConnection(stream, client_id=client_id)
            if self.mechanism:
                await self._authenticate(conn)
            return conn
        except BaseException:
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            raise

    async def _authenticate(self, conn: KafkaConnection) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 requests until the exchange completes
        (:func:`minikafka.client.security.sasl_authenticate`, shared with wire replay)."""
        from ..client.security import sasl_authenticate

        await sasl_authenticate(conn.request, self.mechanism, self.username, self.password)


class PlainConnector:
    """Plain TCP connections (to a controller's PLAINTEXT listener), from ``local_address`` when set."""

    def __init__(self, local_address: str | None = None) -> None:
        self.local_address = local_address

    async def connect(self, host: str, port: int, client_id: str) -> KafkaConnection:
        stream = await trio.open_tcp_stream(host, port, local_address=self.local_address)
        return KafkaConnection(stream, client_id=client_id)


class InterBrokerChannel:
    """Connections from one sender to the brokers of the cluster, found by node id."""

    def __init__(self, client_id: str, endpoint: Callable[[int], Node | None], timeout_s: float = 30.0,
                 connector: InterBrokerConnector | PlainConnector | None = None) -> None:
        """``endpoint``: a broker's inter-broker address by id; ``connector``: how to connect (default plain TCP)."""
        self.client_id = client_id
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.connect = (connector or PlainConnector()).connect
        self._conns: dict[int, KafkaConnection] = {}
        self._locks: dict[int, trio.Lock] = {}

    async def request(self, node_id: int, api_key: int, version: int, body: dict) -> Any:
        """Send one request to ``node_id`` and return its parsed response; raises one of
        :data:`CHANNEL_ERRORS` (the connection is closed) when it cannot."""
        lock = self._locks.setdefault(node_id, trio.Lock())
        async with lock:
            try:
                with trio.fail_after(self.timeout_s):
                    conn = self._conns.get(node_id)
                    if conn is None:
                        node = self.endpoint(node_id)
                        if node is None or node.port < 0:
                            raise LookupError(f"broker {node_id} is not live")
                        conn = self._conns[node_id] = await self.connect(node.host, node.port, self.client_id)
                    return await conn.request(api_key, version, body)
            except BaseException:
                await self._close(node_id)
                raise

    async def _close(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            with trio.CancelScope(shield=True):
                try:
                    await conn.aclose()
                except CHANNEL_ERRORS:
                    pass

    async def aclose(self) -> None:
        for node_id in list(self._conns):
            await self._close(node_id)
