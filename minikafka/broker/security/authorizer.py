"""ACL authorization: Kafka's ``StandardAuthorizer`` (KRaft) over a cluster-wide ACL store.

:class:`AclStore` holds a cluster's ACLs (one store shared by the brokers of a
:class:`~minikafka.broker.cluster.Cluster`); with a data dir they are KRaft's ``AccessControlEntryRecord``
records in the controller's metadata log, as Kafka keeps them, so ACLs survive a restart.
:class:`StandardAuthorizer` answers "may this principal, from this host, do this operation on this resource?"
with Kafka's rules:

* super users (``super.users``, plus :data:`BROKER_PRINCIPAL`) may do everything;
* the ACLs that apply to a resource are the LITERAL ones on its name, the LITERAL ``*`` wildcard and the
  PREFIXED ones whose name starts the resource's; an ACL applies to a request when its principal is the
  request's (or ``User:*``) and its host the client's address (or ``*``);
* a DENY that applies wins; otherwise an ALLOW that applies allows.  ALL matches every operation;
  an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and an ALLOW of ALTER_CONFIGS allows
  DESCRIBE_CONFIGS (a DENY only ever denies the operation it names, or ALL);
* with no ACL at all on the resource the answer is ``allow.everyone.if.no.acl.found`` (default false);
  with ACLs on the resource but none applying, it is denied.

:func:`create_authorizer` builds the authorizer ``authorizer.class.name`` names (Kafka's
``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` or the older ZooKeeper-era
``kafka.security.authorizer.AclAuthorizer``, which have the same semantics here), or None when the key is
empty: then nothing is checked, and the ACL APIs answer SECURITY_DISABLED.

Differences from Kafka: ACL changes apply at once on every broker of the process (the brokers do not fetch
the metadata log, they share the store), without a data dir they are kept in memory only, and the
``AuthorizerNotReadyException`` start-up window does not exist.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

from ...protocol.errors import ErrorCode
from .acl import (CLUSTER_NAME, SUPPORTED_OPERATIONS, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, AccessControlEntry,
                  AclBinding, AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourcePattern,
                  ResourceType, host_matches, operations_bitfield)

log = logging.getLogger(__name__)
audit_log = logging.getLogger("minikafka.authorizer")
"""The audit log (Kafka's ``kafka.authorizer.logger``): denials at INFO, grants at DEBUG."""

BROKER_PRINCIPAL = "User:minikafka-broker"
"""The principal of the brokers' own connections to each other (replica fetches, WriteTxnMarkers,
AddPartitionsToTxn verification).  The socket server gives it to inter-broker connections; the
authorizer always treats it as a super user, as a Kafka cluster lists its brokers' principal in
``super.users``."""

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
AUTHORIZER_CLASS_NAMES = (STANDARD_AUTHORIZER, ACL_AUTHORIZER)
ACLS_FILE = "acls.json"


class AclStoreError(Exception):
    """The saved ACLs cannot be read (the broker refuses to start rather than run without them)."""

# ALLOW ACLs of these operations also allow the key (Kafka's IMPLIES_DESCRIBE / IMPLIES_DESCRIBE_CONFIGS).
_IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                      AclOperation.DELETE, AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


#: An ACL as its wire codes: resource type, name, pattern type, principal, host, operation, permission type.
AclCodes = tuple[int, str, int, str, str, int, int]


class AclRecords(Protocol):
    """Where a cluster's ACLs are kept as KRaft's records (the controller's metadata log): the ACLs it held when
    it was opened, by id (None: there is no log), and what a change writes (``AccessControlEntryRecord`` for each
    added ACL, ``RemoveAccessControlEntryRecord`` for each removed one)."""

    def replayed_acls(self) -> dict[uuid.UUID, AclCodes] | None: ...

    def write_acls(self, added: dict[uuid.UUID, AclCodes], removed: list[uuid.UUID]) -> None: ...


def acl_codes(b: AclBinding) -> AclCodes:
    p, e = b.pattern, b.entry
    return (p.resource_type.value, p.name, p.pattern_type.value, e.principal, e.host, e.operation.value,
            e.permission_type.value)


class AclStore:
    """A cluster's ACLs, indexed by resource pattern (Kafka's ``AclCache``).  With ``records`` (a data dir's
    metadata log) each ACL is an ``AccessControlEntryRecord`` of its own id, as in KRaft; an earlier version's
    ``<data_dir>/acls.json`` is carried over into the log once.  Without, they are saved in
    ``<data_dir>/acls.json`` after every change (written to a temporary file, then renamed over the old one)."""

    def __init__(self, data_dir: Path | None = None, records: AclRecords | None = None) -> None:
        self.path = Path(data_dir) / ACLS_FILE if data_dir is not None else None
        replayed = records.replayed_acls() if records is not None else None
        self.records = records if replayed is not None else None
        # pattern -> its entries, each with its id in the metadata log (dicts keep insertion order, so listings
        # are stable)
        self._by_pattern: dict[ResourcePattern, dict[AccessControlEntry, uuid.UUID | None]] = {}
        # resource type -> PREFIXED pattern names, for the prefix scan
        self._prefixed: dict[ResourceType, set[str]] = {}
        if replayed is None:
            self._load()
            return
        self.replace(replayed)
        if not replayed and self.path is not None and self.path.exists():
            self._load()  # an earlier version's file: its ACLs written as records, then it goes
            self._write([b for b in self], [])
            self.path.unlink()

    def _insert(self, b: AclBinding, acl_id: uuid.UUID | None) -> None:
        self._by_pattern.setdefault(b.pattern, {})[b.entry] = acl_id
        if b.pattern.pattern_type == PatternType.PREFIXED:
            self._prefixed.setdefault(b.pattern.resource_type, set()).add(b.pattern.name)

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._by_pattern.values())

    def __iter__(self) -> Iterator[AclBinding]:
        for pattern, entries in list(self._by_pattern.items()):
            for entry in list(entries):
                yield AclBinding(pattern, entry)

    # -- lookups ----------------------------------------------------------------------------------
    def applicable(self, resource_type: ResourceType, name: str
                   ) -> Iterator[tuple[ResourcePattern, dict[AccessControlEntry, uuid.UUID | None]]]:
        """The stored patterns that apply to a resource, with their entries: the literal name, the
        literal wildcard, and every prefix of the name stored as PREFIXED."""
        by_pattern = self._by_pattern
        for pattern in (ResourcePattern(resource_type, name, PatternType.LITERAL),
                        ResourcePattern(resource_type, WILDCARD_RESOURCE, PatternType.LITERAL)):
            entries = by_pattern.get(pattern)
            if entries:
                yield pattern, entries
            if name == WILDCARD_RESOURCE:
                break
        prefixes = self._prefixed.get(resource_type)
        if prefixes:
            if len(prefixes) <= len(name):
                candidates: Iterable[str] = [p for p in prefixes if name.startswith(p)]
            else:
                candidates = [name[:i] for i in range(1, len(name) + 1) if name[:i] in prefixes]
            for prefix in candidates:
                pattern = ResourcePattern(resource_type, prefix, PatternType.PREFIXED)
                entries = by_pattern.get(pattern)
                if entries:
                    yield pattern, entries

    def of_type(self, resource_type: ResourceType) -> Iterator[AclBinding]:
        for binding in self:
            if binding.pattern.resource_type == resource_type:
                yield binding

    def matching(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return [b for b in self if acl_filter.matches(b)]

    # -- changes ----------------------------------------------------------------------------------
    def add(self, bindings: Iterable[AclBinding]) -> int:
        """Store bindings (an existing one is left as it is); returns how many were new."""
        added = [b for b in dict.fromkeys(bindings) if b.entry not in self._by_pattern.get(b.pattern, {})]
        if added:
            self._write(added, [])
        return len(added)

    def remove(self, bindings: Iterable[AclBinding]) -> int:
        removed: list[uuid.UUID | None] = []
        for b in bindings:
            entries = self._by_pattern.get(b.pattern)
            if entries is None or b.entry not in entries:
                continue
            removed.append(entries.pop(b.entry))
            if not entries:
                del self._by_pattern[b.pattern]
                if b.pattern.pattern_type == PatternType.PREFIXED:
                    self._prefixed[b.pattern.resource_type].discard(b.pattern.name)
        if removed:
            self._write([], [i for i in removed if i is not None])
        return len(removed)

    def replace(self, acls: dict[uuid.UUID, AclCodes]) -> None:
        """The ACLs the metadata log holds (replayed at start, or a broker process's copy of its controller's log
        now): taken, written nowhere."""
        self._by_pattern, self._prefixed = {}, {}
        for acl_id, codes in acls.items():
            self._insert(AclBinding.of(*codes), acl_id)

    # -- persistence ------------------------------------------------------------------------------
    def _load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            bindings = [AclBinding.from_json(d) for d in data["acls"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Failing closed: starting without the ACLs could open what they deny.
            raise AclStoreError(f"cannot read the ACLs in {self.path}: {exc}") from None
        for b in bindings:
            self._insert(b, None)
        log.info("loaded %d ACL(s) from %s", len(bindings), self.path)

    def _write(self, added: list[AclBinding], removed: list[uuid.UUID]) -> None:
        """Take ``added`` in (each with a new id when there is a metadata log) and keep the change: as records
        in the metadata log, else in the file."""
        ids = {uuid.uuid4(): b for b in added} if self.records is not None else {}
        for acl_id, b in ids.items():
            self._insert(b, acl_id)
        if self.records is not None:
            self.records.write_acls({acl_id: acl_codes(b) for acl_id, b in ids.items()}, removed)
            return
        for b in added:
            self._insert(b, None)
        self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": 1, "acls": [b.to_json() for b in self]}, indent=1))
        os.replace(tmp, self.path)


class StandardAuthorizer:
    """Kafka's ``StandardAuthorizer`` (and ``AclAuthorizer``): ACL checks, plus the ACL admin operations
    behind CreateAcls / DescribeAcls / DeleteAcls.  It satisfies the handlers' narrow
    :class:`~minikafka.broker.services.Authorizer` Protocol."""

    def __init__(self, store: AclStore | None = None, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.store = store if store is not None else AclStore()
        self.super_users = frozenset(super_users) | {BROKER_PRINCIPAL}
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    # -- checks -----------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str, log_if_denied: bool = True) -> bool:
        """Whether ``principal`` from ``host`` may do ``operation`` on the LITERAL resource (type, name)."""
        if principal in self.super_users:
            rule = "SuperUser"
            allowed = True
        else:
            allowed, rule = self._find(principal, host, operation, resource_type, name)
        if allowed:
            if audit_log.isEnabledFor(logging.DEBUG):
                audit_log.debug("Principal = %s is Allowed operation = %s from host = %s on resource = %s:LITERAL:%s"
                                " based on rule %s", principal, operation.name, host, resource_type.name, name, rule)
        elif log_if_denied:
            audit_log.info("Principal = %s is Denied operation = %s from host = %s on resource = %s:LITERAL:%s "
                           "based on rule %s", principal, operation.name, host, resource_type.name, name, rule)
        return allowed

    def _find(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
              name: str) -> tuple[bool, str]:
        """Kafka's ``StandardAuthorizerData.findAclRule``: (allowed, the rule that decided)."""
        allow: AclBinding | None = None
        has_resource_acls = False
        implied_by = _IMPLIED_BY.get(operation)
        for pattern, entries in self.store.applicable(resource_type, name):
            has_resource_acls = True
            for entry in entries:
                if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                    continue
                if not host_matches(entry.host, host):
                    continue
                op = entry.operation
                if entry.permission_type == AclPermissionType.DENY:
                    if op == operation or op == AclOperation.ALL:
                        return False, f"MatchingAcl(acl={AclBinding(pattern, entry)})"
                elif op == AclOperation.ALL or op == operation or (implied_by is not None and op in implied_by):
                    allow = AclBinding(pattern, entry)
        if allow is not None:
            return True, f"MatchingAcl(acl={allow})"
        if not has_resource_acls:
            return self.allow_everyone_if_no_acl_found, ("DefaultAllow" if self.allow_everyone_if_no_acl_found
                                                         else "DefaultDeny")
        return False, "DefaultDeny"

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type (Kafka's
        ``Authorizer.authorizeByResourceType`` default implementation, used for idempotent producers
        without IDEMPOTENT_WRITE on the cluster: an ALLOW of WRITE on some topic is enough)."""
        # A hard-coded name: super users, and allow.everyone.if.no.acl.found on an ACL-free type.
        if self.authorize(principal, host, operation, resource_type, "hardcode", log_if_denied=False):
            return True
        deny: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        allow: dict[PatternType, set[str]] = {PatternType.LITERAL: set(), PatternType.PREFIXED: set()}
        wildcard_allow = False
        for b in self.store.of_type(resource_type):
            e, p = b.entry, b.pattern
            if not host_matches(e.host, host):
                continue
            if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.operation != operation and e.operation != AclOperation.ALL:
                continue
            if e.permission_type == AclPermissionType.DENY:
                if p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE:
                    return False
                deny[p.pattern_type].add(p.name)
            elif e.permission_type == AclPermissionType.ALLOW:
                if p.pattern_type == PatternType.LITERAL and p.name == WILDCARD_RESOURCE:
                    wildcard_allow = True
                else:
                    allow[p.pattern_type].add(p.name)
        if wildcard_allow:
            return True
        for pattern_type, names in allow.items():
            for name in names:
                if pattern_type == PatternType.LITERAL and name in deny[PatternType.LITERAL]:
                    continue
                if not any(name[:i] in deny[PatternType.PREFIXED] for i in range(1, len(name) + 1)):
                    return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The ``authorized_operations`` bit field of a resource (Kafka's ``AuthHelper.authorizedOperations``)."""
        return operations_bitfield([op for op in SUPPORTED_OPERATIONS.get(resource_type, ())
                                    if self.authorize(principal, host, op, resource_type, name, log_if_denied=False)])

    # -- ACL administration -------------------------------------------------------------------------
    def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """Store each valid binding; per binding, its error (INVALID_REQUEST with Kafka's message) or NONE."""
        results: list[tuple[ErrorCode, str | None]] = []
        valid: list[AclBinding] = []
        for b in bindings:
            problem = b.validation_error()
            if problem is not None:
                results.append((ErrorCode.INVALID_REQUEST, problem))
            else:
                results.append((ErrorCode.NONE, None))
                valid.append(b)
        added = self.store.add(valid)
        if added:
            log.info("created %d ACL(s): %s", added, ", ".join(str(b) for b in valid))
        return results

    def delete_acls(self, filters: list[AclBindingFilter]
                    ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        """Per filter: its error, or the ACLs it matched (all matched against the ACLs as they were before
        the request, as Kafka's controller does), which are then deleted."""
        results: list[tuple[ErrorCode, str | None, list[AclBinding]]] = []
        doomed: dict[AclBinding, None] = {}
        for f in filters:
            if f.pattern.is_unknown():
                results.append((ErrorCode.INVALID_REQUEST, "Unknown patternFilter.", []))
            elif f.entry.is_unknown():
                results.append((ErrorCode.INVALID_REQUEST, "Unknown entryFilter.", []))
            else:
                matched = self.store.matching(f)
                doomed.update(dict.fromkeys(matched))
                results.append((ErrorCode.NONE, None, matched))
        removed = self.store.remove(doomed)
        if removed:
            log.info("deleted %d ACL(s): %s", removed, ", ".join(str(b) for b in doomed))
        return results

    def acls(self, acl_filter: AclBindingFilter) -> list[AclBinding]:
        return self.store.matching(acl_filter)


def parse_super_users(value: str) -> list[str]:
    """``super.users``: principals separated by semicolons (``User:alice;User:bob``)."""
    return [p.strip() for p in value.split(";") if p.strip()]


def create_authorizer(class_name: str, super_users: str, allow_everyone_if_no_acl_found: bool,
                      store: AclStore) -> StandardAuthorizer | None:
    """The authorizer ``authorizer.class.name`` asks for (with ``super.users`` and
    ``allow.everyone.if.no.acl.found``), or None (no authorization) when the name is empty.
    ValueError for a class minikafka does not implement."""
    name = class_name.strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"minikafka implements {' and '.join(AUTHORIZER_CLASS_NAMES)} (or empty for none)")
    users = parse_super_users(super_users)
    log.info("authorizer %s: super users %s, allow.everyone.if.no.acl.found=%s, %d ACL(s)",
             name.rsplit(".", 1)[-1], users, allow_everyone_if_no_acl_found, len(store))
    return StandardAuthorizer(store, users, allow_everyone_if_no_acl_found)


__all__ = ["ACL_AUTHORIZER", "AUTHORIZER_CLASS_NAMES", "BROKER_PRINCIPAL", "CLUSTER_NAME", "STANDARD_AUTHORIZER",
           "AclStore", "AclStoreError", "StandardAuthorizer", "create_authorizer", "parse_super_users"]
