"""Listener key material written to the broker's node by someone else (another tool, or ZooKeeper edited
by hand) is followed: the broker's watch loads it and new connections get it; key material it cannot
load is logged and the one in force stays; a new subject only where ssl.allow.dn.changes allows it
(broker/security/dynamic_tls.py)."""

import asyncio

import pytest

from broker.cluster.layout import BrokerConfigZNode, ConfigEntityZNode
from broker.cluster.store import EmbeddedStore
from broker.config import load_config
from broker.dynamic_config import DynamicBrokerConfig, DynamicConfigError
from tests.security.certs import SSL_KEYSTORE_LOCATION as LOCATION
from tests.security.certs import rotation_pki


async def _applied(dynamic: DynamicBrokerConfig) -> None:
    """The store calls the broker's watch as it writes; wait for the reloads it started."""
    await asyncio.gather(*list(dynamic._applying))


async def test_key_material_written_by_another_is_followed(tmp_path):
    ca = rotation_pki(tmp_path)
    config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", "listeners=SSL://127.0.0.1:0",
                                "listener.security.protocol.map=SSL:SSL", "ssl.keystore.type=PEM",
                                f"ssl.keystore.location={ca.first.combined}"])
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    dynamic = DynamicBrokerConfig(store, config)
    await dynamic.load()
    await dynamic.start()
    live = dynamic.tls.listeners["SSL"]
    served_first = live.context
    assert live.material.subject == "User:CN=localhost,O=Ebb tests"

    path = BrokerConfigZNode.path("1")
    await store.create(path, ConfigEntityZNode.encode({LOCATION: str(ca.second.combined),
                                                       "listener.name.ssl.ssl.key.password": "new-secret"}))
    await _applied(dynamic)
    assert live.context is not served_first and live.material.listener.context is live.context
    assert config.tls_listeners["SSL"].context.sni_callback is not None  # the server's context hands it over

    unloadable = live.context
    await store.set(path, ConfigEntityZNode.encode({LOCATION: str(tmp_path / "missing.pem")}))
    await _applied(dynamic)  # the reload fails and is logged
    assert live.context is unloadable
    await dynamic.stop()
    await store.close()


async def test_a_new_subject_only_where_the_listener_allows_it(tmp_path):
    ca = rotation_pki(tmp_path)
    stores = []

    async def broker(*extra: str) -> DynamicBrokerConfig:
        config = load_config(None, [f"log.dirs={tmp_path / 'logs'}", "listeners=SSL://127.0.0.1:0",
                                    "listener.security.protocol.map=SSL:SSL", "ssl.keystore.type=PEM",
                                    f"ssl.keystore.location={ca.first.combined}", *extra])
        stores.append(await EmbeddedStore.open(tmp_path / f"meta{len(stores)}.json"))
        dynamic = DynamicBrokerConfig(stores[-1], config)
        await dynamic.load()
        return dynamic

    def other(configs: dict) -> dict:
        return {**configs, LOCATION: str(ca.other.combined)}

    strict = await broker()
    with pytest.raises(DynamicConfigError, match="DistinguishedName does not match"):
        await strict.alter("1", other)
    lenient = await broker("listener.name.ssl.ssl.allow.dn.changes=true")
    await lenient.alter("1", other)
    assert lenient.tls.listeners["SSL"].material.subject == "User:CN=somebody-else,O=Ebb tests"
    for store in stores:
        await store.close()
