"""The cluster's finalized transaction.version (broker/features.py): the first broker's setting is
stored in `/feature`, every later broker follows it, and ApiVersions lists it as Kafka does."""

import json

import pytest

from broker.cluster.layout import FeatureZNode
from broker.cluster.store import EmbeddedStore
from broker.features import TRANSACTION_VERSION, load_finalized


async def test_the_first_setting_is_stored_and_later_brokers_follow_it(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    first = await load_finalized(store, 1)
    assert (first.transaction_version, first.listed()) == (1, {TRANSACTION_VERSION: 1})
    later = await load_finalized(store, 2)  # another broker's setting does not change the cluster's
    assert later.transaction_version == 1 and later.epoch == first.epoch >= 0
    data, _ = await store.get(FeatureZNode.PATH)
    assert json.loads(data) == {"version": 2, "status": 1, "features": {
        TRANSACTION_VERSION: {"min_version_level": 1, "max_version_level": 1}}}
    await store.close()
    reopened = await EmbeddedStore.open(tmp_path / "meta.json")  # across a restart too
    assert (await load_finalized(reopened, 2)).transaction_version == 1
    await reopened.close()


async def test_level_0_is_finalized_but_not_listed(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    finalized = await load_finalized(store, 0)
    assert finalized.transaction_version == 0 and finalized.listed() == {}
    await store.close()


def test_supported_ranges_from_0_are_listed_from_api_versions_v4():
    from broker.features import FinalizedFeatures
    features = FinalizedFeatures({TRANSACTION_VERSION: 2}, 0)
    assert features.supported(3) == {}
    assert features.supported(4) == {TRANSACTION_VERSION: (0, 2)}


async def test_a_stored_level_this_broker_cannot_run_stops_it(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    await store.create(FeatureZNode.PATH, FeatureZNode.encode({TRANSACTION_VERSION: 3}))
    with pytest.raises(ValueError, match="outside"):
        await load_finalized(store, 2)
    await store.close()
