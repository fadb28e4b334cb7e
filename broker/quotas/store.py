"""The cluster's client quotas: kept where Kafka's ZooKeeper mode kept them, held in memory on every broker.

Nodes (cluster/layout.py ClientQuotaZNode): /config/users/<user>, /config/clients/<client>,
/config/users/<user>/clients/<client>, /config/ips/<ip>, `<default>` for a type's default; values as
text in the node's config (a user's node keeps its SCRAM credentials beside them). After each change
the writer adds a notification under /config/changes (Kafka's config_change_<n>); every broker watches
those and reads the quotas again, so a change made through any broker is enforced by all.

AlterClientQuotas is judged as Kafka 4.3.1's controller judges it (ClientQuotaControlManager): each
entity on its own (an error leaves the others applied), a key named twice or an entity named twice is
INVALID_REQUEST for that entity (the first of a repeated entity is still applied, as in Kafka), removing a
key that is not set is no change; validate_only checks and writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

import structlog

from broker.cluster.layout import ClientQuotaZNode, ConfigChangesZNode, ConfigEntityZNode, ConfigType
from broker.cluster.store import MetadataStore, NodeExists, NoNode, Watch
from broker.quotas.entities import (
    ALL_KEYS,
    CLIENT_ID,
    IP,
    USER,
    QuotaEntity,
    QuotaError,
    check_entity,
    check_value,
    entity_of,
    entity_text,
    value_text,
)
from protocol.errors import ErrorCode

log = structlog.get_logger("quotas")

Quotas = dict[QuotaEntity, dict[str, float]]
KEPT_NOTIFICATIONS = 10  # every broker reads all quotas on any notification: older ones serve nobody


class ClientQuotaStore:
    """Every client quota of the cluster as the store holds them; `listeners` hear each new set."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self.quotas: Quotas = {}
        self.listeners: list[Callable[[Quotas], None]] = []
        self._watch: Watch | None = None
        self._reload: asyncio.Task | None = None
        self._again = False
        self._lock = asyncio.Lock()  # one alteration written at a time from this broker
        self._reading = asyncio.Lock()

    async def start(self) -> None:
        try:
            await self.store.create(ConfigChangesZNode.PATH, b"")
        except NodeExists:
            pass
        await self.reload()
        self._watch = await self.store.watch_children(ConfigChangesZNode.PATH, self._changed)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
        if self._reload is not None:
            self._reload.cancel()

    def _changed(self, _children: list[str] | None) -> None:
        if self._reload is not None and not self._reload.done():
            self._again = True  # read again once the read under way ends: it may predate this change
            return
        self._reload = asyncio.get_running_loop().create_task(self._reload_until_quiet())

    async def _reload_until_quiet(self) -> None:
        while True:
            self._again = False
            try:
                await self.reload()
            except Exception:  # the store went away meanwhile: the next notification reads again
                log.exception("reading client quotas failed")
            if not self._again:
                return

    async def reload(self) -> None:
        async with self._reading:  # one read at a time: a read begun before a change never lands after it
            quotas = await self._read_all()
            self._take(quotas)

    def _take(self, quotas: Quotas) -> None:
        if quotas != self.quotas:
            self.quotas = quotas
            log.info("client quotas in force", entities=len(quotas))
            for listener in self.listeners:
                listener(quotas)

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.store.children(path)
        except NoNode:
            return []

    async def _config(self, path: str) -> dict[str, float]:
        try:
            data, _ = await self.store.get(path)
        except NoNode:
            return {}
        found = {}
        for key, text in ConfigEntityZNode.decode(data).items():
            if key in ALL_KEYS:  # a user's node also holds its SCRAM credentials
                try:
                    value = float(text)
                except ValueError:
                    log.warning("unreadable quota value skipped", path=path, key=key, value=text)
                    continue
                if value <= 0:  # written past AlterClientQuotas' checks (NaN passes them, as in Kafka)
                    log.warning("quota value not above 0 skipped", path=path, key=key, value=text)
                    continue
                found[key] = value
        return found

    async def _read_all(self) -> Quotas:
        quotas: Quotas = {}

        async def take(path: str, entity: dict[str, str | None]) -> None:
            config = await self._config(path)
            if config:
                quotas[entity_of(entity)] = config

        for kind, entity_type in ((ConfigType.USER, USER), (ConfigType.CLIENT, CLIENT_ID), (ConfigType.IP, IP)):
            root = f"/config/{kind}"
            for child in await self._children(root):
                name = ClientQuotaZNode.name_of(child, sanitize=kind != ConfigType.IP)
                await take(f"{root}/{child}", {entity_type: name})
                if kind == ConfigType.USER:
                    clients = f"{root}/{child}/{ClientQuotaZNode.USER_CLIENTS}"
                    for client in await self._children(clients):
                        await take(f"{clients}/{client}", {USER: name, CLIENT_ID: ClientQuotaZNode.name_of(client)})
        return quotas

    async def alter(self, alterations: Iterable[tuple[QuotaEntity, list[tuple[str, float | None]]]],
                    validate_only: bool) -> list[tuple[QuotaEntity, ErrorCode, str | None]]:
        """Each entity's result, in the order first named."""
        results: dict[QuotaEntity, tuple[ErrorCode, str | None]] = {}
        writes: list[tuple[QuotaEntity, dict[str, float | None]]] = []
        for entity, ops in alterations:
            changes: dict[str, float | None] = {}
            for key, value in ops:
                if key in changes:
                    results[entity] = (ErrorCode.INVALID_REQUEST, f"Duplicate quota key {key} not updating quota "
                                                                  f"for this entity {entity_text(entity)}")
                else:
                    changes[key] = value
            if entity in results:
                results[entity] = (ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}")
                continue
            try:
                keys = await check_entity(entity)
                for key, value in changes.items():
                    if value is not None:  # removing a key is never checked (nor an error when unset)
                        check_value(keys, key, value)
            except QuotaError as exc:
                results[entity] = (exc.code, exc.message)
                continue
            results[entity] = (ErrorCode.NONE, None)
            writes.append((entity, changes))
        if writes and not validate_only:
            async with self._lock:
                for entity, changes in writes:
                    await self._write(entity, changes)
            await self.reload()  # this broker answers with what it wrote
        return [(entity, code, message) for entity, (code, message) in results.items()]

    async def _write(self, entity: QuotaEntity, changes: dict[str, float | None]) -> None:
        path = ClientQuotaZNode.path(dict(entity))

        def change(config: dict[str, str]) -> dict[str, str]:
            for key, value in changes.items():
                if value is None:
                    config.pop(key, None)
                else:
                    config[key] = value_text(key, value)
            return config

        written = await ConfigEntityZNode.replace(self.store, path, change, drop_empty=True)
        if written is None:
            return
        log.info("altered client quotas", entity=entity_text(entity), changes=changes)
        await self.store.create_sequential(ConfigChangesZNode.path_prefix(), ConfigChangesZNode.encode(path))
        stale = ConfigChangesZNode.in_order(await self._children(ConfigChangesZNode.PATH))[:-KEPT_NOTIFICATIONS]
        for child in stale:
            try:
                await self.store.delete(ConfigChangesZNode.path(child))
            except NoNode:
                pass  # another broker's writer took it
