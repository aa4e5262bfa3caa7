"""The authorizer's semantics (Kafka's StandardAuthorizer), as a table of cases, plus ACL filters,
validation, ``authorizeByResourceType``, persistence and configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from minikafka.broker.broker import Broker, broker_authorizer
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.metadata_log import ClusterMetadataLog
from minikafka.broker.cluster_stores import open_acl_store
from minikafka.broker.config import BrokerConfig, ConfigError, StartupError
from minikafka.broker.security.acl import (ANY_FILTER, CLUSTER_NAME, AclBinding, AclBindingFilter, AclOperation,
                                           AclPermissionType, PatternType, ResourceType)
from minikafka.broker.security.authorizer import (ACL_AUTHORIZER, BROKER_PRINCIPAL, STANDARD_AUTHORIZER, AclStore,
                                                  StandardAuthorizer, parse_super_users)
from minikafka.protocol.errors import ErrorCode

T, G, C, TX = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
O = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(rtype: ResourceType, name: str, pattern: PatternType, principal: str, op: AclOperation,
        perm: AclPermissionType = ALLOW, host: str = "*") -> AclBinding:
    return AclBinding.of(rtype, name, pattern, principal, host, op, perm)


def authorizer(*bindings: AclBinding, super_users: tuple[str, ...] = (), allow_everyone: bool = False,
               store: AclStore | None = None) -> StandardAuthorizer:
    auth = StandardAuthorizer(store if store is not None else AclStore(), super_users, allow_everyone)
    assert all(code == ErrorCode.NONE for code, _ in auth.create_acls(list(bindings)))
    return auth


# (description, ACLs, request (principal, host, operation, type, name), expected, options)
CASES: list[tuple[str, list[AclBinding], tuple[str, str, AclOperation, ResourceType, str], bool, dict]] = [
    ("no ACL at all: denied by default", [], (ALICE, HOST, O.READ, T, "t"), False, {}),
    ("no ACL at all, allow.everyone.if.no.acl.found", [], (ALICE, HOST, O.READ, T, "t"), True,
     {"allow_everyone": True}),
    ("allow.everyone only when the resource has no ACL at all",
     [acl(T, "t", LIT, BOB, O.READ)], (ALICE, HOST, O.READ, T, "t"), False, {"allow_everyone": True}),
    ("allow.everyone: ACLs on another resource do not count",
     [acl(T, "other", LIT, BOB, O.READ)], (ALICE, HOST, O.READ, T, "t"), True, {"allow_everyone": True}),
    ("super user allowed everything", [], ("User:admin", HOST, O.ALTER, C, CLUSTER_NAME), True,
     {"super_users": ("User:admin",)}),
    ("super user wins over DENY", [acl(T, "t", LIT, "User:admin", O.ALL, DENY)],
     ("User:admin", HOST, O.WRITE, T, "t"), True, {"super_users": ("User:admin",)}),
    ("the broker principal is always a super user", [], (BROKER_PRINCIPAL, HOST, O.CLUSTER_ACTION, C, CLUSTER_NAME),
     True, {}),
    ("literal allow", [acl(T, "t", LIT, ALICE, O.READ)], (ALICE, HOST, O.READ, T, "t"), True, {}),
    ("literal allow is for that name only", [acl(T, "t", LIT, ALICE, O.READ)], (ALICE, HOST, O.READ, T, "t2"),
     False, {}),
    ("literal allow is for that principal only", [acl(T, "t", LIT, ALICE, O.READ)], (BOB, HOST, O.READ, T, "t"),
     False, {}),
    ("literal allow is for that operation only", [acl(T, "t", LIT, ALICE, O.READ)], (ALICE, HOST, O.WRITE, T, "t"),
     False, {}),
    ("literal allow is for that resource type only", [acl(T, "x", LIT, ALICE, O.READ)],
     (ALICE, HOST, O.READ, G, "x"), False, {}),
    ("wildcard resource", [acl(T, "*", LIT, ALICE, O.WRITE)], (ALICE, HOST, O.WRITE, T, "anything"), True, {}),
    ("wildcard principal User:*", [acl(T, "t", LIT, "User:*", O.READ)], (BOB, HOST, O.READ, T, "t"), True, {}),
    ("prefixed allow", [acl(T, "logs-", PRE, ALICE, O.READ)], (ALICE, HOST, O.READ, T, "logs-app"), True, {}),
    ("prefixed: the prefix itself matches", [acl(T, "logs-", PRE, ALICE, O.READ)], (ALICE, HOST, O.READ, T, "logs-"),
     True, {}),
    ("prefixed does not match other names", [acl(T, "logs-", PRE, ALICE, O.READ)], (ALICE, HOST, O.READ, T, "log"),
     False, {}),
    ("a literal ACL is not a prefix", [acl(T, "logs", LIT, ALICE, O.READ)], (ALICE, HOST, O.READ, T, "logs-app"),
     False, {}),
    ("host must match", [acl(T, "t", LIT, ALICE, O.READ, host="10.0.0.2")], (ALICE, HOST, O.READ, T, "t"), False, {}),
    ("host matches", [acl(T, "t", LIT, ALICE, O.READ, host=HOST)], (ALICE, HOST, O.READ, T, "t"), True, {}),
    ("IPv6 host in another spelling", [acl(T, "t", LIT, ALICE, O.READ, host="0:0:0:0:0:0:0:1")],
     (ALICE, "::1", O.READ, T, "t"), True, {}),
    ("DENY wins over ALLOW", [acl(T, "t", LIT, ALICE, O.READ), acl(T, "t", LIT, ALICE, O.READ, DENY)],
     (ALICE, HOST, O.READ, T, "t"), False, {}),
    ("a prefixed DENY wins over a literal ALLOW",
     [acl(T, "t", LIT, ALICE, O.READ), acl(T, "t", PRE, ALICE, O.READ, DENY)], (ALICE, HOST, O.READ, T, "t"),
     False, {}),
    ("a wildcard-principal DENY wins", [acl(T, "t", LIT, ALICE, O.READ), acl(T, "*", LIT, "User:*", O.READ, DENY)],
     (ALICE, HOST, O.READ, T, "t"), False, {}),
    ("a DENY for another host does not apply",
     [acl(T, "t", LIT, ALICE, O.READ), acl(T, "t", LIT, ALICE, O.READ, DENY, host="10.9.9.9")],
     (ALICE, HOST, O.READ, T, "t"), True, {}),
    ("ALL allows every operation", [acl(T, "t", LIT, ALICE, O.ALL)], (ALICE, HOST, O.DELETE, T, "t"), True, {}),
    ("ALL DENY denies every operation", [acl(T, "t", LIT, ALICE, O.ALL), acl(T, "t", LIT, ALICE, O.ALL, DENY)],
     (ALICE, HOST, O.DESCRIBE, T, "t"), False, {}),
    ("READ implies DESCRIBE", [acl(T, "t", LIT, ALICE, O.READ)], (ALICE, HOST, O.DESCRIBE, T, "t"), True, {}),
    ("WRITE implies DESCRIBE", [acl(T, "t", LIT, ALICE, O.WRITE)], (ALICE, HOST, O.DESCRIBE, T, "t"), True, {}),
    ("DELETE implies DESCRIBE", [acl(T, "t", LIT, ALICE, O.DELETE)], (ALICE, HOST, O.DESCRIBE, T, "t"), True, {}),
    ("ALTER implies DESCRIBE", [acl(T, "t", LIT, ALICE, O.ALTER)], (ALICE, HOST, O.DESCRIBE, T, "t"), True, {}),
    ("CREATE does not imply DESCRIBE", [acl(T, "t", LIT, ALICE, O.CREATE)], (ALICE, HOST, O.DESCRIBE, T, "t"),
     False, {}),
    ("DESCRIBE does not imply READ", [acl(T, "t", LIT, ALICE, O.DESCRIBE)], (ALICE, HOST, O.READ, T, "t"), False, {}),
    ("ALTER_CONFIGS implies DESCRIBE_CONFIGS", [acl(T, "t", LIT, ALICE, O.ALTER_CONFIGS)],
     (ALICE, HOST, O.DESCRIBE_CONFIGS, T, "t"), True, {}),
    ("a DENY of READ does not deny DESCRIBE", [acl(T, "t", LIT, ALICE, O.WRITE), acl(T, "t", LIT, ALICE, O.READ, DENY)],
     (ALICE, HOST, O.DESCRIBE, T, "t"), True, {}),
    ("a DENY of DESCRIBE denies it even with READ allowed",
     [acl(T, "t", LIT, ALICE, O.READ), acl(T, "t", LIT, ALICE, O.DESCRIBE, DENY)], (ALICE, HOST, O.DESCRIBE, T, "t"),
     False, {}),
    ("group READ", [acl(G, "g", LIT, ALICE, O.READ)], (ALICE, HOST, O.READ, G, "g"), True, {}),
    ("cluster IDEMPOTENT_WRITE", [acl(C, CLUSTER_NAME, LIT, ALICE, O.IDEMPOTENT_WRITE)],
     (ALICE, HOST, O.IDEMPOTENT_WRITE, C, CLUSTER_NAME), True, {}),
    ("transactional id WRITE by prefix", [acl(TX, "app-", PRE, ALICE, O.WRITE)], (ALICE, HOST, O.WRITE, TX, "app-1"),
     True, {}),
    ("principal types differ", [acl(T, "t", LIT, "Group:alice", O.READ)], (ALICE, HOST, O.READ, T, "t"), False, {}),
]


@pytest.mark.parametrize("description,acls,request_,expected,options", CASES, ids=[c[0] for c in CASES])
def test_authorize(description: str, acls: list[AclBinding], request_: tuple, expected: bool, options: dict) -> None:
    assert authorizer(*acls, **options).authorize(*request_) is expected, description


def test_authorized_operations_bits() -> None:
    auth = authorizer(acl(T, "t", LIT, ALICE, O.READ), acl(T, "t", LIT, ALICE, O.ALTER_CONFIGS))
    bits = auth.authorized_operations(ALICE, HOST, T, "t")
    assert bits == (1 << O.READ) | (1 << O.DESCRIBE) | (1 << O.ALTER_CONFIGS) | (1 << O.DESCRIBE_CONFIGS)
    assert auth.authorized_operations(BOB, HOST, T, "t") == 0
    # A super user gets every operation the resource type supports (no CLUSTER_ACTION on a group).
    su = authorizer(super_users=(ALICE,))
    assert su.authorized_operations(ALICE, HOST, G, "g") == ((1 << O.READ) | (1 << O.DESCRIBE) | (1 << O.DELETE)
                                                           | (1 << O.DESCRIBE_CONFIGS) | (1 << O.ALTER_CONFIGS))


@pytest.mark.parametrize("acls,expected", [
    ([], False),
    ([acl(T, "t", LIT, ALICE, O.WRITE)], True),
    ([acl(T, "t", LIT, ALICE, O.WRITE), acl(T, "t", LIT, ALICE, O.WRITE, DENY)], False),
    ([acl(T, "t", LIT, ALICE, O.WRITE), acl(T, "t", PRE, ALICE, O.WRITE, DENY)], False),  # dominated by a prefix
    ([acl(T, "tx", LIT, ALICE, O.WRITE), acl(T, "t", PRE, ALICE, O.WRITE, DENY)], False),
    ([acl(T, "tx", LIT, ALICE, O.WRITE), acl(T, "ty", PRE, ALICE, O.WRITE, DENY)], True),
    ([acl(T, "p-", PRE, ALICE, O.WRITE)], True),
    ([acl(T, "*", LIT, ALICE, O.WRITE)], True),
    ([acl(T, "*", LIT, ALICE, O.WRITE), acl(T, "*", LIT, ALICE, O.WRITE, DENY)], False),
    ([acl(T, "t", LIT, ALICE, O.READ)], False),  # another operation
    ([acl(T, "t", LIT, BOB, O.WRITE)], False),  # another principal
    ([acl(T, "t", LIT, "User:*", O.ALL)], True),
    ([acl(G, "g", LIT, ALICE, O.WRITE)], False),  # another resource type
])
def test_authorize_by_resource_type(acls: list[AclBinding], expected: bool) -> None:
    """Kafka's Authorizer.authorizeByResourceType: WRITE on at least one topic (idempotent producers)."""
    assert authorizer(*acls).authorize_by_resource_type(ALICE, HOST, O.WRITE, T) is expected


