"""A declarative message schema that yields one ``construct`` per version.

Models Kafka's message generator: a message is declared once, as a list of
fields each carrying the versions it exists in (``"0+"``, ``"3-7"``), the
versions it may be null in, a default and, for tagged fields, a tag.  For any
supported version, :meth:`Message.construct` builds (and caches) the
``construct`` that parses and builds exactly that version's wire format,
classic or flexible (KIP-482).

Field types are Kafka's names: ``int8 int16 uint16 int32 uint32 int64 float64
bool string bytes records uuid``, ``"[]T"`` for an array of a primitive, a
list of fields for an array of structs, and :func:`struct` for a single
nested struct (nullable too: null is ``None`` on both sides).  Field names are
Kafka's, in snake_case.

Deliberate difference from Kafka: parsed values are ``construct.Container``
dicts (attribute access), not generated classes; fields absent from a version
read back as their default.  :mod:`minikafka.protocol.bodies` types them.

Strict mode (:func:`set_strict`, or ``MINIKAFKA_STRICT_MESSAGES=1`` at import)
makes :meth:`Message.build` and :meth:`Message.build_segments` reject a key
that is no field of its struct in any version (a misspelling would otherwise
go out silently as the default).  Off, the builders are the plain ones.
"""

from __future__ import annotations

import os
import struct as _struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from construct import Construct, ConstructError

from . import types as T
from .exceptions import MalformedMessage, ProtocolError, UnknownFieldError, UnsupportedVersion

__all__ = [
    "VersionRange", "Field", "f", "struct", "Message", "UnknownFieldError", "set_strict", "strict_enabled",
    "STRICT_ENV", "UNKNOWN_TAGS",
]

UNKNOWN_TAGS = "_unknown_tags"
"""The key under which a parsed struct keeps tagged fields it did not know (built back as they were)."""
STRICT_ENV = "MINIKAFKA_STRICT_MESSAGES"


@dataclass(frozen=True)
class VersionRange:
    """An inclusive version range; ``hi`` None means open-ended ("3+")."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, spec: "str | VersionRange | None") -> "VersionRange | None":
        if spec is None or isinstance(spec, VersionRange):
            return spec
        spec = spec.strip()
        if spec == "none":
            return None
        if spec.endswith("+"):
            return cls(int(spec[:-1]), None)
        if "-" in spec:
            lo, hi = spec.split("-")
            return cls(int(lo), int(hi))
        return cls(int(spec), int(spec))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version and (self.hi is None or version <= self.hi)

    def __str__(self) -> str:
        if self.hi is None:
            return f"{self.lo}+"
        return f"{self.lo}-{self.hi}" if self.lo != self.hi else str(self.lo)


_PRIMITIVES: dict[str, Construct] = {
    "int8": T.INT8, "int16": T.INT16, "uint16": T.UINT16, "int32": T.INT32,
    "uint32": T.UINT32, "int64": T.INT64, "float64": T.FLOAT64, "bool": T.BOOL,
    "uuid": T.KUuid(),
}
_ZERO_DEFAULTS: dict[str, Any] = {
    "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0,
    "float64": 0.0, "bool": False, "string": "", "bytes": b"", "records": None,
    "uuid": T.ZERO_UUID,
}


@dataclass
class Field:
    """One field of a message or nested struct, as Kafka's JSON schemas declare it."""

    name: str
    type: "str | list[Field] | _Struct"
    versions: VersionRange | None
    nullable: VersionRange | None = None
    default: Any = None
    tag: int | None = None
    tagged: VersionRange | None = None
    has_default: bool = False
    flexible: VersionRange | None | bool = True  # False: never compact (RequestHeader.ClientId)
    #: What the field names (Kafka's ``entityType``, plus the project's own kinds): see ``protocol.entities``.
    entity: str | None = None

    @property
    def is_array_of_structs(self) -> bool:
        return isinstance(self.type, list)

    @property
    def is_struct(self) -> bool:
        return isinstance(self.type, _Struct)

    @property
    def subfields(self) -> "list[Field]":
        if isinstance(self.type, list):
            return self.type
        if isinstance(self.type, _Struct):
            return self.type.fields
        return []

    def present(self, version: int) -> bool:
        return self.versions is not None and version in self.versions

    def is_tagged(self, version: int) -> bool:
        return self.tag is not None and self.tagged is not None and version in self.tagged

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and version in self.nullable

    def default_factory(self) -> Any:
        """The value a reader sees when the field is absent (Kafka's default rules)."""
        if self.has_default:
            return self.default
        t = self.type
        if isinstance(t, list) or (isinstance(t, str) and t.startswith("[]")):
            return list  # a fresh empty list each time
        if isinstance(t, _Struct):
            return lambda: _struct_default(t.fields)
        return _ZERO_DEFAULTS[t]


