"""Hypothesis strategies that generate valid message objects from our declarations.

The builder walks ``Message.fields`` for one version: only fields present in
that version are generated, nullable fields are sometimes ``None``, integers
span their type's full range, tagged fields are sometimes omitted or at their
default, and (optionally) flexible structs carry unknown tagged fields under
``_unknown_tags``.  :func:`normalise` turns a built or parsed object into the
plain value a reader of that version must see, for comparisons.
"""

from __future__ import annotations

import uuid
from functools import lru_cache
from typing import Any, Mapping

from hypothesis import strategies as st

from minikafka.protocol.schema import Field, Message

UNKNOWN = "_unknown_tags"
ZERO_UUID = uuid.UUID(int=0)

_INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def default_value(fl: Field) -> Any:
    """The value a reader sees for ``fl`` when it is absent."""
    d = fl.default_factory()
    return d() if callable(d) else d


def primitive_strategy(type_name: str) -> st.SearchStrategy[Any]:
    """Values of one Kafka primitive type, over its full range."""
    if type_name in _INT_RANGES:
        lo, hi = _INT_RANGES[type_name]
        return st.integers(lo, hi)
    if type_name == "bool":
        return st.booleans()
    if type_name == "float64":
        return st.floats(allow_nan=False)
    if type_name == "string":
        return st.text(max_size=8)
    if type_name in ("bytes", "records"):
        return st.binary(max_size=24)
    if type_name == "uuid":
        return st.one_of(st.just(ZERO_UUID), st.uuids())
    raise KeyError(type_name)


def _is_flexible_field(fl: Field, flexible: bool) -> bool:
    return flexible and fl.flexible is not False


def field_strategy(
    fl: Field, version: int, flexible: bool, unknown_tags: bool
) -> st.SearchStrategy[Any]:
    """Values for field ``fl`` at ``version`` (``None`` included when nullable)."""
    t = fl.type
    if fl.is_array_of_structs:
        inner = struct_strategy(fl.subfields, version, flexible, unknown_tags)
        base: st.SearchStrategy[Any] = st.lists(inner, max_size=2)
    elif fl.is_struct:
        base = struct_strategy(fl.subfields, version, flexible, unknown_tags)
    elif isinstance(t, str) and t.startswith("[]"):
        base = st.lists(primitive_strategy(t[2:]), max_size=3)
    else:
        assert isinstance(t, str)
        base = primitive_strategy(t)
    if fl.is_nullable(version):
        return st.one_of(st.none(), base)
    return base


def _unknown_tags_strategy(known: set[int]) -> st.SearchStrategy[dict[int, bytes]]:
    tags = st.one_of(st.integers(0, 40), st.integers(0, 2**31 - 1)).filter(
        lambda t: t not in known
    )
    return st.dictionaries(tags, st.binary(max_size=6), min_size=1, max_size=2)


def struct_strategy(
    fields: list[Field], version: int, flexible: bool, unknown_tags: bool
) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts for a struct: every present field, tagged ones optional or at default."""
    required: dict[str, st.SearchStrategy[Any]] = {}
    optional: dict[str, st.SearchStrategy[Any]] = {}
    known: set[int] = set()
    for fl in fields:
        if not fl.present(version):
            continue
        values = field_strategy(fl, version, flexible, unknown_tags)
        if flexible and fl.is_tagged(version):
            assert fl.tag is not None
            known.add(fl.tag)
            optional[fl.name] = st.one_of(st.builds(default_value, st.just(fl)), values)
        else:
            required[fl.name] = values
    if flexible and unknown_tags:
        optional[UNKNOWN] = _unknown_tags_strategy(known)
    return st.fixed_dictionaries(required, optional=optional)


@lru_cache(maxsize=None)
def message_strategy(
    msg: Message, version: int, unknown_tags: bool = False
) -> st.SearchStrategy[dict[str, Any]]:
    """Random valid objects of ``msg`` at ``version``."""
    return struct_strategy(msg.fields, version, msg.is_flexible(version), unknown_tags)


def normalise(fields: list[Field], obj: Mapping[str, Any], version: int, flexible: bool) -> dict:
    """What a reader of ``version`` sees: present fields only, absent ones at default.

    Containers become dicts, lists become lists, and unknown tagged fields are
    kept (as a plain dict) only in flexible versions.
    """
    out: dict[str, Any] = {}
    for fl in fields:
        if not fl.present(version):
            continue
        value = obj.get(fl.name, _ABSENT)
        if value is _ABSENT:
            value = default_value(fl)
        out[fl.name] = _normalise_value(fl, value, version, flexible)
    unknown = obj.get(UNKNOWN)
    if flexible and unknown:
        out[UNKNOWN] = {int(k): bytes(v) for k, v in unknown.items()}
    return out


def _normalise_value(fl: Field, value: Any, version: int, flexible: bool) -> Any:
    if value is None:
        return None
    if fl.is_array_of_structs:
        return [normalise(fl.subfields, item, version, flexible) for item in value]
    if fl.is_struct:
        return normalise(fl.subfields, value, version, flexible)
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def present_names(fields: list[Field], version: int) -> set[str]:
    """Names of the fields that exist at ``version``."""
    return {fl.name for fl in fields if fl.present(version)}


_ABSENT = object()


_SAMPLE_PRIMITIVES: dict[str, Any] = {"bool": True, "float64": 1.5, "bytes": b"x", "records": None}


def full_body(message: Message, version: int) -> dict[str, Any]:
    """A body of ``message`` at ``version`` with every present field set: one element in every array, a
    distinct non-default value in every string, number and uuid field (so each can be told apart)."""
    counter = iter(range(1, 1 << 30))

    def primitive(type_name: str) -> Any:
        n = next(counter)
        if type_name in _INT_RANGES:
            return n % _INT_RANGES[type_name][1] or 1
        if type_name == "string":
            return f"s{n}"
        if type_name == "uuid":
            return uuid.UUID(int=n)
        return _SAMPLE_PRIMITIVES[type_name]

    def struct(fields: list[Field]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for fl in fields:
            if not fl.present(version):
                continue
            t = fl.type
            if fl.is_array_of_structs:
                out[fl.name] = [struct(fl.subfields)]
            elif fl.is_struct:
                out[fl.name] = struct(fl.subfields)
            elif isinstance(t, str) and t.startswith("[]"):
                out[fl.name] = [primitive(t[2:])]
            else:
                assert isinstance(t, str)
                out[fl.name] = primitive(t)
        return out

    return struct(message.fields)