def test_authorize_by_resource_type_super_user_and_allow_everyone() -> None:
    assert authorizer(super_users=(ALICE,)).authorize_by_resource_type(ALICE, HOST, O.WRITE, T)
    assert authorizer(allow_everyone=True).authorize_by_resource_type(ALICE, HOST, O.WRITE, T)


# -- filters (DescribeAcls / DeleteAcls) --------------------------------------------------------------
STORED = [acl(T, "orders", LIT, ALICE, O.READ), acl(T, "ord", PRE, BOB, O.WRITE), acl(T, "*", LIT, ALICE, O.DESCRIBE),
          acl(G, "orders", LIT, ALICE, O.READ), acl(C, CLUSTER_NAME, LIT, ALICE, O.ALTER, DENY, host=HOST)]


def flt(rtype: int = ResourceType.ANY, name: str | None = None, pattern: int = PatternType.ANY,
        principal: str | None = None, host: str | None = None, op: int = O.ANY,
        perm: int = AclPermissionType.ANY) -> AclBindingFilter:
    return AclBindingFilter.of(rtype, name, pattern, principal, host, op, perm)


@pytest.mark.parametrize("acl_filter,expected", [
    (ANY_FILTER, [0, 1, 2, 3, 4]),
    (flt(T), [0, 1, 2]),
    (flt(T, "orders", LIT), [0]),
    (flt(T, "orders"), [0]),  # ANY pattern type: the name exactly, any stored pattern type
    (flt(T, "ord"), [1]),
    (flt(T, "orders", PatternType.MATCH), [0, 1, 2]),  # everything that applies to topic "orders"
    (flt(T, "other", PatternType.MATCH), [2]),
    (flt(T, None, PRE), [1]),
    (flt(principal=ALICE), [0, 2, 3, 4]),
    (flt(host=HOST), [4]),
    (flt(op=O.WRITE), [1]),
    (flt(perm=DENY), [4]),
    (flt(G, "orders", LIT, ALICE, "*", O.READ, ALLOW), [3]),
])
def test_filters(acl_filter: AclBindingFilter, expected: list[int]) -> None:
    auth = authorizer(*STORED)
    assert sorted(STORED.index(b) for b in auth.acls(acl_filter)) == expected


