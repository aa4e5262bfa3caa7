"""Subscriptions of KIP-848 consumer groups: topic names, regular expressions, subscribed topic metadata.

Kafka resolves a member's ``SubscribedTopicRegex`` with Google's RE2/J against every topic name and keeps
the names it *fully* matches (``Pattern.matcher(name).matches()``).  Here :func:`compile_topic_regex`
turns an RE2 pattern into a Python ``re`` pattern used with ``fullmatch``:

* RE2 constructs Python lacks are translated: ``\\Q...\\E`` (literal text), ``\\z`` (end of text),
  ``\\A``, ``(?P<name>...)``, POSIX classes ``[[:alpha:]]`` and friends inside brackets.
* What RE2 refuses is refused even where Python would accept it, with INVALID_REGULAR_EXPRESSION:
  backreferences (``\\1``, ``(?P=name)``), lookaround (``(?=``, ``(?!``, ``(?<=``, ``(?<!``), atomic groups
  ``(?>``, conditionals ``(?(``, and possessive quantifiers (``a*+``).
* Known differences that remain: Unicode classes ``\\p{..}``/``\\pL`` and the ``(?U)`` (ungreedy) flag
  are refused (RE2 accepts them); ``\\b``, ``\\w``, ``\\d`` and ``\\s`` follow Python's Unicode-aware
  definitions where RE2's are ASCII-only; matching is backtracking, so a pathological pattern is slow where
  RE2 is linear (topic names are short, at most 249 characters).

Kafka resolves regexes asynchronously and at most every few seconds; here they are resolved synchronously
when a member brings a new regex and on every heartbeat in which the set of topic names changed, which is
where the group notices topics created or deleted.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ....common import TopicMetadata
from .model import TopicImage

__all__ = ["InvalidRegexError", "TopicsImage", "compile_topic_regex", "metadata_hash", "topic_images"]


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


_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_FORBIDDEN_GROUPS = (("(?=", "lookahead"), ("(?!", "lookahead"), ("(?<=", "lookbehind"),
                     ("(?<!", "lookbehind"), ("(?>", "atomic group"), ("(?(", "conditional"),
                     ("(?P=", "backreference"))


def _translate(pattern: str) -> str:
    """The Python ``re`` source of an RE2 pattern; InvalidRegexError for what RE2 refuses."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise InvalidRegexError("trailing backslash at end of expression")
            nxt = pattern[i + 1]
            if nxt == "Q":  # \Q...\E: literal text (also inside a character class)
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append("".join("\\" + ch if not ch.isalnum() else ch for ch in literal))
                i = n if end < 0 else end + 2
                continue
            if nxt.isdigit() and nxt != "0" and not in_class:
                raise InvalidRegexError(f"invalid escape sequence: \\{nxt} (backreferences are not supported)")
            if nxt in "pP":
                raise InvalidRegexError(f"invalid character class range: \\{nxt} (Unicode classes are not supported)")
            if nxt == "z":
                out.append("\\Z")
            else:
                out.append(c + nxt)
            i += 2
            continue
        if in_class:
            if c == "[" and pattern.startswith("[:", i):
                end = pattern.find(":]", i + 2)
                if end > 0:
                    name = pattern[i + 2:end]
                    negate = name.startswith("^")
                    cls = _POSIX_CLASSES.get(name.lstrip("^"))
                    if cls is None or negate:
                        raise InvalidRegexError(f"invalid character class range: [:{name}:]")
                    out.append(cls)
                    i = end + 2
                    continue
            if c == "]" and out and out[-1] not in ("[", "[^"):
                in_class = False
            out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            if pattern.startswith("[^", i):
                out.append("[^")
                i += 2
            else:
                out.append("[")
                i += 1
            if i < n and pattern[i] == "]":  # a leading ] is literal
                out.append("\\]")
                i += 1
            continue
        if c == "(":
            for prefix, what in _FORBIDDEN_GROUPS:
                if pattern.startswith(prefix, i):
                    raise InvalidRegexError(f"invalid or unsupported Perl syntax: `{prefix}` ({what})")
            if pattern.startswith("(?U", i) or re.match(r"\(\?[imsx-]*U", pattern[i:]):
                raise InvalidRegexError("invalid or unsupported Perl syntax: `(?U` (ungreedy flag)")
        if c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            raise InvalidRegexError(f"bad repetition operator: {c}+")
        out.append(c)
        i += 1
    return "".join(out)


def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """Compile an RE2/J ``SubscribedTopicRegex`` for full matching; InvalidRegexError if it is invalid."""
    try:
        return re.compile(_translate(pattern))
    except re.error as exc:
        raise InvalidRegexError(str(exc)) from None
    except RecursionError:
        raise InvalidRegexError("expression nests too deeply") from None


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
