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