def test_delete_acls_matches_before_deleting_and_reports_each_filter() -> None:
    auth = authorizer(*STORED)
    results = auth.delete_acls([flt(T, "orders", LIT), flt(T, "orders", PatternType.MATCH),
                                flt(ResourceType.UNKNOWN), flt(T, op=O.UNKNOWN)])
    assert [r[0] for r in results] == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST,
                                       ErrorCode.INVALID_REQUEST]
    assert results[0][2] == [STORED[0]]
    assert sorted(STORED.index(b) for b in results[1][2]) == [0, 1, 2]  # also the one filter 0 deleted
    assert sorted(STORED.index(b) for b in auth.acls(ANY_FILTER)) == [3, 4]


@pytest.mark.parametrize("binding,message", [
    (acl(C, "other", LIT, ALICE, O.ALTER), "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(T, "", LIT, ALICE, O.READ), "Invalid empty resource name"),
    (acl(T, "t", PatternType.MATCH, ALICE, O.READ), "Invalid patternType MATCH"),
    (acl(T, "t", PatternType.ANY, ALICE, O.READ), "Invalid patternType ANY"),
    (acl(T, "t", LIT, ALICE, O.ANY), "Invalid operation ANY"),
    (AclBinding.of(T, "t", LIT, ALICE, "*", 99, ALLOW), "Invalid operation UNKNOWN"),
    (acl(T, "t", LIT, ALICE, O.READ, AclPermissionType.ANY), "Invalid permissionType ANY"),
    (acl(ResourceType.ANY, "t", LIT, ALICE, O.READ), "Invalid resourceType ANY"),
    (acl(T, "t", LIT, "alice", O.READ), "no colon"),
])
def test_create_acls_validation(binding: AclBinding, message: str) -> None:
    auth = authorizer()
    [(code, got)] = auth.create_acls([binding])
    assert code == ErrorCode.INVALID_REQUEST and got is not None and message in got
    assert auth.acls(ANY_FILTER) == []


def test_create_acls_is_idempotent() -> None:
    auth = authorizer(STORED[0])
    assert auth.create_acls([STORED[0]]) == [(ErrorCode.NONE, None)]
    assert auth.acls(ANY_FILTER) == [STORED[0]]


# -- persistence and configuration ---------------------------------------------------------------------
def test_store_persists_and_reloads(tmp_path: Path) -> None:
    auth = authorizer(*STORED, store=AclStore(tmp_path))
    auth.delete_acls([flt(perm=DENY)])
    again = StandardAuthorizer(AclStore(tmp_path))
    assert set(again.acls(ANY_FILTER)) == set(STORED[:4])
    assert again.authorize(BOB, HOST, O.WRITE, T, "orders-eu")  # the prefix index is rebuilt


def test_acls_are_records_of_the_metadata_log_and_a_file_of_an_earlier_version_is_carried_over(
        tmp_path: Path) -> None:
    file_store = AclStore(tmp_path)  # an earlier version: acls.json
    authorizer(*STORED, store=file_store)
    assert (tmp_path / "acls.json").exists()

    metadata = ClusterMetadata([0], tmp_path)
    auth = StandardAuthorizer(open_acl_store(tmp_path, metadata))
    assert set(auth.acls(ANY_FILTER)) == set(STORED) and not (tmp_path / "acls.json").exists()
    auth.delete_acls([flt(perm=DENY)])
    metadata.close()
    mlog = ClusterMetadataLog(tmp_path)
    names = [rec.name for _, rec in mlog.records()]
    mlog.close()
    assert names.count("AccessControlEntryRecord") == len(STORED)
    assert names.count("RemoveAccessControlEntryRecord") == len(STORED) - 4

    metadata = ClusterMetadata([0], tmp_path)
    again = StandardAuthorizer(open_acl_store(tmp_path, metadata))
    assert set(again.acls(ANY_FILTER)) == set(STORED[:4])
    assert again.authorize(BOB, HOST, O.WRITE, T, "orders-eu")  # the prefix index is rebuilt
    assert again.create_acls([STORED[4]]) == [(ErrorCode.NONE, None)]
    metadata.close()
    metadata = ClusterMetadata([0], tmp_path)
    assert set(StandardAuthorizer(open_acl_store(tmp_path, metadata)).acls(ANY_FILTER)) == set(STORED[:5])
    metadata.close()


def test_corrupt_acl_file_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "acls.json").write_text("{not json")
    metadata = ClusterMetadata([0], tmp_path)
    with pytest.raises(StartupError, match="cannot read the ACLs"):
        open_acl_store(tmp_path, metadata)
    metadata.close()


