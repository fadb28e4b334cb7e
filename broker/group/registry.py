"""The groups this coordinator serves, and the `__consumer_offsets` partitions they come from.

One broker serves every group: all partitions are replayed at start-up (load_all). In a cluster a group
belongs to the leader of its __consumer_offsets partition: when leadership of such a partition moves
here its groups are replayed from the log (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and when it moves
away they are dropped from memory and their parked members told NOT_COORDINATOR (Kafka's onElection /
onResignation). A restarted or newly elected coordinator knows its Stable groups, and their members
keep heartbeating without a rebalance (each gets a fresh session timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import structlog

from broker.coordinator_partitions import CoordinatorPartitions
from broker.group.group import Group, GroupError, GroupState
from broker.group.metadata import group_from_value
from broker.group.offsets_store import OFFSETS_TOPIC, LoadStats, OffsetsStore, partition_for
from broker.group.requests import MemberCheck, answer_parked
from broker.group.tasks import Spawn
from broker.replica import Partition
from protocol.errors import ErrorCode
from protocol.messages import GroupMetadataValue
from protocol.wire import fits_short_string

log = structlog.get_logger("groups")


class GroupRegistry:
    def __init__(self, store: OffsetsStore, spawn: Spawn, *, offsets_partition: Callable[[int], Partition] | None,
                 loaded: Callable[[Group], None], unloaded: Callable[[Group], None]) -> None:
        """`offsets_partition` is None on a broker without a cluster (it serves every group). `loaded` is
        called for each group replayed from the log, `unloaded` for each dropped (to start and stop the
        members' timers)."""
        self.store = store
        self._loaded = loaded
        self._unloaded = unloaded
        self.groups: dict[str, Group] = {}
        # The ids share groups and KIP-848 consumer groups hold: no classic group may take one (an empty
        # consumer group gives its id up when the migration policy lets it). Set by the coordinator.
        self.share_ids: Callable[[str], bool] = lambda group_id: False
        # Drops the share and KIP-848 consumer groups an unloaded __consumer_offsets partition holds.
        self.share_unload: Callable[[Callable[[str], bool]], None] = lambda doomed: None
        # Whether the id is a KIP-848 consumer group's, and if so its offset commit or fetch checked
        # (GroupError). Set by the coordinator.
        self.consumer_check: Callable[[str, MemberCheck], bool] = lambda group_id, check: False
        # The KIP-848 consumer groups' ids, and deleting one if it is empty (True if deleted): for
        # offset expiration. Set by the coordinator.
        self.consumer_ids: Callable[[], list[str]] = list
        self.consumer_drop_empty: Callable[[str], bool] = lambda group_id: False
        # The topics a KIP-848 consumer group's members subscribe to, or None when the id is not one's.
        self.consumer_topics: Callable[[str], set[str] | None] = lambda group_id: None
        # A KIP-848 consumer group's or share group's record at load (key, value or None), and the
        # groups rebuilt from them once a load ends. Set by the coordinator.
        self.consumer_replay: Callable[[bytes, bytes | None], None] = lambda key, value: None
        self.consumer_loaded: Callable[[], object] = lambda: None
        self.active = False
        # In a cluster: which __consumer_offsets partitions are led (and loaded) here.
        self.partitions = None if offsets_partition is None else CoordinatorPartitions(
            OFFSETS_TOPIC, spawn, offsets_partition, load=self._load, unload=self._unload)

    @property
    def loading(self) -> dict[int, asyncio.Task]:
        """__consumer_offsets partitions being replayed after this broker became their leader."""
        return {} if self.partitions is None else self.partitions.loading

    # --- which groups are served -------------------------------------------------------------------

    def check_active(self) -> None:
        if not self.active:
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "the group coordinator is not active")

    def not_served(self, group_id: str) -> ErrorCode | None:
        """Why this coordinator cannot answer for the group now, or None. In a cluster a group belongs
        to the leader of its __consumer_offsets partition (Kafka's NOT_COORDINATOR otherwise), and is
        COORDINATOR_LOAD_IN_PROGRESS while that partition is replayed after a leadership move."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not fits_short_string(group_id):  # its __consumer_offsets key has an int16 length
            return ErrorCode.INVALID_GROUP_ID
        if self.partitions is None or not group_id or not self.store.topic_exists():
            return None
        return self.partitions.not_served(self.store.partition_for(group_id))

    def check_served(self, group_id: str) -> None:
        error = self.not_served(group_id)
        if error is not None:
            raise GroupError(error, f"this broker does not coordinate group {group_id} now ({error.name})")

    def is_share(self, group_id: str) -> bool:
        return self.share_ids(group_id)

    def forget_if_unused(self, group: Group) -> None:
        """Drop an in-memory group that holds nothing (created by a request that then failed)."""
        if (self.groups.get(group.group_id) is group and group.is_in(GroupState.EMPTY) and not group.members
                and not group.pending_members and not self.store.has_offsets(group.group_id)
                and group.generation_id == 0):
            with contextlib.suppress(KeyError):
                del self.groups[group.group_id]

    # --- loading -----------------------------------------------------------------------------------

    async def load_all(self) -> LoadStats:
        """One broker: replay every partition of __consumer_offsets."""
        stats = await self.store.load(self.replay_group, self.consumer_replay)
        self._adopt_loaded(self.groups)
        self.consumer_loaded()
        return stats

    def replay_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        """A GroupMetadata record at load: the group as it was last written; None is its tombstone."""
        if value is None:
            self.groups.pop(group_id, None)
            return
        self.groups[group_id] = group_from_value(group_id, value)

    def _adopt_loaded(self, groups: dict[str, Group]) -> None:
        """After a replay: offsets without group metadata make a "simple" group, and loaded members get
        their session timers."""
        for group_id in self.store.groups_with_offsets():
            if group_id not in self.groups:
                self.groups[group_id] = Group(group_id)
        for group in list(groups.values()):
            self._loaded(group)

    # --- leadership of __consumer_offsets partitions (a cluster) -------------------------------------

    def offsets_partition_moved(self, partition: Partition) -> None:
        """A partition's leadership changed here. For a __consumer_offsets partition: its groups are
        dropped from memory, and replayed from the log when this broker is the new leader."""
        if self.active and self.partitions is not None:
            self.partitions.moved(partition)

    def _unload(self, index: int) -> None:
        count = self.store.partition_count()
        doomed = {g for g in [*self.groups, *self.store.groups_with_offsets()] if partition_for(g, count) == index}
        self.share_unload(lambda group_id: partition_for(group_id, count) == index)
        for group_id in doomed:
            group = self.groups.pop(group_id, None)
            if group is not None:
                answer_parked(group, ErrorCode.NOT_COORDINATOR)
                self._unloaded(group)
            self.store.forget_group(group_id)
        self.store.forget_pending(index)
        if doomed:
            log.info("groups unloaded: their offsets partition is led elsewhere now", partition=index,
                     groups=len(doomed))

    async def _load(self, index: int, partition: Partition) -> None:
        loaded: dict[str, Group] = {}

        def replay(group_id: str, value: GroupMetadataValue | None) -> None:
            self.replay_group(group_id, value)
            if group_id in self.groups:
                loaded[group_id] = self.groups[group_id]

        await self.store.load_partition(partition, replay, self.consumer_replay)
        self._adopt_loaded(loaded)
        self.consumer_loaded()
        log.info("groups loaded: this broker leads their offsets partition now", partition=index,
                 groups=len(loaded))
