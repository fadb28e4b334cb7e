"""The share groups (KIP-932) this coordinator serves, beside its classic groups: ShareGroupHeartbeat's
membership, epochs and assignment, member sessions, and what listing, describing and deleting need.

One group id has one type: a heartbeat (or AlterShareGroupOffsets) for a classic or consumer group's id
is GROUP_ID_NOT_FOUND ("is not a share group"), as Kafka's coordinator answers (coordinator.kind_of).
The heartbeat follows Kafka's GroupMetadataManager: epoch 0 joins (SubscribedTopicNames required), -1
leaves, any other epoch must be the member's own or the one before (a lost answer), else
FENCED_MEMBER_EPOCH; a member that is not known is UNKNOWN_MEMBER_ID, a group that is not known with an
epoch other than 0 GROUP_ID_NOT_FOUND. The group epoch moves when a member joins, leaves, expires or
changes its subscription, or the subscribed topics change (created, deleted, grown); a heartbeat that
finds the group epoch past the target recomputes it (share_group.assign) once the group's
share.assignment.interval.ms (else the broker's group.share.assignment.interval.ms, dynamic; 0: at once)
has passed since the last computation (KIP-1263, member_group.new_target_now, as for consumer groups).
Each member takes its part of the target at its next heartbeat, with the target's epoch: while a new
target waits, a member is given the one it has (a member joining meanwhile, nothing of it), only of
topics it still subscribes to that exist, as Kafka's ShareGroupAssignmentBuilder.

Each state change is written to __consumer_offsets as Kafka's records (share_records.py) before the
heartbeat is answered, one change of a group at a time; a failed write answers it with the coordinator's
error and undoes the change (as Kafka reverts to its last committed state). A restarted or failed-over
coordinator rebuilds the groups from those records (epochs, members, target and current assignments) and
restarts their members' sessions, so the members carry on without rejoining.

Share-partition state is initialized as Kafka's coordinator does it: a heartbeat that finds subscribed
partitions neither initialized nor asked for lately (a new topic, one that grew, an ask older than
INIT_RETRY_MS) writes them as initializing in record 15 with its change and is answered once that is
written; then, apart from it (as Kafka's GroupCoordinatorService runs persisterInitialize after the shard's
write), their share coordinators are asked (InitializeShareGroupState at the group epoch as state epoch,
start offset -1: the leader applies share.auto.offset.reset), and the answer written: initialized, or on an
error taken back from initializing (asked again at the next heartbeat) and logged, never a member's answer.
One initialization asks for a partition at a time; it is cancelled when its group is unloaded, and writes
nothing for a group deleted or unloaded meanwhile (nor a topic deleted: StatePartitions.answered).
The assignor is given only initialized partitions, so no member fetches one whose state may yet be replaced by the
initialization; the first heartbeat after an initialization finished (any member's: initialized partitions
the target does not give out) moves the group epoch, and each member takes them at its next heartbeat,
as Kafka's initializedAssignmentPending does.

Two checks make good what older Ebbs left; each runs in the background, one per group at a time, started
by a heartbeat (not a leave) and never awaited by one, so that a share coordinator that does not answer
holds back no heartbeat (the persister bounds each call) and a group's members start one check, not one
each; a failure is logged and the next heartbeat starts another. A group rebuilt from records holding no
record 15 (an Ebb before it wrote one, whose leaders made the states of the partitions they served) must
not have its states reset, and its leaders no longer make the missing ones: nothing of it is asked to be
initialized at the group epoch, and `_take_older_states` has the share coordinators initialize only those
partitions of its subscribed topics (with the heartbeat's subscription applied first: an Empty group's
states are its next member's) they hold no state for (`initialize_missing`), then writes them all as
initialized; until then the group gives out no partition (no member fetches one without state), and its
members take them at their next heartbeat. The Ebb before this one took such a group's partitions as
initialized without asking and wrote record 15 so, leaving its leaders to make the states: every group
rebuilt with a record 15 (after each load: which were such groups cannot be told) has, once,
`_check_initialized` have the share coordinators initialize those of its initialized subscribed partitions
they hold no state for (none, if all were fetched); meanwhile it gives out what record 15 says.

Deleting states keeps record 15's deleting list as Kafka's coordinator does (delete_offsets for
DeleteShareGroupOffsets, delete for DeleteGroups: the topics written as deleting before the share
coordinators delete their states, taken off after), and a deleted topic leaves record 15 (topic_deleted).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import structlog

from broker.aio import KeyedLocks
from broker.coordinator_partitions import Spawn
from broker.group import share_records
from broker.group.group import GroupError, check_storable_member_id, now_ms
from broker.group.loaded_sessions import own_sessions
from broker.group.member_group import LEAVE_EPOCH, Assignment, HeartbeatAnswer, check_joining, new_target_now
from broker.group.record_log import AppendRecords, GroupRecordLog, Records, topics_hash
from broker.group.share_group import GROUP_TYPE, ShareGroup, ShareMember, StatePartitions, assign
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode

log = structlog.get_logger("groups")

# A subscribed topic as the coordinator sees it: (id, partition count), or None when it does not exist.
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]
# Asks the share coordinators to initialize (group id, state epoch, topic id -> partitions): the first error.
InitializeStates = Callable[[str, int, dict[uuid.UUID, set[int]]], Awaitable[ErrorCode]]
# Asks them to initialize those of (group id, topic id -> partitions) they hold no state for: the first error.
InitializeMissing = Callable[[str, dict[uuid.UUID, set[int]]], Awaitable[ErrorCode]]
# Deletes share-partitions' states (group id, topic id -> (name, partitions)): each topic's error.
DeleteStates = Callable[[str, dict[uuid.UUID, tuple[str, frozenset[int]]]], Awaitable[dict[uuid.UUID, ErrorCode]]]


@dataclass(frozen=True)
class OffsetsDeleted:
    """One topic's part of DeleteShareGroupOffsets' answer (topic_id None: no such topic)."""
    name: str
    topic_id: uuid.UUID | None
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed: list[str] | None
    client_id: str
    client_host: str


class ShareGroups:
    def __init__(self, max_size: int, topic: TopicLookup, other_kind: Callable[[str], bool], append: AppendRecords,
                 spawn: Spawn, *, clock: Callable[[], int] = now_ms) -> None:
        """`topic` resolves a subscribed name; `other_kind` says whether a group of another kind (classic or
        KIP-848 consumer) holds the id; `append` writes a group's records, `spawn` runs a timer's removal of
        a member (and its write); `clock`: the wall clock in ms that times the targets (kept in record 12,
        so read back after a restart)."""
        self.groups: dict[str, ShareGroup] = {}
        self.records = GroupRecordLog(share_records.KIND, self._records_now, append, spawn)
        # Told (group id, member id) when a member leaves or expires (what it holds is released: broker/share/).
        self.member_left: list[Callable[[str, str], None]] = []
        # The share coordinators' InitializeShareGroupState (broker/share/persister.py); None: nothing asked.
        self.initialize_states: InitializeStates | None = None
        # Theirs for a group an older Ebb wrote (module docstring); None: its partitions taken as they are.
        self.initialize_missing: InitializeMissing | None = None
        # Their deletion of states (broker/share/manager.py's forget); None: nothing to delete.
        self.delete_states: DeleteStates | None = None
        self._max_size = max_size
        self._topic = topic
        self._other_kind = other_kind
        self._spawn = spawn
        self._clock = clock
        # One change of a group at a time, from its computation through its write; the groups with a change
        # in flight -> whether their partition was unloaded meanwhile (then a failed change is not undone).
        self._changing = KeyedLocks()
        self._in_flight: dict[str, bool] = {}
        # Groups rebuilt with a record 15 whose initialized partitions' states are not checked yet (module
        # docstring: an older Ebb may have taken some as initialized that no leader ever made).
        self._unchecked: set[str] = set()
        # The one check of a group's states under way (an older Ebb's group, or one in _unchecked): started
        # by a heartbeat, never awaited by one, so that a share coordinator that is down holds back no
        # heartbeat and N members make one check, not N.
        self._checks: dict[str, asyncio.Task] = {}
        # The initializations under way, by group (started after a heartbeat's write, never awaited by it):
        # each task -> its group and the partitions it asks for, which no other asks for meanwhile.
        self._initializing: dict[str, dict[asyncio.Task, tuple[ShareGroup, dict[uuid.UUID, set[int]]]]] = {}

    @contextlib.asynccontextmanager
    async def _change(self, group_id: str, member_id: str | None = None) -> AsyncIterator[None]:
        """A change of the group and its write: undone when it fails (a GroupError), as Kafka's coordinator
        reverts to the last committed state, so that memory never runs ahead of __consumer_offsets."""
        async with self._changing.held(group_id):
            self._in_flight[group_id] = False
            undo = self._snapshot(group_id, member_id)
            try:
                yield
            except GroupError:
                if not self._in_flight[group_id]:
                    undo()
                raise
            finally:
                del self._in_flight[group_id]

    def _snapshot(self, group_id: str, member_id: str | None) -> Callable[[], None]:
        """What undoes a change of the group from here: its own fields and, of its members, those of
        `member_id` (the heartbeating member: a change alters no other member's fields, so a heartbeat's
        cost stays independent of the group's size); timers are kept, but for members the change added."""
        group = self.groups.get(group_id)
        if group is None:
            return lambda: self._drop(group_id)
        fields = {**vars(group), "members": dict(group.members), "target": dict(group.target)}
        member = group.members.get(member_id) if member_id is not None else None
        member_fields = {k: v for k, v in vars(member).items() if k != "session_timer"} if member else {}

        def undo() -> None:
            if self.groups.get(group_id) not in (group, None) or self._other_kind(group_id):
                return  # the id was taken meanwhile: what holds it now stays
            for added in [m for m_id, m in group.members.items() if m_id not in fields["members"]]:
                if added.session_timer is not None:
                    added.session_timer.cancel()
            vars(group).update(fields)
            if member is not None:
                vars(member).update(member_fields)
            self.groups[group_id] = group
        return undo

    def _drop(self, group_id: str) -> None:
        for member in self.groups.pop(group_id, ShareGroup(group_id)).members.values():
            if member.session_timer is not None:
                member.session_timer.cancel()

    # --- ShareGroupHeartbeat -----------------------------------------------------------------------

    async def heartbeat(self, request: ShareHeartbeat, timeouts: MemberTimeouts) -> HeartbeatAnswer:
        """The heartbeat's change, kept once its records are written (else undone, the write's GroupError
        raised: a leaving member stays until its tombstones land, a join not written is not counted)."""
        _check_request(request)
        group_id = request.group_id
        async with self._change(group_id, request.member_id):
            group = self.groups.get(group_id)
            leaving = group.members.get(request.member_id) if group is not None else None
            answer = self._heartbeat(request, timeouts)
            asked = None if answer.left else self._ask_initialize(group_id)
            # The change is in __consumer_offsets before the member hears of it, as in Kafka.
            await self.records.persist(group_id, answer.member_id)
        if answer.left and group is not None and leaving is not None:
            self._gone(group, leaving)
            log.info("member left the share group", group=group_id, member=leaving.member_id)
        if not answer.left:
            self._start_check(group_id)  # after the change: its subscription is among the topics checked
        if asked is not None:
            self._start_initialize(group_id, *asked)
        return answer

    def _ask_initialize(self, group_id: str) -> tuple[int, dict[uuid.UUID, set[int]]] | None:
        """The subscribed partitions to initialize now, marked initializing (written with the heartbeat's
        change), with the group epoch they are asked at; None when there are none. Partitions an
        initialization still under way asks for are left to it, even past INIT_RETRY_MS."""
        group = self.groups.get(group_id)
        if group is None or self.initialize_states is None or group.legacy_states:
            return None  # an older Ebb's group: its states are checked instead (_take_older_states)
        now = time.time_ns() // 1_000_000
        state = group.state_partitions or StatePartitions()
        wanted = state.to_initialize(group.topics, now)
        for asker, asking in self._initializing.get(group_id, {}).values():
            if asker is not group:
                continue  # a deleted group's, whose answer is written nowhere
            for topic_id, parts in asking.items():
                wanted.get(topic_id, set()).difference_update(parts)
        wanted = {topic_id: parts for topic_id, parts in wanted.items() if parts}
        if not wanted:
            return None
        names = {topic_id: name for name, (topic_id, _) in group.topics.items()}
        group.state_partitions = state.asked(names, wanted, now)
        return group.group_epoch, wanted

    def _start_initialize(self, group_id: str, epoch: int, wanted: dict[uuid.UUID, set[int]]) -> None:
        """Kafka's persisterInitialize, run apart from the heartbeat that asked (answered already from its
        own write, as Kafka's GroupCoordinatorService answers it): a share coordinator that is slow or down
        holds back no heartbeat, and its error is no member's answer."""
        group = self.groups.get(group_id)
        if group is None:
            return
        in_flight = self._initializing.setdefault(group_id, {})
        task = self._spawn(self._initialize(group, epoch, wanted))
        in_flight[task] = (group, wanted)

        def done(finished: asyncio.Task) -> None:
            if (tasks := self._initializing.get(group_id)) is not None:
                tasks.pop(finished, None)
                if not tasks:
                    del self._initializing[group_id]
        task.add_done_callback(done)

    async def _initialize(self, group: ShareGroup, epoch: int, wanted: dict[uuid.UUID, set[int]]) -> None:
        """Ask the share coordinators, then write the answer in record 15 (Kafka's initializeShareGroupState
        on success, uninitializeShareGroupState on an error: the partitions asked again at the next
        heartbeat). Only for the same group still served here: one deleted, unloaded or replaced meanwhile
        gets nothing written. An answer not written leaves them initializing, asked again after
        INIT_RETRY_MS. Errors are logged only, as Kafka does."""
        assert self.initialize_states is not None
        group_id = group.group_id
        error = await self.initialize_states(group_id, epoch, wanted)
        if error != ErrorCode.NONE:
            log.warning("share group state not initialized", group=group_id, error=error.name)
        try:
            async with self._change(group_id):
                if self.groups.get(group_id) is not group or group.state_partitions is None:
                    return
                group.state_partitions = group.state_partitions.answered(wanted, done=error == ErrorCode.NONE)
                await self.records.persist(group_id)
        except GroupError as exc:
            log.warning("share group state's initialization not written", group=group_id,
                        error=exc.error_code.name)

    async def states_altering(self, group_id: str, partitions: dict[uuid.UUID, tuple[str, set[int]]]) -> int:
        """AlterShareGroupOffsets of an Empty group, before its share coordinators initialize these
        partitions' states: written as initializing in record 15 (no longer deleting), as Kafka's shard does;
        the group epoch they are to be initialized at. GroupError: no such group, members, or the write's."""
        async with self._change(group_id):
            group = self._deletable(group_id)
            if partitions:
                names = {topic_id: name for topic_id, (name, _) in partitions.items()}
                parts = {topic_id: set(p) for topic_id, (_, p) in partitions.items()}
                state = group.state_partitions or StatePartitions()
                group.state_partitions = state.asked(names, parts, time.time_ns() // 1_000_000)
                await self.records.persist(group_id)
            return group.group_epoch

    async def states_set(self, group_id: str, partitions: dict[uuid.UUID, set[int]]) -> None:
        """AlterShareGroupOffsets had every partition's state initialized: initialized in record 15 (not to
        be reset by a subscribing heartbeat); GroupError for the write's error."""
        async with self._change(group_id):
            group = self.groups.get(group_id)
            if group is None or group.state_partitions is None or not partitions:
                return
            group.state_partitions = group.state_partitions.answered(partitions, done=True)
            await self.records.persist(group_id)

    async def delete_offsets(self, group_id: str, names: list[str]) -> list[OffsetsDeleted]:
        """DeleteShareGroupOffsets of an Empty group, in Kafka's order: the topics with state are written as
        deleting (no longer initialized) in record 15, their states deleted with the share coordinators,
        and those deleted taken off the deleting list (a topic whose deletion failed stays there, tried
        again by the next delete). Answered as Kafka's coordinator: the deleted topics, then those without
        state (UNKNOWN_TOPIC_OR_PARTITION), then those a coordinator refused; no topic at all for a group
        that never had state (no record 15). GroupError: no such group, members, or a write's error."""
        async with self._change(group_id):
            group = self._deletable(group_id)
            state = group.state_partitions
            if state is None:
                return []
            refused, eligible = [], {}
            for name in names:
                found = self._topic(name)
                if found is None:
                    refused.append(OffsetsDeleted(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  f"Topic {name} does not exist."))
                elif (parts := state.offsets_to_delete(*found)) is None:
                    refused.append(OffsetsDeleted(name, found[0], ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                  f"The group has no state of topic {name} to delete."))
                else:
                    eligible[found[0]] = (name, parts)
            group.state_partitions = state.deleting_from({t: name for t, (name, _) in eligible.items()})
            await self.records.persist(group_id)
        errors = await self.delete_states(group_id, eligible) if eligible and self.delete_states else {}
        done = {t for t in eligible if errors.get(t, ErrorCode.NONE) == ErrorCode.NONE}
        failed = [OffsetsDeleted(eligible[t][0], t, e) for t, e in errors.items() if e != ErrorCode.NONE]
        if done:
            async with self._change(group_id):
                now = self.groups.get(group_id)
                if now is not None and now.state_partitions is not None:
                    now.state_partitions = now.state_partitions.deleted(done)
                    await self.records.persist(group_id)
        return [OffsetsDeleted(eligible[t][0], t, ErrorCode.NONE) for t in eligible if t in done] + refused + failed

    def _deletable(self, group_id: str) -> ShareGroup:
        """The group DeleteShareGroupOffsets or DeleteGroups may change: it exists and is Empty."""
        group = self._group(group_id, create=False)
        if group.members:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP, f"Share group {group_id} is not empty.")
        return group

    def topic_deleted(self, name: str) -> None:
        """A topic was deleted: its entries leave record 15 of every group holding them (Kafka's
        maybeCleanupShareGroupState), written in the background (the share coordinators drop the states)."""
        if self.groups:
            self._spawn(self._forget_deleted(name))

    async def _forget_deleted(self, name: str) -> None:
        for group_id in list(self.groups):
            try:
                async with self._change(group_id):
                    group = self.groups.get(group_id)
                    if group is None or (state := group.state_partitions) is None:
                        continue
                    gone = {t for t, held in state.named().items() if held == name and not self._exists(t, name)}
                    if gone:
                        group.state_partitions = state.forgotten(gone)
                        await self.records.persist(group_id)
            except GroupError as exc:  # left as it was, as Kafka leaves it when that write fails
                log.warning("a deleted topic's share group state not forgotten", group=group_id, topic=name,
                            error=exc.error_code.name)

    def _exists(self, topic_id: uuid.UUID, name: str) -> bool:
        found = self._topic(name)
        return found is not None and found[0] == topic_id

    def _start_check(self, group_id: str) -> None:
        """The group's states checked in the background, if they need it and no check is under way: an
        older Ebb's group (_take_older_states), one rebuilt with a record 15 (_check_initialized). Either
        fails only with a log line; the next heartbeat starts another."""
        group = self.groups.get(group_id)
        if group is None or group_id in self._checks or self.initialize_missing is None:
            return
        if group.legacy_states:
            check = self._take_older_states(group)
        elif group_id in self._unchecked:
            check = self._check_initialized(group)
        else:
            return
        task = self._checks[group_id] = self._spawn(check)
        task.add_done_callback(lambda done: self._checks.pop(group_id) if self._checks.get(group_id) is done
                               else None)

    async def _take_older_states(self, group: ShareGroup) -> None:
        """An older Ebb's group (module docstring): the share coordinators initialize those partitions of
        its subscribed topics they hold no state for; then, if its members subscribe to nothing more
        meanwhile, all are taken as initialized, written in record 15, and given out from the next
        heartbeat (until then it gives out none: no member fetches a partition without state)."""
        assert self.initialize_missing is not None
        group_id = group.group_id
        for _ in range(3):  # a subscription that keeps growing is left to the next heartbeat's check
            topics = self._subscribed_topics(group)
            if not topics:
                return  # nothing to check yet: the group stays an older Ebb's until something is
            error = await self.initialize_missing(group_id, {t: set(range(count)) for t, count in topics.values()})
            if error != ErrorCode.NONE:
                log.warning("share group state of an older Ebb's group not initialized", group=group_id,
                            error=error.name)
                return
            try:
                async with self._change(group_id):
                    if self.groups.get(group_id) is not group or not group.legacy_states:
                        return  # unloaded, deleted or taken meanwhile
                    if any(topics.get(name) != topic for name, topic in self._subscribed_topics(group).items()):
                        continue  # subscribed to a topic (or partitions) not checked: checked again
                    self._legacy_initialized(group, {n: t for n, t in topics.items() if self._topic(n) == t})
                    await self.records.persist(group_id)
                    return
            except GroupError as exc:  # undone: still an older Ebb's group, checked again
                log.warning("an older Ebb's share group's record 15 not written", group=group_id,
                            error=exc.error_code.name)
                return

    async def _check_initialized(self, group: ShareGroup) -> None:
        """For a group rebuilt with a record 15, once: those of its initialized subscribed partitions without
        state at their share coordinators initialized (module docstring). A failure is logged only (the
        partitions stay initialized, as they were), and asked again at the next heartbeat."""
        assert self.initialize_missing is not None
        group_id = group.group_id
        if group.state_partitions is not None:
            subscribed = {topic_id for topic_id, _ in self._subscribed_topics(group).values()}
            wanted = {t: set(parts) for t, (_, parts) in group.state_partitions.initialized.items()
                      if t in subscribed and parts}
            if wanted and (error := await self.initialize_missing(group_id, wanted)) != ErrorCode.NONE:
                log.warning("share group states not checked", group=group_id, error=error.name)
                return
        if self.groups.get(group_id) is group:  # not a later load's group, which has its own check
            self._unchecked.discard(group_id)

    def _heartbeat(self, request: ShareHeartbeat, timeouts: MemberTimeouts) -> HeartbeatAnswer:
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        if epoch == LEAVE_EPOCH:
            return self._leave(group_id, member_id)
        group = self._group(group_id, create=epoch == 0)
        member = group.members.get(member_id)
        if member is None:
            check_joining(group, GROUP_TYPE, member_id, epoch=epoch, max_size=self._max_size)
            member = ShareMember(member_id, request.client_id, request.client_host)
            log.info("member joins the share group", group=group_id, member=member_id)
        else:
            _check_epoch(member, epoch)
        before = {t: set(p) for t, p in member.assignment.items()}
        changed = group.join(member)
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed is not None:
            changed = group.subscribe(member, list(request.subscribed)) or changed
        topics = self._subscribed_topics(group)
        if group.legacy_states and self.initialize_missing is None:
            self._legacy_initialized(group, topics)  # nothing to check them with: taken as they are
        # Kafka's bumpGroupEpoch: a member came or changed its subscription, or newly initialized partitions
        # wait for a target that has caught up.
        changed = changed or group.assignment_epoch >= group.group_epoch and self._initialized_pending(group)
        bumped = changed or topics != group.topics  # a subscribed topic created or deleted moves the epoch too
        if bumped:
            group.topics = topics
            group.group_epoch += 1
        if new_target_now(group, timeouts.assignment_interval_ms, self._clock()):
            self._compute_target(group)
        # Reconcile: share groups need no revocation, so a member takes the target at once (the one it has,
        # while a new one waits for the assignment interval), and, at the target's epoch, gives up at once
        # a topic it no longer subscribes to or that is gone.
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
            member.assignment = self._target_of(group, member)
        elif bumped:
            member.assignment = self._target_of(group, member)
        self._arm_session(group, member, timeouts.session_timeout_ms)
        # Kafka sends the assignment to a joining member, to one that sent its subscription, and when it changed.
        show = epoch == 0 or request.subscribed is not None or member.assignment != before
        return HeartbeatAnswer(member_id, member.epoch, member.assignment if show else None)

    def _target_of(self, group: ShareGroup, member: ShareMember) -> Assignment:
        """The member's part of the target, of the topics it subscribes to that exist (a target computed
        before it left a topic, or before the topic was deleted, may hold more)."""
        subscribed = {found[0] for name in member.subscribed if (found := self._topic(name)) is not None}
        return {t: set(p) for t, p in group.target.get(member.member_id, {}).items() if t in subscribed}

    def _leave(self, group_id: str, member_id: str) -> HeartbeatAnswer:
        group = self._group(group_id, create=False)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        self._remove(group, member)
        return HeartbeatAnswer(member_id, LEAVE_EPOCH, None)

    def _group(self, group_id: str, *, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self._other_kind(group_id):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def _subscribed_topics(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        found = {}
        for name in sorted(group.subscribed_names()):
            if (topic := self._topic(name)) is not None:
                found[name] = topic
        return found

    def _legacy_initialized(self, group: ShareGroup, topics: dict[str, tuple[uuid.UUID, int]]) -> None:
        """A group rebuilt without record 15 (module docstring): the partitions of `topics` (each with state
        now: `_take_older_states`) taken as initialized, before anything is assigned, without asking to
        initialize them at the group epoch (that would reset its leaders' states)."""
        group.legacy_states = False
        now = time.time_ns() // 1_000_000
        state = group.state_partitions or StatePartitions()
        if wanted := state.to_initialize(topics, now):
            names = {topic_id: name for name, (topic_id, _) in topics.items()}
            group.state_partitions = state.asked(names, wanted, now).answered(wanted, done=True)

    def _initialized_pending(self, group: ShareGroup) -> bool:
        return (bool(group.members) and group.state_partitions is not None
                and group.state_partitions.pending(group.topics, group.target_given()))

    def _assignable(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, frozenset[int]]]:
        """What the assignor may give out: the initialized partitions; every subscribed one where no share
        coordinators are wired to initialize them (initialize_states None: nothing has state to wait for)."""
        if self.initialize_states is None:
            return {name: (topic_id, frozenset(range(count))) for name, (topic_id, count) in group.topics.items()}
        return (group.state_partitions or StatePartitions()).assignable(group.topics)

    def _compute_target(self, group: ShareGroup) -> None:
        self.records.changed_whole(group.group_id)
        group.set_target(assign({m.member_id: m.subscribed for m in group.members.values()}, self._assignable(group),
                                {m: a for m, a in group.target.items() if m in group.members}))
        group.assignment_epoch = group.group_epoch
        group.assignment_ms = self._clock()

    def _remove(self, group: ShareGroup, member: ShareMember) -> None:
        """The member out of the group (its timer and listeners wait for the write: `_gone`); the target is
        recomputed at the next heartbeat, as Kafka's coordinator does (its records: the member's
        tombstones and the group epoch)."""
        self.records.changed_whole(group.group_id)
        group.remove(member.member_id)
        group.topics = self._subscribed_topics(group)
        group.group_epoch += 1

    def _gone(self, group: ShareGroup, member: ShareMember) -> None:
        """A member's removal written: its timer stops and what it holds is released."""
        if member.session_timer is not None:
            member.session_timer.cancel()
            member.session_timer = None
        for listener in self.member_left:
            listener(group.group_id, member.member_id)

    # --- sessions ----------------------------------------------------------------------------------

    def _arm_session(self, group: ShareGroup, member: ShareMember, timeout_ms: float) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._expire, group, member, timeout_ms)

    def _expire(self, group: ShareGroup, member: ShareMember, timeout_ms: float) -> None:
        if group.members.get(member.member_id) is member:
            member.session_timer = None  # a heartbeat before the removal below re-arms it: the member stays
            self._spawn(self._expired(group, member, timeout_ms))

    async def _expired(self, group: ShareGroup, member: ShareMember, timeout_ms: float) -> None:
        group_id = group.group_id
        try:
            async with self._change(group_id):
                if (self.groups.get(group_id) is not group or group.members.get(member.member_id) is not member
                        or member.session_timer is not None):
                    return
                self._remove(group, member)
                await self.records.persist(group_id)
        except GroupError as exc:  # undone: the member's session runs once more, its removal retried then
            log.warning("share group member's removal not written", group=group_id, error=exc.error_code.name)
            if group.members.get(member.member_id) is member and member.session_timer is None:
                self._arm_session(group, member, timeout_ms)
            return
        if member.member_id not in group.members:
            self._gone(group, member)
            log.info("share group member's session expired", group=group_id, member=member.member_id)

    def stop(self) -> None:
        self.unload(lambda group_id: True)

    def unload(self, doomed: Callable[[str], bool]) -> None:
        """Forget the groups `doomed` names (their __consumer_offsets partition is led elsewhere now)."""
        for group_id in [g for g in self.groups if doomed(g)]:
            self._drop(group_id)
        for group_id in [g for g in self._in_flight if doomed(g)]:
            self._in_flight[group_id] = True
        for group_id in [g for g in self._checks if doomed(g)]:
            self._checks[group_id].cancel()
        for group_id in [g for g in self._initializing if doomed(g)]:
            for task in self._initializing[group_id]:
                task.cancel()
        self.records.unload(doomed)

    # --- __consumer_offsets -------------------------------------------------------------------------

    def _records_now(self, group_id: str, member_id: str | None) -> Records:
        group = self.groups.get(group_id)
        return {} if group is None else share_records.KIND.group_records(group, member_id)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """A share group record at load (groups are rebuilt from them by `loaded`)."""
        self.records.replay(key, value)

    def loaded(self, session_timeout_ms: int, taken: Callable[[str], bool],
               group_session_ms: Callable[[str], Awaitable[int]] | None = None) -> list[str]:
        """Rebuild the groups replayed since the last load (not those whose id `taken` says another kind
        of group holds); their members' sessions start now, as Kafka's coordinator starts them, timed by
        the group's share.session.timeout.ms (`group_session_ms`, read off the loop: the broker's
        `session_timeout_ms` until then)."""
        rebuilt = []
        for group, metadata_hash in self.records.rebuilt(lambda group_id: group_id in self.groups or taken(group_id)):
            group_id = group.group_id
            self.groups[group_id] = group
            topics = self._subscribed_topics(group)
            # Topics changed while away: left unseen, so that the next heartbeat bumps the group epoch.
            group.topics = topics if topics_hash(topics) == metadata_hash else {}
            group.legacy_states = group.state_partitions is None
            if not group.legacy_states:
                self._unchecked.add(group_id)
            for member in group.members.values():
                self._arm_session(group, member, session_timeout_ms)
            if group_session_ms is not None and group.members:
                self._spawn(self._own_sessions(group, group_session_ms))
            rebuilt.append(group_id)
        return rebuilt

    async def _own_sessions(self, group: ShareGroup, group_session_ms: Callable[[str], Awaitable[int]]) -> None:
        await own_sessions(group.group_id, group.members.values, group_session_ms,
                           lambda: self.groups.get(group.group_id) is group,
                           lambda member, left_ms: self._arm_session(group, member, left_ms))

    # --- the admin APIs ----------------------------------------------------------------------------

    async def ensure(self, group_id: str) -> ShareGroup:
        """AlterShareGroupOffsets: the group, made (Empty) and written if it does not exist; GroupError for
        another kind's id, or the write's error (the group is then not made)."""
        async with self._change(group_id):
            if (group := self.groups.get(group_id)) is not None:
                return group
            group = self._group(group_id, create=True)
            await self.records.persist(group_id)
        return group

    def existing(self, group_id: str) -> ShareGroup:
        return self._group(group_id, create=False)

    # --- listing, describing, deleting -------------------------------------------------------------

    def live(self) -> list[ShareGroup]:
        return [g for g in self.groups.values() if not g.dead]

    async def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: only an Empty one. As Kafka: record 15 first lists every topic
        with state as deleting (none initialized), then the share coordinators delete those states, and
        only then is the group gone with its records' tombstones; a deletion a coordinator refused is the
        group's answer and the group stays (a later delete tries again). A write's error leaves the group
        as it was."""
        try:
            async with self._change(group_id):
                group = self._deletable(group_id)
                doomed: dict[uuid.UUID, tuple[str, frozenset[int]]] = {}
                if group.state_partitions is not None:
                    doomed = group.state_partitions.all_to_delete(self._count_of)
                    group.state_partitions = StatePartitions(deleting={t: n for t, (n, _) in doomed.items()})
                    await self.records.persist(group_id)
            errors = await self.delete_states(group_id, doomed) if doomed and self.delete_states else {}
            if (failed := next((e for e in errors.values() if e != ErrorCode.NONE), None)) is not None:
                log.warning("a deleted share group's states not deleted", group=group_id, error=failed.name)
                return failed
            async with self._change(group_id):
                group = self._deletable(group_id)
                group.dead = True
                del self.groups[group_id]
                await self.records.persist(group_id)
        except GroupError as exc:
            if exc.error_code not in (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NON_EMPTY_GROUP):
                log.warning("a deleted share group's records not written", group=group_id,
                            error=exc.error_code.name)
            return exc.error_code
        log.info("deleted share group", group=group_id)
        return ErrorCode.NONE

    def _count_of(self, topic_id: uuid.UUID, name: str) -> int | None:
        found = self._topic(name)
        return found[1] if found is not None and found[0] == topic_id else None


def _check_request(request: ShareHeartbeat) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (a blank string counts as empty)."""
    for value, what in ((request.member_id, "MemberId"), (request.group_id, "GroupId"),
                        (request.rack_id, "RackId")):
        if value is not None and not value.strip():
            raise GroupError(ErrorCode.INVALID_REQUEST, f"{what} can't be empty.")
    check_storable_member_id(request.member_id)
    if request.member_epoch == 0:
        if not request.subscribed:
            raise GroupError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_EPOCH:
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, epoch: int) -> None:
    if epoch > member.epoch:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a greater member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.epoch}). The member must abandon all its partitions "
                         "and rejoin.")
    if epoch < member.epoch and epoch != member.previous_epoch:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.epoch}), and it does not match the previous member "
                         f"epoch ({member.previous_epoch}). The member must abandon all its partitions and "
                         "rejoin.")
