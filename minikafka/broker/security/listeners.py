"""Listeners: named endpoints with a security protocol (Kafka's ``EndPoint``, ``ListenerName``,
``SecurityProtocol`` and the listener parts of ``KafkaConfig``).

``listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://:9094`` names each endpoint the
broker binds; ``listener.security.protocol.map`` says which security protocol a
listener name uses (names that are protocols map to themselves by default, custom
names such as ``INTERNAL`` must be mapped); ``advertised.listeners`` are the
addresses clients are told in Metadata and FindCoordinator, by the listener the
request came in on; ``inter.broker.listener.name`` (or
``security.inter.broker.protocol``) is the listener brokers use to reach each other.

Pure functions and values: nothing here binds a socket.  Validation messages are
Kafka's.  Deliberate differences: a port of 0 picks a free port per listener (Kafka
allows it too, but minikafka advertises the port it got), and an empty host is
advertised as ``localhost`` rather than the machine's canonical host name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
#: The principal of a connection that did not authenticate (PLAINTEXT, SSL without a client certificate).
ANONYMOUS = "User:ANONYMOUS"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
DEFAULT_PROTOCOL_MAP = {p: p for p in SECURITY_PROTOCOLS}

# Kafka's EndPoint.uriParseExp: NAME://host:port, the host possibly empty or a bracketed IPv6 address.
_ENDPOINT = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


class ListenerError(ValueError):
    """A listener setting that Kafka would refuse (the message is Kafka's)."""


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener: its name (upper case, as Kafka's ``ListenerName.normalised``), host, port and
    security protocol."""

    listener: str
    host: str
    port: int
    security_protocol: str

    @property
    def tls(self) -> bool:
        """Whether connections start with a TLS handshake (SSL, SASL_SSL)."""
        return self.security_protocol in (SSL, SASL_SSL)

    @property
    def sasl(self) -> bool:
        """Whether connections must authenticate with SASL first (SASL_PLAINTEXT, SASL_SSL)."""
        return self.security_protocol in (SASL_PLAINTEXT, SASL_SSL)

    def with_port(self, port: int) -> "EndPoint":
        return replace(self, port=port)

    def with_host(self, host: str) -> "EndPoint":
        return replace(self, host=host)

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.connection_string


def parse_protocol_map(value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL`` pairs, comma separated."""
    out: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        if not sep or not name.strip():
            raise ListenerError(f"Map entry '{item}' is not of the form 'key:value'")
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ListenerError(f"No enum constant org.apache.kafka.common.security.auth.SecurityProtocol.{protocol}")
        name = name.strip().upper()
        if name in out:
            raise ListenerError(f"Duplicate key '{name}'")
        out[name] = protocol
    return out


def parse_listeners(value: str, protocol_map: dict[str, str]) -> list[EndPoint]:
    """A ``listeners`` or ``advertised.listeners`` value as endpoints (Kafka's ``listenerListToEndPoints``)."""
    endpoints: list[EndPoint] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        m = _ENDPOINT.match(item)
        if m is None:
            raise ListenerError(f"Unable to parse {item} to a broker endpoint")
        name, host, port_s = m.group(1).upper(), m.group(2), m.group(3)
        port = int(port_s)
        if not 0 <= port <= 65535:
            raise ListenerError(f"Unable to parse {item} to a broker endpoint: port out of range")
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ListenerError(f"No security protocol defined for listener {name}")
        endpoints.append(EndPoint(name, host, port, protocol))
    names = [e.listener for e in endpoints]
    if len(set(names)) != len(names):
        raise ListenerError(f"Each listener must have a different name, listeners: {value}")
    ports = [e.port for e in endpoints if e.port != 0]
    if len(set(ports)) != len(ports):
        raise ListenerError(f"Each listener must have a different port, listeners: {value}")
    return endpoints


def check_advertised(advertised: list[EndPoint], listeners: list[EndPoint]) -> None:
    """Kafka's checks on ``advertised.listeners`` against ``listeners``."""
    for e in advertised:
        if e.host == "0.0.0.0":
            raise ListenerError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0. "
                                "Use a routable IP address.")
    names = {e.listener for e in listeners}
    extra = [e.listener for e in advertised if e.listener not in names]
    if extra:
        raise ListenerError("advertised.listeners listener names must be equal to or a subset of the ones defined "
                            f"in listeners. Found {','.join(extra)}. The valid options based on currently configured "
                            f"listeners are {','.join(sorted(names))}")


def inter_broker_listener(advertised: list[EndPoint], listener_name: str | None, protocol: str | None) -> EndPoint:
    """The listener brokers connect to each other through (``inter.broker.listener.name`` or
    ``security.inter.broker.protocol``, default PLAINTEXT); it must be advertised."""
    if listener_name and protocol:
        raise ListenerError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    name = (listener_name or protocol or PLAINTEXT).upper()
    for e in advertised:
        if e.listener == name:
            return e
    valid = ",".join(e.listener for e in advertised)
    raise ListenerError("inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                        f"The valid options based on currently configured listeners are {valid}")


def advertised_host(host: str) -> str:
    """The host clients are told for a listener bound to ``host`` (all interfaces: ``localhost``)."""
    return "localhost" if host in ("0.0.0.0", "::", "") else host
