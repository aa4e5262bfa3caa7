"""Renaming for ``--scale K``: copy *i* of a capture replayed under its own topic, group, transactional and
client ids, so that K copies replayed at once against one target do not collide.

There is no such thing in Kafka (the nearest is MirrorMaker 2's ``DefaultReplicationPolicy``, which prefixes
replicated topics with ``<source cluster>.``); the naming follows it:

* **prefix** ``s{i}.`` -- topic ``orders`` of copy 3 is ``s3.orders``, client id ``app`` is ``s3.app``.  With
  K > 1 every copy is renamed, copy 0 too (``s0.``), so that no copy sees another's names unprefixed; with
  K = 1 nothing is renamed (:func:`copy_names` returns None).
* **group and transactional ids** get the prefix and, when needed, a suffix ``~t`` (the smallest t >= 1) so
  that the renamed id hashes to the same partition of ``__consumer_offsets`` / ``__transaction_state``
  (``abs(hashCode) % 50``, Kafka's ``partitionFor``) as the captured one: its coordinator is then the same
  broker as in the capture (on a cluster whose partition p is led by broker p mod n), and the replayed
  FindCoordinator answers compare equal.  A PREFIXED ACL on ``g`` becomes ``s3.g``, which still matches.
* **regexes** (ConsumerGroupHeartbeat ``subscribed_topic_regex``): ``R`` becomes ``s3\\.(?:R)`` and ``^R``
  becomes ``^s3\\.(?:R)`` (the escaped prefix before the regex, grouped so that an alternation stays
  within the copy).
* **never renamed**: names starting with ``__`` (``__consumer_offsets``, ``__transaction_state``: internal
  topics), empty or null names, the wildcard ``*`` of ACLs, user principals and config names.

:func:`rename_request` renames a parsed request body in place (every field its declaration tags as a topic
name, group id, transactional id, client id or topic regex, see :mod:`minikafka.protocol.entities`; and, where
the kind of a name depends on another field, ACL resource names of TOPIC, GROUP and TRANSACTIONAL_ID resources,
config resources of type TOPIC and GROUP, FindCoordinator keys, client-id quota entities), and
:func:`rename_client_id` the client id of a request frame's header.  :func:`unrename_response` undoes the
renaming in a replayed response body (and in its error messages), and drops what belongs to *other* copies
from listings (Metadata of all topics, ListGroups, ListTransactions, DescribeAcls, DescribeClientQuotas), so
that the response compares with the captured one as if the copy had been alone.

Left as captured: the consumer protocol's subscription and assignment bytes inside JoinGroup/SyncGroup (the
broker does not read them; they come back as sent), and DeleteAcls filters without a name (they match every
copy's ACLs; the response's matches of other copies are dropped).  Pure functions on parsed bodies, no I/O.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any

from ...common.hashing import partition_for_key
from ...protocol.api import APIS, ApiKey
from ...protocol.entities import Entity, entity_fields, rewrite, structs
from ...protocol.headers import parse_request_header
from ...protocol.schema import Message

#: Partitions of ``__consumer_offsets`` and ``__transaction_state`` (Kafka's defaults).
COORDINATOR_PARTITIONS = 50
INTERNAL_PREFIX = "__"
GROUP_SUFFIX = "~"

_TOPIC_RESOURCE, _GROUP_RESOURCE, _TXN_RESOURCE = 2, 3, 5  # ACL ResourceType
_ANY_RESOURCE = 1
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32  # ConfigResource.Type
_CLIENT_ID_ENTITY = "client-id"
_WILDCARD = "*"
_PREFIX_RE = re.compile(r"s(\d+)\.")
_ERRMSG_RE = re.compile(r"(?<![\w.~-])s(\d+)\.")


def copy_names(index: int, copies: int, coordinator_partitions: int = COORDINATOR_PARTITIONS) -> CopyNames | None:
    """The names of copy ``index`` of ``copies``; None when there is one copy (nothing renamed)."""
    return CopyNames(index, copies, coordinator_partitions) if copies > 1 else None


class CopyNames:
    """Renames names of the capture to those of copy ``index`` (of ``copies``) and back."""

    def __init__(self, index: int, copies: int, coordinator_partitions: int = COORDINATOR_PARTITIONS) -> None:
        if not 0 <= index < copies:
            raise ValueError(f"copy {index} of {copies}")
        self.index = index
        self.copies = copies
        self.coordinator_partitions = coordinator_partitions
        self.prefix = f"s{index}."
        self._regex_prefix = re.escape(self.prefix)
        self._coordinated: dict[str, str] = {}
        self._originals: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"CopyNames({self.index}, {self.copies})"

    @staticmethod
    def kept(name: str | None) -> bool:
        """Names never renamed: null, empty, internal (``__``...)."""
        return not name or name.startswith(INTERNAL_PREFIX)

    # -- captured -> copy ------------------------------------------------------------------------------
    def topic(self, name: str | None) -> str | None:
        """A topic name (also client ids, and ACL resource names of unknown type)."""
        return name if self.kept(name) else self.prefix + name  # type: ignore[operator]

    client_id = topic

    def group(self, name: str | None) -> str | None:
        """A group or transactional id: prefixed, and suffixed so that it keeps its coordinator partition."""
        if self.kept(name):
            return name
        assert name is not None
        out = self._coordinated.get(name)
        if out is None:
            n = self.coordinator_partitions
            want = partition_for_key(name, n)
            out = self.prefix + name
            t = 0
            while partition_for_key(out, n) != want:
                t += 1
                out = f"{self.prefix}{name}{GROUP_SUFFIX}{t}"
            self._coordinated[name] = out
            self._originals[out] = name
        return out

    transactional_id = group

    def topic_regex(self, regex: str | None) -> str | None:
        """A topic regex matching the copy's topics that the captured one matched (see the module docstring)."""
        if not regex:
            return regex
        anchored = regex.startswith("^")
        body = regex[1:] if anchored else regex
        return ("^" if anchored else "") + f"{self._regex_prefix}(?:{body})"

    def share_key(self, key: str | None) -> str | None:
        """A share-partition coordinator key ``group:topicId:partition``: its group renamed."""
        if not key:
            return key
        group, sep, rest = key.partition(":")
        return f"{self.group(group)}{sep}{rest}"

    # -- copy -> captured ------------------------------------------------------------------------------
    def owner(self, name: str | None) -> int | None:
        """The copy whose prefix ``name`` carries (any copy of ``copies``), None for a name without one."""
        if not name:
            return None
        m = _PREFIX_RE.match(name)
        if m is None:
            return None
        i = int(m.group(1))
        return i if i < self.copies else None

    def foreign(self, name: str | None) -> bool:
        """Whether ``name`` belongs to another copy (dropped from listings)."""
        i = self.owner(name)
        return i is not None and i != self.index

    def original(self, name: str | None) -> str | None:
        """The captured name of one of this copy's names (other names are returned as they are)."""
        if not name or not name.startswith(self.prefix):
            return name
        known = self._originals.get(name)
        if known is not None:
            return known
        rest = name[len(self.prefix):]
        base, sep, t = rest.rpartition(GROUP_SUFFIX)
        if sep and t.isdigit() and self.group(base) == name:
            return base
        return rest

    def original_regex(self, regex: str | None) -> str | None:
        if not regex:
            return regex
        anchored = regex.startswith("^")
        body = regex[1:] if anchored else regex
        head = f"{self._regex_prefix}(?:"
        if body.startswith(head) and body.endswith(")"):
            return ("^" if anchored else "") + body[len(head):-1]
        return regex

    def original_share_key(self, key: str | None) -> str | None:
        if not key:
            return key
        group, sep, rest = key.partition(":")
        return f"{self.original(group)}{sep}{rest}"

    def original_message(self, message: str | None) -> str | None:
        """An error message with this copy's prefixes (and group suffixes) taken out of the names it quotes."""
        if not message or self.prefix not in message:
            return message
        for renamed, name in self._originals.items():
            if renamed in message:
                message = message.replace(renamed, name)
        return _ERRMSG_RE.sub(lambda m: "" if int(m.group(1)) == self.index else m.group(0), message)


