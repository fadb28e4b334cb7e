"""The cluster's finalized transaction.version and group.version (broker/features.py): the first
broker's settings are stored in `/feature`, every later broker follows them, and ApiVersions lists
them as Kafka does."""

import json
import uuid

import pytest

from broker.cluster.layout import BrokerIdZNode, BrokerRegistration, FeatureZNode, TopicAssignment, TopicZNode
from broker.cluster.store import EmbeddedStore
from broker.features import GROUP_VERSION, SUPPORTED, TRANSACTION_VERSION, load_finalized


async def test_the_first_setting_is_stored_and_later_brokers_follow_it(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    first = await load_finalized(store, 1)
    assert (first.transaction_version, first.listed()) == (1, {GROUP_VERSION: 1, TRANSACTION_VERSION: 1})
    later = await load_finalized(store, 2)  # another broker's setting does not change the cluster's
    assert later.transaction_version == 1 and later.epoch == first.epoch >= 0
    data, _ = await store.get(FeatureZNode.PATH)
    assert json.loads(data) == {"version": 2, "status": 1, "features": {
        GROUP_VERSION: {"min_version_level": 1, "max_version_level": 1},
        TRANSACTION_VERSION: {"min_version_level": 1, "max_version_level": 1}}}
    await store.close()
    reopened = await EmbeddedStore.open(tmp_path / "meta.json")  # across a restart too
    assert (await load_finalized(reopened, 2)).transaction_version == 1
    await reopened.close()


async def test_level_0_is_finalized_but_not_listed(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    finalized = await load_finalized(store, 0, 0)
    assert finalized.transaction_version == 0 and finalized.listed() == {}
    assert not finalized.consumer_groups_enabled
    assert FeatureZNode.decode((await store.get(FeatureZNode.PATH))[0]) == {}  # stored as absent
    await store.close()


def test_supported_ranges_from_0_are_listed_from_api_versions_v4():
    from broker.features import FinalizedFeatures
    features = FinalizedFeatures({TRANSACTION_VERSION: 2}, 0)
    assert features.supported(3) == {}
    assert features.supported(4) == {GROUP_VERSION: (0, 1), TRANSACTION_VERSION: (0, 2)}


async def test_a_stored_level_this_broker_cannot_run_stops_it(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(FeatureZNode.PATH, FeatureZNode.encode({TRANSACTION_VERSION: 3}))
    with pytest.raises(ValueError, match="outside"):
        await load_finalized(store, 2)
    await store.close()


def _registration(features):
    return BrokerIdZNode.encode(BrokerRegistration("h", 9092, None, ("PLAINTEXT://h:9092",),
                                                   {"PLAINTEXT": "PLAINTEXT"}, "1", features))


async def test_a_registered_broker_without_features_keeps_a_new_node_at_level_1(tmp_path):
    """Rolling upgrade: an older Ebb (no "features" in its registration) serves transactions version
    1 only; finalizing 2 would send it WriteTxnMarkers v2 and stop AddPartitionsToTxn to it."""
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(BrokerIdZNode.path(1), _registration(None))
    finalized = await load_finalized(store, 2)
    assert finalized.transaction_version == 1
    assert not finalized.consumer_groups_enabled  # it serves no KIP-848 groups
    await store.close()


async def test_the_level_is_capped_by_what_registered_brokers_support(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(BrokerIdZNode.path(1), _registration({TRANSACTION_VERSION: (0, 2)}))
    await store.create(BrokerIdZNode.path(2), _registration({TRANSACTION_VERSION: (0, 0)}))
    assert (await load_finalized(store, 2)).transaction_version == 0
    await store.close()


async def test_brokers_that_support_it_finalize_the_setting(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(BrokerIdZNode.path(1), _registration(dict(SUPPORTED)))
    assert (await load_finalized(store, 2)).transaction_version == 2
    await store.close()


async def test_an_existing_cluster_without_the_node_is_finalized_at_older_ebbs_level(tmp_path):
    """Its topics (and `__transaction_state`) were written by an Ebb serving version 1."""
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(TopicZNode.path("__transaction_state"), b"{}")
    finalized = await load_finalized(store, 2)
    assert finalized.transaction_version == 1
    assert finalized.level(GROUP_VERSION) == 0  # as Kafka keeps an upgraded cluster's group.version
    await store.close()
    store = await EmbeddedStore.open(tmp_path / "other.json")
    await store.create(TopicZNode.path("t"), b"{}")
    assert (await load_finalized(store, 0)).transaction_version == 0  # never above the setting
    await store.close()


async def test_a_broker_registers_its_features_and_an_upgraded_store_stays_at_level_1(tmp_path):
    """Wired in the broker: its registration names what it supports (what later brokers cap the level
    by), and a store an older Ebb filled (topics, no `/feature`) is finalized at 1 despite the default 2."""
    from broker.app import METADATA_FILE, Broker
    from broker.config import load_config

    store = await EmbeddedStore.open(tmp_path / METADATA_FILE)
    await store.create(TopicZNode.path("orders"), TopicZNode.encode(TopicAssignment(uuid.uuid4(), {0: [4]})))
    await store.close()
    broker = Broker(load_config(None, [f"log.dirs={tmp_path}", "listeners=PLAINTEXT://127.0.0.1:0", "node.id=4"]))
    await broker.start()
    try:
        data, _ = await broker.store.get(BrokerIdZNode.path(4))
        assert BrokerIdZNode.decode(data).features == SUPPORTED
        assert broker.features.transaction_version == 1
        assert not broker.features.consumer_groups_enabled
    finally:
        await broker.stop()


async def test_a_new_cluster_serves_consumer_groups_and_an_older_node_does_not(tmp_path):
    """group.version 1 (KIP-848) in a new cluster, as Kafka 4.3.1 formats one; `ebb.group.version=0`
    keeps it off; a `/feature` an older Ebb wrote (transaction.version only) holds level 0."""
    store = await EmbeddedStore.open(tmp_path / "new.json")
    assert (await load_finalized(store, 2)).consumer_groups_enabled
    await store.close()
    store = await EmbeddedStore.open(tmp_path / "off.json")
    assert (await load_finalized(store, 2, 0)).level(GROUP_VERSION) == 0
    assert not (await load_finalized(store, 2, 1)).consumer_groups_enabled  # the stored level rules
    await store.close()
    store = await EmbeddedStore.open(tmp_path / "older.json")
    await store.create(FeatureZNode.PATH, FeatureZNode.encode({TRANSACTION_VERSION: 2}))
    finalized = await load_finalized(store, 2)
    assert (finalized.transaction_version, finalized.level(GROUP_VERSION)) == (2, 0)
    await store.close()


async def test_group_version_is_capped_by_registered_brokers(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(BrokerIdZNode.path(1), _registration({TRANSACTION_VERSION: (0, 2)}))  # no group.version
    assert (await load_finalized(store, 2)).level(GROUP_VERSION) == 0
    await store.close()
    store = await EmbeddedStore.open(tmp_path / "other.json")
    await store.create(BrokerIdZNode.path(1), _registration(dict(SUPPORTED)))
    assert (await load_finalized(store, 2)).level(GROUP_VERSION) == 1
    await store.close()
