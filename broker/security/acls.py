"""Kafka's ACL model (KIP-11, KIP-290) and the decision an authorizer makes from it.

An ACL: (resource type, name, pattern type) x (principal, host, operation, ALLOW or DENY). A request
for an operation on a resource is allowed when
  - the principal is a super user; else
  - no DENY ACL matches (DENY wins); and an ALLOW ACL matches the operation or one that implies it
    (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS; ALL all);
  - or no ACL at all names the resource and allow.everyone.if.no.acl.found is true.
A name matches a LITERAL ACL with that name or "*", and a PREFIXED ACL whose name it starts with; a
principal matches itself or "User:*"; a host matches itself or "*".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from protocol.enums import Operation, PatternType, Permission, ResourceType

CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD = "*"
# An ALLOW for the key also allows these (Kafka's implied operations).
IMPLIES = {
    Operation.READ: {Operation.DESCRIBE}, Operation.WRITE: {Operation.DESCRIBE},
    Operation.DELETE: {Operation.DESCRIBE}, Operation.ALTER: {Operation.DESCRIBE},
    Operation.ALTER_CONFIGS: {Operation.DESCRIBE_CONFIGS},
}
# The operations each resource type has (CreateAcls refuses others).
OPERATIONS = {
    ResourceType.TOPIC: {Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},
    ResourceType.GROUP: {Operation.READ, Operation.DELETE, Operation.DESCRIBE,
                         Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},  # the last two: group configs
    ResourceType.CLUSTER: {Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE},
    ResourceType.TRANSACTIONAL_ID: {Operation.WRITE, Operation.DESCRIBE},
}


@dataclass(frozen=True)
class Acl:
    resource_type: ResourceType
    name: str
    pattern: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def names(self, resource_type: ResourceType, name: str) -> bool:
        """Does this ACL's resource pattern cover the resource?"""
        if self.resource_type != resource_type:
            return False
        if self.pattern == PatternType.LITERAL:
            return self.name in (name, WILDCARD)
        return name.startswith(self.name)

    def applies_to(self, principal: str, host: str) -> bool:
        kind = principal.split(":", 1)[0]
        return self.principal in (principal, f"{kind}:{WILDCARD}") and self.host in (host, WILDCARD)

    def grants(self, operation: Operation) -> bool:
        return self.operation in (operation, Operation.ALL) or operation in IMPLIES.get(self.operation, ())


@dataclass(frozen=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select; None or ANY matches anything."""

    resource_type: ResourceType
    name: str | None
    pattern: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, acl: Acl) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if self.pattern == PatternType.MATCH:
            if self.name is not None and not acl.names(acl.resource_type, self.name):
                return False
        else:
            if self.pattern != PatternType.ANY and acl.pattern != self.pattern:
                return False
            if self.name is not None and acl.name != self.name:
                return False
        return ((self.principal is None or acl.principal == self.principal)
                and (self.host is None or acl.host == self.host)
                and (self.operation == Operation.ANY or acl.operation == self.operation)
                and (self.permission == Permission.ANY or acl.permission == self.permission))


def decide(acls: Iterable[Acl], super_users: frozenset[str], allow_if_no_acl: bool, principal: str, host: str,
           operation: Operation, resource_type: ResourceType, name: str) -> bool:
    if principal in super_users:
        return True
    found = allowed = False
    for acl in acls:
        if not acl.names(resource_type, name):
            continue
        found = True
        if not acl.applies_to(principal, host):
            continue
        if acl.permission == Permission.DENY:
            if acl.operation in (operation, Operation.ALL):  # implication widens ALLOWs only
                return False
        elif acl.grants(operation):
            allowed = True
    return allowed or (not found and allow_if_no_acl)
