"""Feature levels (KIP-584): what this broker supports and what the cluster finalized, for ApiVersions.

Ebb supports `transaction.version` 0-2 (2: KIP-890 part 2, served by broker/txn/) and `group.version`
0-1 (1: KIP-848 consumer groups, ConsumerGroupHeartbeat and ConsumerGroupDescribe; at 0 they answer
UNSUPPORTED_VERSION, as Kafka 4.3.1's do, yet stay advertised as Kafka's are). A new cluster finalizes
them at `ebb.transaction.version` (default 2) and `ebb.group.version` (default 1), as Kafka 4.3.1
formats one. The other features Kafka 4.3.1 lists (metadata.version, kraft.version, share.version,
...) name KRaft metadata or protocols Ebb does not serve, so they are neither supported nor finalized
here. Level 0 is never listed as finalized, and supported ranges starting at 0 are hidden from
ApiVersions v3, as Kafka's ApiVersionsResponse does.

The levels are the cluster's, stored in `/feature` (broker/cluster/layout.py): the first broker to start
writes its settings there, every broker reads them back, and one whose setting differs logs it and
follows the stored level; a feature the node lacks is at level 0. The node's data version is the
FinalizedFeaturesEpoch. Every broker watches the node and follows a change at once (UpdateFeatures,
broker/feature_updates.py, or an operator's edit): `FinalizedFeatures` is updated in place and its
listeners (the transaction coordinator) told; the consumer group handlers read the level per request.
A level is never finalized above what a registered broker supports (each advertises its ranges in its
registration, as Kafka's ZooKeeper-era brokers did): an Ebb from before that field serves
transaction.version up to 1 and no group.version. A cluster that already holds topics is an upgrade,
kept as Kafka keeps an upgraded cluster's levels until an operator raises them (`kafka-features
upgrade`): transaction.version at most 1 (its producers and `__transaction_state` ran at the level
older Ebb served) and group.version 0 (older Ebb served no KIP-848 groups; Kafka leaves group.version
at 0 on a metadata.version upgrade). So does a cluster whose `/feature` an older Ebb wrote without
group.version.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from broker.cluster.layout import BrokerIdsZNode, BrokerIdZNode, FeatureZNode, TopicsZNode
from broker.cluster.store import MetadataStore, NodeExists, NoNode, Watch

log = structlog.get_logger("features")

TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SUPPORTED: dict[str, tuple[int, int]] = {GROUP_VERSION: (0, 1), TRANSACTION_VERSION: (0, 2)}
# What an existing cluster (topics, no `/feature`) or an older Ebb's registration is held to.
LEGACY_LEVELS = {TRANSACTION_VERSION: 1, GROUP_VERSION: 0}


@dataclass
class FinalizedFeatures:
    levels: dict[str, int] = field(default_factory=dict)
    epoch: int = -1
    # told after a change of the levels (not of the epoch alone)
    listeners: list[Callable[[FinalizedFeatures], None]] = field(default_factory=list, repr=False)

    def follow(self, levels: dict[str, int], epoch: int) -> None:
        """Take the stored levels at `epoch` (the node's version); an older epoch is ignored."""
        if epoch < self.epoch:
            return
        changed = {k: v for k, v in levels.items() if v > 0} != {k: v for k, v in self.levels.items() if v > 0}
        self.levels, self.epoch = dict(levels), epoch
        if changed:
            log.info("finalized features changed", levels=self.levels, epoch=epoch)
            for listener in self.listeners:
                listener(self)

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    @property
    def transaction_version(self) -> int:
        return self.level(TRANSACTION_VERSION)

    @property
    def consumer_groups_enabled(self) -> bool:
        """KIP-848's consumer groups are served from group.version 1 (Kafka's GroupVersion.GV_1)."""
        return self.level(GROUP_VERSION) >= 1

    def listed(self) -> dict[str, int]:
        """The finalized levels ApiVersions lists (level 0 is not)."""
        return {name: level for name, level in sorted(self.levels.items()) if level > 0}

    def supported(self, api_version: int) -> dict[str, tuple[int, int]]:
        """The supported ranges ApiVersions lists at `api_version` (those from 0 only at v4+)."""
        return {name: bounds for name, bounds in sorted(SUPPORTED.items()) if api_version >= 4 or bounds[0] > 0}


async def load_finalized(store: MetadataStore, transaction_version: int, group_version: int = 1) -> FinalizedFeatures:
    """The cluster's finalized levels, `/feature` created if absent: this broker's settings, capped by
    what the registered brokers support (and by older Ebb's levels in a cluster that existed before the node)."""
    configured = {TRANSACTION_VERSION: transaction_version, GROUP_VERSION: group_version}
    try:
        first = await _first_levels(store, configured)
        # level 0 is stored as absent, as UpdateFeatures' disable leaves it
        await store.create(FeatureZNode.PATH, FeatureZNode.encode({k: v for k, v in first.items() if v > 0}))
    except NodeExists:
        pass
    data, version = await store.get(FeatureZNode.PATH)
    levels = FeatureZNode.decode(data)
    finalized: dict[str, int] = {}
    for name in sorted(SUPPORTED):
        stored = levels.get(name, 0)
        if stored != configured[name]:
            log.warning("the cluster finalized another level: following it", feature=name,
                        configured=configured[name], finalized=stored)
        finalized[name] = stored
    if bad := unsupported_levels(levels):
        raise UnservableLevels(f"the cluster finalized {', '.join(bad)}, outside what this broker supports "
                               f"({_ranges()}): it cannot serve the cluster")
    return FinalizedFeatures(finalized, version)


class UnservableLevels(ValueError):
    """The cluster finalized a level this broker cannot serve: it must not run (Kafka's ZooKeeper-era
    broker exits, FinalizedFeatureChangeListener)."""


def _ranges() -> str:
    return ", ".join(f"{name} {low}-{high}" for name, (low, high) in sorted(SUPPORTED.items()))


def unsupported_levels(levels: dict[str, int]) -> list[str]:
    """The stored levels this broker cannot serve (a feature it lacks above 0, or a level outside its range)."""
    return [f"{name}={level}" for name, level in sorted(levels.items())
            if not SUPPORTED.get(name, (0, 0))[0] <= level <= SUPPORTED.get(name, (0, 0))[1]]


async def watch_finalized(store: MetadataStore, features: FinalizedFeatures, halt: Callable[[str], None]) -> Watch:
    """Follow `/feature` from now on. Levels this broker cannot serve (a hand edit, or an UpdateFeatures
    that checked the registered brokers just before this one registered) are not followed: `halt` is
    told why, and the broker stops, as Kafka's does, rather than run at levels the cluster left."""
    def changed(data: bytes | None, version: int | None) -> None:
        if data is None or version is None:
            # removed by hand: the levels in force stay; a node made again starts its versions anew
            features.epoch = -1
            return
        try:
            levels = FeatureZNode.decode(data)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.error("unreadable /feature node: the finalized levels in force are kept", error=repr(exc))
            return
        if bad := unsupported_levels(levels):
            why = f"the cluster finalized {', '.join(bad)}, outside what this broker supports ({_ranges()})"
            log.critical(f"{why}: the broker stops")
            halt(why)
            return
        features.follow(levels, version)
    return await store.watch_data(FeatureZNode.PATH, changed)


async def registered_support(store: MetadataStore) -> dict[int, dict[str, tuple[int, int]]]:
    """The feature ranges each registered broker supports (an Ebb from before the field: transaction.version 0-1)."""
    found: dict[int, dict[str, tuple[int, int]]] = {}
    for child in await _children(store, BrokerIdsZNode.PATH):
        try:
            data, _ = await store.get(BrokerIdZNode.path(int(child)))
            features = BrokerIdZNode.decode(data).features
        except (NoNode, ValueError):
            continue  # gone meanwhile, or not a broker's node
        found[int(child)] = ({name: (0, level) for name, level in LEGACY_LEVELS.items()} if features is None
                             else features)
    return found


async def _children(store: MetadataStore, path: str) -> list[str]:
    try:
        return await store.children(path)
    except NoNode:
        return []


async def _first_levels(store: MetadataStore, configured: dict[str, int]) -> dict[str, int]:
    """The levels to finalize in a cluster without `/feature`."""
    if await store.exists(FeatureZNode.PATH):
        return configured  # another broker created it meanwhile: the create fails and it is read
    levels = dict(configured)
    if await _children(store, TopicsZNode.PATH):  # an existing cluster: kept at older Ebb's levels
        levels = {name: min(level, LEGACY_LEVELS[name]) for name, level in levels.items()}
    for features in (await registered_support(store)).values():
        levels = {name: min(level, features.get(name, (0, 0))[1]) for name, level in levels.items()}
    if levels != configured:
        log.warning("finalizing lower levels than configured: a registered broker or the cluster's "
                    "existing data needs it", configured=configured, finalized=levels)
    return levels
