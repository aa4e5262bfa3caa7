"""Kafka's generated ``*JsonConverter.write``: a parsed message (or nested struct) as a JSON object.

What Kafka's tools print for a message: ``kafka-dump-log.sh``'s coordinator-record decoders, the console
consumer's formatters of internal topics.  The rules are the generator's (``JsonConverterGenerator``):

* fields in declaration order, named as Kafka's schema JSON names them in camelCase (``transactionalId``;
  our declarations spell them ``transactional_id``);
* a field absent from the version is left out, and so is a tagged field holding its default;
* int and float types are JSON numbers, ``bool`` true/false, strings strings, null (nullable) null;
* ``bytes`` and ``records`` are base64 text (Jackson's ``BinaryNode``), ``uuid`` Kafka's base64url form
  without padding (``Uuid.toString``); arrays are lists, structs objects.

Unknown tagged fields a parse kept aside are not written (Kafka's converter does not know them either).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from .exceptions import UnsupportedVersion
from .schema import Field, Message

__all__ = ["json_name", "kafka_uuid", "write_json"]


def json_name(name: str) -> str:
    """Kafka's ``camelCaseName`` of a field we declare in snake_case (``leader_epoch`` -> ``leaderEpoch``)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def kafka_uuid(value: uuid.UUID) -> str:
    """``Uuid.toString``: the 16 bytes in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def _is_default(fl: Field, value: Any) -> bool:
    """Kafka's ``generateNonDefaultValueCheck``, negated: whether a tagged field is left out."""
    default = fl.default_factory()
    if callable(default):  # arrays and structs: a fresh empty one
        default = default()
    return bool(value == default)


def _value(fl: Field, t: Any, value: Any, version: int) -> Any:
    if value is None:
        return None
    if isinstance(t, list):
        return [_struct(t, item, version) for item in value]
    if fl.is_struct:
        return _struct(fl.subfields, value, version)
    if t.startswith("[]"):
        return [_value(fl, t[2:], item, version) for item in value]
    if t in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode()
    if t == "uuid":
        return kafka_uuid(value)
    return value


def _struct(fields: Sequence[Field], data: Mapping[str, Any], version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fl in fields:
        if not fl.present(version):
            continue
        value = data[fl.name]
        if fl.is_tagged(version) and _is_default(fl, value):
            continue
        out[json_name(fl.name)] = _value(fl, fl.type, value, version)
    return out


def write_json(message: Message, data: Mapping[str, Any], version: int) -> dict[str, Any]:
    """``message`` at ``version`` (as :meth:`Message.parse` returns it) as the JSON object Kafka's
    converter writes; serialise with ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False)`` for
    Jackson's compact text."""
    if not message.supports(version):
        raise UnsupportedVersion(f"Can't write version {version} of {message.name}", None, version)
    return _struct(message.fields, data, version)
