"""ACLs through CreateAcls, DescribeAcls and DeleteAcls (KIP-140), with Kafka's enum codes.

    async with Admin("127.0.0.1:9092") as admin:
        await create_acls(admin, [AclSpec(TOPIC, "orders", LITERAL, "User:alice", "*", DELETE, ALLOW)])
        print(await describe_acls(admin, AclSpec(TOPIC, None, ANY, None, None, ANY, ANY)))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.enums import ApiKey, Operation, PatternType, Permission, ResourceType
from protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from .admin import Admin
from .errors import error_for

# The words the `ebb acls` command takes for each code (kafka-acls.sh's spellings).
RESOURCE_TYPES: dict[str, int] = {kind.name.lower().replace("_", "-"): kind for kind in ResourceType}
PATTERN_TYPES: dict[str, int] = {pattern.name.lower(): pattern for pattern in PatternType}
OPERATIONS: dict[str, int] = {operation.name.lower().replace("_", ""): operation for operation in Operation}
PERMISSIONS: dict[str, int] = {permission.name.lower(): permission for permission in Permission}


def name_of(table: Mapping[str, int], code: int) -> str:
    return next((name for name, value in table.items() if value == code), str(code))


@dataclass(frozen=True)
class AclSpec:
    """An ACL (to create) or a filter (to describe or delete: None and ANY match anything)."""

    resource_type: int
    name: str | None
    pattern: int
    principal: str | None
    host: str | None
    operation: int
    permission: int


async def create_acls(admin: Admin, acls: list[AclSpec]) -> None:
    conn = await admin.cluster.any_connection()
    request = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=a.resource_type, resource_name=a.name or "", resource_pattern_type=a.pattern,
        principal=a.principal or "", host=a.host or "*", operation=a.operation, permission_type=a.permission)
        for a in acls])
    response = await conn.request(request, version=conn.pick_version(ApiKey.CREATE_ACLS))
    for result in response.results:
        if result.error_code:
            raise error_for(result.error_code, result.error_message or "CreateAcls")


def _filter_fields(f: AclSpec) -> dict:
    return dict(resource_type_filter=f.resource_type, resource_name_filter=f.name, pattern_type_filter=f.pattern,
                principal_filter=f.principal, host_filter=f.host, operation=f.operation, permission_type=f.permission)


async def describe_acls(admin: Admin, acl_filter: AclSpec) -> list[AclSpec]:
    conn = await admin.cluster.any_connection()
    response = await conn.request(DescribeAclsRequest(**_filter_fields(acl_filter)),
                                  version=conn.pick_version(ApiKey.DESCRIBE_ACLS))
    if response.error_code:
        raise error_for(response.error_code, response.error_message or "DescribeAcls")
    return [AclSpec(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                    a.permission_type) for r in response.resources for a in r.acls]


async def delete_acls(admin: Admin, filters: list[AclSpec]) -> list[AclSpec]:
    """Delete every ACL the filters match; returns those deleted."""
    conn = await admin.cluster.any_connection()
    response = await conn.request(DeleteAclsRequest(filters=[
        DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in filters]),
        version=conn.pick_version(ApiKey.DELETE_ACLS))
    deleted = []
    for result in response.filter_results:
        if result.error_code:
            raise error_for(result.error_code, result.error_message or "DeleteAcls")
        deleted += [AclSpec(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation,
                            a.permission_type) for a in result.matching_acls]
    return deleted
