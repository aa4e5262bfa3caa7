"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31): ACL administration (Kafka's ``AclApis``).

Without an authorizer the three answer SECURITY_DISABLED ("No Authorizer is configured on the broker").
DescribeAcls needs DESCRIBE on the cluster, CreateAcls and DeleteAcls ALTER on the cluster; without it the
request is answered CLUSTER_AUTHORIZATION_FAILED.  Version 0 knows only literal patterns (its bindings and
filters read back as LITERAL).  Filters follow Kafka's rules: ANY type/operation/permission and a null
name/principal/host match everything, the ANY pattern type matches both stored types by name, and MATCH
selects every ACL that applies to the named resource (literal, wildcard and prefixes).  A filter with an
UNKNOWN field gets INVALID_REQUEST.

Deliberate difference: Kafka refuses a DescribeAcls filter or an ACL creation with UNKNOWN fields when it
parses the request (closing the connection); minikafka answers INVALID_REQUEST instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...protocol.errors import ErrorCode
from ..request import RequestContext
from ..security.acl import AclBinding, AclBindingFilter
from ..services import Authorizer
from .authorization import AclOperation, authorize

if TYPE_CHECKING:
    from ...protocol import bodies as B

log = logging.getLogger(__name__)

E = ErrorCode
NO_AUTHORIZER = "No Authorizer is configured on the broker"
CLUSTER_DENIED = "Cluster authorization failed."


def _filter_of(f: B.DescribeAclsRequestBody | B.DeleteAclsRequestFilters) -> AclBindingFilter:
    return AclBindingFilter.of(f["resource_type_filter"], f["resource_name_filter"], f["pattern_type_filter"],
                               f["principal_filter"], f["host_filter"], f["operation"], f["permission_type"])


def acl_resources(bindings: Iterable[AclBinding]) -> list[B.DescribeAclsResponseResources]:
    """Bindings grouped by resource pattern, as DescribeAcls answers them (Kafka's ``aclsResources``),
    in a stable order: resource type, name, pattern type."""
    by_pattern: dict[tuple[int, str, int], list[B.DescribeAclsResponseResourcesAcls]] = {}
    for b in bindings:
        p, e = b.pattern, b.entry
        by_pattern.setdefault((int(p.resource_type), p.name, int(p.pattern_type)), []).append(
            {"principal": e.principal, "host": e.host, "operation": int(e.operation),
             "permission_type": int(e.permission_type)})
    return [{"resource_type": rt, "resource_name": name, "pattern_type": pt, "acls": acls}
            for (rt, name, pt), acls in sorted(by_pattern.items())]


class DescribeAclsHandler:
    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DescribeAclsRequestBody) -> B.DescribeAclsResponseBody:
        if self.authorizer is None:
            return {"throttle_time_ms": 0, "error_code": E.SECURITY_DISABLED, "error_message": NO_AUTHORIZER,
                    "resources": []}
        if not authorize(self.authorizer, ctx, AclOperation.DESCRIBE):
            return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                    "error_message": CLUSTER_DENIED, "resources": []}
        acl_filter = _filter_of(req)
        if acl_filter.is_unknown():
            return {"throttle_time_ms": 0, "error_code": E.INVALID_REQUEST,
                    "error_message": "DescribeAclsRequest contains UNKNOWN elements", "resources": []}
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "resources": acl_resources(self.authorizer.acls(acl_filter))}


class CreateAclsHandler:
    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.CreateAclsRequestBody) -> B.CreateAclsResponseBody:
        creations = req["creations"]
        if self.authorizer is None or not authorize(self.authorizer, ctx, AclOperation.ALTER):
            code, message = ((E.SECURITY_DISABLED, NO_AUTHORIZER) if self.authorizer is None
                             else (E.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED))
            return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message}
                                                       for _ in creations]}
        bindings = [AclBinding.of(c["resource_type"], c["resource_name"], c["resource_pattern_type"], c["principal"],
                                  c["host"], c["operation"], c["permission_type"]) for c in creations]
        results = self.authorizer.create_acls(bindings)
        for b, (error, problem) in zip(bindings, results):
            if error:
                log.info("ACL %s not created by %s: %s", b, ctx.principal, problem)
        return {"throttle_time_ms": 0, "results": [{"error_code": code, "error_message": message}
                                                   for code, message in results]}


class DeleteAclsHandler:
    def __init__(self, authorizer: Authorizer | None) -> None:
        self.authorizer = authorizer

    async def handle(self, ctx: RequestContext, req: B.DeleteAclsRequestBody) -> B.DeleteAclsResponseBody:
        filters = req["filters"]
        if self.authorizer is None or not authorize(self.authorizer, ctx, AclOperation.ALTER):
            code, message = ((E.SECURITY_DISABLED, NO_AUTHORIZER) if self.authorizer is None
                             else (E.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED))
            return {"throttle_time_ms": 0, "filter_results": [
                {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]}
        results = self.authorizer.delete_acls([_filter_of(f) for f in filters])
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": [
                {"error_code": 0, "error_message": None, "resource_type": int(b.pattern.resource_type),
                 "resource_name": b.pattern.name, "pattern_type": int(b.pattern.pattern_type),
                 "principal": b.entry.principal, "host": b.entry.host, "operation": int(b.entry.operation),
                 "permission_type": int(b.entry.permission_type)}
                for b in matched]}
            for code, message, matched in results]}
