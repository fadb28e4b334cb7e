"""UpdateFeatures on the controller (broker/feature_updates.py): what Kafka's differential cannot show
(brokers registered with narrower ranges, features Kafka has and Ebb does not, a concurrent write,
the watch every broker follows). Kafka's own answers: tests/differential/test_features_against_kafka.py."""

import pytest

from broker.cluster.layout import BrokerIdZNode, BrokerRegistration, FeatureZNode
from broker.cluster.store import EmbeddedStore
from broker.feature_updates import FeatureUpdate, FeatureUpdater
from broker.features import SUPPORTED, TRANSACTION_VERSION, load_finalized, watch_finalized
from protocol.enums import UpgradeType
from protocol.errors import ErrorCode

TV = TRANSACTION_VERSION

def _registration(features):
    return BrokerIdZNode.encode(BrokerRegistration(host="h", port=1, rack=None, endpoints=(), security_protocols={},
                                                   timestamp="0", features=features))

async def _updater(tmp_path, level=2):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    features = await load_finalized(store, level, 0)  # transaction.version alone (group.version below)
    return store, features, FeatureUpdater(store, features, node_id=1, halt=lambda why: None)

async def test_a_registered_broker_narrower_than_asked_refuses_the_update(tmp_path):
    store, features, updater = await _updater(tmp_path, level=1)
    await store.create(BrokerIdZNode.path(1), _registration({TV: (0, 2)}))
    await store.create(BrokerIdZNode.path(2), _registration(None))  # an older Ebb: 0-1
    code, message = await updater.update([FeatureUpdate(TV, 2, UpgradeType.UPGRADE)], False)
    assert code == ErrorCode.INVALID_UPDATE_VERSION
    assert message.endswith("Invalid update version 2 for feature transaction.version. "
                            "Broker 2 only supports versions 0-1")
    assert features.transaction_version == 1
    await store.close()

async def test_features_ebb_does_not_serve_are_unknown(tmp_path):
    store, _, updater = await _updater(tmp_path)
    lacking = [name for name in ("metadata.version", "kraft.version", "group.version", "share.version",
                                 "streams.version", "eligible.leader.replicas.version") if name not in SUPPORTED]
    assert len(lacking) >= 2  # (the table, broker/features.py, may gain some of them)
    for name in lacking:
        code, message = await updater.update([FeatureUpdate(name, 1, UpgradeType.UPGRADE)], True)
        assert (code, message.rsplit(". ", 1)[-1]) == (ErrorCode.INVALID_UPDATE_VERSION,
                                                       "Local controller 1 does not support this feature.")
        code, message = await updater.update([FeatureUpdate(name, 0, UpgradeType.SAFE_DOWNGRADE)], False)
        assert message.endswith(f"Feature {name} not found.")
    await store.close()

async def test_an_update_writes_the_node_at_its_version_and_is_in_force_at_once(tmp_path):
    store, features, updater = await _updater(tmp_path)
    told = []
    features.listeners.append(lambda f: told.append(f.transaction_version))
    _, before = await store.get(FeatureZNode.PATH)
    assert await updater.update([FeatureUpdate(TV, 1, UpgradeType.SAFE_DOWNGRADE)], True) == (ErrorCode.NONE, None)
    assert (await store.get(FeatureZNode.PATH))[1] == before and told == []  # validate only
    assert await updater.update([FeatureUpdate(TV, 1, UpgradeType.SAFE_DOWNGRADE)], False) == (ErrorCode.NONE, None)
    data, version = await store.get(FeatureZNode.PATH)
    assert FeatureZNode.decode(data) == {TV: 1} and version == before + 1 == features.epoch and told == [1]
    assert await updater.update([FeatureUpdate(TV, 0, UpgradeType.UNSAFE_DOWNGRADE)], False) == (ErrorCode.NONE, None)
    assert FeatureZNode.decode((await store.get(FeatureZNode.PATH))[0]) == {}  # level 0: removed
    assert features.transaction_version == 0 and features.listed() == {} and told == [1, 0]
    await store.close()

async def test_a_node_removed_or_spoiled_by_hand_is_written_again(tmp_path):
    store, features, updater = await _updater(tmp_path)
    await store.delete(FeatureZNode.PATH)
    assert await updater.update([FeatureUpdate(TV, 1, UpgradeType.UPGRADE)], False) == (ErrorCode.NONE, None)
    assert FeatureZNode.decode((await store.get(FeatureZNode.PATH))[0]) == {TV: 1}
    await store.set(FeatureZNode.PATH, b"{not json")
    assert await updater.update([FeatureUpdate(TV, 2, UpgradeType.UPGRADE)], False) == (ErrorCode.NONE, None)
    assert FeatureZNode.decode((await store.get(FeatureZNode.PATH))[0]) == {TV: 2}
    await store.close()


