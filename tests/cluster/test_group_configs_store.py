"""Group configs in the metadata store (broker/group_configs.py), on ZooKeeper and on the embedded
store: what one broker sets another reads at once (a describe reads the store), at Kafka's kind of
path `/config/groups/<group>` with the name sanitized; two brokers changing one group at once lose
neither change; the node goes with the group's last value."""

from __future__ import annotations

import asyncio

import pytest

from broker.cluster.layout import ConfigEntityTypeZNode, ConfigEntityZNode, ConfigType
from broker.cluster.store import NoNode
from broker.cluster.zookeeper import ZooKeeperStore
from broker.group_configs import GroupConfigs, group_broker_properties
from broker.topic_configs import BrokerLayers, InvalidConfig
from protocol.enums import ConfigSource

GROUP = "team/a b"  # sanitized in the path, as Kafka's entity names are
BROKER = group_broker_properties({})
LAYERS = BrokerLayers({}, {}, {}, {})


def setting(key: str, value: str):
    return lambda current: {**current, key: value}


async def test_one_broker_sets_another_reads(store_factory):
    first = GroupConfigs(await store_factory(), BROKER)
    await first.alter(GROUP, setting("consumer.heartbeat.interval.ms", "7000"))
    second = GroupConfigs(await store_factory(), BROKER)  # another client (ZooKeeper) or a restart
    entries = {e.name: e for e in await second.describe(GROUP, LAYERS)}
    assert (entries["consumer.heartbeat.interval.ms"].value, entries["consumer.heartbeat.interval.ms"].source) == (
        "7000", ConfigSource.GROUP_CONFIG)
    data, _ = await second.store.get(ConfigEntityZNode.path(ConfigType.GROUP, GROUP))
    assert ConfigEntityZNode.path(ConfigType.GROUP, GROUP) == "/config/groups/team%2Fa%20b"
    assert ConfigEntityZNode.decode(data) == {"consumer.heartbeat.interval.ms": "7000"}
    with pytest.raises(InvalidConfig, match="Unknown group config name: nope"):
        await second.alter(GROUP, setting("nope", "1"))
    await second.alter(GROUP, lambda current: {})
    with pytest.raises(NoNode):
        await second.store.get(ConfigEntityZNode.path(ConfigType.GROUP, GROUP))


@pytest.mark.parametrize("group", [".", ".."])
async def test_groups_named_dot_and_dot_dot_are_stored(store_factory, group):
    """Relative path elements to ZooKeeper, which refused them as nodes; ordinary group names to Kafka."""
    configs = GroupConfigs(await store_factory(), BROKER)
    await configs.alter(group, setting("consumer.heartbeat.interval.ms", "7000"))
    assert await GroupConfigs(await store_factory(), BROKER).get(group) == {"consumer.heartbeat.interval.ms": "7000"}
    assert group in await ConfigEntityTypeZNode.names(configs.store, ConfigType.GROUP)
    await configs.alter(group, lambda current: {})
    assert await configs.get(group) == {}


async def test_two_brokers_at_once_lose_no_change(zk_connect):
    """Only ZooKeeper has two writers (an embedded store is one broker's)."""
    stores = [await ZooKeeperStore.open(zk_connect, session_timeout_ms=6000) for _ in range(2)]
    try:
        brokers = [GroupConfigs(store, BROKER) for store in stores]
        keys = [("share.delivery.count.limit", "3"), ("streams.num.standby.replicas", "1")]
        for _ in range(5):  # each round both write the same node at once
            await asyncio.gather(*(b.alter("raced", setting(k, v)) for b, (k, v) in zip(brokers, keys, strict=True)))
            assert await brokers[0].get("raced") == dict(keys)
            await brokers[1].alter("raced", lambda current: {})
    finally:
        for store in stores:
            await store.close()