# -- walking parsed bodies ---------------------------------------------------------------------------
#
# Where a message names topics, groups, transactional ids, client ids and topic regexes is read from its
# declaration (the fields tagged ``entity=``, :mod:`minikafka.protocol.entities`): a new API version is renamed
# as soon as it is declared.  The names whose kind depends on another field of the body (ACL and config
# resources, FindCoordinator keys, client-quota entities) are the special cases below, named by api.

_Path = tuple[str, ...]
_Change = Mapping[Entity, Callable[[CopyNames, Any], Any]]

#: What each kind of tagged name becomes in a copy's request, and back in its response.
_FORWARD: _Change = {
    Entity.TOPIC_NAME: CopyNames.topic, Entity.GROUP_ID: CopyNames.group,
    Entity.TRANSACTIONAL_ID: CopyNames.transactional_id, Entity.CLIENT_ID: CopyNames.client_id,
    Entity.TOPIC_REGEX: CopyNames.topic_regex,
}
_BACKWARD: _Change = {
    Entity.TOPIC_NAME: CopyNames.original, Entity.GROUP_ID: CopyNames.original,
    Entity.TRANSACTIONAL_ID: CopyNames.original, Entity.CLIENT_ID: CopyNames.original,
    Entity.TOPIC_REGEX: CopyNames.original_regex,
}

