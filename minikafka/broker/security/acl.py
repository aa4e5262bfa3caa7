"""The ACL data model: Kafka's ``org.apache.kafka.common.acl`` and ``org.apache.kafka.common.resource``.

An :class:`AclBinding` ties a :class:`ResourcePattern` (resource type, name, LITERAL or PREFIXED pattern)
to an :class:`AccessControlEntry` (principal, host, operation, ALLOW or DENY).  Filters
(:class:`AclBindingFilter`) select bindings for DescribeAcls and DeleteAcls, with Kafka's matching rules:
a null name, principal or host matches anything, ANY matches every type/operation/permission, and the
MATCH pattern type selects every pattern that would apply to the named resource (the literal name, the
``*`` wildcard and every prefix of the name).  Numeric codes are Kafka's (``AclOperation``,
``ResourceType``, ``PatternType``, ``AclPermissionType``), as they travel on the wire.  The enums of those
codes live in :mod:`minikafka.common.acl` (the tools use them too) and are re-exported here.

Differences from Kafka: principals stay strings (``"User:alice"``) instead of ``KafkaPrincipal`` objects,
and hosts compare as strings, except that two IP addresses also compare equal when they are the same
address (``::1`` and ``0:0:0:0:0:0:0:1``), which Kafka gets from ``InetAddress.getHostAddress``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ...common.acl import (CLUSTER_NAME, SUPPORTED_OPERATIONS, WILDCARD_HOST, WILDCARD_PRINCIPAL,  # noqa: F401
                           WILDCARD_RESOURCE, AclOperation, AclPermissionType, PatternType, ResourceType)


def operations_bitfield(operations: "tuple[AclOperation, ...] | list[AclOperation]") -> int:
    """Kafka's ``Utils.to32BitField`` over operation codes: bit ``code`` set for each operation."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


def _enum(cls: type[IntEnum], code: int) -> Any:
    """``fromCode``: an unknown code reads as UNKNOWN, as Kafka's enums do."""
    try:
        return cls(code)
    except ValueError:
        return cls(0)


def parse_principal(principal: str) -> tuple[str, str]:
    """``"Type:name"`` -> (type, name); ValueError as Kafka's ``SecurityUtils.parseKafkaPrincipal``."""
    if not principal:
        raise ValueError("principalType and name must be non-null")
    kind, sep, name = principal.partition(":")
    if not sep:
        raise ValueError(f"Could not parse principal from `{principal}` (no colon is present separating the "
                         "principal type from the principal name)")
    return kind, name


def host_matches(acl_host: str, host: str) -> bool:
    """An ACL's host against a client address: ``*``, the same string, or the same IP address."""
    if acl_host == WILDCARD_HOST or acl_host == host:
        return True
    try:
        return ipaddress.ip_address(acl_host) == ipaddress.ip_address(host)
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """Kafka's ``ResourcePattern``: a resource type, a name and how the name matches (LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, " \
               f"patternType={self.pattern_type.name})"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Kafka's ``AccessControlEntry``: who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, " \
               f"permissionType={self.permission_type.name})"


@dataclass(frozen=True, slots=True)
class AclBinding:
    """Kafka's ``AclBinding``: one ACL."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"

    @classmethod
    def of(cls, resource_type: int, name: str, pattern_type: int, principal: str, host: str, operation: int,
           permission_type: int) -> AclBinding:
        """A binding from wire codes (unknown codes read as UNKNOWN)."""
        return cls(ResourcePattern(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type)),
                   AccessControlEntry(principal, host, _enum(AclOperation, operation),
                                      _enum(AclPermissionType, permission_type)))

    def to_json(self) -> dict[str, Any]:
        p, e = self.pattern, self.entry
        return {"resource_type": p.resource_type.name, "name": p.name, "pattern_type": p.pattern_type.name,
                "principal": e.principal, "host": e.host, "operation": e.operation.name,
                "permission_type": e.permission_type.name}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> AclBinding:
        return cls(ResourcePattern(ResourceType[d["resource_type"]], d["name"], PatternType[d["pattern_type"]]),
                   AccessControlEntry(d["principal"], d["host"], AclOperation[d["operation"]],
                                      AclPermissionType[d["permission_type"]]))

    def validation_error(self) -> str | None:
        """Why this binding cannot be stored, or None: Kafka's ``AclControlManager.validateNewAcl`` plus
        the checks of ``CreateAclsRequest`` and ``AclApis.handleCreateAcls``."""
        p, e = self.pattern, self.entry
        if p.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resourceType {p.resource_type.name}"
        if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {p.pattern_type.name}"
        if e.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"Invalid operation {e.operation.name}"
        if e.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permissionType {e.permission_type.name}"
        if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not p.name:
            return "Invalid empty resource name"
        try:
            parse_principal(e.principal)
        except ValueError as exc:
            return str(exc)
        return None


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Kafka's ``ResourcePatternFilter``: type (ANY for all), name (None for all), pattern type (ANY, MATCH,
    LITERAL or PREFIXED)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: every stored pattern that applies to the named resource.
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def is_unknown(self) -> bool:
        return ResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == self.pattern_type


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Kafka's ``AccessControlEntryFilter``: None principal/host and ANY operation/permission match all."""

    principal: str | None
    host: str | None
    operation: AclOperation
    permission_type: AclPermissionType

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type))

    def is_unknown(self) -> bool:
        return AclOperation.UNKNOWN == self.operation or AclPermissionType.UNKNOWN == self.permission_type


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``: selects bindings for DescribeAcls and DeleteAcls."""

    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    @classmethod
    def of(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
           host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
        """A filter from wire codes (unknown codes read as UNKNOWN)."""
        return cls(ResourcePatternFilter(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type)),
                   AccessControlEntryFilter(principal, host, _enum(AclOperation, operation),
                                            _enum(AclPermissionType, permission_type)))

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    def is_unknown(self) -> bool:
        return self.pattern.is_unknown() or self.entry.is_unknown()


ANY_FILTER = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY),
                              AccessControlEntryFilter(None, None, AclOperation.ANY, AclPermissionType.ANY))
"""Every ACL (Kafka's ``AclBindingFilter.ANY``)."""
