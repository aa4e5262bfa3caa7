"""TLS for listeners and inter-broker connections (Kafka's ``SslFactory`` / ``DefaultSslEngineFactory``),
and the principal of a TLS client (``SslPrincipalMapper`` and the subject DN Kafka maps).

:func:`server_context` and :func:`client_context` build an :class:`ssl.SSLContext`
from Kafka's ``ssl.*`` keys, each looked up first as
``listener.name.<listener>.ssl.*`` (:meth:`BrokerConfig.security_value`):

* key store: ``ssl.keystore.type=PEM`` with ``ssl.keystore.location`` (one file
  holding the private key and the certificate chain) or inline
  ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``; the key may be
  encrypted with ``ssl.key.password`` (as Kafka, a PEM key store takes no
  ``ssl.keystore.password``).  ``PKCS12`` key stores (``ssl.keystore.password``)
  are read with the ``cryptography`` package.
* trust store: ``ssl.truststore.type`` PEM (``ssl.truststore.location`` or inline
  ``ssl.truststore.certificates``) or PKCS12; without one, the system's CAs.
* ``ssl.client.auth=required|requested|none`` (on SASL_SSL listeners only the
  listener-prefixed key counts, as KIP-684 made it), ``ssl.enabled.protocols``
  (default TLSv1.2,TLSv1.3), ``ssl.cipher.suites`` (OpenSSL names),
  ``ssl.endpoint.identification.algorithm`` (client side; empty turns host name
  checks off).

Deliberate differences: no JKS key stores (Java's own format): a ``JKS`` store
that is in fact PKCS12 (what keytool writes since Java 9, and what Java's JKS
type reads) is read as PKCS12, a real JKS file is refused with a hint to convert
it; a store of the default type (JKS) holding PEM text is read as PEM.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import BrokerConfig, ConfigError
from .listeners import ANONYMOUS, SASL_SSL, EndPoint

log = logging.getLogger(__name__)

_PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1.2": ssl.TLSVersion.TLSv1_2,
              "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_JKS_MAGIC = b"\xfe\xed\xfe\xed"


# -- SSLContext (Kafka's DefaultSslEngineFactory) --------------------------------------------------------
class _Settings:
    """The ``ssl.*`` values of one listener."""

    def __init__(self, config: BrokerConfig, listener: str) -> None:
        self.config = config
        self.listener = listener

    def get(self, key: str) -> str | None:
        value = self.config.security_value(key, self.listener)
        return value if value is None else value.strip()

    def listener_only(self, key: str) -> str | None:
        value = self.config.extra.get(f"listener.name.{self.listener.lower()}.{key}")
        return value if value is None else value.strip()

    def error(self, key: str, value: str | None, reason: str) -> ConfigError:
        return ConfigError(key, "" if value is None else value, reason)


def server_context(config: BrokerConfig, endpoint: EndPoint) -> ssl.SSLContext:
    """The context a TLS listener accepts connections with; :class:`ConfigError` when it cannot be made."""
    s = _Settings(config, endpoint.listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _protocols(ctx, s)
    if not _load_key_store(ctx, s):
        raise s.error("ssl.keystore.location", None,
                      f"listener {endpoint.listener} uses {endpoint.security_protocol} and needs a key store "
                      "(ssl.keystore.location, or ssl.keystore.certificate.chain with ssl.keystore.key)")
    auth = s.listener_only("ssl.client.auth") if endpoint.security_protocol == SASL_SSL else s.get("ssl.client.auth")
    auth = (auth or "none").lower()
    if auth not in ("required", "requested", "none"):
        raise s.error("ssl.client.auth", auth, "String must be one of: required, requested, none")
    if auth != "none":
        ctx.verify_mode = ssl.CERT_REQUIRED if auth == "required" else ssl.CERT_OPTIONAL
        if not _load_trust_store(ctx, s):
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return ctx


def client_context(config: BrokerConfig, endpoint: EndPoint) -> ssl.SSLContext:
    """The context a broker connects to another broker's TLS listener with (its key store is sent when
    the other side asks for a certificate)."""
    s = _Settings(config, endpoint.listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _protocols(ctx, s)
    identification = s.get("ssl.endpoint.identification.algorithm")
    ctx.check_hostname = identification is None or identification.lower() == "https"
    if not _load_trust_store(ctx, s):
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    _load_key_store(ctx, s)
    return ctx


def client_auth(config: BrokerConfig, endpoint: EndPoint) -> str:
    """``ssl.client.auth`` as it applies to ``endpoint`` (none, requested or required)."""
    s = _Settings(config, endpoint.listener)
    auth = s.listener_only("ssl.client.auth") if endpoint.security_protocol == SASL_SSL else s.get("ssl.client.auth")
    return (auth or "none").lower()


def _protocols(ctx: ssl.SSLContext, s: _Settings) -> None:
    value = s.get("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    names = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in names if p not in _PROTOCOLS]
    if unknown or not names:
        raise s.error("ssl.enabled.protocols", value, f"unsupported protocol(s) {', '.join(unknown) or '(none)'}; "
                      f"known: {', '.join(_PROTOCOLS)}")
    versions = sorted(_PROTOCOLS[p] for p in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ciphers = s.get("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",") if c.strip()))
        except ssl.SSLError:
            log.warning("ssl.cipher.suites=%s names no cipher OpenSSL knows (give OpenSSL names); using the defaults",
                        ciphers)


def _store_type(s: _Settings, key: str, location: str | None) -> str:
    """The store's type: as configured (default JKS, as Kafka), JKS files that are PKCS12 or PEM read as such."""
    configured = (s.get(key) or "JKS").upper()
    if configured != "JKS" or location is None:
        return configured
    head = _read(s, key.replace(".type", ".location"), location)[:64]
    if head.startswith(_JKS_MAGIC):
        raise s.error(key, configured, "JKS stores are not supported by minikafka; convert it with keytool "
                      "-importkeystore -deststoretype PKCS12 (or use PEM)")
    return "PEM" if head.lstrip().startswith(b"-----BEGIN") else "PKCS12"


