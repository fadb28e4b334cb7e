"""The classic group rebalance protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (Kafka's
GroupMetadataManager for classic groups). A rebalance runs as in Kafka:

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
a generation > 0. A new member's join times out after 5 minutes (sessions.py keeps the timers). Static
members (group.instance.id) keep their place across restarts: a rejoin with an unknown member id
replaces the old id (whoever waits under it is answered FENCED_INSTANCE_ID); in Stable with an
unchanged protocol no rebalance happens (v9+: the leader gets SkipAssignment).

`group.max.size` bounds a group as in Kafka: an Empty group takes anyone; while preparing a rebalance
a member already rejoined is kept and others come in while fewer than the bound have rejoined; in
CompletingRebalance and Stable members are kept and newcomers come in while the group is below the
bound. Whoever is refused gets GROUP_MAX_SIZE_REACHED and is taken out of the group (so the last to
rejoin a group over its bound are the ones left out), and a group loaded over its bound rebalances.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

import structlog

from broker.group.group import UNKNOWN_MEMBER_ID, Group, GroupError, GroupState, Member
from broker.group.metadata import group_value
from broker.group.phases import RebalancePhases, StoreGroup
from broker.group.requests import JoinRequest, JoinResult, SyncResult, join_answer
from broker.group.sessions import SessionTimers
from broker.group.tasks import Spawn
from protocol.errors import ErrorCode
from protocol.wire import fits_short_string

log = structlog.get_logger("groups")

NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000  # Kafka's group.classic.new.member.join.timeout.ms
EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                              GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)


@dataclass(frozen=True)
class GroupLimits:
    min_session_timeout_ms: int  # group.min.session.timeout.ms
    max_session_timeout_ms: int  # group.max.session.timeout.ms
    max_size: int  # group.max.size


class GroupTable(Protocol):
    """What the protocol needs of the group registry."""

    active: bool
    groups: dict[str, Group]

    def not_served(self, group_id: str) -> ErrorCode | None: ...

    def forget_if_unused(self, group: Group) -> None: ...

    def is_share(self, group_id: str) -> bool: ...


def _inconsistent(asked: str | None, actual: str | None) -> bool:
    return asked is not None and asked != actual


class RebalanceProtocol:
    def __init__(self, limits: GroupLimits, groups: GroupTable, sessions: SessionTimers,
                 phases: RebalancePhases, store_group: StoreGroup, spawn: Spawn) -> None:
        self._limits = limits
        self._groups = groups
        self._sessions = sessions
        self._phases = phases
        self._store_group = store_group
        self._spawn = spawn

    # --- JoinGroup ---------------------------------------------------------------------------------

    def join_refusal(self, request: JoinRequest) -> JoinResult | None:
        """The checks every JoinGroup gets first, whatever the group's type."""
        member_id = request.member_id
        if not self._groups.active:
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not request.group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id)
        if (refused := self._groups.not_served(request.group_id)) is not None:
            return JoinResult(refused, member_id)
        if not self._limits.min_session_timeout_ms <= request.session_timeout_ms <= self._limits.max_session_timeout_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        # Stored in the group's record and shown by JoinGroup v0-5, DescribeGroups v0-4, ListGroups v0-2
        if not all(map(fits_short_string, [request.group_instance_id, request.protocol_type,
                                           *(name for name, _ in request.protocols)])):
            return JoinResult(ErrorCode.INVALID_REQUEST, member_id)
        return None

    async def join_group(self, request: JoinRequest) -> JoinResult:
        member_id = request.member_id
        if (refused_join := self.join_refusal(request)) is not None:
            return refused_join
        unknown = member_id == UNKNOWN_MEMBER_ID
        group = self._groups.groups.get(request.group_id)
        created = group is None
        if group is None:
            if self._groups.is_share(request.group_id):  # one id, one type (Kafka's answer)
                return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
            if not unknown:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self._groups.groups[request.group_id] = Group(request.group_id)
        if not self._accepts(group, member_id):
            self._refuse_over_size(group, member_id)
            return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID)
        future = asyncio.get_running_loop().create_future()
        if unknown:
            self._join_new_member(group, request, future)
        else:
            self._join_existing_member(group, request, future)
        result = await asyncio.shield(future)
        if created and result.error not in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
            self._groups.forget_if_unused(group)  # a refused first join leaves no group behind
        return result

    def _accepts(self, group: Group, member_id: str) -> bool:
        """Whether the group takes this join under group.max.size (Kafka's acceptJoiningMember)."""
        member = group.members.get(member_id)
        if group.is_in(EMPTY, DEAD):
            return True
        if group.is_in(PREPARING):
            # rejoined members count, not the group's size (it may be over a lowered bound)
            return (member is not None and member.awaiting_join) or \
                sum(m.awaiting_join for m in group.members.values()) < self._limits.max_size
        return member is not None or len(group.members) < self._limits.max_size

    def _refuse_over_size(self, group: Group, member_id: str) -> None:
        member = group.members.get(member_id)
        log.info("join refused: group at group.max.size", group=group.group_id, member_id=member_id,
                 max_size=self._limits.max_size)
        if member is not None:
            self._phases.drop_member(group, member)
        else:
            group.remove(member_id)  # a pending member's id
        if group.is_in(PREPARING) and group.has_all_members_joined():
            self._phases.maybe_complete_join_phase(group)

    def group_loaded(self, group: Group) -> None:
        """A group loaded over group.max.size (the bound was lowered) rebalances, as in Kafka: its
        members get the chance to commit, and the last to rejoin are left out."""
        if len(group.members) > self._limits.max_size:
            self._phases.prepare_rebalance(group, f"loaded with {len(group.members)} members, over "
                                                  f"group.max.size {self._limits.max_size}")

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
            self._sessions.add_pending_member(group, new_member_id, request.session_timeout_ms,
                                              self._phases.pending_member_expired)
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
            self._sessions.remove_pending_member(group, member_id)
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
                future.set_result(join_answer(group, member, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, request, future, "member metadata changed")
        elif group.is_in(STABLE):
            if group.is_leader(member_id) or not member.matches(request.protocols):
                reason = "the leader rejoins" if group.is_leader(member_id) else "member metadata changed"
                self._update_member_and_rebalance(group, member, request, future, reason)
            else:
                future.set_result(join_answer(group, member, with_members=False))
        else:
            future.set_result(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))

    def _add_member_and_rebalance(self, group: Group, request: JoinRequest, member_id: str,
                                  future: asyncio.Future) -> None:
        member = Member(member_id, request.group_instance_id, request.client_id, request.client_host,
                        request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                        list(request.protocols), is_new=True)
        if group.is_in(PREPARING) and group.previous_state is EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, future)
        # A new member cannot heartbeat while its JoinGroup is parked; its join times out instead.
        self._sessions.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._phases.maybe_prepare_rebalance_or_complete_join(
            group, f"new member {member_id} joins (reason: {request.reason or 'not given'})")

    def _update_member_and_rebalance(self, group: Group, member: Member, request: JoinRequest,
                                     future: asyncio.Future, reason: str) -> None:
        if member.awaiting_join:  # an earlier JoinGroup of the same member is superseded
            member.complete_join(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms,
                            future)
        self._phases.maybe_prepare_rebalance_or_complete_join(group, f"{reason}: {member.member_id}")

    def _replace_static_member(self, group: Group, request: JoinRequest, old_member_id: str, new_member_id: str,
                               future: asyncio.Future) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(_instance_id(request), old_member_id, new_member_id,
                                             JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id),
                                             SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        self._sessions.schedule_heartbeat(group, member, member.session_timeout_ms)
        old = (list(member.protocols), member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms,
                            future)
        if group.is_in(STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol: no rebalance, only the new member id is persisted.
                self._spawn(self._persist_replaced_static_member(group, request, member, old_member_id,
                                                                 current_leader, old))
                return
            self._phases.maybe_prepare_rebalance_or_complete_join(
                group, f"static member {new_member_id} changed protocols")
            return
        if group.is_in(COMPLETING):
            # The leader may already hold an assignment for the old id: assign again.
            self._phases.prepare_rebalance(group, f"static member {new_member_id} rejoined during the sync phase")
            return
        self._phases.maybe_complete_join_phase(group)

    async def _persist_replaced_static_member(self, group: Group, request: JoinRequest, member: Member,
                                              old_member_id: str, current_leader: str | None, old) -> None:
        generation = group.generation_id
        try:
            await self._store_group(group.group_id, group_value(group))
        except GroupError as exc:
            if group.members.get(member.member_id) is member:
                log.warning("could not persist a replaced static member; reverting", group=group.group_id,
                            member_id=member.member_id, error=exc.error_code.name)
                group.update_member(member, old[0], old[1], old[2], member.join_future)
                error = JoinResult(exc.error_code, UNKNOWN_MEMBER_ID, group.generation_id, group.protocol_type,
                                   group.protocol_name, current_leader or "")
                restored = group.replace_static_member(_instance_id(request), member.member_id, old_member_id,
                                                       error, SyncResult(exc.error_code))
                self._sessions.schedule_heartbeat(group, restored, restored.session_timeout_ms)
            return
        if group.members.get(member.member_id) is not member or group.generation_id != generation:
            return  # replaced again or rebalanced meanwhile: that path answered the join
        if request.version >= 9:
            leader = group.is_leader(member.member_id)
            member.complete_join(join_answer(group, member, with_members=leader, skip_assignment=leader))
        else:
            member.complete_join(join_answer(group, member, with_members=False, leader=current_leader or ""))

    # --- SyncGroup ---------------------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: list[tuple[str, bytes]]) -> SyncResult:
        if not self._groups.active:
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        if (refused := self._groups.not_served(group_id)) is not None:
            return SyncResult(refused)
        group = self._groups.groups.get(group_id)
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
            self._phases.remove_pending_sync(group, member_id)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: park until the leader's assignment is stored.
        future = asyncio.get_running_loop().create_future()
        if member.awaiting_sync:
            member.complete_sync(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = future
        self._phases.remove_pending_sync(group, member_id)
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
                await self._store_group(group.group_id, group_value(group, assignment))
            except GroupError as exc:
                error = exc.error_code
            if group.is_in(COMPLETING) and generation == group.generation_id \
                    and self._groups.groups.get(group.group_id) is group:
                if error:
                    self._phases.reset_and_propagate_assignment(group, error)
                    self._phases.maybe_prepare_rebalance_or_complete_join(
                        group, f"storing the assignment failed: {error.name}")
                else:
                    self._phases.set_and_propagate_assignment(group, assignment)
                    group.transition_to(STABLE)
                    log.info("group stable", group=group.group_id, generation=generation,
                             members=len(group.members))
        finally:
            if not future.done():  # the group moved on while the assignment was being written
                future.set_result(SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))

    # --- Heartbeat and LeaveGroup ------------------------------------------------------------------

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if not self._groups.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (refused := self._groups.not_served(group_id)) is not None:
            return refused
        group = self._groups.groups.get(group_id)
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
        self._sessions.schedule_heartbeat(group, member, member.session_timeout_ms)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_in(PREPARING) else ErrorCode.NONE

    def leave_group(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        """(request-level error, one error per leaving member)."""
        if not self._groups.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if (refused := self._groups.not_served(group_id)) is not None:
            return refused, []
        group = self._groups.groups.get(group_id)
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
                self._sessions.remove_pending_member(group, member_id)
                errors.append(ErrorCode.NONE)
                left.append(member_id)
                continue
            else:
                try:
                    target = group.validate_member(member_id, instance_id)
                except GroupError as exc:
                    errors.append(exc.error_code)
                    continue
            self._phases.drop_member(group, target)
            errors.append(ErrorCode.NONE)
            left.append(target.member_id)
        if left:
            log.info("members left the group", group=group_id, members=left)
            if group.is_in(STABLE, COMPLETING):
                self._phases.maybe_prepare_rebalance_or_complete_join(group, f"members left: {left}")
            elif group.is_in(PREPARING):
                self._phases.maybe_complete_join_phase(group)
        return ErrorCode.NONE, errors


def _instance_id(request: JoinRequest) -> str:
    assert request.group_instance_id is not None  # only a static member (one with an instance id) is replaced
    return request.group_instance_id
