"""Compiled parsers and builders for message versions: the hot path next to the construct schemas.

The schemas in :mod:`minikafka.protocol.schema` are ``construct`` objects, the
declarative reference.  Walking them field by field through construct's
machinery costs a few microseconds per field, which shows on large requests
(a 1000-partition Fetch).  Like construct's own ``compile()``, this module
turns each :class:`~minikafka.protocol.types.KStruct` into straight-line
Python source (``struct.unpack_from`` on a memoryview, inline varints, no
per-field dispatch), ``exec``s it once, and caches the functions.  The tests
check that for every API and version the compiled code reads and writes
exactly what the construct schema does.

Parsed values are the same ``construct`` Containers; ``records`` fields are
zero-copy memoryviews; a ``records`` value built from a list of chunks is
handed to a :class:`~minikafka.protocol.types.SegmentedWriter` uncopied.
"""

from __future__ import annotations

import itertools
import struct
import uuid
from typing import Any, Callable

from construct import Container, Flag, FormatField, ListContainer

from . import types as T
from .exceptions import FastPathError, ProtocolError

ParseFn = Callable[[memoryview, int], tuple[Any, int]]
ParseFn3 = Callable[[memoryview, int, int], tuple[Any, int]]
BuildFn = Callable[[Any, T.SegmentedWriter], None]

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_MISSING = object()


def _check(pos: int, n: int, end: int) -> None:
    if n < 0 or pos + n > end:
        raise FastPathError(f"need {n} bytes at {pos}, buffer ends at {end}")


def _null_error(name: str) -> None:
    raise FastPathError(f"null value in non-nullable field {name}")


class ParsedUuid(uuid.UUID):
    """A ``uuid.UUID`` read off the wire that remembers its hash: topic ids key the fetch session and
    partition dicts, hashed several times per request (``UUID.__hash__`` recomputes ``hash(self.int)``).
    Equal to, hashed as, shown as and pickled as the plain ``UUID`` of the same value."""

    __slots__ = ("_hash",)
    _hash: int

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"UUID('{self}')"

    def __reduce__(self) -> tuple[Any, ...]:
        return uuid.UUID, (None, None, None, None, self.int)


def _uuid(data: memoryview) -> uuid.UUID:
    """``uuid.UUID(bytes=data)`` (16 bytes), without the constructor's argument checks: a third of its cost
    (the all-zero id, a null topic id, is the shared ``ZERO_UUID``)."""
    if data == _ZERO_BYTES:
        return T.ZERO_UUID
    u = _new_object(ParsedUuid)
    value = int.from_bytes(data, "big")
    _set_attr(u, "int", value)
    _set_attr(u, "is_safe", uuid.SafeUUID.unknown)
    _set_attr(u, "_hash", hash(value))
    return u


_new_object = object.__new__
_ZERO_BYTES = bytes(16)
_set_attr = object.__setattr__


def _too_many(n: int, left: int, name: str) -> None:
    raise FastPathError(f"Tried to allocate a collection of size {n} for {name}, but there are only {left} "
                        "bytes remaining.")