@dataclass
class _Struct:
    fields: list[Field]


def _struct_default(fields: list[Field]) -> dict:
    out = {}
    for fl in fields:
        d = fl.default_factory()
        out[fl.name] = d() if callable(d) else d
    return out


def struct_default(fields: list[Field]) -> dict:
    """A struct of ``fields`` with every field at the value a reader sees when it is absent."""
    return _struct_default(fields)


def struct(*fields: Field) -> _Struct:
    """A single nested struct (not an array), e.g. FetchRequest's ReplicaState."""
    return _Struct(list(fields))


_NODEFAULT = object()


def f(
    name: str,
    type: "str | list[Field] | tuple[Field, ...] | _Struct",
    versions: str | None = "0+",
    *,
    nullable: str | None = None,
    default: Any = _NODEFAULT,
    tag: int | None = None,
    tagged: str | None = None,
    flexible: str | None = None,
    entity: str | None = None,
) -> Field:
    """Declare a field.  ``tag`` makes it a tagged field (from ``tagged`` or ``versions``); ``entity`` says what
    it names (an :class:`~minikafka.protocol.entities.Entity` value: ``topicName``, ``groupId``, ...)."""
    if isinstance(type, (list, tuple)):
        type = list(type)
    fl = Field(
        name=name,
        type=type,
        versions=VersionRange.parse(versions),
        nullable=VersionRange.parse(nullable),
        default=None if default is _NODEFAULT else default,
        tag=tag,
        tagged=VersionRange.parse(tagged or (versions if tag is not None else None)),
        has_default=default is not _NODEFAULT,
        flexible=False if flexible == "none" else True,
        entity=entity,
    )
    return fl


def _type_construct(fl: Field, version: int, flexible: bool) -> Construct:
    t = fl.type
    flexible = flexible and fl.flexible is not False
    nullable = fl.is_nullable(version)
    if isinstance(t, list):
        return T.KArray(_struct_construct(t, version, flexible), flexible, nullable)
    if isinstance(t, _Struct):
        body = _struct_construct(t.fields, version, flexible)
        return T.KNullableStruct(body) if nullable else body
    if t.startswith("[]"):
        inner = Field(fl.name, t[2:], fl.versions)
        return T.KArray(_type_construct(inner, version, flexible), flexible, nullable)
    if t == "string":
        return T.KString(flexible, nullable)
    if t in ("bytes", "records"):
        return T.KBytes(flexible, nullable or t == "records", records=t == "records")
    return _PRIMITIVES[t]


def _struct_construct(fields: list[Field], version: int, flexible: bool) -> T.KStruct:
    regular = []
    tagged = {}
    absent = []
    for fl in fields:
        if not fl.present(version):
            absent.append((fl.name, fl.default_factory()))
            continue
        sub = _type_construct(fl, version, flexible)
        if flexible and fl.is_tagged(version):
            tagged[fl.tag] = (fl.name, sub, fl.default_factory())
        else:
            regular.append((fl.name, sub, fl.default_factory()))
    return T.KStruct(regular, dict(sorted(tagged.items())), flexible, absent)


