"""What CreateAcls, DescribeAcls and DeleteAcls share: turning wire entries into ACLs and filters, and
the checks Kafka makes on them (broker/security/acls.py has the model)."""

from __future__ import annotations

from broker.security.acls import CLUSTER_NAME, OPERATIONS, WILDCARD, Acl, AclFilter
from broker.security.principal import split
from protocol.enums import Operation, PatternType, Permission, ResourceType

SECURITY_DISABLED_TEXT = "No authorizer is configured on the broker (authorizer.class.name)"


class InvalidAcl(ValueError):
    pass


def _enum(kind, value: int, what: str):
    try:
        return kind(value)
    except ValueError:
        raise InvalidAcl(f"unknown {what} {value}") from None


def acl_from(entry, version: int) -> Acl:
    resource_type = _enum(ResourceType, entry.resource_type, "resource type")
    pattern = _enum(PatternType, entry.resource_pattern_type if version >= 1 else 3, "pattern type")
    operation = _enum(Operation, entry.operation, "operation")
    permission = _enum(Permission, entry.permission_type, "permission type")
    if resource_type == ResourceType.ANY or pattern in (PatternType.ANY, PatternType.MATCH) or \
            operation == Operation.ANY or permission == Permission.ANY:
        raise InvalidAcl("ANY and MATCH select ACLs; an ACL to create names a type, pattern, operation and permission")
    if operation != Operation.ALL and operation not in OPERATIONS[resource_type]:
        raise InvalidAcl(f"{operation.name} is not an operation on {resource_type.name}")
    if resource_type == ResourceType.CLUSTER and entry.resource_name != CLUSTER_NAME:
        raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME}")
    if not entry.resource_name:
        raise InvalidAcl("the resource name is empty")
    if pattern == PatternType.PREFIXED and entry.resource_name == WILDCARD:
        raise InvalidAcl("a PREFIXED pattern cannot be '*'")
    try:
        split(entry.principal)
    except ValueError as exc:
        raise InvalidAcl(str(exc)) from None
    if not entry.host:
        raise InvalidAcl("the host is empty ('*' means any)")
    return Acl(resource_type, entry.resource_name, pattern, entry.principal, entry.host, operation, permission)


def filter_from(entry, version: int) -> AclFilter:
    pattern = _enum(PatternType, entry.pattern_type_filter if version >= 1 else 3, "pattern type")
    return AclFilter(_enum(ResourceType, entry.resource_type_filter, "resource type"), entry.resource_name_filter,
                     pattern, entry.principal_filter, entry.host_filter,
                     _enum(Operation, entry.operation, "operation"),
                     _enum(Permission, entry.permission_type, "permission"))
