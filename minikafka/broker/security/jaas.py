"""JAAS configuration values: ``sasl.jaas.config`` and its listener/mechanism-prefixed forms.

Models Kafka's ``org.apache.kafka.common.security.JaasConfig`` (the parser of a ``sasl.jaas.config``
value) and the part of ``JaasContext.loadServerContext`` that picks which value applies to a
listener and mechanism.  A value is one or more login module entries::

    <loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*;

tokenized as Java's ``StreamTokenizer`` is set up there: bytes up to the space are whitespace (so a
value may span lines), ``"`` and ``'`` quote (with Java's backslash escapes), ``;`` and ``=`` are
tokens of their own, ``/`` starts a comment (``//`` and ``/* */`` too), everything else makes words.

Where a broker looks (:func:`server_jaas_entries`), first match wins:

1. ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (Kafka's documented broker form),
2. ``<mechanism>.sasl.jaas.config``,
3. ``listener.name.<listener>.sasl.jaas.config``,
4. ``sasl.jaas.config``.

Deliberate difference: Kafka ignores 3 and 4 on a broker (it warns and falls back to the static JAAS
file's ``KafkaServer`` section); minikafka reads them, keeping only the entries of the mechanism's own
login module, and it has no static JAAS file (``java.security.auth.login.config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["JaasConfigError", "JaasEntry", "parse_jaas_config", "server_jaas_entries", "LOGIN_MODULES",
           "PLAIN_LOGIN_MODULE", "SCRAM_LOGIN_MODULE", "OAUTHBEARER_LOGIN_MODULE"]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
LOGIN_MODULES: dict[str, str] = {
    "PLAIN": PLAIN_LOGIN_MODULE,
    "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
    "SCRAM-SHA-512": SCRAM_LOGIN_MODULE,
    "OAUTHBEARER": OAUTHBEARER_LOGIN_MODULE,
}
"""The login module class Kafka pairs with each SASL mechanism."""

_CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class JaasConfigError(ValueError):
    """A ``sasl.jaas.config`` value that does not parse (Kafka's ``IllegalArgumentException`` texts)."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry (Java's ``AppConfigurationEntry``)."""

    login_module: str
    control_flag: str  # lower case: required, requisite, sufficient, optional
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # options hold passwords: never print their values
        return f"JaasEntry({self.login_module!r}, {self.control_flag!r}, options={sorted(self.options)})"


# Token kinds: a word or quoted string (its text), or one of the single-character tokens ";" and "=".
_WORD, _QUOTED, _SEMI, _EQUALS = "word", "quoted", ";", "="


def _tokens(text: str) -> list[tuple[str, str]]:
    """Java ``StreamTokenizer`` as ``JaasConfig`` configures it."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # "//" or a lone "/" (commentChar): to the end of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in ";=":
            out.append((c, c))
            i += 1
        elif c in "\"'":
            i, value = _quoted(text, i + 1, c)
            out.append((_QUOTED, value))
        else:
            start = i
            while i < n and text[i] > " " and text[i] not in ";=\"'/":
                i += 1
            out.append((_WORD, text[start:i]))
    return out


def _quoted(text: str, i: int, quote: str) -> tuple[int, str]:
    """A quoted string from ``i`` (after the quote): ends at the quote, a line end or the end of input."""
    buf: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return i + 1, "".join(buf)
        if c in "\r\n":
            return i, "".join(buf)
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":  # up to three octal digits, as Java's tokenizer reads them
                j = i + 1
                while j < n and j < i + 4 and text[j] in "01234567":
                    j += 1
                buf.append(chr(int(text[i + 1:j], 8) & 0xFF))
                i = j
                continue
            buf.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        buf.append(c)
        i += 1
    return i, "".join(buf)


def parse_jaas_config(value: str) -> list[JaasEntry]:
    """Parse a ``sasl.jaas.config`` value into its login module entries (:class:`JaasConfigError` if bad)."""
    tokens = _tokens(value)
    entries: list[JaasEntry] = []
    pos = 0
    while pos < len(tokens):
        kind, module = tokens[pos]
        pos += 1
        if kind in (_SEMI, _EQUALS):
            raise JaasConfigError(f"Unexpected '{module}' where a login module class was expected in JAAS config")
        if pos >= len(tokens):
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        kind, flag = tokens[pos]
        pos += 1
        if flag.lower() not in _CONTROL_FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        terminated = False
        while pos < len(tokens):
            kind, key = tokens[pos]
            pos += 1
            if kind == _SEMI:
                terminated = True
                break
            if (pos + 1 >= len(tokens) or tokens[pos][0] != _EQUALS
                    or tokens[pos + 1][0] in (_SEMI, _EQUALS)):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[pos + 1][1]
            pos += 2
        if not terminated:
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def server_jaas_entries(settings: Mapping[str, str], listener: str, mechanism: str) -> list[JaasEntry]:
    """The login module entries a broker uses for ``mechanism`` on ``listener`` (see the module docstring).

    ``settings`` holds the broker's ``server.properties`` keys (``BrokerConfig.extra``).  From the generic
    keys (3 and 4) only the entries of the mechanism's login module are kept.  Raises
    :class:`JaasConfigError` when the value that applies does not parse.
    """
    lname = listener.lower()
    mech = mechanism.lower()
    for key in (f"listener.name.{lname}.{mech}.sasl.jaas.config", f"{mech}.sasl.jaas.config"):
        value = settings.get(key)
        if value is not None:
            try:
                return parse_jaas_config(value)
            except JaasConfigError as exc:
                raise JaasConfigError(f"{key}: {exc}") from None
    module = LOGIN_MODULES.get(mechanism.upper())
    for key in (f"listener.name.{lname}.sasl.jaas.config", "sasl.jaas.config"):
        value = settings.get(key)
        if value is not None:
            try:
                entries = parse_jaas_config(value)
            except JaasConfigError as exc:
                raise JaasConfigError(f"{key}: {exc}") from None
            mine = [e for e in entries if e.login_module == module]
            if mine:
                return mine
    return []