def _read(s: _Settings, key: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise s.error(key, location, f"cannot read it: {exc.strerror or exc}") from None


def _load_key_store(ctx: ssl.SSLContext, s: _Settings) -> bool:
    """Load the key store into ``ctx``; False when none is configured."""
    location = s.get("ssl.keystore.location")
    chain = s.get("ssl.keystore.certificate.chain")
    key = s.get("ssl.keystore.key")
    key_password = s.get("ssl.key.password")
    store_password = s.get("ssl.keystore.password")
    if location is None and chain is None and key is None:
        return False
    kind = _store_type(s, "ssl.keystore.type", location) if location is not None else (
        s.get("ssl.keystore.type") or "PEM").upper()
    if kind == "PEM":
        if store_password:
            raise s.error("ssl.keystore.password", "[hidden]", "SSL key store password cannot be specified with "
                          "PEM format, only key password may be specified")
        if location is not None:
            if chain is not None or key is not None:
                raise s.error("ssl.keystore.location", location, "give either ssl.keystore.location or "
                              "ssl.keystore.certificate.chain with ssl.keystore.key, not both")
            _load_cert_chain(ctx, s, "ssl.keystore.location", lambda: _read(s, "ssl.keystore.location", location),
                             key_password)
            return True
        if chain is None or key is None:
            missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
            raise s.error(missing, None, "an inline PEM key store needs both ssl.keystore.certificate.chain "
                          "and ssl.keystore.key")
        _load_cert_chain(ctx, s, "ssl.keystore.key", lambda: (key + "\n" + chain + "\n").encode(), key_password)
        return True
    if kind == "PKCS12":
        if location is None:
            raise s.error("ssl.keystore.location", None, "a PKCS12 key store is a file: set ssl.keystore.location")
        pem = _pkcs12_key_and_chain(s, _read(s, "ssl.keystore.location", location), store_password or key_password)
        _load_cert_chain(ctx, s, "ssl.keystore.location", lambda: pem, None)
        return True
    raise s.error("ssl.keystore.type", kind, "supported key store types: PEM, PKCS12")


def _load_cert_chain(ctx: ssl.SSLContext, s: _Settings, key: str, pem: Callable[[], bytes],
                     password: str | None) -> None:
    """``load_cert_chain`` from PEM bytes: Python's ssl reads files only, so through a private temporary file
    removed at once."""
    data = pem()
    tmpdir = tempfile.mkdtemp(prefix="minikafka-ssl-")
    path = os.path.join(tmpdir, "keystore.pem")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        ctx.load_cert_chain(path, password=password or None)
    except (ssl.SSLError, ValueError) as exc:
        raise s.error(key, "[hidden]" if key == "ssl.keystore.key" else s.get(key),
                      f"cannot load the key and certificate chain: {exc}") from None
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass
        os.rmdir(tmpdir)


def _load_trust_store(ctx: ssl.SSLContext, s: _Settings) -> bool:
    """Load the trusted certificates into ``ctx``; False when none are configured."""
    location = s.get("ssl.truststore.location")
    inline = s.get("ssl.truststore.certificates")
    if location is None and inline is None:
        return False
    kind = _store_type(s, "ssl.truststore.type", location) if location is not None else (
        s.get("ssl.truststore.type") or "PEM").upper()
    try:
        if kind == "PEM":
            if location is not None:
                _read(s, "ssl.truststore.location", location)
                ctx.load_verify_locations(cafile=location)
            else:
                assert inline is not None
                ctx.load_verify_locations(cadata=inline)
            return True
        if kind == "PKCS12" and location is not None:
            password = s.get("ssl.truststore.password")
            ctx.load_verify_locations(cadata=_pkcs12_certificates(s, _read(s, "ssl.truststore.location", location),
                                                                  password))
            return True
    except (ssl.SSLError, ValueError) as exc:
        raise s.error("ssl.truststore.location" if location else "ssl.truststore.certificates",
                      location or "[certificates]", f"cannot load the trusted certificates: {exc}") from None
    raise s.error("ssl.truststore.type", kind, "supported trust store types: PEM (file or inline), PKCS12 (file)")


def _pkcs12() -> Any:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError("ssl.keystore.type", "PKCS12", "PKCS12 stores need the cryptography package "
                          "(pip install cryptography)") from None
    return pkcs12


def _pkcs12_key_and_chain(s: _Settings, data: bytes, password: str | None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    try:
        key, cert, extra = _pkcs12().load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise s.error("ssl.keystore.location", s.get("ssl.keystore.location"),
                      f"cannot read the PKCS12 key store (wrong ssl.keystore.password?): {exc}") from None
    if key is None or cert is None:
        raise s.error("ssl.keystore.location", s.get("ssl.keystore.location"),
                      "the PKCS12 key store holds no private key with its certificate")
    out = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    for c in [cert, *extra]:
        out += c.public_bytes(serialization.Encoding.PEM)
    return out


def _pkcs12_certificates(s: _Settings, data: bytes, password: str | None) -> str:
    from cryptography.hazmat.primitives import serialization

    try:
        store = _pkcs12().load_pkcs12(data, password.encode() if password else None)
    except ValueError as exc:
        raise s.error("ssl.truststore.location", s.get("ssl.truststore.location"),
                      f"cannot read the PKCS12 trust store (wrong ssl.truststore.password?): {exc}") from None
    certs = ([store.cert.certificate] if store.cert is not None else []) + [c.certificate
                                                                           for c in store.additional_certs]
    if not certs:
        raise s.error("ssl.truststore.location", s.get("ssl.truststore.location"),
                      "the PKCS12 trust store holds no certificate")
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


# -- the subject DN, as Java's X500Principal.getName() (RFC 2253) writes it --------------------------------
# RFC 2253's keywords, the only ones Java writes by name; other attributes are written as OID=#hex.
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
             "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID"}
# ASN.1 string types and their encodings (UTF8String, PrintableString, T61String, IA5String,
# UniversalString, BMPString).
_STRINGS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1C: "utf-32-be", 0x1E: "utf-16-be"}
_ESCAPED = set(',=+<>#;"\\')


