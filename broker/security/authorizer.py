"""Ebb's authorizer: ACLs kept in the metadata store in Kafka's ZooKeeper layout (`/kafka-acl/...`,
`/kafka-acl-extended/prefixed/...`: the nodes and their JSON are broker/cluster/layout.py's), held in
memory by every broker and reloaded when any broker changes them (a counter every broker watches), so
that a request's check never waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import structlog

from broker.cluster.layout import AclChangesZNode, AclResourceTypeZNode, AclResourceZNode, desanitized
from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode, Watch
from broker.resolve_generation import RESOLVE_GENERATION
from broker.security.acls import Acl, AclFilter, decide
from protocol.enums import Operation, PatternType, Permission, ResourceType

log = structlog.get_logger("authorizer")

class Authorizer:
    def __init__(self, store: MetadataStore, super_users: frozenset[str], allow_if_no_acl: bool):
        self.store = store
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: dict[ResourceType, list[Acl]] = {}
        self._watch: Watch | None = None
        # Reloads may overlap (a change announced while the last is read): each is numbered as it
        # starts, and one that finishes after a later one has installed its set drops its older one.
        self._reloads_started = 0
        self._installed = 0

    async def start(self) -> None:
        try:
            await self.store.create(AclChangesZNode.PATH, AclChangesZNode.encode(0))
        except NodeExists:
            pass
        self._watch = await self.store.watch_data(AclChangesZNode.PATH, lambda data, version: self._changed())
        await self.reload()

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    def _changed(self) -> None:
        asyncio.get_running_loop().create_task(self.reload())

    async def reload(self) -> None:
        self._reloads_started += 1
        number = self._reloads_started
        found: dict[ResourceType, list[Acl]] = {}
        for pattern, resource_type in AclResourceTypeZNode.kinds():
            try:
                names = await self.store.children(AclResourceTypeZNode.path(pattern, resource_type))
            except NoNode:
                continue
            for child in names:
                for acl in await self._read(resource_type, pattern, desanitized(child)):
                    found.setdefault(resource_type, []).append(acl)
        if number < self._installed:
            return
        self._installed = number
        self._acls = found
        RESOLVE_GENERATION.bump()
        log.info("ACLs loaded", acls=sum(len(a) for a in found.values()))

    async def _read(self, resource_type: ResourceType, pattern: PatternType, name: str) -> list[Acl]:
        try:
            data, _ = await self.store.get(AclResourceZNode.path(pattern, resource_type, name))
        except NoNode:
            return []
        return AclResourceZNode.decode(data, pattern, resource_type, name)

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
        path = AclResourceZNode.path(pattern, resource_type, name)
        while True:  # compare-and-set: another broker may change the same resource meanwhile
            try:
                data, version = await self.store.get(path)
            except NoNode:
                data, version = None, -1
            current = set(await self._read(resource_type, pattern, name)) if data is not None else set()
            wanted = change(current)
            body = AclResourceZNode.encode(wanted)
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
        data, _ = await self.store.get(AclChangesZNode.PATH)
        await self.store.set(AclChangesZNode.PATH, AclChangesZNode.encode(AclChangesZNode.decode(data) + 1))
        await self.reload()
