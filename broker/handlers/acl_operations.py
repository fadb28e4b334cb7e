"""Authorized-operation bitfields (KIP-430) for responses that report them.

Each bit is `1 << AclOperation code`: the operations of the resource type the caller may do — all of
them without an authorizer, else those the authorizer allows. Only operations valid for the resource
are ever set, because clients such as kafka-python turn the bits back into enum members and raise on
unknown ones. INT32_MIN means "not requested".
"""

from __future__ import annotations

from broker.security.access import Asker, Guarded
from broker.security.acls import CLUSTER_NAME, OPERATIONS
from protocol.enums import Operation, ResourceType

NOT_REQUESTED = -(2**31)


def _bits(*operations: int) -> int:
    return sum(1 << op for op in operations)


# Kafka's AclEntry.supportedOperations per resource type (broker/security/acls.py's OPERATIONS).
TOPIC_OPERATIONS = _bits(*OPERATIONS[ResourceType.TOPIC])
CLUSTER_OPERATIONS = _bits(*OPERATIONS[ResourceType.CLUSTER])
GROUP_OPERATIONS = _bits(*OPERATIONS[ResourceType.GROUP])


def authorized(broker: Guarded, connection: Asker, resource_type: ResourceType, name: str, supported: int) -> int:
    """The bits of `supported` the connection's principal may do on the resource."""
    authorizer = broker.authorizer
    if authorizer is None:
        return supported
    return sum(1 << op for op in range(32) if supported & (1 << op) and
               authorizer.authorize(connection.principal, connection.client_host, Operation(op), resource_type, name))


def authorized_on_cluster(broker: Guarded, connection: Asker, requested: bool) -> int:
    return authorized(broker, connection, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS) if requested \
        else NOT_REQUESTED