class _Compiler:
    """Generates one parse and one build function per KStruct (shared between versions by identity)."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {
            "Container": Container, "ListContainer": ListContainer, "UUID": uuid.UUID, "_uuid": _uuid,
            "_uv": T.uvarint_at, "_uvb": T.write_uvarint, "_check": _check, "_null": _null_error,
            "_too_many": _too_many,
            "_H": _H, "_I": _I, "MISSING": _MISSING, "ZERO_UUID": T.ZERO_UUID, "FastPathError": FastPathError,
        }
        self.parsers: dict[int, str] = {}
        self.builders: dict[int, str] = {}
        self._ids = itertools.count()

    def _const(self, value: Any, prefix: str = "c") -> str:
        name = f"_{prefix}{next(self._ids)}"
        self.ns[name] = value
        return name

    def _struct_fmt(self, node: FormatField) -> str:
        return self._const(struct.Struct(node.fmtstr), "S")

    # -- parsing ----------------------------------------------------------------
    def parser(self, node: T.KStruct) -> str:
        key = id(node)
        if key in self.parsers:
            return self.parsers[key]
        fname = f"_p{next(self._ids)}"
        self.parsers[key] = fname
        lines = [f"def {fname}(buf, pos, end):", "    o = Container()"]
        for name, default in node.absent:
            lines.append(f"    o[{name!r}] = {self._default_expr(default)}")
        for run in _runs(node.fields):
            if len(run) > 1:  # consecutive fixed-width fields: one unpack
                s = self._const(struct.Struct(">" + "".join(sub.fmtstr[1:] for _, sub, _ in run)), "S")
                names = [f"f{i}" for i in range(len(run))]
                lines.append(f"    {', '.join(names)} = {s}.unpack_from(buf, pos)")
                lines.append(f"    pos += {sum(sub.length for _, sub, _ in run)}")
                lines += [f"    o[{name!r}] = {local}" for (name, _, _), local in zip(run, names)]
                continue
            name, sub, _default = run[0]
            lines += self._read(sub, "v", "    ", name)
            lines.append(f"    o[{name!r}] = v")
        if node.flexible:
            tags = {}
            for tag, (name, sub, default) in node.tagged.items():
                lines.append(f"    o[{name!r}] = {self._default_expr(default)}")
                tags[tag] = (name, self._value_parser(sub, name))
            tag_table = self._const(tags, "tags")
            lines += [
                "    if buf[pos] == 0:",  # no tagged fields: the usual case
                "        pos += 1",
                "    else:",
                "        count, pos = _uv(buf, pos)",
                "        unknown = None",
                "        for _ in range(count):",
                "            tag, pos = _uv(buf, pos)",
                "            size, pos = _uv(buf, pos)",
                "            _check(pos, size, end)",
                f"            known = {tag_table}.get(tag)",
                "            if known is None:",
                "                if unknown is None:",
                "                    unknown = {}",
                "                unknown[tag] = bytes(buf[pos:pos + size])",
                "            else:",
                "                o[known[0]] = known[1](buf[pos:pos + size])",
                "            pos += size",
                "        if unknown:",
                "            o['_unknown_tags'] = unknown",
            ]
        lines.append("    return o, pos")
        exec("\n".join(lines), self.ns)  # noqa: S102 - generated from our own schemas
        return fname

    def _value_parser(self, sub: Any, name: str) -> Callable[[memoryview], Any]:
        """A function parsing one whole value of ``sub`` (a tagged field's payload)."""
        fname = f"_tv{next(self._ids)}"
        lines = [f"def {fname}(buf):", "    pos = 0", "    end = len(buf)"]
        lines += self._read(sub, "v", "    ", name)
        lines.append("    return v")
        exec("\n".join(lines), self.ns)  # noqa: S102
        return self.ns[fname]

    def _default_expr(self, default: Any) -> str:
        d = self._const(default, "d")
        return f"{d}()" if callable(default) else d

    def _read(self, node: Any, target: str, ind: str, name: str) -> list[str]:
        """Lines that read one value of ``node`` at ``pos`` into ``target`` and advance ``pos``."""
        if isinstance(node, T.KStruct):
            return [f"{ind}{target}, pos = {self.parser(node)}(buf, pos, end)"]
        if isinstance(node, T.KNullableStruct):  # int8 marker: negative for null
            return [f"{ind}if pos >= end:", f"{ind}    _check(pos, 1, end)", f"{ind}pos += 1",
                    f"{ind}if buf[pos - 1] >= 0x80:",
                    f"{ind}    {target} = None", f"{ind}else:",
                    f"{ind}    {target}, pos = {self.parser(node.subcon)}(buf, pos, end)"]
        if isinstance(node, FormatField):
            s = self._struct_fmt(node)
            return [f"{ind}{target} = {s}.unpack_from(buf, pos)[0]", f"{ind}pos += {node.length}"]
        if node is Flag or type(node).__name__ == "Flag":
            return [f"{ind}{target} = buf[pos] != 0", f"{ind}pos += 1"]
        if isinstance(node, T.KUuid):
            return [f"{ind}if pos + 16 > end:", f"{ind}    _check(pos, 16, end)",
                    f"{ind}{target} = _uuid(buf[pos:pos + 16])", f"{ind}pos += 16"]
        if isinstance(node, (T.KString, T.KBytes, T.KArray)):
            width = 2 if isinstance(node, T.KString) else 4
            if node.compact:  # a one-byte varint inline (the usual case)
                lines = [f"{ind}n = buf[pos] - 1", f"{ind}if n < 127:", f"{ind}    pos += 1", f"{ind}else:",
                         f"{ind}    n, pos = _uv(buf, pos)", f"{ind}    n -= 1"]
            else:
                s = "_H" if width == 2 else "_I"
                lines = [f"{ind}n = {s}.unpack_from(buf, pos)[0]", f"{ind}pos += {width}"]
            lines.append(f"{ind}if n < 0:")
            lines.append(f"{ind}    {target} = None" if node.nullable else f"{ind}    _null({name!r})")
            lines.append(f"{ind}else:")
            inner = ind + "    "
            if isinstance(node, T.KString):
                lines += [f"{inner}if pos + n > end:", f"{inner}    _check(pos, n, end)",
                          f"{inner}{target} = str(buf[pos:pos + n], 'utf-8')", f"{inner}pos += n"]
            elif isinstance(node, T.KBytes):
                value = "buf[pos:pos + n]" if node.records else "bytes(buf[pos:pos + n])"
                lines += [f"{inner}if pos + n > end:", f"{inner}    _check(pos, n, end)", f"{inner}{target} = {value}",
                          f"{inner}pos += n"]
            else:
                # Kafka's generated readers: an array longer than the bytes left is refused before
                # anything is allocated for it (every element takes at least one byte).
                item = f"i{next(self._ids)}"
                lines += [f"{inner}if n > end - pos:", f"{inner}    _too_many(n, end - pos, {name!r})",
                          f"{inner}{target} = ListContainer()", f"{inner}for _ in range(n):"]
                lines += self._read(node.subcon, item, inner + "    ", name)
                lines.append(f"{inner}    {target}.append({item})")
            return lines
        raise TypeError(f"no fast path for {node!r}")

    # -- building ---------------------------------------------------------------
    def builder(self, node: T.KStruct) -> str:
        key = id(node)
        if key in self.builders:
            return self.builders[key]
        fname = f"_b{next(self._ids)}"
        self.builders[key] = fname
        lines = [f"def {fname}(obj, w):", "    if obj is None:", "        obj = {}", "    get = obj.get",
                 "    out = w.buf"]
        for run in _runs(node.fields):
            if len(run) > 1:  # consecutive fixed-width fields: one pack
                s = self._const(struct.Struct(">" + "".join(sub.fmtstr[1:] for _, sub, _ in run)), "S")
                args = ", ".join(f"get({name!r}, {self._const(default, 'd')})" for name, _, default in run)
                lines.append(f"    out += {s}.pack({args})")
                continue
            name, sub, default = run[0]
            d = self._const(default, "d")
            if callable(default):
                lines.append(f"    v = get({name!r}, MISSING)")
                lines.append("    if v is MISSING:")
                lines.append(f"        v = {d}()")
            else:
                lines.append(f"    v = get({name!r}, {d})")
            lines += self._write(sub, "v", "    ", name)
        if node.flexible:
            lines.append("    entries = []")
            for tag, (name, sub, default) in node.tagged.items():
                d = self._const(default, "d")
                vb = self._const(self._value_builder(sub, name), "vb")
                lines += [
                    f"    v = get({name!r}, MISSING)",
                    f"    if v is not MISSING and v != ({d}() if callable({d}) else {d}):",
                    f"        entries.append(({tag}, {vb}(v)))",
                ]
            lines += [
                "    unknown = get('_unknown_tags')",
                "    if unknown:",
                "        entries.extend(unknown.items())",
                "        entries.sort(key=lambda e: e[0])",
                "    out = w.buf",
                "    if not entries:",  # no tagged fields: the usual case
                "        out.append(0)",
                "    else:",
                "        out += _uvb(len(entries))",
                "        for tag, raw in entries:",
                "            out += _uvb(tag)",
                "            out += _uvb(len(raw))",
                "            out += raw",
            ]
        exec("\n".join(lines), self.ns)  # noqa: S102
        return fname

    def _value_builder(self, sub: Any, name: str) -> Callable[[Any], bytes]:
        fname = f"_tb{next(self._ids)}"
        lines = [f"def {fname}(v):", "    w = _SW(1 << 62)", "    out = w.buf"]
        lines += self._write(sub, "v", "    ", name)
        lines.append("    return bytes(w.buf)")
        self.ns["_SW"] = T.SegmentedWriter
        exec("\n".join(lines), self.ns)  # noqa: S102
        return self.ns[fname]

    def _write_len(self, node: Any, expr: str, ind: str, width: int) -> list[str]:
        if node.compact:
            if expr == "-1":
                return [f"{ind}out.append(0)"]
            return [f"{ind}k = {expr} + 1", f"{ind}if k < 128:", f"{ind}    out.append(k)", f"{ind}else:",
                    f"{ind}    out += _uvb(k)"]
        s = "_H" if width == 2 else "_I"
        return [f"{ind}out += {s}.pack({expr})"]

    def _write(self, node: Any, value: str, ind: str, name: str) -> list[str]:
        """Lines that append one value of ``node`` to ``out`` (the writer's current buffer)."""
        if isinstance(node, T.KStruct):
            return [f"{ind}{self.builder(node)}({value}, w)", f"{ind}out = w.buf"]
        if isinstance(node, T.KNullableStruct):
            return [f"{ind}if {value} is None:", f"{ind}    out.append(0xFF)", f"{ind}else:",
                    f"{ind}    out.append(1)", f"{ind}    {self.builder(node.subcon)}({value}, w)",
                    f"{ind}    out = w.buf"]
        if isinstance(node, FormatField):
            s = self._struct_fmt(node)
            return [f"{ind}out += {s}.pack({value})"]
        if node is Flag or type(node).__name__ == "Flag":
            return [f"{ind}out.append(1 if {value} else 0)"]
        if isinstance(node, T.KUuid):
            return [f"{ind}out += ({value} if isinstance({value}, (bytes, bytearray)) else "
                    f"({value} or ZERO_UUID).bytes)"]
        if isinstance(node, (T.KString, T.KBytes, T.KArray)):
            width = 2 if isinstance(node, T.KString) else 4
            lines = [f"{ind}if {value} is None:"]
            if node.nullable:
                lines += [f"    {line}" for line in self._write_len(node, "-1", ind, width)]
            else:
                lines.append(f"{ind}    _null({name!r})")
            lines.append(f"{ind}else:")
            inner = ind + "    "
            if isinstance(node, T.KString):
                lines += [f"{inner}e = {value}.encode('utf-8')"]
                lines += self._write_len(node, "len(e)", inner, width)
                lines.append(f"{inner}out += e")
            elif isinstance(node, T.KBytes):
                lines += [
                    f"{inner}if isinstance({value}, (list, tuple)):",
                    f"{inner}    n = sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in {value})",
                ]
                lines += [f"    {line}" for line in self._write_len(node, "n", inner, width)]
                lines += [
                    f"{inner}    for c in {value}:",
                    f"{inner}        w.write(c)",
                    f"{inner}    out = w.buf",
                    f"{inner}else:",
                    f"{inner}    n = {value}.nbytes if isinstance({value}, memoryview) else len({value})",
                ]
                lines += [f"    {line}" for line in self._write_len(node, "n", inner, width)]
                lines += [f"{inner}    w.write({value})", f"{inner}    out = w.buf"]
            else:
                item = f"i{next(self._ids)}"
                lines += self._write_len(node, f"len({value})", inner, width)
                lines.append(f"{inner}for {item} in {value}:")
                lines += self._write(node.subcon, item, inner + "    ", name)
            return lines
        raise TypeError(f"no fast path for {node!r}")


def _fixed(sub: Any, default: Any) -> bool:
    """A big-endian fixed-width number field (int8-64, float64) with a plain default: one of a merged run."""
    return isinstance(sub, FormatField) and sub.fmtstr[0] == ">" and not callable(default)


def _runs(fields: list) -> list[list]:
    """``fields`` in wire order, consecutive fixed-width number fields grouped (each other field alone)."""
    runs: list[list] = []
    for field in fields:
        if runs and _fixed(field[1], field[2]) and _fixed(runs[-1][-1][1], runs[-1][-1][2]):
            runs[-1].append(field)
        else:
            runs.append([field])
    return runs


_COMPILER = _Compiler()


#: What bad input makes a raw compiled parser (:func:`parser_at`) raise: Python's own errors of a read past the end
#: or of bad UTF-8, and the protocol's (a varint too long, a null where none may be, a declared size too large).
_PYTHON_ERRORS: tuple[type[Exception], ...] = (IndexError, struct.error, UnicodeDecodeError)
PARSE_ERRORS: tuple[type[Exception], ...] = (*_PYTHON_ERRORS, ProtocolError)


def compile_parser(node: T.KStruct) -> Callable[[Any], Any]:
    """A function parsing a whole buffer with ``node``'s layout (trailing bytes ignored)."""
    fn = _COMPILER.ns[_COMPILER.parser(node)]

    def parse(data: Any) -> Any:
        buf = data if isinstance(data, memoryview) else memoryview(data)
        if buf.format != "B" or buf.ndim != 1:
            buf = buf.cast("B")
        try:
            return fn(buf, 0, len(buf))[0]
        except _PYTHON_ERRORS as exc:
            raise FastPathError(f"malformed input: {exc}") from None

    return parse


def compile_builder(node: T.KStruct) -> Callable[[Any, T.SegmentedWriter], None]:
    """A function appending ``obj`` in ``node``'s layout to a SegmentedWriter."""
    fn = _COMPILER.ns[_COMPILER.builder(node)]

    def build(obj: Any, writer: T.SegmentedWriter) -> None:
        try:
            fn(obj, writer)
        except struct.error as exc:
            raise FastPathError(f"value out of range: {exc}") from None

    return build


def parser_at(node: T.KStruct) -> ParseFn3:
    """The raw compiled parser of ``node``: ``fn(buf, pos, end) -> (value, pos)`` on a byte memoryview, raising
    :data:`PARSE_ERRORS` on bad input (the broker's
    request path, which reads a body in place after its header)."""
    return _COMPILER.ns[_COMPILER.parser(node)]


def builder_at(node: T.KStruct) -> BuildFn:
    """The raw compiled builder of ``node``: ``fn(obj, writer)``, raising ``struct.error`` on out-of-range values."""
    return _COMPILER.ns[_COMPILER.builder(node)]