@pytest.mark.parametrize("name", [STANDARD_AUTHORIZER, ACL_AUTHORIZER])
def test_config_keys(tmp_path: Path, name: str) -> None:
    props = tmp_path / "server.properties"
    props.write_text(f"authorizer.class.name={name}\nsuper.users=User:admin; User:ops\n"
                     "allow.everyone.if.no.acl.found=true\n")
    config = BrokerConfig.from_properties(props)
    assert (config.authorizer_class_name, config.allow_everyone_if_no_acl_found) == (name, True)
    auth = broker_authorizer(config, AclStore())
    assert auth is not None
    assert auth.super_users == {"User:admin", "User:ops", BROKER_PRINCIPAL}
    assert auth.allow_everyone_if_no_acl_found


def test_no_authorizer_by_default_and_unknown_class_refused() -> None:
    assert BrokerConfig().authorizer_class_name == "" and not BrokerConfig().allow_everyone_if_no_acl_found
    assert broker_authorizer(BrokerConfig(), AclStore()) is None
    with pytest.raises(ConfigError, match="authorizer.class.name"):
        broker_authorizer(BrokerConfig(authorizer_class_name="com.example.MyAuthorizer"), AclStore())
    with pytest.raises(StartupError):
        Broker(BrokerConfig(port=0, authorizer_class_name="com.example.MyAuthorizer"))


def test_parse_super_users() -> None:
    assert parse_super_users(" User:a ;User:b;; ") == ["User:a", "User:b"]
    assert parse_super_users("") == []