#: Responses listing every topic, group or transaction of the target (not only those the request named):
#: the entries of other copies are dropped.  ACL listings are special cases (their names are not tagged).
_LISTINGS: dict[int, Entity] = {
    ApiKey.METADATA: Entity.TOPIC_NAME, ApiKey.DESCRIBE_TOPIC_PARTITIONS: Entity.TOPIC_NAME,
    ApiKey.DESCRIBE_LOG_DIRS: Entity.TOPIC_NAME, ApiKey.LIST_GROUPS: Entity.GROUP_ID,
    ApiKey.LIST_TRANSACTIONS: Entity.TRANSACTIONAL_ID,
}
_ACL_LISTINGS: dict[int, tuple[_Path, _Path]] = {
    ApiKey.DESCRIBE_ACLS: (("resources",), ("resource_name",)),
    ApiKey.DELETE_ACLS: (("filter_results", "matching_acls"), ("resource_name",)),
}


def _apply(body: Any, path: _Path, fn: Callable[[Any], Any]) -> bool:
    """Replace the string (or each string of the list) at ``path`` by ``fn`` of it; whether anything changed."""
    changed = False
    *parents, name = path
    for s in structs(body, tuple(parents)):
        value = s.get(name)
        if value is None:
            continue
        if isinstance(value, list):
            new_list = [fn(v) for v in value]
            if new_list != list(value):
                s[name] = new_list
                changed = True
        elif isinstance(value, str):
            new = fn(value)
            if new != value:
                s[name] = new
                changed = True
    return changed


def _rename_tagged(message: Message, version: int | None, body: Any, names: CopyNames, change: _Change) -> bool:
    """Rename every tagged name of ``body`` (a ``message`` at ``version``, None: any) per ``change``; whether any
    name changed."""
    changed = False

    def renamer(fn: Callable[[CopyNames, Any], Any]) -> Callable[[Any], Any]:
        def rename(value: Any) -> Any:
            nonlocal changed
            new = fn(names, value)
            changed = changed or new != value
            return new
        return rename

    rewrite(body, message, version, {kind: renamer(fn) for kind, fn in change.items()})
    return changed


def _acl_kind(resource_type: int) -> Entity | None:
    if resource_type in (_TOPIC_RESOURCE, _ANY_RESOURCE):
        return Entity.TOPIC_NAME
    if resource_type == _GROUP_RESOURCE:
        return Entity.GROUP_ID
    if resource_type == _TXN_RESOURCE:
        return Entity.TRANSACTIONAL_ID
    return None


def _acl_name(names: CopyNames, kind: Entity | None, name: str | None, forward: bool) -> str | None:
    if kind is None or name is None or name == _WILDCARD:
        return name
    return (_FORWARD if forward else _BACKWARD)[kind](names, name)


def _resources(names: CopyNames, structs: Iterator[Any], type_field: str, name_field: str,
               kind_of: Callable[[int], Entity | None], forward: bool) -> bool:
    changed = False
    for s in structs:
        new = _acl_name(names, kind_of(s.get(type_field, 0)), s.get(name_field), forward)
        if new != s.get(name_field):
            s[name_field] = new
            changed = True
    return changed


