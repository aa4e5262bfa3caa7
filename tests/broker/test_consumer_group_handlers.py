"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69) handlers through their real schemas: requests
built and parsed at each version, the handler run with its services (the group coordinator, an in-memory
metadata store, group configs, an authorizer), the response built and parsed at the same version."""

from __future__ import annotations

import itertools
from typing import Any

import trio

from minikafka.broker.config import BrokerConfig
from minikafka.common.clock import ManualClock
from minikafka.broker.groups import GroupCoordinator
from minikafka.broker.groups.group_config import GroupConfigManager
from minikafka.broker.handlers.consumer_groups import (
    ConsumerGroupDescribeHandler,
    ConsumerGroupHeartbeatHandler,
)
from minikafka.broker.metadata import ClusterMetadata
from minikafka.broker.request import RequestContext
from minikafka.broker.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from minikafka.broker.security.authorizer import StandardAuthorizer
from minikafka.protocol.api import APIS, ApiKey
from minikafka.protocol.errors import ErrorCode as E

_corr = itertools.count(1)
ALICE, BOB = "User:alice", "User:bob"


class Env:
    def __init__(self, *, authorizer: bool = False, owns: bool = True, **config: Any) -> None:
        self.config = BrokerConfig(port=9092, **config)
        self.coordinator = GroupCoordinator(self.config, None, clock=trio.current_time,
                                            wall_clock=ManualClock(1_700_000_000_000))
        self.metadata = ClusterMetadata([0])
        self.metadata.broker_started(0, "127.0.0.1", 9092)
        self.metadata.create_topic("t", 3, 1)
        self.metadata.create_topic("secret", 1, 1)
        self.group_configs = GroupConfigManager(self.config)
        self.authorizer = StandardAuthorizer() if authorizer else None
        def error(group_id: str) -> E:
            return E.NONE if owns else E.NOT_COORDINATOR

        self.heartbeat = ConsumerGroupHeartbeatHandler(self.coordinator, self.metadata, self.group_configs,
                                                       authorizer=self.authorizer, coordinator_error=error)
        self.describe = ConsumerGroupDescribeHandler(self.coordinator, self.metadata, authorizer=self.authorizer,
                                                     coordinator_error=error)

    def allow(self, rtype: ResourceType, name: str, *ops: AclOperation, principal: str = ALICE) -> None:
        assert self.authorizer is not None
        self.authorizer.create_acls([AclBinding.of(rtype, name, PatternType.LITERAL, principal, "*", op,
                                                   AclPermissionType.ALLOW) for op in ops])


async def call(handler: Any, key: ApiKey, version: int, fields: dict, principal: str = ALICE) -> Any:
    api = APIS[key]
    req = api.request.parse(api.request.build(fields, version), version)
    ctx = RequestContext(int(key), version, next(_corr), "client-1", "conn", peer="10.0.0.1:5000", principal=principal,
                         request_size=100)
    body = await handler.handle(ctx, req)
    return api.response.parse(api.response.build(body, version), version)


def join_fields(member_id: str = "member-1", **kw: Any) -> dict:
    return {"group_id": "g", "member_id": member_id, "member_epoch": 0, "rebalance_timeout_ms": 30000,
            "subscribed_topic_names": ["t"], "topic_partitions": [], **kw}


async def test_join_heartbeat_leave_v1() -> None:
    env = Env(group_consumer_heartbeat_interval_ms=2000, group_consumer_min_heartbeat_interval_ms=1000)
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields())
    assert r.error_code == E.NONE and r.member_id == "member-1" and r.member_epoch == 1
    assert r.heartbeat_interval_ms == 2000
    t = env.metadata.get_topic("t")
    assert t is not None
    assert [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions] == [(t.topic_id, [0, 1, 2])]
    # An ordinary heartbeat with the owned partitions: no assignment in the answer.
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, {
        "group_id": "g", "member_id": "member-1", "member_epoch": 1,
        "topic_partitions": [{"topic_id": t.topic_id, "partitions": [0, 1, 2]}]})
    assert r.error_code == E.NONE and r.assignment is None
    d = await call(env.describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 1,
                   {"group_ids": ["g", "missing"], "include_authorized_operations": True})
    g, missing = d.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        E.NONE, "Stable", 1, 1, "uniform")
    (m,) = g.members
    assert (m.member_id, m.member_epoch, m.client_id, m.client_host, m.member_type) == (
        "member-1", 1, "client-1", "/10.0.0.1", 1)
    assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [("t", [0, 1, 2])]
    assert [(tp.topic_name, tp.partitions) for tp in m.target_assignment.topic_partitions] == [("t", [0, 1, 2])]
    assert g.authorized_operations > 0
    assert (missing.error_code, missing.error_message) == (E.GROUP_ID_NOT_FOUND, "Group missing not found.")
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                   {"group_id": "g", "member_id": "member-1", "member_epoch": -1})
    assert (r.error_code, r.member_id, r.member_epoch) == (E.NONE, "member-1", -1)


async def test_v0_coordinator_generates_the_member_id_and_v1_requires_one() -> None:
    env = Env()
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, join_fields(member_id=""))
    assert r.error_code == E.NONE and r.member_id and len(r.member_id) == 22
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields(member_id=""))
    assert (r.error_code, r.error_message, r.member_id) == (E.INVALID_REQUEST, "MemberId can't be empty.", None)


async def test_group_configs_set_the_heartbeat_interval(autojump_clock: Any) -> None:
    env = Env(group_consumer_min_heartbeat_interval_ms=100, group_consumer_min_session_timeout_ms=1000)
    env.group_configs.alter("g", [("consumer.heartbeat.interval.ms", 0, "750"),
                                  ("consumer.session.timeout.ms", 0, "3000")], incremental=True, validate_only=False)
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields())
    assert r.heartbeat_interval_ms == 750
    member = env.coordinator.groups["g"].consumer.members["member-1"]  # type: ignore[union-attr]
    assert member.session_deadline == trio.current_time() + 3.0


async def test_not_coordinator() -> None:
    env = Env(owns=False)
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields())
    assert r.error_code == E.NOT_COORDINATOR
    d = await call(env.describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": ["g"]})
    assert d.groups[0].error_code == E.NOT_COORDINATOR


async def test_authorization() -> None:
    env = Env(authorizer=True)
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields())
    assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
    d = await call(env.describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"]})
    assert d.groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED
    env.allow(ResourceType.GROUP, "g", AclOperation.READ)
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields())
    assert r.error_code == E.TOPIC_AUTHORIZATION_FAILED  # no DESCRIBE on the subscribed topic
    env.allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE)
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1, join_fields())
    assert r.error_code == E.NONE
    # A regex only resolves to topics the member may describe ("secret" matches but is left out).
    r = await call(env.heartbeat, ApiKey.CONSUMER_GROUP_HEARTBEAT, 1,
                   join_fields(member_id="member-2", subscribed_topic_names=None, subscribed_topic_regex=".*"))
    assert r.error_code == E.NONE
    cg = env.coordinator.groups["g"].consumer
    assert cg is not None and cg.resolved_regexes[".*"] == {"t"}
    # READ on the group implies DESCRIBE.
    d = await call(env.describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"]})
    assert d.groups[0].error_code == E.NONE and len(d.groups[0].members) == 2
    # Bob may describe the group but not its topic.
    env.allow(ResourceType.GROUP, "g", AclOperation.DESCRIBE, principal=BOB)
    d = await call(env.describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"]}, principal=BOB)
    assert d.groups[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
    env.allow(ResourceType.TOPIC, "t", AclOperation.DESCRIBE, principal=BOB)
    d = await call(env.describe, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, {"group_ids": ["g"]}, principal=BOB)
    assert d.groups[0].error_code == E.NONE