async def test_a_change_made_meanwhile_is_checked_again(tmp_path):
    store, features, updater = await _updater(tmp_path)
    real_set, raced = store.set, []

    async def racing_set(path, data, version=-1):
        if not raced:  # another writer gets in between the read and the write
            raced.append(await real_set(path, FeatureZNode.encode({TV: 1}), version))
        return await real_set(path, data, version)
    store.set = racing_set
    code, message = await updater.update([FeatureUpdate(TV, 2, UpgradeType.SAFE_DOWNGRADE)], False)
    # checked again against level 1: 2 is now an upgrade asked as a downgrade
    assert code == ErrorCode.INVALID_UPDATE_VERSION and message.endswith("Can't downgrade to a newer version.")
    await store.close()

async def test_every_broker_follows_the_node_and_stops_at_levels_it_cannot_serve(tmp_path):
    store = await EmbeddedStore.open(tmp_path / "meta.json")
    features = await load_finalized(store, 2)
    told, halted = [], []
    features.listeners.append(lambda f: told.append(f.transaction_version))
    watch = await watch_finalized(store, features, halted.append)
    _, version = await store.get(FeatureZNode.PATH)
    await store.set(FeatureZNode.PATH, FeatureZNode.encode({TV: 1}), version)
    assert (features.transaction_version, told) == (1, [1])
    await store.set(FeatureZNode.PATH, FeatureZNode.encode({TV: 3}))  # a hand edit past this broker's range
    await store.set(FeatureZNode.PATH, FeatureZNode.encode({TV: 1, "share.version": 1}))
    assert (features.transaction_version, told) == (1, [1])  # not followed: the broker is told to stop
    assert [why.split(",")[0] for why in halted] == ["the cluster finalized transaction.version=3",
                                                     "the cluster finalized share.version=1"]
    await store.delete(FeatureZNode.PATH)  # removed and made again by hand: its versions start anew
    await store.create(FeatureZNode.PATH, FeatureZNode.encode({TV: 2}))
    assert (features.transaction_version, features.epoch, told) == (2, 0, [1, 2])
    watch.cancel()
    await store.close()


async def test_a_broker_stops_when_the_cluster_finalizes_what_it_cannot_serve(tmp_path):
    """A level finalized past this broker's range (say an UpdateFeatures that checked the registered
    brokers just before this one registered) halts it, as Kafka's broker exits; at start it refuses to
    run at all, whatever the feature."""
    from broker.app import Broker
    from broker.config import build_config
    from broker.features import UnservableLevels

    config = build_config({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:0",
                           "log.dirs": str(tmp_path / "logs")})
    broker = Broker(config)
    await broker.start()
    try:
        await broker.store.set(FeatureZNode.PATH, FeatureZNode.encode({TV: 2, "no.such.feature": 1}))
        assert broker.halted.is_set() and "no.such.feature=1" in (broker.halt_reason or "")
        assert broker.features.transaction_version == 2
    finally:
        await broker.stop()
    again = Broker(config)
    try:
        with pytest.raises(UnservableLevels, match="no.such.feature=1"):
            await again.start()
    finally:
        await again.stop()


async def test_group_version_is_raised_and_disabled_and_followed_at_once(tmp_path):
    """`kafka-features upgrade --feature group.version=1` turns KIP-848 groups on, `disable` off; a
    broker registered without group.version (an older Ebb) refuses the upgrade."""
    store, features, updater = await _updater(tmp_path)
    assert not features.consumer_groups_enabled
    await store.create(BrokerIdZNode.path(2), _registration({TV: (0, 2)}))
    code, message = await updater.update([FeatureUpdate("group.version", 1, UpgradeType.UPGRADE)], False)
    assert (code, message.rsplit(". ", 1)[-1]) == (ErrorCode.INVALID_UPDATE_VERSION,
                                                   "Broker 2 does not support this feature.")
    await store.delete(BrokerIdZNode.path(2))
    await store.create(BrokerIdZNode.path(2), _registration(dict(SUPPORTED)))
    assert await updater.update([FeatureUpdate("group.version", 1, UpgradeType.UPGRADE)], False) == (
        ErrorCode.NONE, None)
    assert features.consumer_groups_enabled
    assert FeatureZNode.decode((await store.get(FeatureZNode.PATH))[0]) == {TV: 2, "group.version": 1}
    code, message = await updater.update([FeatureUpdate("group.version", 2, UpgradeType.UPGRADE)], False)
    assert message.endswith("Local controller 1 only supports versions 0-1")
    assert await updater.update([FeatureUpdate("group.version", 0, UpgradeType.UNSAFE_DOWNGRADE)], False) == (
        ErrorCode.NONE, None)
    assert not features.consumer_groups_enabled
    assert FeatureZNode.decode((await store.get(FeatureZNode.PATH))[0]) == {TV: 2}
    await store.close()
