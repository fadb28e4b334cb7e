"""The classic group coordinator: membership, rebalances and sessions (Kafka's GroupMetadataManager
for classic groups), one instance per broker, a broker service.

Every group this broker coordinates lives here (on one broker: every group). A rebalance runs as in
Kafka:

    JoinGroup (v4+: a first join with no member id gets MEMBER_ID_REQUIRED and an id; the member is
      "pending" until it rejoins, for one session timeout)
    -> PreparingRebalance: wait until every member has rejoined, or the rebalance timeout (the
      largest of the members'); a new group (Empty) first waits group.initial.rebalance.delay.ms,
      extended by the same delay for each member that arrives, up to the rebalance timeout
    -> CompletingRebalance: generation + 1, the protocol every member supports that most members
      prefer; the leader gets all members' metadata; dynamic members that did not rejoin are removed
    -> SyncGroup from the leader: the assignment is written to __consumer_offsets, then every
      member gets its part -> Stable. Members that send no SyncGroup within the rebalance timeout
      are removed and the group rebalances again.

Generations start at 1 (the first completed join), as in Kafka: aiokafka only sends LeaveGroup for
a generation > 0. Sessions: each heartbeat, commit or completed join/sync pushes a member's deadline
out by its session timeout; one asyncio timer per member fires at the deadline and removes the
member (then the group rebalances) unless it is parked in a JoinGroup or SyncGroup. A new member's
join times out after 5 minutes. Static members (group.instance.id) keep their place across restarts:
a rejoin with an unknown member id replaces the old id (whoever waits under it is answered
FENCED_INSTANCE_ID); in Stable with an unchanged protocol no rebalance happens (v9+: the leader gets
SkipAssignment). All timers are asyncio TimerHandles; nothing polls.

Group metadata (members, generation, protocol, assignment) is written when a group becomes Empty,
when the leader's assignment arrives and when a static member is replaced, and is replayed at
start-up: a restarted broker knows its Stable groups, and their members keep heartbeating without a
rebalance (each gets a fresh session timeout). Committed offsets are offsets.py's.

A broker stopping answers every parked JoinGroup and SyncGroup with NOT_COORDINATOR and refuses new
group requests with COORDINATOR_NOT_AVAILABLE (begin_shutdown), so shutdown does not wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import structlog

from broker.group.group import (
    GROUP_TYPE,
    UNKNOWN_MEMBER_ID,
    Group,
    GroupError,
    GroupState,
    Member,
)
from broker.group.offsets import MinCommittedOffset, OffsetManager
from broker.group.offsets_store import OFFSETS_TOPIC, OffsetsStore, partition_for
from broker.replica import PartitionError
from protocol.errors import ErrorCode
from protocol.messages import GroupMetadataValue
from protocol.wire import fits_short_string

log = structlog.get_logger("groups")

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's group.classic.new.member.join.timeout.ms
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                              GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
_Member = GroupMetadataValue.MemberMetadata


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_id: str
    client_host: str
    version: int
    reason: str | None = None


@dataclass
class JoinResult:
    error: ErrorCode = ErrorCode.NONE
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and asked != actual


class GroupCoordinator:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = broker.config
        self.groups: dict[str, Group] = {}
        self.store = OffsetsStore(broker)
        self.offsets = OffsetManager(self)
        self.active = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        # Called with the (topic, partition) keys of every stored commit (broker/group/trim.py).
        self.commit_listeners: list[Callable[[Iterable[tuple[str, int]]], None]] = []
        # In a cluster: __consumer_offsets partitions being replayed after this broker became their leader.
        self._loads: dict[int, asyncio.Task] = {}

    # --- lifecycle (a broker service) --------------------------------------------------------------

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.broker.cluster is not None:
            # Only the partitions led here are this coordinator's, and leadership may move while they
            # load: follow it from the start, and load each led partition as if it had just moved here.
            self.active = True
            self.broker.replicas.leadership_listeners.append(self.offsets_partition_moved)
            for partition in self.store.local_partitions():
                if partition.is_leader:
                    self.offsets_partition_moved(partition)
            self._spawn(self.offsets.expire_periodically())
            log.info("group coordinator started", loading=sorted(self._loads))
            return
        stats = await self.store.load(self._replay_group)
        self._adopt_loaded(self.groups)
        self.active = True
        self._spawn(self.offsets.expire_periodically())
        log.info("group coordinator started", groups=len(self.groups), offsets=stats.offsets,
                 records=stats.records)
        if stats.skipped:
            log.warning("offsets topic records skipped at load (no key, unknown type or malformed)",
                        skipped=stats.skipped)

    def begin_shutdown(self) -> None:
        """Stop taking group requests; answer every parked JoinGroup and SyncGroup now."""
        self.active = False
        for group in self.groups.values():
            for member in group.members.values():
                member.complete_join(JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                member.complete_sync(SyncResult(ErrorCode.NOT_COORDINATOR))

    async def stop(self) -> None:
        self.begin_shutdown()
        for group in self.groups.values():
            self._cancel_timers(group)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("group coordinator task failed", error=repr(task.exception()))

    def _adopt_loaded(self, groups) -> None:
        """After a replay: offsets without group metadata make a "simple" group, and loaded members get
        their session timers."""
        for group_id in self.store.groups_with_offsets():
            if group_id not in self.groups:
                self.groups[group_id] = Group(group_id)
        for group in list(groups.values()):
            for member in group.members.values():
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

    def _check_active(self) -> None:
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
        if self.broker.cluster is None or not group_id or not self.store.topic_exists():
            return None
        index = self.store.partition_for(group_id)
        if index in self._loads:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        try:
            partition = self.broker.replicas.partition(OFFSETS_TOPIC, index)
        except PartitionError:
            return ErrorCode.NOT_COORDINATOR
        return None if partition.is_leader else ErrorCode.NOT_COORDINATOR

    def check_served(self, group_id: str) -> None:
        error = self.not_served(group_id)
        if error is not None:
            raise GroupError(error, f"this broker does not coordinate group {group_id} now ({error.name})")

    # --- leadership of __consumer_offsets partitions (a cluster) -------------------------------------

    def offsets_partition_moved(self, partition) -> None:
        """A partition's leadership changed here. For a __consumer_offsets partition: its groups are
        dropped from memory (members waiting in a join or sync are told NOT_COORDINATOR), and replayed
        from the log when this broker is the new leader (Kafka's onElection / onResignation)."""
        tp = partition.topic_partition
        if tp.topic != OFFSETS_TOPIC or not self.active or self.broker.cluster is None:
            return
        self._unload(tp.partition)
        if partition.is_leader:
            self._loads[tp.partition] = self._spawn(self._load(tp.partition, partition))

    def _unload(self, index: int) -> None:
        loading = self._loads.pop(index, None)
        if loading is not None:
            loading.cancel()
        count = self.store.partition_count()
        doomed = {g for g in [*self.groups, *self.store.groups_with_offsets()] if partition_for(g, count) == index}
        for group_id in doomed:
            group = self.groups.pop(group_id, None)
            if group is not None:
                for member in group.members.values():
                    member.complete_join(JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
                    member.complete_sync(SyncResult(ErrorCode.NOT_COORDINATOR))
                self._cancel_timers(group)
            self.store.forget_group(group_id)
        if doomed:
            log.info("groups unloaded: their offsets partition is led elsewhere now", partition=index,
                     groups=len(doomed))

    async def _load(self, index: int, partition) -> None:
        try:
            loaded: dict[str, Group] = {}

            def replay(group_id: str, value) -> None:
                self._replay_group(group_id, value)
                if group_id in self.groups:
                    loaded[group_id] = self.groups[group_id]

            await self.store.load_partition(partition, replay)
            self._adopt_loaded(loaded)
            log.info("groups loaded: this broker leads their offsets partition now", partition=index,
                     groups=len(loaded))
        finally:
            if self._loads.get(index) is asyncio.current_task():
                del self._loads[index]

    # --- the broker-side API -----------------------------------------------------------------------

    def committed_offsets(self, topic: str, partition: int) -> dict[str, int]:
        """{group: committed offset} for one partition, over every group that has one."""
        return self.offsets.committed_offsets(topic, partition)

    def min_committed_offset(self, topic: str, partition: int) -> MinCommittedOffset:
        """(smallest committed offset over all groups or None, groups with live members consuming it)."""
        return self.offsets.min_committed_offset(topic, partition)

    # --- JoinGroup ---------------------------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> JoinResult:
        member_id = request.member_id
        if not self.active:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not request.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id)
        if (refused := self.not_served(request.group_id)) is not None:
            return JoinResult(refused, member_id)
        if not (self.config.group_min_session_timeout_ms <= request.session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        # Stored in the group's record and shown by JoinGroup v0-5, DescribeGroups v0-4, ListGroups v0-2
        if not all(map(fits_short_string, [request.group_instance_id, request.protocol_type,
                                           *(name for name, _ in request.protocols)])):
            return JoinResult(ErrorCode.INVALID_REQUEST, member_id)
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(request.group_id)
        created = group is None
        if group is None:
            if not unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[request.group_id] = Group(request.group_id)
        future = asyncio.get_running_loop().create_future()
        if unknown:
            self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)
        result = await asyncio.shield(future)
        if created and result.error not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
            self.forget_if_unused(group)  # a refused first join leaves no group behind
        return result

    def _join_new_member(self, group: Group, request: JoinRequest, future: asyncio.Future) -> None:
        if group.is_in(DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(request.protocol_type, [n for n, _ in request.protocols]):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(request.client_id, request.group_instance_id)
        if request.group_instance_id is not None:
            existing = group.static_member_id(request.group_instance_id)
            if existing is not None:
                log.info("static member rejoins with a new member id", group=group.group_id,
                         instance_id=request.group_instance_id, old_member_id=existing, member_id=new_member_id)
                self._replace_static_member(group, request, existing, new_member_id, future)
            else:
                self._add_member_and_rebalance(group, request, new_member_id, future)
        elif request.version >= 4:
            # KIP-394: hand out the id and let the member come back with it; until then it is pending
            # and the rebalance waits for it, for one session timeout.
            timer = self._loop.call_later(request.session_timeout_ms / 1000, self._expire_pending_member,
                                          group, new_member_id)
            group.pending_members[new_member_id] = timer
            future.set_result(JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id))
        else:
            self._add_member_and_rebalance(group, request, new_member_id, future)

    def _join_existing_member(self, group: Group, request: JoinRequest, future: asyncio.Future) -> None:
        member_id = request.member_id
        if group.is_in(DEAD):
            future.set_result(JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id))
            return
        if not group.supports_protocols(request.protocol_type, [n for n, _ in request.protocols]):
            future.set_result(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id))
            return
        if group.is_pending(member_id):
            if request.group_instance_id is not None:  # pending members are dynamic by construction
                future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
                return
            timer = group.pending_members.pop(member_id)
            if timer is not None:
                timer.cancel()
            self._add_member_and_rebalance(group, request, member_id, future)
            return
        try:
            member = group.validate_member(member_id, request.group_instance_id)
        except GroupError as exc:
            future.set_result(JoinResult(exc.error_code, member_id))
            return
        if group.is_in(PREPARING):
            self._update_member_and_rebalance(group, member, request, future, "member rejoins during a rebalance")
        elif group.is_in(COMPLETING):
            if member.matches(request.protocols):
                # The member missed its JoinGroup answer: the current generation again.
                future.set_result(self._join_answer(group, member, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, request, future, "member metadata changed")
        elif group.is_in(STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                reason = "the leader rejoins" if group.is_leader(member_id) else "member metadata changed"
                self._update_member_and_rebalance(group, member, request, future, reason)
            else:
                future.set_result(self._join_answer(group, member, with_members=False))
        else:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _join_answer(self, group: Group, member: Member, *, with_members: bool, leader: str | None = None,
                     skip_assignment: bool = False) -> JoinResult:
        members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                   for m in group.members.values()] if with_members else []
        return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, (group.leader_id or "") if leader is None else leader, members,
                          skip_assignment)

    def _add_member_and_rebalance(self, group: Group, request: JoinRequest, member_id: str,
                                  future: asyncio.Future) -> None:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        list(request.protocols), is_new=True)
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, future)
        # A new member cannot heartbeat while its JoinGroup is parked; its join times out instead.
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance_or_complete_join(
            group, f"new member {member_id} joins (reason: {request.reason or 'not given'})")

    def _update_member_and_rebalance(self, group: Group, member: Member, request: JoinRequest,
                                     future: asyncio.Future, reason: str) -> None:
        if member.awaiting_join:  # an earlier JoinGroup of the same member is superseded
            member.complete_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms,
                            future)
        self._maybe_prepare_rebalance_or_complete_join(group, f"{reason}: {member.member_id}")

    def _replace_static_member(self, group: Group, request: JoinRequest, old_member_id: str, new_member_id: str,
                               future: asyncio.Future) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id,
                                             JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id),
                                             SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms,
                            future)
        if group.is_in(STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, only the new member id is persisted.
                self._spawn(self._persist_replaced_static_member(group, request, member, old_member_id,
                                                                 current_leader, old))
                return
            self._maybe_prepare_rebalance_or_complete_join(group, f"static member {new_member_id} changed protocols")
            return
        if group.is_in(COMPLETING):
            # The leader may already hold an assignment for the old id: assign again.
            self._prepare_rebalance(group, f"static member {new_member_id} rejoined during the sync phase")
            return
        self._maybe_complete_join_phase(group)

    async def _persist_replaced_static_member(self, group: Group, request: JoinRequest, member: Member,
                                              old_member_id: str, current_leader: str | None, old) -> None:
        generation = group.generation_id
        try:
            await self.store.store_group(group.group_id, self._group_value(group))
        except GroupError as exc:
            if group.members.get(member.member_id) is member:
                log.warning("could not persist a replaced static member; reverting", group=group.group_id,
                            member_id=member.member_id, error=exc.error_code.name)
                group.update_member(member, old[0], old[1], old[2], member.join_future)
                error = JoinResult(exc.error_code, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                                   group.protocol_name, current_leader or "")
                restored = group.replace_static_member(request.group_instance_id, member.member_id, old_member_id,
                                                       error, SyncResult(exc.error_code))
                self._schedule_heartbeat(group, restored, restored.session_timeout_ms)
            return
        if group.members.get(member.member_id) is not member or group.generation_id != generation:
            return  # replaced again or rebalanced meanwhile: that path answered the join
        if request.version >= 9:
            leader = group.is_leader(member.member_id)
            member.complete_join(self._join_answer(group, member, with_members=leader, skip_assignment=leader))
        else:
            member.complete_join(self._join_answer(group, member, with_members=False, leader=current_leader or ""))

    # --- rebalancing -------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def _maybe_complete_join_phase(self, group: Group) -> None:
        # Never early during the initial rebalance of a new group: its delay runs out first.
        if group.is_in(PREPARING) and group.previous_state is not EMPTY and group.has_all_members_joined():
            self._complete_join(group)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(COMPLETING):
            self._reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(EMPTY)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._set_join_timer(group, delay, lambda: self._try_complete_initial_rebalance(group, delay, remaining))
        group.transition_to(PREPARING)
        log.info("preparing to rebalance group", group=group.group_id, generation=group.generation_id,
                 members=len(group.members), reason=reason)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self._set_join_timer(group, group.rebalance_timeout_ms(), lambda: self._complete_join(group))

    def _try_complete_initial_rebalance(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            next_remaining = max(remaining_ms - delay_ms, 0)
            self._set_join_timer(group, next_delay,
                                 lambda: self._try_complete_initial_rebalance(group, next_delay, next_remaining))
        else:
            self._complete_join(group)

    def _set_join_timer(self, group: Group, delay_ms: int, action: Callable[[], None]) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()

        def fire() -> None:
            group.join_timer = None
            if self.groups.get(group.group_id) is group and self.active:
                action()

        group.join_timer = self._loop.call_later(delay_ms / 1000, fire)

    def _complete_join(self, group: Group) -> None:
        """The join phase ends: next generation, answers to every parked JoinGroup, wait for syncs."""
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(PREPARING):
            return
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in gone:
            self._drop_member(group, member)
        if gone:
            log.info("removed members that did not rejoin", group=group.group_id,
                     members=[m.member_id for m in gone])
        if group.members and not group.maybe_elect_new_joined_leader():
            log.error("no member rejoined; waiting for sessions to expire", group=group.group_id)
            self._set_join_timer(group, group.rebalance_timeout_ms(), lambda: self._complete_join(group))
            return
        group.init_next_generation()
        if group.is_in(EMPTY):
            log.info("group is empty", group=group.group_id, generation=group.generation_id)
            self._spawn(self._store_group_quietly(group))
            return
        log.info("group joined", group=group.group_id, generation=group.generation_id, members=len(group.members),
                 protocol=group.protocol_name, leader=group.leader_id)
        for member in group.members.values():
            member.complete_join(self._join_answer(group, member, with_members=group.is_leader(member.member_id)))
            self._schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        group.sync_timer = self._loop.call_later(group.rebalance_timeout_ms() / 1000, self._expire_pending_sync,
                                                 group, generation)

    def _expire_pending_sync(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if self.groups.get(group.group_id) is not group or generation != group.generation_id or not self.active:
            return
        if group.is_in(COMPLETING, STABLE) and group.pending_sync:
            late = [group.members[m] for m in list(group.pending_sync) if m in group.members]
            for member in late:
                self._drop_member(group, member)
            self._prepare_rebalance(group, f"members sent no SyncGroup in time: {[m.member_id for m in late]}")

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if group.sync_timer is not None and (not group.is_in(COMPLETING, STABLE) or not group.pending_sync):
            group.sync_timer.cancel()
            group.sync_timer = None

    def _reset_and_propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        protocol_type, protocol_name = (group.protocol_type, group.protocol_name) if not error else (None, None)
        for member in group.members.values():
            if member.complete_sync(SyncResult(error, protocol_type, protocol_name, member.assignment)):
                self._schedule_heartbeat(group, member, member.session_timeout_ms)

    # --- sessions ----------------------------------------------------------------------------------

    def _schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int) -> None:
        """Push the member's session deadline out; the timer is moved only when it would fire late."""
        deadline = self._loop.time() + timeout_ms / 1000
        member.heartbeat_deadline = deadline
        timer = member.heartbeat_timer
        if timer is not None:
            if timer.when() <= deadline:
                return  # fires first, sees the new deadline and sleeps on
            timer.cancel()
        member.heartbeat_timer = self._loop.call_at(deadline, self._heartbeat_expired, group, member)

    def _heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if self.groups.get(group.group_id) is not group or group.members.get(member.member_id) is not member:
            return
        if not self.active or group.is_in(DEAD):
            return
        if self._loop.time() < member.heartbeat_deadline:
            member.heartbeat_timer = self._loop.call_at(member.heartbeat_deadline, self._heartbeat_expired,
                                                        group, member)
            return
        if member.has_satisfied_heartbeat():
            return  # parked in a join or sync; completing it schedules the next deadline
        log.info("member session expired; removing it", group=group.group_id, member_id=member.member_id,
                 session_timeout_ms=member.session_timeout_ms)
        self._remove_member_and_update(group, member, f"session of {member.member_id} expired")

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        if self.groups.get(group.group_id) is not group or not group.is_pending(member_id):
            return
        log.info("pending member never rejoined; removed", group=group.group_id, member_id=member_id)
        group.pending_members.pop(member_id, None)
        if group.is_in(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    def _drop_member(self, group: Group, member: Member) -> None:
        """Take a member out: whoever waits for it is answered UNKNOWN_MEMBER_ID, its timer stops."""
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        group.remove(member.member_id)

    def _remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        self._drop_member(group, member)
        if group.is_in(STABLE, COMPLETING):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(PREPARING) and group.has_all_members_joined():
            self._complete_join(group)

    def _cancel_timers(self, group: Group) -> None:
        for timer in (group.join_timer, group.sync_timer, *group.pending_members.values(),
                      *(m.heartbeat_timer for m in group.members.values())):
            if timer is not None:
                timer.cancel()
        group.join_timer = group.sync_timer = None
        for member in group.members.values():
            member.heartbeat_timer = None

    # --- SyncGroup ---------------------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> SyncResult:
        if not self.active:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        if (refused := self.not_served(group_id)) is not None:
            return SyncResult(refused)
        group = self.groups.get(group_id)
        if group is None or group.is_in(EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        try:
            member = group.validate_member(member_id, group_instance_id)
        except GroupError as exc:
            return SyncResult(exc.error_code)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if _inconsistent(protocol_type, group.protocol_type) or _inconsistent(protocol_name, group.protocol_name):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.is_in(PREPARING):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.is_in(STABLE):
            self._remove_pending_sync(group, member_id)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        future = asyncio.get_running_loop().create_future()
        if member.awaiting_sync:
            member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = future
        self._remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            assignment = {m: bytes(a) for m, a in assignments}
            missing = [m for m in group.members if m not in assignment]
            for m in missing:
                assignment[m] = b""
            if missing:
                log.warning("leader gave no assignment to some members", group=group_id, members=missing)
            # The write and what follows run on their own: the leader's client may go away meanwhile.
            self._spawn(self._store_assignment(group, group.generation_id, assignment, future))
        return await asyncio.shield(future)

    async def _store_assignment(self, group: Group, generation: int, assignment: dict[str, bytes],
                                future: asyncio.Future) -> None:
        """Persist the leader's assignment, then hand every member its part and go Stable."""
        try:
            error = ErrorCode.NONE
            try:
                await self.store.store_group(group.group_id, self._group_value(group, assignment))
            except GroupError as exc:
                error = exc.error_code
            if group.is_in(COMPLETING) and generation == group.generation_id \
                    and self.groups.get(group.group_id) is group:
                if error:
                    self._reset_and_propagate_assignment(group, error)
                    self._maybe_prepare_rebalance_or_complete_join(group,
                                                                   f"storing the assignment failed: {error.name}")
                else:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(STABLE)
                    log.info("group stable", group=group.group_id, generation=generation,
                             members=len(group.members))
        finally:
            if not future.done():  # the group moved on while the assignment was being written
                future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (refused := self.not_served(group_id)) is not None:
            return refused
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            member = group.validate_member(member_id, group_instance_id)
        except GroupError as exc:
            return exc.error_code
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._schedule_heartbeat(group, member, member.session_timeout_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_in(PREPARING) else ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(request-level error, one error per leaving member)."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if (refused := self.not_served(group_id)) is not None:
            return refused, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        errors = []
        left = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Admin removal by instance id alone (kafka-consumer-groups --delete... / removeMembersFromGroup).
                existing = group.static_member_id(instance_id)
                if existing is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                target = group.members[existing]
            elif group.is_pending(member_id):
                timer = group.pending_members.pop(member_id)
                if timer is not None:
                    timer.cancel()
                errors.append(ErrorCode.NONE)
                left.append(member_id)
                continue
            else:
                try:
                    target = group.validate_member(member_id, instance_id)
                except GroupError as exc:
                    errors.append(exc.error_code)
                    continue
            self._drop_member(group, target)
            errors.append(ErrorCode.NONE)
            left.append(target.member_id)
        if left:
            log.info("members left the group", group=group_id, members=left)
            if group.is_in(STABLE, COMPLETING):
                self._maybe_prepare_rebalance_or_complete_join(group, f"members left: {left}")
            elif group.is_in(PREPARING):
                self._maybe_complete_join_phase(group)
        return ErrorCode.NONE, errors

    # --- listing, describing, deleting -------------------------------------------------------------

    def list_groups(self, states: set[str], types: set[str]) -> list[Group]:
        """Groups not Dead, filtered by state and type names (case-insensitive; empty = all)."""
        self._check_active()
        if types and GROUP_TYPE not in {t.lower() for t in types}:
            return []
        wanted = {s.lower() for s in states}
        return [g for g in sorted(self.groups.values(), key=lambda g: g.group_id)
                if not g.is_in(DEAD) and (not wanted or g.state.value.lower() in wanted)]

    def describe_group(self, group_id: str) -> Group | None:
        self._check_active()
        self.check_served(group_id)
        group = self.groups.get(group_id)
        return None if group is None or group.is_in(DEAD) else group

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Kafka's DeleteGroups: only Empty groups; their offsets and metadata get tombstones."""
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            if (refused := self.not_served(group_id)) is not None:
                results[group_id] = refused
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(DEAD):
                results[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if not group.is_in(EMPTY) or group.pending_members:
                results[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            results[group_id] = await self._delete_group(group)
        return results

    async def _delete_group(self, group: Group) -> ErrorCode:
        group.transition_to(DEAD)  # no join or commit gets in while the tombstones are written
        self._cancel_timers(group)
        del self.groups[group.group_id]
        try:
            await self.store.delete(group.group_id, self.store.group_offsets(group.group_id), group_tombstone=True)
        except GroupError as exc:
            log.warning("deleting a group failed", group=group.group_id, error=exc.error_code.name)
            if group.group_id not in self.groups:
                self.groups[group.group_id] = Group(group.group_id, generation_id=group.generation_id,
                                                    protocol_type=group.protocol_type)
            return exc.error_code
        log.info("deleted group", group=group.group_id)
        return ErrorCode.NONE

    # --- group metadata records --------------------------------------------------------------------

    def _group_value(self, group: Group, assignment: dict[str, bytes] | None = None) -> GroupMetadataValue:
        members = [
            _Member(member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                    client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                    session_timeout=m.session_timeout_ms, subscription=m.metadata(group.protocol_name),
                    assignment=(assignment or {}).get(m.member_id, m.assignment))
            for m in group.members.values()]
        return GroupMetadataValue(protocol_type=group.protocol_type or "", generation=group.generation_id,
                                  protocol=group.protocol_name, leader=group.leader_id,
                                  current_state_timestamp=group.state_timestamp_ms or -1, members=members)

    async def _store_group_quietly(self, group: Group) -> None:
        try:
            await self.store.store_group(group.group_id, self._group_value(group))
        except GroupError as exc:
            # Safe to lose: the previous generation comes back after a restart and its members expire.
            log.warning("could not write group metadata", group=group.group_id, error=exc.error_code.name)

    def _replay_group(self, group_id: str, value: GroupMetadataValue | None) -> None:
        """A GroupMetadata record at load: the group as it was last written (Stable if it had members)."""
        if value is None:
            self.groups.pop(group_id, None)
            return
        protocol_type = value.protocol_type or None
        group = Group(group_id, STABLE if value.members else EMPTY, generation_id=value.generation,
                      protocol_type=protocol_type, protocol_name=value.protocol, leader_id=value.leader)
        group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
        for m in value.members:
            rebalance = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
            group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host, rebalance,
                             m.session_timeout, value.protocol_type, [(value.protocol or "", bytes(m.subscription))],
                             bytes(m.assignment)))
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group

    def forget_if_unused(self, group: Group) -> None:
        """Drop an in-memory group that holds nothing (created by a request that then failed)."""
        if (self.groups.get(group.group_id) is group and group.is_in(EMPTY) and not group.members
                and not group.pending_members and not self.store.has_offsets(group.group_id)
                and group.generation_id == 0):
            with contextlib.suppress(KeyError):
                del self.groups[group.group_id]