def _tlv(der: bytes, i: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``i``."""
    tag = der[i]
    length = der[i + 1]
    i += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(der[i:i + n], "big")
        i += n
    if i + length > len(der):
        raise ValueError("truncated DER")
    return tag, i, i + length


def _oid(content: bytes) -> str:
    first = content[0]
    parts = [str(min(first // 40, 2)), str(first - 40 * min(first // 40, 2))]
    n = 0
    for b in content[1:]:
        n = (n << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(str(n))
            n = 0
    return ".".join(parts)


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _ESCAPED else ("\\00" if c == "\x00" else c) for c in value)
    if out.startswith(" "):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_dn(cert_der: bytes) -> str:
    """A certificate's subject as Java's ``X500Principal.getName()`` gives it (RFC 2253: most specific RDN
    first, e.g. ``CN=alice,OU=Eng,O=Example,C=US``), the name Kafka's principal mapping rules see."""
    _, start, _ = _tlv(cert_der, 0)  # Certificate
    _, i, _ = _tlv(cert_der, start)  # tbsCertificate
    tag, _, end = _tlv(cert_der, i)
    if tag == 0xA0:  # [0] version
        i = end
    for _field in range(4):  # serialNumber, signature, issuer, validity
        i = _tlv(cert_der, i)[2]
    _, i, name_end = _tlv(cert_der, i)  # subject: SEQUENCE OF RDN
    rdns: list[str] = []
    while i < name_end:
        _, j, rdn_end = _tlv(cert_der, i)  # SET OF AttributeTypeAndValue
        avas: list[str] = []
        while j < rdn_end:
            _, k, ava_end = _tlv(cert_der, j)
            _, oid_start, oid_end = _tlv(cert_der, k)
            oid = _oid(cert_der[oid_start:oid_end])
            vtag, vstart, vend = _tlv(cert_der, oid_end)
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and vtag in _STRINGS:
                avas.append(f"{keyword}={_escape(cert_der[vstart:vend].decode(_STRINGS[vtag], 'replace'))}")
            else:
                avas.append(f"{keyword or oid}=#{cert_der[oid_end:vend].hex()}")
            j = ava_end
        rdns.append("+".join(avas))
        i = rdn_end
    return ",".join(reversed(rdns))


# -- SslPrincipalMapper ----------------------------------------------------------------------------------
_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule applies to a DN (Kafka's ``NoMatchingRule``)."""


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", lower: bool = False,
                 upper: bool = False) -> None:
        self.pattern = None if pattern is None else re.compile(pattern)
        self.replacement = replacement
        self.lower = lower
        self.upper = upper

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:  # DEFAULT
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        groups = self.pattern.groups
        result = self.pattern.sub(lambda m: _java_replacement(self.replacement, m, groups), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result

    def __repr__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


def _java_replacement(replacement: str, m: re.Match[str], groups: int) -> str:
    """Java's ``Matcher.appendReplacement``: ``\\x`` is x, ``$n`` a group (the longest number naming one);
    as Kafka's ``escapeLiteralBackReferences``, a ``$n`` naming no group is kept literally."""
    out: list[str] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        if c == "$" and i + 1 < len(replacement) and replacement[i + 1].isdigit():
            j = i + 2
            number = int(replacement[i + 1])
            while j < len(replacement) and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups:
                number = number * 10 + int(replacement[j])
                j += 1
            if number <= groups:
                out.append(m.group(number) or "")
            else:
                out.append(replacement[i:j])
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """Kafka's ``SslPrincipalMapper``: ``ssl.principal.mapping.rules`` (``DEFAULT`` and
    ``RULE:pattern/replacement/[LU]``, comma separated, the first rule that matches the whole DN wins)."""

    def __init__(self, rules: str | None = None) -> None:
        self.rules = self.parse(rules if rules is not None else "DEFAULT")

    @staticmethod
    def parse(value: str) -> list[_Rule]:
        rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(value.strip()):
            rule = m.group(1)
            p = _RULE_PARSER.match(rule)
            if p is None:
                raise ValueError(f"Invalid rule: {rule}")
            if p.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[p.end():]}`")
            if p.group(1) is not None:
                rules.append(_Rule())
            elif p.group(2) is not None:
                rules.append(_Rule(p.group(2), p.group(4), p.group(6) == "L", p.group(6) == "U"))
            if m.end() == len(value.strip()):
                break
        return rules

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.rules}")


def principal_mapper(config: BrokerConfig, listener: str) -> SslPrincipalMapper:
    value = config.security_value("ssl.principal.mapping.rules", listener)
    try:
        return SslPrincipalMapper(value)
    except (ValueError, re.error) as exc:
        raise ConfigError("ssl.principal.mapping.rules", value or "", str(exc)) from None


def ssl_principal(cert_der: bytes | None, mapper: SslPrincipalMapper) -> str:
    """The principal of a TLS client (Kafka's ``DefaultKafkaPrincipalBuilder`` on an SSL listener):
    ``User:<mapped subject DN>``, or ``User:ANONYMOUS`` without a client certificate.
    Raises :class:`NoMatchingRule` or ValueError (a certificate that does not parse)."""
    if not cert_der:
        return ANONYMOUS
    return "User:" + mapper.name(subject_dn(cert_der))
