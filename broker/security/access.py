"""The one question handlers ask: may the principal a request came from, from its host, do this
operation on this resource? Always yes without an authorizer (authorizer.class.name unset)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from broker.security.acls import CLUSTER_NAME
from protocol.enums import Operation, ResourceType

if TYPE_CHECKING:
    from broker.security.authorizer import Authorizer


class Guarded(Protocol):
    """The broker as these checks see it (handlers' BrokerContext is one)."""

    @property
    def authorizer(self) -> Authorizer | None: ...


class Asker(Protocol):
    """Who asks: the principal a request's connection authenticated as and its host (the handlers'
    RequestContext is one)."""

    @property
    def principal(self) -> str: ...
    @property
    def client_host(self) -> str: ...


def allowed(broker: Guarded, asker: Asker, operation: Operation, resource_type: ResourceType, name: str) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(asker.principal, asker.client_host, operation, resource_type, name)


def allowed_on_cluster(broker: Guarded, asker: Asker, operation: Operation) -> bool:
    return allowed(broker, asker, operation, ResourceType.CLUSTER, CLUSTER_NAME)