def _config_kind(resource_type: int) -> Entity | None:
    return Entity.TOPIC_NAME if resource_type == _CONFIG_TOPIC else \
        Entity.GROUP_ID if resource_type == _CONFIG_GROUP else None


def _special_request(api_key: int, body: Any, names: CopyNames) -> bool:
    """The names whose kind depends on another field (resource types, coordinator key types, quota entities)."""
    changed = False
    if api_key == ApiKey.FIND_COORDINATOR:  # key_type 0 group, 1 transaction, 2 share partition
        key_type = body.get("key_type", 0)
        fn: Callable[[Any], Any] = (names.group if key_type == 0 else names.transactional_id if key_type == 1
                                    else names.share_key)
        changed |= _apply(body, ("key",), fn)
        changed |= _apply(body, ("coordinator_keys",), fn)
    elif api_key == ApiKey.DESCRIBE_ACLS:
        changed |= _resources(names, iter([body]), "resource_type_filter", "resource_name_filter", _acl_kind, True)
    elif api_key == ApiKey.CREATE_ACLS:
        changed |= _resources(names, structs(body, ("creations",)), "resource_type", "resource_name", _acl_kind, True)
    elif api_key == ApiKey.DELETE_ACLS:
        changed |= _resources(names, structs(body, ("filters",)), "resource_type_filter", "resource_name_filter",
                              _acl_kind, True)
    elif api_key in (ApiKey.DESCRIBE_CONFIGS, ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        changed |= _resources(names, structs(body, ("resources",)), "resource_type", "resource_name",
                              _config_kind, True)
    elif api_key == ApiKey.DESCRIBE_CLIENT_QUOTAS:
        for c in structs(body, ("components",)):
            if c.get("entity_type") == _CLIENT_ID_ENTITY and c.get("match_type") == 0 and c.get("match"):
                new = names.client_id(c["match"])
                if new != c["match"]:
                    c["match"] = new
                    changed = True
    elif api_key == ApiKey.ALTER_CLIENT_QUOTAS:
        changed |= _quota_entities(names, structs(body, ("entries", "entity")), True)
    return changed


def _quota_entities(names: CopyNames, entities: Iterator[Any], forward: bool) -> bool:
    changed = False
    for e in entities:
        if e.get("entity_type") == _CLIENT_ID_ENTITY and e.get("entity_name"):
            new = names.client_id(e["entity_name"]) if forward else names.original(e["entity_name"])
            if new != e["entity_name"]:
                e["entity_name"] = new
                changed = True
    return changed


def rename_request(api_key: int, body: Any, names: CopyNames, version: int | None = None) -> bool:
    """Rename the names in a parsed request body of ``api_key`` (at ``version``; None: whichever fields it holds)
    in place for ``names``' copy; whether any changed."""
    api = APIS.get(api_key)
    changed = api is not None and _rename_tagged(api.request, version, body, names, _FORWARD)
    return _special_request(api_key, body, names) or changed


def _drop_foreign(body: Any, listing: _Path, name_path: _Path, names: CopyNames) -> None:
    *parents, field = listing
    for s in structs(body, tuple(parents)):
        items = s.get(field)
        if not isinstance(items, list):
            continue  # a struct (DescribeTopicPartitions' cursor), not a listing
        kept = [e for e in items if not names.foreign(_get(e, name_path))]
        if len(kept) != len(items):
            s[field] = kept


def _get(obj: Any, path: _Path) -> Any:
    for name in path:
        if obj is None:
            return None
        obj = obj.get(name)
    return obj


@cache
def _error_message_paths(api_key: int) -> tuple[_Path, ...]:
    """Paths of the ``error_message`` fields of ``api_key``'s response (any version)."""
    api = APIS.get(api_key)
    if api is None:
        return ()
    out: list[_Path] = []

    def walk(fields: Any, path: _Path) -> None:
        for fl in fields:
            if fl.subfields:
                walk(fl.subfields, path + (fl.name,))
            elif fl.name == "error_message":
                out.append(path + (fl.name,))

    walk(api.response.fields, ())
    return tuple(out)


def _listings(message: Message, version: int | None, kind: Entity) -> Iterator[tuple[_Path, _Path]]:
    """(path of a listing, path of the name in an element) for the tagged names of ``kind`` in ``message``."""
    for ef in entity_fields(message, version):
        if ef.entity == kind and not ef.many and len(ef.path) > 1:
            yield ef.path[:-1], ef.path[-1:]


def unrename_response(api_key: int, body: Any, names: CopyNames, version: int | None = None) -> None:
    """Undo the renaming in a parsed response body of ``api_key`` (at ``version``; None: whichever fields it
    holds) in place: this copy's names back to the captured ones, error messages too, and other copies' entries
    dropped from listings."""
    api = APIS.get(api_key)
    listed = _LISTINGS.get(api_key)
    if api is not None and listed is not None:
        for listing, name_path in _listings(api.response, version, listed):
            _drop_foreign(body, listing, name_path, names)
    if api_key in _ACL_LISTINGS:
        _drop_foreign(body, *_ACL_LISTINGS[api_key], names)
    if api is not None:
        _rename_tagged(api.response, version, body, names, _BACKWARD)
    if api_key == ApiKey.FIND_COORDINATOR:
        _apply(body, ("coordinators", "key"), names.original_share_key)
    elif api_key == ApiKey.DESCRIBE_ACLS:
        _resources(names, structs(body, ("resources",)), "resource_type", "resource_name", _acl_kind, False)
    elif api_key == ApiKey.DELETE_ACLS:
        _resources(names, structs(body, ("filter_results", "matching_acls")), "resource_type", "resource_name",
                   _acl_kind, False)
    elif api_key == ApiKey.DESCRIBE_CONFIGS:
        _resources(names, structs(body, ("results",)), "resource_type", "resource_name", _config_kind, False)
    elif api_key in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        _resources(names, structs(body, ("responses",)), "resource_type", "resource_name", _config_kind, False)
    elif api_key in (ApiKey.DESCRIBE_CLIENT_QUOTAS, ApiKey.ALTER_CLIENT_QUOTAS):
        if api_key == ApiKey.DESCRIBE_CLIENT_QUOTAS:
            entries = body.get("entries")
            if isinstance(entries, list):
                kept = [e for e in entries if not any(
                    x.get("entity_type") == _CLIENT_ID_ENTITY and names.foreign(x.get("entity_name"))
                    for x in e.get("entity") or ())]
                if len(kept) != len(entries):
                    body["entries"] = kept
        _quota_entities(names, structs(body, ("entries", "entity")), False)
    for path in _error_message_paths(api_key):
        _apply(body, path, names.original_message)


# -- frames ------------------------------------------------------------------------------------------

_I16 = struct.Struct(">h")


def rename_client_id(frame: bytes | bytearray | memoryview, names: CopyNames) -> bytes:
    """A request frame (without its size prefix) with the header's client id renamed (a null one stays)."""
    n = _I16.unpack_from(frame, 8)[0]
    if n < 0:
        return bytes(frame)
    old = bytes(frame[10:10 + n]).decode("utf-8", "replace")
    new = names.client_id(old)
    if new == old:
        return bytes(frame)
    raw = (new or "").encode()
    return bytes(frame[:8]) + _I16.pack(len(raw)) + raw + bytes(frame[10 + n:])


def rename_request_frame(frame: bytes | bytearray | memoryview, names: CopyNames) -> bytes:
    """A request frame renamed for ``names``' copy: header client id and body (rebuilt only if a name changed).

    Raises as :func:`minikafka.protocol.headers.parse_request_frame` for an api or version minikafka does not
    know (such a request cannot be renamed)."""
    hdr = parse_request_header(frame)
    api = APIS[hdr.api_key]
    if not api.request.supports(hdr.api_version):
        raise ValueError(f"{api.name} v{hdr.api_version} is not supported")
    body = api.request.parse(memoryview(frame)[hdr.body_offset:], hdr.api_version)
    if rename_request(hdr.api_key, body, names, hdr.api_version):
        frame = bytes(frame[:hdr.body_offset]) + api.request.build(body, hdr.api_version)
    return rename_client_id(frame, names)
