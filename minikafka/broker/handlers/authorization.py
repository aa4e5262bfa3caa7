"""Authorization checks for handlers (Kafka's ``AuthHelper``).

Every handler that checks ACLs takes an optional :class:`~minikafka.broker.services.Authorizer`
(``None`` when the broker has no ``authorizer.class.name``) and asks through these helpers with the
request's :class:`~minikafka.broker.request.RequestContext`, whose ``principal`` (``"User:alice"``) and
``peer`` (``"host:port"``) the socket server filled in.  Without an authorizer every helper answers
"allowed" after one ``is None`` test; the hot paths (Produce, Fetch) test ``self.authorizer is None``
once per request and skip the helpers entirely.

Handlers written elsewhere (the SCRAM credential APIs, ...) use :func:`authorize` the same way::

    if not authorize(self.authorizer, ctx, AclOperation.ALTER):          # ALTER on the cluster
        return error_response(..., ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
"""

from __future__ import annotations

from collections.abc import Iterable

from ..request import RequestContext
from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType, operations_bitfield
from ..services import Authorizer

__all__ = ["AclOperation", "CLUSTER_NAME", "ResourceType", "authorize", "authorize_by_resource_type",
           "authorized_operations", "creatable_topics", "filter_authorized", "peer_host"]


def peer_host(peer: str) -> str:
    """The client's address as ACL hosts name it (Kafka's ``clientAddress.getHostAddress``) from a
    ``"host:port"`` (or ``"[v6]:port"``) peer."""
    if not peer or peer == "?":
        return ""
    if peer.startswith("["):
        return peer[1:].partition("]")[0]
    host, sep, port = peer.rpartition(":")  # the server writes "ip:port", also for IPv6 ("::1:50000")
    return host if sep and port.isdigit() else peer


def authorize(authorizer: Authorizer | None, ctx: RequestContext, operation: AclOperation,
              resource_type: ResourceType = ResourceType.CLUSTER, name: str = CLUSTER_NAME, *,
              log_if_denied: bool = True) -> bool:
    """Whether the request's principal may do ``operation`` on a resource (the cluster by default).

    Always true without an authorizer.  ``log_if_denied=False`` for checks that only filter what a
    listing shows (Kafka's ``logIfDenied``), so they do not fill the audit log."""
    if authorizer is None:
        return True
    return authorizer.authorize(ctx.principal, peer_host(ctx.peer), operation, resource_type, name,
                                log_if_denied)


def filter_authorized(authorizer: Authorizer | None, ctx: RequestContext, operation: AclOperation,
                      resource_type: ResourceType, names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
    """The names (each asked once) the principal may do ``operation`` on (Kafka's ``filterByAuthorized``)."""
    unique = set(names)
    if authorizer is None:
        return unique
    host = peer_host(ctx.peer)
    return {n for n in unique
            if authorizer.authorize(ctx.principal, host, operation, resource_type, n, log_if_denied)}


def authorize_by_resource_type(authorizer: Authorizer | None, ctx: RequestContext, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """Whether the principal may do ``operation`` on at least one resource of the type."""
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(ctx.principal, peer_host(ctx.peer), operation, resource_type)


def authorized_operations(authorizer: Authorizer | None, ctx: RequestContext, resource_type: ResourceType,
                          name: str) -> int:
    """The ``authorized_operations`` bits of a resource: what the principal may do among the operations
    the resource type supports (all of them without an authorizer, as Kafka reports)."""
    if authorizer is None:
        return operations_bitfield(SUPPORTED_OPERATIONS.get(resource_type, ()))
    return authorizer.authorized_operations(ctx.principal, peer_host(ctx.peer), resource_type, name)


def creatable_topics(authorizer: Authorizer | None, ctx: RequestContext, names: Iterable[str]) -> set[str]:
    """The topics the principal may create: all with CREATE on the cluster, else those with CREATE on the
    topic (Kafka's check before auto-creating topics for Metadata, and for CreateTopics)."""
    unique = set(names)
    if authorizer is None or not unique or authorize(authorizer, ctx, AclOperation.CREATE, log_if_denied=False):
        return unique
    return filter_authorized(authorizer, ctx, AclOperation.CREATE, ResourceType.TOPIC, unique)
