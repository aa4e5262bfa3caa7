"""How to replay: :class:`ReplayOptions` (target, speed, in-flight limit, timeouts, causality, security) and
their parsing."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from ...client.security import SASL_MECHANISMS, SECURITY_PROTOCOLS, uses_sasl, uses_tls

DEFAULT_MAX_IN_FLIGHT = 5
DEFAULT_TIMEOUT_S = 30.0
DEFAULT_EXAMPLES = 5

ConnKey = tuple[int, str]  # (broker id, connection id) of the capture


def parse_speed(text: str) -> float | None:
    """``"max"`` -> None, ``"2x"``/``"0.5x"``/``"2"`` -> the factor."""
    t = text.strip().lower()
    if t == "max":
        return None
    value = float(t.removesuffix("x"))
    if not value > 0 or math.isinf(value):
        raise ValueError(f"speed must be a positive factor like 1x, or max, not {text!r}")
    return value


def parse_target(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6addr]:port`` too)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def principal_name(principal: str) -> str:
    """``User:alice`` -> ``alice`` (the name a principal's user logs in with; a bare name stays as it is)."""
    return principal.partition(":")[2] or principal


@dataclass(frozen=True)
class SaslCredentials:
    """A user name and password to authenticate with."""

    username: str
    password: str = field(repr=False)


@dataclass
class ReplaySecurity:
    """How replayed connections reach a secured target, as a Kafka client's ``security.protocol``,
    ``sasl.mechanism``, ``sasl.username``/``sasl.password`` and ``ssl.*`` settings say.

    On SASL protocols each replayed connection authenticates before its first request, as the
    principal the capture recorded for it (the principal of its latest request, i.e. after the
    captured client authenticated): with that principal's entry of ``credentials`` (principal, e.g.
    ``User:alice``, or bare name -> credentials), else with ``username``/``password``.  Everything
    is plain data, so the options pickle for Spark tasks; the TLS context is built where the replay runs.
    """

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    credentials: dict[str, SaslCredentials] = field(default_factory=dict, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True  # ssl.endpoint.identification.algorithm=https (Kafka's default)

    def __post_init__(self) -> None:
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                             f"not {self.security_protocol!r}")
        if self.sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(f"{self.security_protocol} needs a SASL mechanism: one of "
                                 f"{', '.join(SASL_MECHANISMS)} (got {self.sasl_mechanism!r})")
            if not self.credentials and not self.username:
                raise ValueError(f"{self.security_protocol} needs credentials: a SASL user name and password, "
                                 "or a credentials file mapping the captured principals to passwords")
            if self.username and self.password is None:
                raise ValueError(f"a password for SASL user {self.username!r} is needed")
        elif self.sasl_mechanism or self.username or self.credentials:
            raise ValueError(f"SASL settings need security protocol SASL_PLAINTEXT or SASL_SSL, "
                             f"not {self.security_protocol}")
        if not self.tls and (self.ssl_cafile or self.ssl_certfile or self.ssl_keyfile):
            raise ValueError(f"TLS settings need security protocol SSL or SASL_SSL, not {self.security_protocol}")

    @property
    def tls(self) -> bool:
        return uses_tls(self.security_protocol)

    @property
    def sasl(self) -> bool:
        return uses_sasl(self.security_protocol)

    def credentials_for(self, principal: str) -> SaslCredentials | None:
        """Who to authenticate as for a connection the capture recorded as ``principal``."""
        if self.credentials:
            found = self.credentials.get(principal) or self.credentials.get(principal_name(principal))
            if found is not None:
                return found
        if self.username:
            return SaslCredentials(self.username, self.password or "")
        return None


def load_credentials(path: str | os.PathLike) -> dict[str, SaslCredentials]:
    """A credentials file: a JSON object mapping a captured principal (``"User:alice"``, or the bare name
    ``"alice"``) to its password, or to ``{"username": ..., "password": ...}`` to log in under another
    name (e.g. a principal that an mTLS mapping rule produced)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the credentials file {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object mapping principals to passwords")
    out: dict[str, SaslCredentials] = {}
    for principal, value in data.items():
        if isinstance(value, str):
            out[principal] = SaslCredentials(principal_name(principal), value)
        elif isinstance(value, dict) and isinstance(value.get("username"), str) \
                and isinstance(value.get("password"), str):
            out[principal] = SaslCredentials(value["username"], value["password"])
        else:
            raise ValueError(f"{path}: the entry of {principal!r} must be a password or "
                             '{"username": ..., "password": ...}')
    return out


@dataclass
class ReplayOptions:
    """How to replay: where to, how fast, how much to wait for."""

    host: str
    port: int
    speed: float | None = 1.0  # None = as fast as order and causality allow ("max")
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    timeout_s: float = DEFAULT_TIMEOUT_S
    connect_timeout_s: float = 10.0
    causality: str = "global"  # "global" | "connection"
    max_examples: int = DEFAULT_EXAMPLES
    #: Wall-clock ns at which capture time ``first_ns`` is replayed (Spark tasks share it); None = now.
    base_time_ns: int | None = None
    #: Capture time replayed at the base time; None = the first receive time of the records replayed.
    first_ns: int | None = None
    #: TLS and SASL towards the target (default: PLAINTEXT).
    security: ReplaySecurity = field(default_factory=ReplaySecurity)
    #: The target's bootstrap servers (``--to h1:p1,h2:p2``); empty: just ``host:port``.  With two or more
    #: (or ``routing=True``) requests are routed as a client would (:mod:`.routing`).
    bootstrap: list[tuple[str, int]] = field(default_factory=list)
    #: Route to partition leaders and coordinators: None = when ``bootstrap`` names several servers.
    routing: bool | None = None
    #: Times a replayed connection reopens a connection the target closed before giving up.
    max_reconnects: int = 5
    #: Replay the capture this many times at once, each copy under its own names (:mod:`.rename`: ``--scale``).
    scale: int = 1

    def __post_init__(self) -> None:
        if not self.bootstrap:
            self.bootstrap = [(self.host, self.port)]

    @property
    def routed(self) -> bool:
        return self.routing if self.routing is not None else len(self.bootstrap) > 1

    @property
    def target(self) -> str:
        if len(self.bootstrap) > 1:
            return ",".join(f"{h}:{p}" for h, p in self.bootstrap)
        return f"{self.host}:{self.port}"
