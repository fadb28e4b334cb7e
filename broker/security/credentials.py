"""SCRAM credentials in the metadata store, where Kafka keeps them in ZooKeeper:
/config/users/<user, URL-encoded> = {"version": 1, "config": {"SCRAM-SHA-512": "salt=..,stored_key=..,..."}}.
Read at each authentication (not on the request path), so every broker sees a change at once."""

from __future__ import annotations

from broker.cluster.layout import ConfigEntityTypeZNode, ConfigEntityZNode, ConfigType
from broker.cluster.store import MetadataStore, NoNode
from broker.security.scram import MECHANISMS, ScramCredential, ScramMechanism


def _path(user: str) -> str:
    return ConfigEntityZNode.path(ConfigType.USER, user)


class CredentialStore:
    def __init__(self, store: MetadataStore):
        self.store = store

    async def _config(self, user: str) -> dict[str, str]:
        try:
            data, _ = await self.store.get(_path(user))
        except NoNode:
            return {}
        return ConfigEntityZNode.decode(data)

    async def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        text = (await self._config(user)).get(mechanism.name)
        return ScramCredential.from_text(text) if text else None

    async def describe(self, user: str) -> dict[str, int]:
        """mechanism name -> iterations for every SCRAM credential the user has."""
        found = {}
        for name, text in (await self._config(user)).items():
            if name in MECHANISMS:
                found[name] = ScramCredential.from_text(text).iterations
        return found

    async def users(self) -> list[str]:
        return await ConfigEntityTypeZNode.names(self.store, ConfigType.USER)

    async def alter(self, user: str, upserts: dict[str, ScramCredential], deletions: list[str]) -> None:
        """Apply one user's changes with one compare-and-set write, keeping the node's other configs (the
        user's client quotas); a user left without any config loses its node."""
        def change(config: dict[str, str]) -> dict[str, str]:
            for name in deletions:
                config.pop(name, None)
            config.update({name: credential.to_text() for name, credential in upserts.items()})
            return config

        await ConfigEntityZNode.replace(self.store, _path(user), change, drop_empty=True)
