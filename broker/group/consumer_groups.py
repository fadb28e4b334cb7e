"""The consumer groups of KIP-848's protocol this coordinator serves, beside its classic and share groups:
ConsumerGroupHeartbeat's membership, epochs, target assignment and reconciliation, member sessions and
rebalance timeouts, and what listing, describing, deleting and offset commits need.

One group id has one type: a heartbeat for a share group's id is GROUP_ID_NOT_FOUND; an Empty classic
group (no members; offsets only, as a restarted coordinator has) becomes a consumer group on its first
heartbeat (Kafka's empty-group conversion), a classic group with members by the migration policy
(consumer_migration.py, which also turns a group left with classic members only back; consumer_type_changes.py
applies both to the groups served). The heartbeat follows Kafka's GroupMetadataManager: epoch 0 joins, -1
leaves, -2 is a static member leaving to come back (its partitions stay reserved for its instance id until its
session ends); any other epoch must be the member's own, or the one before it with no partition outside its
assignment, else FENCED_MEMBER_EPOCH.
A new target is computed at a heartbeat that finds the group epoch past it, once the group's
consumer.assignment.interval.ms (else the broker's group.consumer.assignment.interval.ms, dynamic) has
passed since the last computation (KIP-1263; 0: at once); the group epoch itself moves at once.
A member that keeps partitions to revoke past its rebalance timeout is removed.

Each state change is written to __consumer_offsets as Kafka's records (consumer_records.py) before the
heartbeat is answered, one change of a group at a time (a KIP-848 heartbeat's or a timer's); a failed
write answers it with the coordinator's error and undoes the change, as Kafka reverts to its last committed
state (a timer's removal is then tried again after another session). A restarted or failed-over
coordinator rebuilds the groups from those records (epochs, members, target and current assignments) and
restarts their session timers, so the members carry on without rejoining.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable

import structlog

from broker.aio import KeyedLocks
from broker.coordinator_partitions import Spawn
from broker.group import consumer_records
from broker.group.consumer_assignors import assign
from broker.group.consumer_group import (
    GROUP_TYPE,
    STATIC_LEAVE_EPOCH,
    ChangeSnapshot,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    reconcile,
)
from broker.group.consumer_migration import (
    DEFAULT_MIGRATION,
    Migration,
)
from broker.group.consumer_regex import MAX_REGEX_LENGTH, check_regex, matching
from broker.group.consumer_requests import (
    ConsumerHeartbeat,
    check_commit,
    check_epoch,
    check_request,
)
from broker.group.consumer_topics import SubscribedTopics, TopicsNow
from broker.group.consumer_type_changes import ClassicIds, TypeChanges
from broker.group.group import Group, GroupError, now_ms
from broker.group.loaded_sessions import own_sessions
from broker.group.member_group import LEAVE_EPOCH, HeartbeatAnswer, check_joining, new_target_now
from broker.group.record_log import AppendRecords, GroupRecordLog, Records, topics_hash
from broker.group.requests import MemberCheck
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode

log = structlog.get_logger("groups")



def _still_due(member: ConsumerMember, why: str, epoch: int | None) -> bool:
    """Whether a timeout that fired still holds when its removal runs: no timer of its kind armed since."""
    if why == "session":
        return member.session_timer is None
    if why == "rebalance":
        return member.rebalance_timer is None and member.epoch == epoch
    return why.removeprefix("classic ") not in member.classic_timers  # a classic JoinGroup or SyncGroup timeout


class ConsumerGroups(TypeChanges):
    def __init__(self, max_size: int, assignors: list[str], topics: TopicsNow, classic: ClassicIds,
                 is_share: Callable[[str], bool], append: AppendRecords, spawn: Spawn, *,
                 migration: Migration = DEFAULT_MIGRATION, clock: Callable[[], int] = now_ms) -> None:
        """`assignors`: group.consumer.assignors' short names, the first the default; `append` writes a
        group's records, `spawn` runs the writes a timer's removal of a member makes; `migration`: the
        online migration policy (consumer_migration.py); `clock`: the wall clock in ms that times the
        targets (kept in record 6, so read back after a restart)."""
        self.groups: dict[str, ConsumerGroup] = {}
        self.migration = migration
        self.records = GroupRecordLog(consumer_records.KIND, self._records_now, append, spawn)
        self.max_size = max_size
        self.assignors = assignors
        self.topics = SubscribedTopics(topics)
        self._classic = classic
        self._is_share = is_share
        self._spawn = spawn
        self._clock = clock
        # One KIP-848 heartbeat's or timer's change of a group at a time, from its computation through its write.
        self._changing = KeyedLocks()

    # --- ConsumerGroupHeartbeat --------------------------------------------------------------------

    async def heartbeat_written(self, request: ConsumerHeartbeat, timeouts: MemberTimeouts) -> HeartbeatAnswer:
        """The heartbeat's change, kept once its records are written; else undone (a join not kept nor
        counted toward group.consumer.max.size, a leaving member kept so that a retry works) and the
        write's GroupError raised."""
        async with self._changing.held(request.group_id):
            undo = self._undo_of(request.group_id, request.member_id)
            try:
                answer = self.heartbeat(request, timeouts)
                # The change is in __consumer_offsets before the member hears of it, as in Kafka.
                await self.persist(request.group_id, answer.member_id)
            except GroupError:
                undo()
                raise
        return answer

    def _undo_of(self, group_id: str, member_id: str | None) -> Callable[[], None]:
        """What undoes a change of the group from here (ChangeSnapshot). A type change is the record log's
        to revert; when another request's change of the group was written after this one (a classic
        member's: Kafka fails it too, Ebb answers it), only a member this change added goes."""
        group = self.groups.get(group_id)
        asked = self.records.writes_asked.get(group_id, 0)
        if group is None:
            was_classic = self._classic.exists(group_id)

            def drop() -> None:  # a group the change made (from nothing, or from an offsets-only classic id)
                made = self.groups.get(group_id)
                if made is None or self.records.writes_asked.get(group_id, 0) > asked + 1:
                    return
                self._forget(made)
                self.records.changed_whole(group_id)
                if was_classic and not self._classic.exists(group_id):
                    self._classic.install(Group(group_id), False)
            return drop
        snapshot = ChangeSnapshot.of(group, member_id)

        def undo() -> None:
            if self.groups.get(group_id) is not group:
                return
            if self.records.writes_asked.get(group_id, 0) > asked:  # a write was tried: the next compares all
                self.records.changed_whole(group_id)
            if self.records.writes_asked.get(group_id, 0) > asked + 1:
                for added in [m for mid, m in group.members.items() if snapshot.members.get(mid) is not m]:
                    self._remove(group, added)
                self.persist_later(group_id)
                return
            for back in snapshot.restore(group):
                self.rearm(group, back)
            if (member := snapshot.member) is not None and group.members.get(member.member_id) is member:
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    self._arm_rebalance(group, member)
                elif member.rebalance_timer is not None:
                    member.rebalance_timer.cancel()
                    member.rebalance_timer = None
        return undo

    def heartbeat(self, request: ConsumerHeartbeat, timeouts: MemberTimeouts) -> HeartbeatAnswer:
        self.check_request(request)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        known = request.group_id in self.groups
        group = self._group(request.group_id, create=request.member_epoch == 0, member_id=request.member_id,
                            rejoin=True)
        try:
            member, changed = self._member(group, request)
        except GroupError:
            if not known:  # a classic group upgraded for a member refused: it stays classic, as in Kafka
                self.records.undo_type_change(group.group_id)
            raise
        if member.classic is not None:  # a heartbeat under a classic member's id: it speaks KIP-848 now
            member.classic = None
            member.cancel_classic_timer()
        before = {t: set(p) for t, p in member.assigned.items()}
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        resubscribed = False  # the topics it names or its regex changed (Kafka's hasSubscriptionChanged)
        if request.subscribed is not None and sorted(request.subscribed) != sorted(member.subscribed):
            member.subscribed, resubscribed = list(request.subscribed), True
        if request.regex is not None and (request.regex or None) != member.regex:
            member.regex, resubscribed = request.regex or None, True
        if request.server_assignor is not None:
            # Kept and written, but as in Kafka 4.3.1 (hasMemberSubscriptionChanged) no subscription change:
            # the group epoch stays, and the next target computed uses the assignor then most asked for.
            member.server_assignor = request.server_assignor
        self.refresh(group, changed or resubscribed, timeouts.assignment_interval_ms)
        was = (member.state, member.epoch, {t: set(p) for t, p in member.pending_revocation.items()})
        reconcile(group, member, request.owned, lambda: self.subscribed_ids(group, member), resubscribed)
        if member.state == MemberState.UNREVOKED_PARTITIONS and was != (
                member.state, member.epoch, member.pending_revocation):
            # Kafka re-arms it whenever what the member has to revoke, or its epoch, changes.
            self._arm_rebalance(group, member)
        elif member.state != MemberState.UNREVOKED_PARTITIONS and member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        self.arm_session(group, member, timeouts.session_timeout_ms)
        full = (request.rebalance_timeout_ms != -1 and request.owned is not None
                and (request.subscribed is not None or request.regex is not None))
        show = request.member_epoch == 0 or full or member.assigned != before
        return HeartbeatAnswer(member.member_id, member.epoch, member.assigned if show else None)

    def _member(self, group: ConsumerGroup, request: ConsumerHeartbeat) -> tuple[ConsumerMember, bool]:
        """The member the heartbeat is from (made when it joins); True when it is new to the group."""
        member_id, epoch, instance_id = request.member_id, request.member_epoch, request.instance_id
        member = group.members.get(member_id)
        if instance_id is not None and epoch == 0:
            previous = group.static_member(instance_id)
            if previous is not None and previous is not member:
                # A classic member's instance id is taken over at once (Kafka checks the instance id is
                # released only when both members speak KIP-848's protocol).
                if previous.epoch != STATIC_LEAVE_EPOCH and previous.classic is None:
                    raise GroupError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {instance_id} cannot join the "
                                     f"group because the instance id is owned by {previous.member_id} member.")
                # The instance comes back under a new member id: it takes over the old one's partitions.
                return self.replace_static(group, previous, member_id), False
        if member is None:
            check_joining(group, GROUP_TYPE, member_id, epoch=epoch, max_size=self.max_size)
            member = group.members[member_id] = ConsumerMember(member_id, request.client_id, request.client_host,
                                                               instance_id=instance_id)
            log.info("member joins the consumer group", group=group.group_id, member=member_id)
            return member, True
        if epoch == 0:
            # A member that lost its state rejoins: as in Kafka 4.3.1 it stays as it was (its epoch, its
            # partitions and the epochs it holds them since) and is sent its whole assignment again.
            return member, False
        check_epoch(member, epoch, request.owned)
        return member, False

    def replace_static(self, group: ConsumerGroup, old: ConsumerMember, member_id: str) -> ConsumerMember:
        self.records.changed_whole(group.group_id)
        old.cancel_timers()
        del group.members[old.member_id]
        new = ConsumerMember(member_id, old.client_id, old.client_host, instance_id=old.instance_id,
                             rack_id=old.rack_id, rebalance_timeout_ms=old.rebalance_timeout_ms,
                             subscribed=list(old.subscribed), regex=old.regex, server_assignor=old.server_assignor,
                             assigned=old.assigned, pending_revocation=old.pending_revocation,
                             held_since=old.held_since, state=old.state)
        group.members[member_id] = new
        if (target := group.target.pop(old.member_id, None)) is not None:
            group.target[member_id] = target
        log.info("static member rejoins the consumer group", group=group.group_id, member=member_id,
                 instance=old.instance_id)
        return new

    def _leave(self, request: ConsumerHeartbeat) -> HeartbeatAnswer:
        group = self._group(request.group_id, create=False, member_id=request.member_id)
        member = group.members.get(request.member_id)
        if request.instance_id is not None:
            static = group.static_member(request.instance_id)
            if static is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {request.instance_id} is unknown.")
            if static.member_id != request.member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {request.member_id} with instance id {request.instance_id} was "
                                 f"fenced by member {static.member_id}.")
            member = static
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                             f"Member {request.member_id} is not a member of group {group.group_id}.")
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            # Its partitions stay reserved for the instance until its session ends.
            member.epoch = STATIC_LEAVE_EPOCH
            # As Kafka: whoever takes the instance over holds its partitions since epoch 0.
            member.held_since = dict.fromkeys(member.held_since, 0)
            log.info("static member leaves the consumer group for now", group=group.group_id,
                     member=member.member_id)
        else:
            log.info("member left the consumer group", group=group.group_id, member=member.member_id)
            self.fence(group, [member])
        return HeartbeatAnswer(member.member_id, request.member_epoch, None)

    def _group(self, group_id: str, *, create: bool, member_id: str = "", rejoin: bool = False) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self._is_share(group_id):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if self._classic.exists(group_id):
            if not self._classic.empty(group_id):
                classic = self._classic.group(group_id) if create else None
                if classic is None:
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
                return self._upgrade(classic)
            if not create:
                # Offsets only (a group whose records were never written, as by an Ebb before they were):
                # the member rejoins, which turns the id back into a consumer group.
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group_id} has no member {member_id}.")
            self._classic.adopt(group_id)
            log.info("empty classic group becomes a consumer group", group=group_id)
        elif rejoin and not create:
            # A group this coordinator does not know (its records tombstoned, or never written): the member
            # is told what Kafka tells an unknown member, and joins again (GROUP_ID_NOT_FOUND would be
            # fatal to the Java consumer).
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {group_id} has no member {member_id}.")
        elif not create:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")
        self.topics.forget(group_id)
        # Kafka 4.3.1 answers a new group's first member with epoch 2: the group starts at epoch 1.
        group = self.groups[group_id] = ConsumerGroup(group_id, group_epoch=1, assignment_epoch=1,
                                                      assignor=self.assignors[0])
        return group

    def refresh(self, group: ConsumerGroup, changed: bool, interval_ms: int) -> None:
        """The group epoch moves (bump); the target is recomputed when the group epoch is past it and the
        group's assignment interval (`interval_ms`, consumer.assignment.interval.ms in force) has passed
        since the last one."""
        self.bump(group, changed)
        if new_target_now(group, interval_ms, self._clock()):
            self.compute_target(group)

    def bump(self, group: ConsumerGroup, changed: bool) -> None:
        """The group epoch moves when a member came or its subscription `changed`, or the subscribed topics
        changed since the group last looked (Kafka's updateSubscriptionMetadata)."""
        if changed or not self.topics.current(group):
            topics = self.topics.of(group)
            if changed or topics != group.topics:
                group.topics = topics
                group.group_epoch += 1

    def topics_now(self) -> dict[str, tuple[uuid.UUID, int]]:
        return self.topics.now()

    def subscribed_ids(self, group: ConsumerGroup, member: ConsumerMember) -> set[uuid.UUID]:
        """The ids of the existing topics the member subscribes to (the group's topics are current)."""
        return {group.topics[name][0] for name in self.topics.names_of(member) if name in group.topics}

    def compute_target(self, group: ConsumerGroup) -> None:
        subscriptions = {m.member_id: self.topics.names_of(m) for m in group.members.values()}
        group.assignor = self.assignor_of(group)
        self.records.changed_whole(group.group_id)
        group.target = assign(group.assignor, subscriptions, group.topics,
                              {m.member_id: m.assigned for m in group.members.values()})
        group.assignment_epoch = group.group_epoch
        group.assignment_ms = self._clock()

    def assignor_of(self, group: ConsumerGroup) -> str:
        """The assignor the members ask for most, else group.consumer.assignors' first."""
        wanted = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        return wanted.most_common(1)[0][0] if wanted else self.assignors[0]

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self.records.changed_whole(group.group_id)
        member.cancel_timers()
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.topics = self.topics.of(group)
        group.group_epoch += 1  # the target is recomputed at the next member's heartbeat, as Kafka does

    # --- timers ------------------------------------------------------------------------------------

    def arm_session(self, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timeout_ms = timeout_ms
        member.session_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self.expire, group, member, "session")

    def rearm(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """A member put back by an undone change: its session (and revocation deadline) start again."""
        self.arm_session(group, member, member.session_timeout_ms)
        if member.state == MemberState.UNREVOKED_PARTITIONS:
            self._arm_rebalance(group, member)

    def _arm_rebalance(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()
        member.rebalance_timer = asyncio.get_running_loop().call_later(
            member.rebalance_timeout_ms / 1000, self.expire, group, member, "rebalance", member.epoch)

    def expire(self, group: ConsumerGroup, member: ConsumerMember, why: str, epoch: int | None = None) -> None:
        """`epoch`: the one a rebalance timeout was armed at; a member that moved on since is not removed."""
        if epoch is not None and member.epoch != epoch:
            return
        if group.members.get(member.member_id) is member and self.groups.get(group.group_id) is group:
            # A heartbeat (a classic rejoin) before the removal below arms it again: the member stays.
            if why == "rebalance":
                member.rebalance_timer = None
            elif why == "session":
                member.session_timer = None
            self._spawn(self._expired(group, member, why, epoch))

    async def _expired(self, group: ConsumerGroup, member: ConsumerMember, why: str, epoch: int | None) -> None:
        gid = group.group_id
        async with self._changing.held(gid):
            if (self.groups.get(gid) is not group or group.members.get(member.member_id) is not member
                    or not _still_due(member, why, epoch)):
                return
            log.info(f"consumer group member removed: its {why} timeout passed", group=gid, member=member.member_id)
            undo = self._undo_of(gid, member.member_id)
            try:
                self.fence(group, [member])
                await self.persist(gid)
            except GroupError as exc:  # undone: the member stays, its removal tried again after another timeout
                log.warning("timed out member not removed", group=gid, member=member.member_id,
                            error=exc.message)
                undo()
                if group.members.get(member.member_id) is member and self.groups.get(gid) is group:
                    self.rearm(group, member)

    # --- __consumer_offsets -------------------------------------------------------------------------

    def _records_now(self, group_id: str, member_id: str | None) -> Records:
        group = self.groups.get(group_id)
        return {} if group is None else consumer_records.KIND.group_records(group, member_id)

    async def persist(self, group_id: str, member_id: str | None = None) -> None:
        """Write what changed in the group since its last write (record_log.GroupRecordLog.persist)."""
        await self.records.persist(group_id, member_id)

    def persist_later(self, group_id: str) -> None:
        self.records.persist_later(group_id)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """A consumer group record at load (groups are rebuilt from them by `loaded`)."""
        self.records.replay(key, value)

    def loaded(self, session_timeout_ms: int,
               group_session_ms: Callable[[str], Awaitable[int]] | None = None) -> list[str]:
        """Rebuild the groups replayed since the last load; their members' sessions start now, a KIP-848
        member's timed by the group's group.consumer.session.timeout.ms (`group_session_ms`, read off the
        loop: the broker's `session_timeout_ms` until then), a classic member's by its own."""
        rebuilt = []
        for group, metadata_hash in self.records.rebuilt(lambda group_id: group_id in self.groups):
            group_id = group.group_id
            if self._classic.exists(group_id):
                if not self._classic.empty(group_id):  # a classic group written after: it holds the id
                    continue
                self._classic.adopt(group_id)  # the offsets-only group the load made of its commits
            self.groups[group_id] = group
            group.assignor = self.assignor_of(group)
            group.topics = self.topics.of(group)
            if topics_hash(group.topics) != metadata_hash:
                # The topics changed while away: the next heartbeat sees it and bumps the group epoch.
                self.topics.forget(group_id)
                group.topics = {}
            for member in group.members.values():
                self.arm_session(group, member, member.classic.session_timeout_ms if member.classic is not None
                                 else session_timeout_ms)
                if member.state == MemberState.UNREVOKED_PARTITIONS:
                    self._arm_rebalance(group, member)
            if group_session_ms is not None and any(m.classic is None for m in group.members.values()):
                self._spawn(self._own_sessions(group, group_session_ms))
            rebuilt.append(group_id)
        return rebuilt

    async def _own_sessions(self, group: ConsumerGroup, group_session_ms: Callable[[str], Awaitable[int]]) -> None:
        def arm(member: ConsumerMember, left_ms: float) -> None:
            self.arm_session(group, member, int(left_ms))
        await own_sessions(group.group_id, lambda: [m for m in group.members.values() if m.classic is None],
                           group_session_ms, lambda: self.groups.get(group.group_id) is group, arm)

    def stop(self) -> None:
        self.unload(lambda group_id: True)

    def unload(self, doomed: Callable[[str], bool]) -> None:
        """Forget the groups `doomed` names (their __consumer_offsets partition is led elsewhere now)."""
        for group_id in [g for g in self.groups if doomed(g)]:
            for member in self.groups.pop(group_id).members.values():
                member.cancel_timers()
        self.records.unload(doomed)

    # --- offsets, listing, deleting ----------------------------------------------------------------

    def check_commit(self, group_id: str, check: MemberCheck) -> None:
        topics = self.topics_now() if check.partitions else {}
        check_commit(self.groups[group_id], check, {name: topic_id for name, (topic_id, _) in topics.items()})

    def subscribed_topics(self, group_id: str) -> set[str]:
        return set(self.groups[group_id].topics)

    def live(self) -> list[ConsumerGroup]:
        return [g for g in self.groups.values() if not g.dead]

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a consumer group: only an Empty one (its offsets are the caller's to delete)."""
        group = self.groups[group_id]
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        group.dead = True
        del self.groups[group_id]
        log.info("deleted consumer group", group=group_id)
        return ErrorCode.NONE

    def check_request(self, request: ConsumerHeartbeat) -> None:
        check_request(request, self.assignors)


__all__ = ["MAX_REGEX_LENGTH", "ConsumerGroups", "ConsumerHeartbeat", "HeartbeatAnswer", "check_regex", "matching"]
