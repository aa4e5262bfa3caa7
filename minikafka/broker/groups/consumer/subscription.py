"""Subscriptions of KIP-848 consumer groups: topic names, regular expressions, subscribed topic metadata.

Kafka resolves a member's ``SubscribedTopicRegex`` with Google's RE2/J against every topic name and keeps
the names it *fully* matches (``Pattern.matcher(name).matches()``).  Here :func:`compile_topic_regex`
compiles it with Google's RE2 (``google-re2``, the engine RE2/J ports): the same syntax (``\\Q...\\E``,
``\\z``, POSIX and Unicode classes, ``(?U)``), the same refusals (backreferences, lookaround, atomic groups,
possessive quantifiers: INVALID_REGULAR_EXPRESSION) and matching in linear time, so a pattern a client sends
(a member's regex, ListTransactions v2's transactional-id pattern) cannot stall the broker.  RE2 is imported on
the first pattern compiled.

Kafka resolves regexes asynchronously and at most every few seconds; here they are resolved synchronously
when a member brings a new regex and on every heartbeat in which the set of topic names changed, which is
where the group notices topics created or deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ....common import TopicMetadata
from .model import TopicImage

__all__ = ["CompiledRegex", "InvalidRegexError", "TopicsImage", "compile_topic_regex", "metadata_hash",
           "topic_images"]


class TopicsImage(Protocol):
    """The cluster's topics as the coordinator reads them (Kafka's ``CoordinatorMetadataImage``); the
    broker's metadata cache satisfies it."""

    def get_topic(self, name: str) -> TopicMetadata | None: ...

    def get_topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None: ...

    def all_topics(self) -> Iterable[TopicMetadata]: ...


class TopicsByName(Protocol):
    """Topic lookup by name: all :func:`topic_images` needs (consumer and share groups)."""

    def get_topic(self, name: str) -> TopicMetadata | None: ...


class InvalidRegexError(ValueError):
    """The pattern is not a valid RE2 regular expression (Kafka's ``InvalidRegularExpression``)."""


class CompiledRegex(Protocol):
    """A compiled RE2 pattern: what the callers use of it."""

    def fullmatch(self, text: str) -> object | None: ...


def compile_topic_regex(pattern: str) -> CompiledRegex:
    """Compile an RE2/J ``SubscribedTopicRegex`` for full matching; InvalidRegexError if it is invalid."""
    import re2  # google-re2: imported on the first pattern

    options = re2.Options()
    options.log_errors = False  # a client's invalid pattern is answered, not logged by RE2 itself
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "invalid"
        raise InvalidRegexError(detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)) \
            from None


def regex_error_message(pattern: str, exc: InvalidRegexError) -> str:
    """Kafka's INVALID_REGULAR_EXPRESSION message."""
    return f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {exc}."


def resolve_regex(pattern: str, topic_names: Iterable[str]) -> set[str]:
    """The topic names a (valid) regex fully matches; an invalid one matches nothing."""
    try:
        compiled = compile_topic_regex(pattern)
    except InvalidRegexError:
        return set()
    return {name for name in topic_names if compiled.fullmatch(name)}


@dataclass(frozen=True)
class SubscribedTopicsState:
    """What the group saw of its subscribed topics at the last check (to detect metadata changes)."""

    images: dict[str, TopicImage]
    hash: int


def topic_images(names: Iterable[str], topics: TopicsByName) -> dict[str, TopicImage]:
    """The existing topics among ``names`` with their ids and partition counts."""
    out: dict[str, TopicImage] = {}
    for name in names:
        t = topics.get_topic(name)
        if t is not None:
            out[name] = TopicImage(t.topic_id, t.name, t.num_partitions)
    return out


def metadata_hash(images: dict[str, TopicImage]) -> int:
    """Kafka's group metadata hash over the subscribed topics (name, id, partition count): any topic created,
    deleted, recreated or given more partitions changes it."""
    return hash(tuple(sorted((name, img.topic_id.int, img.num_partitions) for name, img in images.items())))
