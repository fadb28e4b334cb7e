"""Ebb's authorizer: ACLs kept in the metadata store in Kafka's ZooKeeper layout, held in memory by
every broker and reloaded when any broker changes them, so that a request's check never waits.

    /kafka-acl/<Topic|Group|Cluster|TransactionalId>/<name>             LITERAL
    /kafka-acl-extended/prefixed/<Topic|Group|...>/<prefix>             PREFIXED
    each {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                  "operation": "Read", "host": "*"}]}
    /ebb/acl-changes                                                     bumped after every change
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from urllib.parse import quote, unquote

import structlog

from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode, Watch
from broker.security.acls import Acl, AclFilter, decide
from protocol.enums import Operation, PatternType, Permission, ResourceType

log = structlog.get_logger("authorizer")

_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
               ResourceType.TRANSACTIONAL_ID: "TransactionalId"}
_OPERATION_NAMES = {Operation.ALL: "All", Operation.READ: "Read", Operation.WRITE: "Write",
                    Operation.CREATE: "Create", Operation.DELETE: "Delete", Operation.ALTER: "Alter",
                    Operation.DESCRIBE: "Describe", Operation.CLUSTER_ACTION: "ClusterAction",
                    Operation.DESCRIBE_CONFIGS: "DescribeConfigs", Operation.ALTER_CONFIGS: "AlterConfigs",
                    Operation.IDEMPOTENT_WRITE: "IdempotentWrite"}
_ROOTS = {PatternType.LITERAL: "/kafka-acl", PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
CHANGES = "/ebb/acl-changes"


def _node(resource_type: ResourceType, pattern: PatternType, name: str) -> str:
    return f"{_ROOTS[pattern]}/{_TYPE_NAMES[resource_type]}/{quote(name, safe='')}"


def _entry(acl: Acl) -> dict:
    return {"principal": acl.principal, "permissionType": "Allow" if acl.permission == Permission.ALLOW else "Deny",
            "operation": _OPERATION_NAMES[acl.operation], "host": acl.host}


class Authorizer:
    def __init__(self, store: MetadataStore, super_users: frozenset[str], allow_if_no_acl: bool):
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[ResourceType, list[Acl]] = {}
        self._watch: Watch | None = None

    async def start(self) -> None:
        try:
            await self.store.create(CHANGES, b"0")
        except NodeExists:
            pass
        self._watch = await self.store.watch_data(CHANGES, lambda data, version: self._changed())
        await self.reload()

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def _changed(self) -> None:
        asyncio.get_running_loop().create_task(self.reload())

    async def reload(self) -> None:
        found: dict[ResourceType, list[Acl]] = {}
        for pattern, root in _ROOTS.items():
            for resource_type, type_name in _TYPE_NAMES.items():
                try:
                    names = await self.store.children(f"{root}/{type_name}")
                except NoNode:
                    continue
                for quoted in names:
                    for acl in await self._read(resource_type, pattern, unquote(quoted)):
                        found.setdefault(resource_type, []).append(acl)
        self._acls = found
        log.info("ACLs loaded", acls=sum(len(a) for a in found.values()))

    async def _read(self, resource_type: ResourceType, pattern: PatternType, name: str) -> list[Acl]:
        try:
            data, _ = await self.store.get(_node(resource_type, pattern, name))
        except NoNode:
            return []
        operations = {v: k for k, v in _OPERATION_NAMES.items()}
        return [Acl(resource_type, name, pattern, e["principal"], e["host"], operations[e["operation"]],
                    Permission.ALLOW if e["permissionType"] == "Allow" else Permission.DENY)
                for e in json.loads(data).get("acls", [])]

    # --- the check on the request path -----------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: Operation, resource_type: ResourceType,
                  name: str) -> bool:
        return decide(self._acls.get(resource_type, ()), self.super_users, self.allow_if_no_acl, principal, host,
                      operation, resource_type, name)

    def allows_some(self, principal: str, host: str, operation: Operation, resource_type: ResourceType) -> bool:
        """Is there a resource of the type the principal may do `operation` on? (Kafka's check by resource
        type, used by InitProducerId: WRITE on any topic.) A super user, or an ALLOW that applies; DENYs
        are not weighed against it here, a simplification of Kafka's rule."""
        if principal in self.super_users:
            return True
        return any(acl.permission == Permission.ALLOW and acl.applies_to(principal, host) and acl.grants(operation)
                   for acl in self._acls.get(resource_type, ()))

    # --- CreateAcls, DescribeAcls, DeleteAcls ------------------------------------------------------

    def describe(self, acl_filter: AclFilter) -> list[Acl]:
        return [acl for acls in self._acls.values() for acl in acls if acl_filter.matches(acl)]

    async def add(self, acls: Iterable[Acl]) -> None:
        for acl in acls:
            await self._update(acl.resource_type, acl.pattern, acl.name, lambda current, a=acl: current | {a})
        await self._announce()

    async def remove(self, doomed: list[Acl]) -> None:
        for acl in doomed:
            await self._update(acl.resource_type, acl.pattern, acl.name, lambda current, a=acl: current - {a})
        await self._announce()

    async def _update(self, resource_type: ResourceType, pattern: PatternType, name: str, change) -> None:
        path = _node(resource_type, pattern, name)
        while True:  # compare-and-set: another broker may change the same resource meanwhile
            try:
                data, version = await self.store.get(path)
            except NoNode:
                data, version = None, -1
            current = set(await self._read(resource_type, pattern, name)) if data is not None else set()
            wanted = change(current)
            body = json.dumps({"version": 1, "acls": [_entry(a) for a in sorted(wanted, key=repr)]}).encode()
            try:
                if data is None:
                    await self.store.create(path, body)
                elif wanted:
                    await self.store.set(path, body, version)
                else:
                    await self.store.delete(path, version)
                return
            except (NodeExists, BadVersion, NoNode):
                continue

    async def _announce(self) -> None:
        data, _ = await self.store.get(CHANGES)
        await self.store.set(CHANGES, str(int(data or b"0") + 1).encode())
        await self.reload()
