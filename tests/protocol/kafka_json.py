"""Helpers to read Apache Kafka's JSON message schemas (reference material, read at test time)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]

PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "bytes", "records", "uuid"}
)

_COMMENT_LINE = re.compile(r"^\s*//.*$", re.MULTILINE)
_CAMEL_1 = re.compile(r"(.)([A-Z][a-z]+)")
_CAMEL_2 = re.compile(r"([a-z0-9])([A-Z])")


def shared_dir() -> Path | None:
    """The ``shared`` directory beside the repository, or ``/work/shared``, if present."""
    for cand in (REPO_ROOT.parent / "shared", Path("/work/shared")):
        if (cand / "kafka-protocol" / "messages").is_dir():
            return cand
    return None


def load_schema(messages_dir: Path, name: str) -> dict[str, Any]:
    """Load ``<name>.json``, dropping Kafka's full-line ``//`` comments."""
    text = (messages_dir / f"{name}.json").read_text(encoding="utf-8")
    return json.loads(_COMMENT_LINE.sub("", text))


def snake_case(name: str) -> str:
    """Kafka CamelCase field name to snake_case: ``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return _CAMEL_2.sub(r"\1_\2", _CAMEL_1.sub(r"\1_\2", name)).lower()


def in_versions(spec: str | None, version: int) -> bool:
    """Whether ``version`` lies in a Kafka version spec ("3+", "0-2", "5", "none")."""
    if spec is None:
        return False
    spec = spec.strip()
    if spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo) <= version <= int(hi)
    return version == int(spec)


def version_bounds(spec: str) -> tuple[int, int | None]:
    """``(lo, hi)`` of a version spec; ``hi`` is None for open-ended specs."""
    spec = spec.strip()
    if spec.endswith("+"):
        return int(spec[:-1]), None
    if "-" in spec:
        lo, hi = spec.split("-")
        return int(lo), int(hi)
    return int(spec), int(spec)


def java_decode_int(text: str) -> int:
    """Parse an integer default the way Java's ``Long.decode`` does (hex, octal, decimal)."""
    s = text.strip()
    neg = s.startswith("-")
    body = s[1:] if neg or s.startswith("+") else s
    if body.lower().startswith("0x"):
        value = int(body[2:], 16)
    elif body.startswith("#"):
        value = int(body[1:], 16)
    elif len(body) > 1 and body.startswith("0"):
        value = int(body[1:], 8)
    else:
        value = int(body, 10)
    return -value if neg else value


def field_differences(ours: list[Any], schema: dict[str, Any]) -> list[str]:
    """How a message declared in minikafka's schema machinery (its ``fields``) differs from Kafka's JSON ``schema``
    field by field: names, versions, nullable versions, tags and tagged versions, nested and common structs
    included ([] when they agree)."""
    from minikafka.protocol.schema import VersionRange

    structs = {s["name"]: s["fields"] for s in schema.get("commonStructs", [])}

    def differences(mine: list[Any], theirs: list[dict[str, Any]], path: str) -> list[str]:
        out = []
        by_name = {fl.name: fl for fl in mine}
        for spec in theirs:
            name = snake_case(spec["name"])
            fl = by_name.pop(name, None)
            where = f"{path}.{name}"
            if fl is None:
                out.append(f"{where}: missing")
                continue
            for attr, key in (("versions", "versions"), ("nullable", "nullableVersions")):
                want = VersionRange.parse(spec.get(key, spec.get("taggedVersions") if key == "versions" else None))
                if getattr(fl, attr) != want:
                    out.append(f"{where}: {attr} {getattr(fl, attr)} != {want}")
            if spec.get("tag") is not None:
                want = VersionRange.parse(spec.get("taggedVersions"))
                if (fl.tag, fl.tagged) != (int(spec["tag"]), want):  # (some files have the tag as a string)
                    out.append(f"{where}: tag {fl.tag}/{fl.tagged} != {spec['tag']}/{want}")
            nested = spec.get("fields") or structs.get(spec["type"].removeprefix("[]"))
            if nested is not None:
                out += differences(fl.subfields, nested, where)
        return out + [f"{path}.{name}: not in Kafka's schema" for name in by_name]

    return differences(ours, schema["fields"], schema["name"])


def assert_unknown_tags_survive(msg: Any, body: dict[str, Any], version: int, nested_tag: int) -> None:
    """Tagged fields a newer peer adds are kept through a round trip (KIP-482), at the root (tag 7) and in the
    first element of each non-empty array of structs (``nested_tag``)."""
    body = dict(body, _unknown_tags={7: b"\x01\x02"})
    arrays = [fl.name for fl in msg.fields if fl.is_array_of_structs and fl.present(version) and body.get(fl.name)]
    for name in arrays:
        body[name] = [dict(body[name][0], _unknown_tags={nested_tag: b"x"}), *body[name][1:]]
    parsed = msg.parse(msg.build(body, version), version)
    assert parsed._unknown_tags == {7: b"\x01\x02"}
    assert all(parsed[name][0]._unknown_tags == {nested_tag: b"x"} for name in arrays)
    assert msg.build(parsed, version) == msg.build(body, version)


def assert_round_trip(msg: Any, body: dict[str, Any], version: int) -> None:
    """Build, parse (fast path and construct path): a reader of ``version`` sees ``body`` as sent, and the parsed
    body builds the same bytes again."""
    from message_strategies import normalise

    wire = msg.build(body, version)
    assert msg.build_construct(body, version) == wire
    flexible = msg.is_flexible(version)
    expected = normalise(msg.fields, body, version, flexible)
    assert normalise(msg.fields, msg.parse(wire, version), version, flexible) == expected
    assert normalise(msg.fields, msg.parse_construct(wire, version), version, flexible) == expected
    assert msg.build(msg.parse(wire, version), version) == wire