class Message:
    """A request or response declared once for all of its versions."""

    def __init__(
        self,
        name: str,
        api_key: int,
        versions: str,
        flexible: str | None,
        fields: Sequence[Field],
    ):
        self.name = name
        self.api_key = api_key
        rng = VersionRange.parse(versions)
        assert rng is not None and rng.hi is not None
        self.min_version, self.max_version = rng.lo, rng.hi
        self.flexible_versions = VersionRange.parse(flexible) if flexible else None
        self.fields = list(fields)
        self._cache: dict[int, T.KStruct] = {}
        self._fast: dict[int, tuple[Callable, Callable]] = {}

    def __repr__(self) -> str:
        return f"<Message {self.name} v{self.min_version}-{self.max_version}>"

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def is_flexible(self, version: int) -> bool:
        return self.flexible_versions is not None and version in self.flexible_versions

    def construct(self, version: int) -> T.KStruct:
        """The construct for ``version`` (built once, then cached)."""
        c = self._cache.get(version)
        if c is None:
            if not self.supports(version):
                raise UnsupportedVersion(f"{self.name} does not support version {version}", self.api_key, version)
            c = _struct_construct(self.fields, version, self.is_flexible(version))
            self._cache[version] = c
        return c

    def _compiled(self, version: int) -> tuple[Callable, Callable]:
        fns = self._fast.get(version)
        if fns is None:
            from .fastpath import compile_builder, compile_parser

            node = self.construct(version)
            fns = self._fast[version] = (compile_parser(node), compile_builder(node))
        return fns

    def parse(self, data: bytes | bytearray | memoryview, version: int) -> Any:
        """Parse one body; ``records`` fields come back as zero-copy memoryviews of ``data``.

        Runs the compiled fast path (:mod:`minikafka.protocol.fastpath`); trailing
        bytes after the body are ignored, as Kafka's generated readers do.  Bytes that do not parse raise
        :class:`MalformedMessage`, a version this message lacks :class:`UnsupportedVersion`.
        """
        parse = self._compiled(version)[0]
        try:
            return parse(data)
        except ProtocolError:
            raise
        except _BAD_BYTES as exc:
            raise MalformedMessage(f"{self.name} v{version}: {exc}") from exc

    def build(self, obj: Any, version: int) -> bytes:
        out = T.SegmentedWriter(1 << 62)
        self._compiled(version)[1](obj, out)
        return bytes(out.buf)

    def build_segments(self, obj: Any, version: int) -> list:
        """Build into a list of buffers, passing large ``records`` chunks through uncopied."""
        out = T.SegmentedWriter()
        self._compiled(version)[1](obj, out)
        return out.getsegments()

    def parse_construct(self, data: bytes | bytearray | memoryview, version: int) -> Any:
        """Parse through the construct schema itself (the reference the fast path is tested against)."""
        node = self.construct(version)
        try:
            return node.parse_stream(T.ViewReader(data))
        except ProtocolError:
            raise
        except _BAD_BYTES as exc:
            raise MalformedMessage(f"{self.name} v{version}: {exc}") from exc

    def build_construct(self, obj: Any, version: int) -> bytes:
        return self.construct(version).build(obj)

    def parse_stream(self, stream: Any, version: int) -> Any:
        """Parse one body from a file-like ``stream`` (:class:`MalformedMessage` if it does not parse)."""
        node = self.construct(version)
        try:
            return node.parse_stream(stream)
        except ProtocolError:
            raise
        except _BAD_BYTES as exc:
            raise MalformedMessage(f"{self.name} v{version}: {exc}") from exc

    def default(self) -> dict:
        """A dict with every field at its default (any version)."""
        return _struct_default(self.fields)

    def check_keys(self, obj: Any) -> None:
        """Raise :class:`UnknownFieldError` for a key of ``obj``, at any depth, that no version declares."""
        _check_keys(self.name, self.fields, obj, self.name)

    def _strict_build(self, obj: Any, version: int) -> bytes:
        """:meth:`build` in strict mode."""
        self.check_keys(obj)
        return _PLAIN_BUILD(self, obj, version)

    def _strict_build_segments(self, obj: Any, version: int) -> list:
        """:meth:`build_segments` in strict mode."""
        self.check_keys(obj)
        return _PLAIN_BUILD_SEGMENTS(self, obj, version)


# What the parsers raise on bytes that do not parse (construct's errors, short buffers, bad UTF-8, values out of
# range): turned into MalformedMessage at the Message boundary.  No TypeError: that is a caller passing a non-buffer.
_BAD_BYTES = (ConstructError, _struct.error, IndexError, UnicodeDecodeError, ValueError, KeyError, OverflowError)


def _check_keys(message: str, fields: list[Field], obj: Any, path: str) -> None:
    if not isinstance(obj, dict):
        return  # None (all defaults) or a value the builder itself will reject
    names = {fl.name for fl in fields}
    for key in obj:
        if key not in names and key != UNKNOWN_TAGS:
            raise UnknownFieldError(message, path, key)
    for fl in fields:
        value = obj.get(fl.name) if fl.subfields else None
        if value is None:
            continue
        if fl.is_struct:
            _check_keys(message, fl.subfields, value, f"{path}.{fl.name}")
        else:
            for i, item in enumerate(value):
                _check_keys(message, fl.subfields, item, f"{path}.{fl.name}[{i}]")


_PLAIN_BUILD = Message.build
_PLAIN_BUILD_SEGMENTS = Message.build_segments
_strict = False


def set_strict(on: bool) -> None:
    """Switch strict mode: swaps the checking builders in or out, so off costs nothing per build."""
    global _strict
    _strict = on
    setattr(Message, "build", Message._strict_build if on else _PLAIN_BUILD)
    setattr(Message, "build_segments", Message._strict_build_segments if on else _PLAIN_BUILD_SEGMENTS)


def strict_enabled() -> bool:
    """Whether strict mode is on."""
    return _strict


set_strict(os.environ.get(STRICT_ENV) == "1")
