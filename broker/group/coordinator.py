"""The classic group coordinator, one per broker, a broker service: the one entry point the handlers
use. It builds the parts and wires them; each part holds only what it uses, never this object:

    registry.GroupRegistry      the groups served and the __consumer_offsets partitions they come from
                                (load, unload, replay, leadership moves); `groups`, `active`
    sessions.SessionTimers      member sessions and the join/sync/pending-member timers
    phases.RebalancePhases      the rebalance state machine (PreparingRebalance, CompletingRebalance, Stable)
    rebalance.RebalanceProtocol JoinGroup, SyncGroup, Heartbeat, LeaveGroup
    offsets.OffsetManager       OffsetCommit, OffsetFetch, OffsetDelete, retention
    share_groups.ShareGroups    share groups (KIP-932): ShareGroupHeartbeat, their members and assignment,
                                their records (share_records.py)
    consumer_groups.ConsumerGroups  KIP-848 consumer groups: ConsumerGroupHeartbeat, members, reconciliation
    consumer_classic.ClassicMembers classic members inside consumer groups (online migration, both ways)

Listing, describing and deleting groups (of both types: one group id has one type) are answered here. A
broker stopping answers every parked JoinGroup and SyncGroup with NOT_COORDINATOR and refuses new group
requests with COORDINATOR_NOT_AVAILABLE (begin_shutdown), so shutdown does not wait for them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog

from broker.cluster.store import StoreError
from broker.group import share_records
from broker.group.consumer_classic import ClassicMembers
from broker.group.consumer_group import GROUP_TYPE as CONSUMER_TYPE
from broker.group.consumer_group import ConsumerGroup
from broker.group.consumer_groups import ConsumerGroups, TopicsNow
from broker.group.consumer_migration import Migration
from broker.group.consumer_type_changes import ClassicIds
from broker.group.group import GROUP_TYPE, Group, GroupError, GroupState
from broker.group.offsets import CommitListener, MinCommittedOffset, OffsetManager, OffsetSettings
from broker.group.offsets_store import OFFSETS_TOPIC, OffsetsStore
from broker.group.phases import RebalancePhases
from broker.group.rebalance import GroupLimits, RebalanceProtocol
from broker.group.record_log import record_type
from broker.group.registry import GroupRegistry
from broker.group.requests import JoinRequest, JoinResult, MemberCheck, SyncResult, answer_parked
from broker.group.sessions import SessionTimers
from broker.group.share_group import GROUP_TYPE as SHARE_TYPE
from broker.group.share_group import ShareGroup
from broker.group.share_groups import ShareGroups, TopicLookup
from broker.group.tasks import BackgroundTasks
from protocol.errors import ErrorCode

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.group_configs import MemberTimeouts
    from broker.replica import ReplicaManager
    from protocol.messages import GroupMetadataValue

# GroupConfigs.member_timeouts: (group id, "consumer" or "share") -> the timeouts in force for the group.
MemberTimeoutsOf = Callable[[str, str], Awaitable["MemberTimeouts"]]

log = structlog.get_logger("groups")


class GroupCoordinator:
    def __init__(self, config: BrokerConfig, store: OffsetsStore, replicas: ReplicaManager, *,
                 in_cluster: bool, share_topic: TopicLookup, consumer_topics: TopicsNow,
                 member_timeouts: MemberTimeoutsOf) -> None:
        """`share_topic` resolves a topic a share group subscribes to: (id, partition count) or None;
        `consumer_topics` lists every topic a consumer group may subscribe to, by name; `member_timeouts`
        reads a group's own session timeout, heartbeat interval and assignment interval
        (GroupConfigs.member_timeouts)."""
        self.store = store
        self._member_timeouts = member_timeouts
        self._replicas = replicas
        self._in_cluster = in_cluster
        self._tasks = spawner = BackgroundTasks()
        offsets_partition = (lambda index: replicas.partition(OFFSETS_TOPIC, index)) if in_cluster else None

        def group_loaded(group: Group) -> None:  # fresh sessions; a group over group.max.size rebalances
            sessions.resume_sessions(group)
            rebalance.group_loaded(group)

        # The registry and the timers report to parts built after them: the lambdas bind those parts
        # late, so that each part holds a callable of another part, never this object.
        registry = GroupRegistry(store, spawner.spawn, offsets_partition=offsets_partition,
                                 loaded=lambda group: group_loaded(group),
                                 unloaded=lambda group: sessions.cancel_all(group))
        sessions = SessionTimers(registry, expired=lambda group, member: phases.member_expired(group, member))

        async def store_classic(group_id: str, value: GroupMetadataValue) -> object:
            """A classic group's record, spawned; skipped once its id is a consumer group's: the upgrade
            wrote its records meanwhile, and this one, stale, must not land after them."""
            if group_id in kip848.groups:
                log.info("stale classic group record not written: the group was upgraded", group=group_id)
                return None
            return await store.store_group(group_id, value)
        phases = RebalancePhases(config.group_initial_rebalance_delay_ms, sessions, store_classic, spawner.spawn)
        self.registry, self.sessions, self._phases = registry, sessions, phases
        self.rebalance = rebalance = RebalanceProtocol(
            GroupLimits(config.group_min_session_timeout_ms, config.group_max_session_timeout_ms,
                        config.group_max_size),
            registry, sessions, phases, store_classic, spawner.spawn)
        self.offsets = OffsetManager(
            OffsetSettings(config.offset_metadata_max_bytes, config.offsets_retention_minutes * 60_000,
                           config.offsets_retention_check_interval_ms),
            store, registry, member_seen=sessions.member_seen, stop_timers=sessions.cancel_all)
        self.share = ShareGroups(config.group_share_max_size, share_topic,
                                 other_kind=lambda group_id: self.kind_of(group_id) not in (None, SHARE_TYPE),
                                 append=store.append, spawn=spawner.spawn)

        def classic_empty(group_id: str) -> bool:
            """An empty classic group turns into a consumer group whatever group.consumer.migration.policy
            says: as in Kafka, the policy governs only the online migration of groups with members."""
            group = registry.groups[group_id]
            return group.is_in(GroupState.EMPTY) and not group.members

        self.consumer = kip848 = ConsumerGroups(
            config.group_consumer_max_size, config.group_consumer_assignors, consumer_topics,
            ClassicIds(exists=registry.groups.__contains__, empty=classic_empty,
                       adopt=self._drop_classic, group=registry.groups.get, install=self._install_classic),
            is_share=lambda group_id: self.kind_of(group_id) == SHARE_TYPE, append=store.append,
            spawn=spawner.spawn, migration=Migration(config.group_consumer_migration_policy, config.group_max_size))
        self.classic_members = ClassicMembers(self.consumer, config.message_max_bytes)
        consumers = self.consumer.groups
        # Loaded KIP-848 and share group members get their group's own session timeout once read (the
        # broker's until then).
        session_ms = int(config.group_config_properties["group.consumer.session.timeout.ms"])
        share_session_ms = int(config.group_config_properties["group.share.session.timeout.ms"])

        async def share_group_session_ms(group_id: str) -> int:
            return (await member_timeouts(group_id, SHARE_TYPE)).session_timeout_ms

        async def consumer_group_session_ms(group_id: str) -> int:
            return (await member_timeouts(group_id, CONSUMER_TYPE)).session_timeout_ms

        def consumer_yields(group_id: str) -> bool:
            """A JoinGroup for an empty consumer group's id: the group turns classic, whatever the policy."""
            group = consumers.get(group_id)
            if group is None or group.members:
                return False
            del consumers[group_id]
            self.consumer.persist_later(group_id)  # its records' tombstones
            return True

        registry.share_ids = lambda group_id: self.kind_of(group_id) == SHARE_TYPE or (
            self.kind_of(group_id) == CONSUMER_TYPE and not consumer_yields(group_id))
        registry.share_unload = self._unload_other_types
        registry.consumer_check = self._consumer_check
        registry.consumer_ids = lambda: list(consumers)
        registry.consumer_drop_empty = self._drop_empty_consumer
        registry.consumer_replay = self._replay_keyed

        def loaded() -> None:
            self.consumer.loaded(session_ms, group_session_ms=consumer_group_session_ms)
            self.share.loaded(share_session_ms, taken=lambda group_id: group_id in consumers or (
                group_id in registry.groups and not classic_empty(group_id)), group_session_ms=share_group_session_ms)

        registry.consumer_loaded = loaded
        registry.consumer_topics = lambda group_id: (
            self.consumer.subscribed_topics(group_id) if group_id in consumers else None)

    def kind_of(self, group_id: str) -> str | None:
        """The one place the group kinds meet (one id has one type, as in Kafka): which kind holds the id,
        classic, consumer or share, or None. Each kind refuses an id another holds by asking this."""
        if group_id in self.share.groups:
            return SHARE_TYPE
        if group_id in self.consumer.groups:
            return CONSUMER_TYPE
        group = self.registry.groups.get(group_id)
        return GROUP_TYPE if group is not None and not group.is_in(GroupState.DEAD) else None

    @property
    def groups(self) -> dict[str, Group]:
        return self.registry.groups

    @property
    def active(self) -> bool:
        return self.registry.active

    @property
    def commit_listeners(self) -> list[CommitListener]:
        """Told the (topic, partition) keys of every stored commit (broker/group/trim.py)."""
        return self.offsets.commit_listeners

    # --- lifecycle (a broker service) --------------------------------------------------------------

    async def start(self) -> None:
        registry = self.registry
        if self._in_cluster:
            # Only the partitions led here are this coordinator's, and leadership may move while they
            # load: follow it from the start, and load each led partition as if it had just moved here.
            registry.active = True
            assert registry.partitions is not None  # made in a cluster
            self._replicas.leadership_listeners.append(registry.offsets_partition_moved)
            self._replicas.forget_listeners.append(registry.partitions.forgotten)
            registry.partitions.follow(self.store.local_partitions())
            self._tasks.spawn(self.offsets.expire_periodically())
            log.info("group coordinator started", loading=sorted(registry.loading))
            return
        stats = await registry.load_all()
        registry.active = True
        self._tasks.spawn(self.offsets.expire_periodically())
        log.info("group coordinator started", groups=len(registry.groups), offsets=stats.offsets,
                 records=stats.records)
        if stats.skipped:
            log.warning("offsets topic records skipped at load (no key, unknown type or malformed)",
                        skipped=stats.skipped)

    def begin_shutdown(self) -> None:
        """Stop taking group requests; answer every parked JoinGroup and SyncGroup now."""
        self.registry.active = False
        for group in self.registry.groups.values():
            answer_parked(group, ErrorCode.NOT_COORDINATOR)

    async def stop(self) -> None:
        self.begin_shutdown()
        self.share.stop()
        self.consumer.stop()
        for group in self.registry.groups.values():
            self.sessions.cancel_all(group)
        await self._tasks.cancel_all()

    # --- the group requests ------------------------------------------------------------------------

    # A classic request for a consumer group with members is served inside it (consumer_classic.py), once
    # the checks every classic request gets first (coordinator active, group id, served here) pass.

    def _in_consumer_group(self, group_id: str) -> bool:
        return bool(group_id) and self.registry.not_served(group_id) is None and self.classic_members.serves(group_id)

    async def join_group(self, request: JoinRequest) -> JoinResult:
        def inside() -> bool:
            return self._in_consumer_group(request.group_id) and self.rebalance.join_refusal(request) is None
        if inside():
            try:  # the group's consumer.assignment.interval.ms paces its targets for classic members too
                interval_ms = (await self._member_timeouts(request.group_id, CONSUMER_TYPE)).assignment_interval_ms
            except StoreError:
                return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, request.member_id)
            if inside():  # still so after the read
                return await self.classic_members.join(request, interval_ms)
        return await self.rebalance.join_group(request)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> SyncResult:
        if self._in_consumer_group(group_id):
            return self.classic_members.sync(group_id, generation_id, member_id, group_instance_id, protocol_type,
                                             protocol_name)
        return await self.rebalance.sync_group(group_id, generation_id, member_id, group_instance_id, protocol_type,
                                               protocol_name, assignments)

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if self._in_consumer_group(group_id):
            return self.classic_members.heartbeat(group_id, generation_id, member_id, group_instance_id)
        return self.rebalance.heartbeat(group_id, generation_id, member_id, group_instance_id)

    async def leave_group(self, group_id: str,
                          leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(request-level error, one error per leaving member)."""
        if self._in_consumer_group(group_id):
            return await self.classic_members.leave(group_id, leaving)
        return self.rebalance.leave_group(group_id, leaving)

    # --- listing, describing, deleting -------------------------------------------------------------

    def _drop_classic(self, group_id: str) -> None:
        group = self.registry.groups.pop(group_id, None)
        if group is not None:  # its pending members' timers go with it; parked members rejoin
            answer_parked(group, ErrorCode.REBALANCE_IN_PROGRESS)
            self.sessions.cancel_all(group)

    def _install_classic(self, group: Group, rebalance: bool) -> None:
        """A consumer group turned classic (its last KIP-848 member left or was replaced): its members'
        sessions run, and it rebalances if asked, as Kafka's convertToClassicGroup does."""
        self.registry.groups[group.group_id] = group
        for member in group.members.values():
            self.sessions.schedule_heartbeat(group, member, member.session_timeout_ms)
        if rebalance and group.can_rebalance():
            self._phases.prepare_rebalance(group, f"Downgrade group {group.group_id} from consumer to classic.")
        elif rebalance and group.is_in(GroupState.PREPARING_REBALANCE):  # an upgrade undone mid-rebalance
            self.sessions.set_join_timer(group, group.rebalance_timeout_ms(), lambda: self._phases.complete_join(group))

    def _drop_empty_consumer(self, group_id: str) -> bool:
        if group_id not in self.consumer.groups or self.consumer.delete(group_id) != ErrorCode.NONE:
            return False
        self.consumer.persist_later(group_id)
        return True

    def _replay_keyed(self, key: bytes, value: bytes | None) -> None:
        """A KIP-848 consumer group's or a share group's record at load, to its kind."""
        if record_type(key) in share_records.WRITTEN_TYPES:
            self.share.replay(key, value)
        else:
            self.consumer.replay(key, value)

    def _unload_other_types(self, doomed: Callable[[str], bool]) -> None:
        self.share.unload(doomed)
        self.consumer.unload(doomed)

    def _consumer_check(self, group_id: str, check: MemberCheck) -> bool:
        """Whether the id is a consumer group's; its offset commit (or fetch) checked if so."""
        if group_id not in self.consumer.groups:
            return False
        self.consumer.check_commit(group_id, check)
        return True

    def list_groups(self, states: set[str], types: set[str]) -> list[Group | ShareGroup | ConsumerGroup]:
        """Groups not Dead, filtered by state and type names (case-insensitive; empty = all), by id."""
        self.registry.check_active()
        kinds = {t.lower() for t in types} or {GROUP_TYPE, SHARE_TYPE, CONSUMER_TYPE}
        wanted = {s.lower() for s in states}
        found: list[Group | ShareGroup | ConsumerGroup] = []
        if GROUP_TYPE in kinds:
            found += [g for g in self.registry.groups.values() if not g.is_in(GroupState.DEAD)]
        if SHARE_TYPE in kinds:
            found += self.share.live()
        if CONSUMER_TYPE in kinds:
            found += self.consumer.live()
        return sorted((g for g in found if not wanted or g.state.value.lower() in wanted), key=lambda g: g.group_id)

    def describe_group(self, group_id: str) -> Group | ShareGroup | ConsumerGroup | None:
        self.registry.check_active()
        self.registry.check_served(group_id)
        if (other := self.share.groups.get(group_id) or self.consumer.groups.get(group_id)) is not None:
            return other
        group = self.registry.groups.get(group_id)
        return None if group is None or group.is_in(GroupState.DEAD) else group

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Kafka's DeleteGroups: only Empty groups; their offsets and metadata get tombstones."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            if (refused := self.registry.not_served(group_id)) is not None:
                results[group_id] = refused
                continue
            if group_id in self.share.groups:  # gone once its records' tombstones are written
                results[group_id] = await self.share.delete(group_id)
                continue
            if group_id in self.consumer.groups:
                results[group_id] = await self._delete_consumer_group(group_id)
                continue
            group = self.registry.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if not group.is_in(GroupState.EMPTY) or group.pending_members:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            results[group_id] = await self._delete_group(group)
        return results

    async def _delete_consumer_group(self, group_id: str) -> ErrorCode:
        """An Empty consumer group's records and offsets tombstoned; a failed write puts the group back, as
        the log still holds it (unless another group took the id meanwhile)."""
        group = self.consumer.groups[group_id]
        error = self.consumer.delete(group_id)
        if error != ErrorCode.NONE:
            return error
        error = await _written(self.consumer.persist(group_id))
        if error == ErrorCode.NONE:
            error = await _written(self.store.delete(group_id, self.store.offset_keys(group_id), group_tombstone=True))
        if error != ErrorCode.NONE and self.kind_of(group_id) is None:
            group.dead = False
            self.consumer.groups[group_id] = group
        return error

    async def _delete_group(self, group: Group) -> ErrorCode:
        groups = self.registry.groups
        group.transition_to(GroupState.DEAD)  # no join or commit gets in while the tombstones are written
        self.sessions.cancel_all(group)
        del groups[group.group_id]
        try:
            await self.store.delete(group.group_id, self.store.offset_keys(group.group_id), group_tombstone=True)
        except GroupError as exc:
            log.warning("deleting a group failed", group=group.group_id, error=exc.error_code.name)
            if group.group_id not in groups:
                groups[group.group_id] = Group(group.group_id, generation_id=group.generation_id,
                                               protocol_type=group.protocol_type)
            return exc.error_code
        log.info("deleted group", group=group.group_id)
        return ErrorCode.NONE

    # --- the broker-side API -----------------------------------------------------------------------

    def committed_offsets(self, topic: str, partition: int) -> dict[str, int]:
        """{group: committed offset} for one partition, over every group that has one."""
        return self.offsets.committed_offsets(topic, partition)

    def min_committed_offset(self, topic: str, partition: int) -> MinCommittedOffset:
        """(smallest committed offset over all groups or None, groups with live members consuming it):
        KIP-848 consumer groups count as classic ones do (their members subscribe to the topic)."""
        found = self.offsets.min_committed_offset(topic, partition)
        committed = self.store.partition_offsets(topic, partition)
        readers = [g.group_id for g in self.consumer.live()
                   if g.members and (topic in g.topics or g.group_id in committed)]
        return found._replace(active_groups=tuple(sorted({*found.active_groups, *readers})))


async def _written(persisting: Awaitable[object]) -> ErrorCode:
    """A deleted group's tombstones written, or the coordinator's error (the client is told to try again)."""
    try:
        await persisting
    except GroupError as exc:
        log.warning("a deleted group's records not written", error=exc.error_code.name)
        return exc.error_code
    return ErrorCode.NONE
