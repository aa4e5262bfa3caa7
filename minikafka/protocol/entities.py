"""What a message's fields name, and one walker over them.

Kafka's message schemas tag the fields that name something with an ``entityType`` (``topicName``,
``groupId``, ``transactionalId``, ``producerId``, ``brokerId``); the project's declarations carry the same
tags (``f(..., entity=...)``) plus four kinds of its own that Kafka leaves untagged: ``topicId``,
``partitionIndex``, ``clientId`` and ``topicRegex``.  Everything that needs to know where an API names a
topic, a partition, a group or a transactional id (fault matching, replay routing, renaming and planning,
the analysis columns) asks this module, so a new API version is taught once, in its declaration.

* :func:`entity_fields`: the tagged fields of a message at a version, with their paths from the root.
* :func:`values` / :func:`rewrite`: read or replace every value of some kinds in a parsed (or built) body.
* :func:`topic_layouts` / :func:`topic_entries`: the topic entries of a body (a struct naming a topic by name
  or id) with the partition numbers listed under each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from typing import Any

from .schema import Field, Message


class Entity(StrEnum):
    """What a field names: Kafka's ``entityType`` values, then the project's own."""

    TOPIC_NAME = "topicName"
    GROUP_ID = "groupId"
    TRANSACTIONAL_ID = "transactionalId"
    PRODUCER_ID = "producerId"
    BROKER_ID = "brokerId"
    # Not tagged by Kafka's schemas; tagged here because the project routes, renames and counts by them.
    TOPIC_ID = "topicId"
    PARTITION = "partitionIndex"
    CLIENT_ID = "clientId"
    TOPIC_REGEX = "topicRegex"


@dataclass(frozen=True, slots=True)
class EntityField:
    """One tagged field: its kind, the field names from the message root down to it (arrays and structs are
    stepped through), and whether it holds a list of values (``[]string``, ``[]int32``)."""

    entity: Entity
    path: tuple[str, ...]
    field: Field
    many: bool

    @property
    def dotted(self) -> str:
        """The path as ``topics.partitions.partition_index``."""
        return ".".join(self.path)


def _present(fl: Field, version: int | None) -> bool:
    return version is None or fl.present(version)


def _collect(fields: list[Field], version: int | None, prefix: tuple[str, ...], out: list[EntityField]) -> None:
    for fl in fields:
        if not _present(fl, version):
            continue
        path = prefix + (fl.name,)
        if fl.entity is not None:
            many = isinstance(fl.type, str) and fl.type.startswith("[]")
            out.append(EntityField(Entity(fl.entity), path, fl, many))
        if fl.subfields:
            _collect(fl.subfields, version, path, out)


@lru_cache(maxsize=None)
def entity_fields(message: Message, version: int | None = None) -> tuple[EntityField, ...]:
    """Every tagged field of ``message`` present at ``version`` (None: at any version), in declaration order."""
    out: list[EntityField] = []
    _collect(message.fields, version, (), out)
    return tuple(out)


def structs(body: Any, path: tuple[str, ...]) -> Iterator[Any]:
    """The structs at ``path`` in a body (every element of each array on the way, and of the last); the body
    itself for ``()``; missing or null parts yield nothing."""
    if body is None:
        return
    if isinstance(body, list):
        for item in body:
            yield from structs(item, path)
    elif not path:
        yield body
    elif hasattr(body, "get"):
        yield from structs(body.get(path[0]), path[1:])


def _wanted(kinds: Entity | Iterable[Entity] | None) -> frozenset[Entity] | None:
    if kinds is None:
        return None
    if isinstance(kinds, str):
        return frozenset((Entity(kinds),))
    return frozenset(Entity(k) for k in kinds)


def _slots(body: Any, message: Message, version: int | None, wanted: Callable[[Entity], bool]
           ) -> Iterator[tuple[EntityField, Any, Any]]:
    """(field, the struct holding it, its value) for every non-null tagged value of a kind ``wanted``."""
    for ef in entity_fields(message, version):
        if not wanted(ef.entity):
            continue
        for holder in structs(body, ef.path[:-1]):
            value = holder.get(ef.path[-1])
            if value is not None:
                yield ef, holder, value


def values(body: Any, message: Message, version: int | None, kinds: Entity | Iterable[Entity] | None = None
           ) -> Iterator[tuple[EntityField, Any]]:
    """(field, value) for every value of ``kinds`` (default: every kind) in ``body``; a list field gives one
    pair per element; null values are left out."""
    chosen = _wanted(kinds)
    for ef, _holder, value in _slots(body, message, version, lambda e: chosen is None or e in chosen):
        if ef.many:
            yield from ((ef, item) for item in value if item is not None)
        else:
            yield ef, value


def rewrite(body: Any, message: Message, version: int | None, change: Mapping[Entity, Callable[[Any], Any]]) -> int:
    """Replace, in place, every value of the kinds in ``change`` by ``change[kind](value)`` (element by element
    in list fields; nulls kept); returns how many values were replaced."""
    count = 0
    for ef, holder, value in list(_slots(body, message, version, lambda e: e in change)):
        fn = change[ef.entity]
        if ef.many:
            holder[ef.path[-1]] = [None if item is None else fn(item) for item in value]
            count += len(value)
        else:
            holder[ef.path[-1]] = fn(value)
            count += 1
    return count


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """Where a message lists topics and their partitions: ``path`` to the topic entries (an array of structs,
    or one struct when ``single``), the entry's field naming the topic (``name``) and/or its id
    (``topic_id``), and its partitions: ``partitions`` (a field of the entry), either structs whose
    ``partition`` field is the number, or (``partition`` None) a list of numbers; or, for an entry that is one
    topic-partition (DescribeTopicPartitions' cursor), ``partition`` alone, a field of the entry itself.
    Both are None where an entry names a topic and no partitions."""

    path: tuple[str, ...]
    name: str | None
    topic_id: str | None
    partitions: str | None
    partition: str | None
    single: bool = False


def _topic_layouts(fields: list[Field], version: int | None, prefix: tuple[str, ...], out: list[TopicLayout]) -> None:
    for fl in fields:
        if not _present(fl, version) or not fl.subfields:
            continue
        path = prefix + (fl.name,)
        sub = [s for s in fl.subfields if _present(s, version)]
        name = next((s.name for s in sub if s.entity == Entity.TOPIC_NAME and not _is_list(s)), None)
        topic_id = next((s.name for s in sub if s.entity == Entity.TOPIC_ID and not _is_list(s)), None)
        if name is not None or topic_id is not None:
            partitions, partition = _partitions_of(sub, version)
            out.append(TopicLayout(path, name, topic_id, partitions, partition, fl.is_struct))
        _topic_layouts(fl.subfields, version, path, out)


def _partitions_of(sub: list[Field], version: int | None) -> tuple[str | None, str | None]:
    """(partitions, partition) of a topic entry with fields ``sub`` (see :class:`TopicLayout`)."""
    own = next((s.name for s in sub if s.entity == Entity.PARTITION and not _is_list(s)), None)
    if own is not None:
        return None, own
    for s in sub:
        if s.entity == Entity.PARTITION and _is_list(s):
            return s.name, None
        inner = next((p.name for p in s.subfields if p.entity == Entity.PARTITION and _present(p, version)), None)
        if s.is_array_of_structs and inner is not None:
            return s.name, inner
    return None, None


def _is_list(fl: Field) -> bool:
    return isinstance(fl.type, str) and fl.type.startswith("[]")


@lru_cache(maxsize=None)
def topic_layouts(message: Message, version: int | None = None) -> tuple[TopicLayout, ...]:
    """Every place ``message`` lists topic entries at ``version`` (None: at any version)."""
    out: list[TopicLayout] = []
    _topic_layouts(message.fields, version, (), out)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TopicEntry:
    """One topic entry of a body: the entry itself (a dict, to read or change other fields), the topic's name
    and id (None where the version has no such field or it is null), and its partitions as (number, the
    partition's struct or None for a list of numbers)."""

    layout: TopicLayout
    entry: Any
    name: str | None
    topic_id: Any
    partitions: tuple[tuple[int, Any], ...]


def topic_entries(body: Any, message: Message, version: int | None) -> Iterator[TopicEntry]:
    """Every topic entry of ``body`` (a ``message`` at ``version``), in the order of :func:`topic_layouts`."""
    for layout in topic_layouts(message, version):
        for holder in structs(body, layout.path[:-1]):
            found = holder.get(layout.path[-1])
            for entry in (() if found is None else (found,)) if layout.single else (found or ()):
                parts: list[tuple[int, Any]] = []
                if layout.partitions is None and layout.partition is not None:
                    parts.append((entry.get(layout.partition), entry))
                elif layout.partitions is not None:
                    for p in entry.get(layout.partitions) or ():
                        if layout.partition is None:
                            parts.append((p, None))
                        else:
                            parts.append((p.get(layout.partition), p))
                yield TopicEntry(layout, entry, entry.get(layout.name) if layout.name else None,
                                 entry.get(layout.topic_id) if layout.topic_id else None, tuple(parts))
