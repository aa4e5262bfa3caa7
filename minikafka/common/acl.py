"""Kafka's ACL codes: ``ResourceType``, ``AclOperation``, ``PatternType`` and ``AclPermissionType`` as they
travel on the wire (CreateAcls, DescribeAcls, DeleteAcls, ``authorized_operations`` bit fields), the
cluster resource's name and the operations each resource type supports (Kafka's
``org.apache.kafka.common.acl`` / ``org.apache.kafka.common.resource`` enums and ``AclEntry.supportedOperations``).

Shared by the broker's authorizer (:mod:`minikafka.broker.security.acl` builds the ACL data model on them)
and the clients and tools that administer ACLs (``minikafka acls``).
"""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(IntEnum):
    """Kafka's ``AclOperation`` codes (the bit positions of the ``authorized_operations`` fields)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PatternType(IntEnum):
    """Kafka's ``PatternType`` codes: LITERAL and PREFIXED are stored; ANY and MATCH only filter."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(IntEnum):
    """Kafka's ``AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
"""The one name of the CLUSTER resource (Kafka's ``Resource.CLUSTER_NAME``)."""
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"

SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    # Kafka's AclEntry.supportedOperations: what ``authorized_operations`` fields can report per resource type.
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),  # group configs (KIP-848/KIP-932) added the last two
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


def pascal_name(code: IntEnum) -> str:
    """Kafka's ``SecurityUtils`` spelling of an enum value: ``CLUSTER_ACTION`` -> ``ClusterAction``."""
    return "".join(part.capitalize() for part in code.name.split("_"))


__all__ = ["ResourceType", "AclOperation", "PatternType", "AclPermissionType", "CLUSTER_NAME", "WILDCARD_RESOURCE",
           "WILDCARD_PRINCIPAL", "WILDCARD_HOST", "SUPPORTED_OPERATIONS", "pascal_name"]
