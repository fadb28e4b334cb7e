"""The one question handlers ask: may this request's principal, from its host, do this operation on
this resource? Always yes without an authorizer (authorizer.class.name unset)."""

from __future__ import annotations

from typing import Any

from broker.security.acls import CLUSTER_NAME
from protocol.enums import Operation, ResourceType


def allowed(broker: Any, request: Any, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(request.principal, request.client_host, operation, resource_type, name)


def allowed_on_cluster(broker: Any, request: Any, operation: Operation) -> bool:
    return allowed(broker, request, operation, ResourceType.CLUSTER, CLUSTER_NAME)
