"""UpdateFeatures' work on the controller (KIP-584, KIP-778): Kafka's checks of each asked level, then
one versioned write of `/feature` (broker/features.py owns the table and the following of the node).

The checks are Kafka 4.3.1's FeatureControlManager's, in its order, and the first failing feature
fails the whole request (INVALID_UPDATE_VERSION): an unknown upgrade type; a level below 0; a level
outside this controller's range, then outside any registered broker's (an Ebb registered without
ranges serves transaction.version 0-1 and no group.version); a downgrade asked as an upgrade, or an
upgrade asked as a downgrade; last, a feature not known (asked at level 0, which passes the range checks). A feature Ebb
does not serve (metadata.version, share.version, ...) is unknown here, as any name Kafka lacks. Level 0
removes the feature from `/feature`. The write carries the node's version (the epoch read): a
concurrent change makes it fail, and the request is checked again against what is stored then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.cluster.layout import FeatureZNode
from broker.cluster.store import BadVersion, MetadataStore, NodeExists, NoNode, Watch
from broker.features import SUPPORTED, FinalizedFeatures, registered_support, unsupported_levels, watch_finalized
from protocol.enums import UpgradeType
from protocol.errors import ErrorCode

log = structlog.get_logger("features")

_WRITE_ATTEMPTS = 5  # a versioned write lost this often in a row to other writers is answered as failed
_ALL_FAILED = "The update failed for all features since the following feature had an error: "


@dataclass(frozen=True)
class FeatureUpdate:
    name: str
    level: int
    upgrade_type: int  # UpgradeType's code, or an unknown one


def _java_string_hash(text: str) -> int:
    encoded = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(encoded), 2):
        h = (31 * h + int.from_bytes(encoded[i:i + 2], "big")) & 0xFFFFFFFF
    return h


def _in_map_order(updates: list[FeatureUpdate]) -> list[FeatureUpdate]:
    """The order a java.util.HashMap (default capacity, load factor 0.75) filled in request order
    iterates its keys: by bucket, then by insertion within one."""
    capacity = 16
    while len(updates) > capacity * 3 // 4:
        capacity *= 2

    def bucket(update: FeatureUpdate) -> int:
        h = _java_string_hash(update.name)
        return (h ^ (h >> 16)) & (capacity - 1)
    return sorted(updates, key=bucket)  # sorted() is stable: insertion order within a bucket


def _range_text(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _not_supported(level: int, who: str, bounds: tuple[int, int]) -> str | None:
    low, high = bounds
    if low <= level <= high:
        return None
    if high == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {_range_text(low, high)}"


def refusal(update: FeatureUpdate, current: int, controller_id: int,
            brokers: dict[int, dict[str, tuple[int, int]]]) -> str | None:
    """Why `update` cannot be made, in Kafka's words; None when it can."""
    reason = _reason(update, current, controller_id, brokers)
    if reason is None:
        return None
    return f"Invalid update version {update.level} for feature {update.name}. {reason}"


def _reason(update: FeatureUpdate, current: int, controller_id: int,
            brokers: dict[int, dict[str, tuple[int, int]]]) -> str | None:
    try:
        upgrade = UpgradeType(update.upgrade_type)
    except ValueError:
        return "The controller does not support the given upgrade type."
    if update.level < 0:
        return "A feature version cannot be less than 0."
    reason = _not_supported(update.level, f"Local controller {controller_id}", SUPPORTED.get(update.name, (0, 0)))
    for broker_id, ranges in sorted(brokers.items()):
        reason = reason or _not_supported(update.level, f"Broker {broker_id}", ranges.get(update.name, (0, 0)))
    if reason is not None:
        return reason
    if update.level < current and upgrade == UpgradeType.UPGRADE:
        return ("Can't downgrade the version of this feature without setting the upgrade type to either "
                "safe or unsafe downgrade.")
    if update.level > current and upgrade != UpgradeType.UPGRADE:
        return "Can't downgrade to a newer version."
    if update.name not in SUPPORTED:  # asked at level 0: passes the range checks, then unknown
        return f"Feature {update.name} not found."
    return None


class FeatureUpdater:
    """Follows `/feature` on every broker (start: broker/features.py's watch) and runs UpdateFeatures
    where the controller is (handlers/k57_update_features.py routes it here)."""

    def __init__(self, store: MetadataStore, features: FinalizedFeatures, node_id: int, *,
                 halt: Callable[[str], None]):
        """`halt(why)`: the cluster finalized a level this broker cannot serve; it must stop."""
        self.store = store
        self._halt = halt
        self.features = features
        self.node_id = node_id
        self._lock = asyncio.Lock()  # one change at a time from this controller
        self._watch: Watch | None = None

    async def start(self) -> None:
        self._watch = await watch_finalized(self.store, self.features, self._halt)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()

    async def update(self, updates: list[FeatureUpdate], validate_only: bool) -> tuple[ErrorCode, str | None]:
        """(NONE, None) once every update is checked and, unless `validate_only`, stored; otherwise
        INVALID_UPDATE_VERSION and why the first failing feature failed. A feature named twice is
        asked at its last entry, and the features are checked in the order Kafka's controller walks
        the map it reads the request into (which one a refusal names)."""
        updates = _in_map_order(list({update.name: update for update in updates}.values()))
        async with self._lock:
            for _ in range(_WRITE_ATTEMPTS):
                levels, version = await self._stored()
                brokers = await registered_support(self.store)
                for update in updates:
                    reason = refusal(update, levels.get(update.name, 0), self.node_id, brokers)
                    if reason is not None:
                        log.warning("feature update refused", reason=reason)
                        return ErrorCode.INVALID_UPDATE_VERSION, _ALL_FAILED + reason
                if validate_only:
                    return ErrorCode.NONE, None
                for update in updates:
                    if update.level > 0:
                        levels[update.name] = update.level
                    else:
                        levels.pop(update.name, None)
                try:
                    if version is None:
                        await self.store.create(FeatureZNode.PATH, FeatureZNode.encode(levels))
                        epoch = 0
                    else:
                        epoch = await self.store.set(FeatureZNode.PATH, FeatureZNode.encode(levels), version=version)
                except (BadVersion, NodeExists):
                    continue  # changed meanwhile: checked again against what is stored now
                log.info("finalized features updated", levels=levels, epoch=epoch)
                if not unsupported_levels(levels):  # (a hand edit's other features: the watch refuses them)
                    self.features.follow(levels, epoch)  # in force here at once; the watch sees the same epoch
                return ErrorCode.NONE, None
        return ErrorCode.FEATURE_UPDATE_FAILED, f"{FeatureZNode.PATH} kept changing under the update"

    async def _stored(self) -> tuple[dict[str, int], int | None]:
        """The stored levels and the node's version; a node removed by hand is made again (None), and
        one that cannot be read holds no level (the update rewrites it)."""
        try:
            data, version = await self.store.get(FeatureZNode.PATH)
        except NoNode:
            return {}, None
        try:
            return FeatureZNode.decode(data), version
        except (ValueError, KeyError, TypeError, AttributeError):
            log.error("unreadable /feature node: read as holding no level")
            return {}, version
