"""The phases of a classic group's rebalance: PreparingRebalance until every member has rejoined (or the
rebalance timeout), CompletingRebalance until the leader's assignment is stored and handed out, then
Stable; members removed on the way (session expired, no rejoin, no SyncGroup in time). The requests that
drive these steps are rebalance.py's; the timers are sessions.py's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog

from broker.group.group import Group, GroupError, GroupState, Member
from broker.group.metadata import group_value
from broker.group.requests import JoinResult, SyncResult, join_answer
from broker.group.sessions import SessionTimers
from broker.group.tasks import Spawn
from protocol.errors import ErrorCode
from protocol.messages import GroupMetadataValue

log = structlog.get_logger("groups")

EMPTY, PREPARING, COMPLETING, STABLE = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                        GroupState.COMPLETING_REBALANCE, GroupState.STABLE)

# Writes a group's metadata record to __consumer_offsets (GroupError when that fails).
StoreGroup = Callable[[str, GroupMetadataValue], Awaitable[object]]


class RebalancePhases:
    def __init__(self, initial_rebalance_delay_ms: int, sessions: SessionTimers, store_group: StoreGroup,
                 spawn: Spawn) -> None:
        self._initial_delay_ms = initial_rebalance_delay_ms  # group.initial.rebalance.delay.ms
        self._sessions = sessions
        self._store_group = store_group
        self._spawn = spawn

    def maybe_prepare_rebalance_or_complete_join(self, group: Group, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self.maybe_complete_join_phase(group)

    def maybe_complete_join_phase(self, group: Group) -> None:
        # Never early during the initial rebalance of a new group: its delay runs out first.
        if group.is_in(PREPARING) and group.previous_state is not EMPTY and group.has_all_members_joined():
            self.complete_join(group)

    def prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(COMPLETING):
            self.reset_and_propagate_assignment(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        initial = group.is_in(EMPTY)
        if initial:
            delay = self._initial_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._sessions.set_join_timer(group, delay,
                                          lambda: self._try_complete_initial_rebalance(group, delay, remaining))
        group.transition_to(PREPARING)
        log.info("preparing to rebalance group", group=group.group_id, generation=group.generation_id,
                 members=len(group.members), reason=reason)
        if not initial:
            if group.has_all_members_joined():
                self.complete_join(group)
            else:
                self._sessions.set_join_timer(group, group.rebalance_timeout_ms(), lambda: self.complete_join(group))

    def _try_complete_initial_rebalance(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            next_delay = min(self._initial_delay_ms, remaining_ms)
            next_remaining = max(remaining_ms - delay_ms, 0)
            self._sessions.set_join_timer(
                group, next_delay, lambda: self._try_complete_initial_rebalance(group, next_delay, next_remaining))
        else:
            self.complete_join(group)

    def complete_join(self, group: Group) -> None:
        """The join phase ends: next generation, answers to every parked JoinGroup, wait for syncs."""
        self._sessions.cancel_join_timer(group)
        if not group.is_in(PREPARING):
            return
        gone = [m for m in group.not_yet_rejoined() if not m.is_static]
        for member in gone:
            self.drop_member(group, member)
        if gone:
            log.info("removed members that did not rejoin", group=group.group_id,
                     members=[m.member_id for m in gone])
        if group.members and not group.maybe_elect_new_joined_leader():
            log.error("no member rejoined; waiting for sessions to expire", group=group.group_id)
            self._sessions.set_join_timer(group, group.rebalance_timeout_ms(), lambda: self.complete_join(group))
            return
        group.init_next_generation()
        if group.is_in(EMPTY):
            log.info("group is empty", group=group.group_id, generation=group.generation_id)
            self._spawn(self._store_group_quietly(group))
            return
        log.info("group joined", group=group.group_id, generation=group.generation_id, members=len(group.members),
                 protocol=group.protocol_name, leader=group.leader_id)
        for member in group.members.values():
            member.complete_join(join_answer(group, member, with_members=group.is_leader(member.member_id)))
            self._sessions.schedule_heartbeat(group, member, member.session_timeout_ms)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        self._sessions.set_sync_timer(group, group.rebalance_timeout_ms(),
                                      lambda: self._expire_pending_sync(group, generation))

    def _expire_pending_sync(self, group: Group, generation: int) -> None:
        if generation != group.generation_id:
            return
        if group.is_in(COMPLETING, STABLE) and group.pending_sync:
            late = [group.members[m] for m in list(group.pending_sync) if m in group.members]
            for member in late:
                self.drop_member(group, member)
            self.prepare_rebalance(group, f"members sent no SyncGroup in time: {[m.member_id for m in late]}")

    def _remove_sync_expiration(self, group: Group) -> None:
        group.pending_sync.clear()
        self._sessions.cancel_sync_timer(group)

    def remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.is_in(COMPLETING, STABLE) or not group.pending_sync:
            self._sessions.cancel_sync_timer(group)

    def reset_and_propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def set_and_propagate_assignment(self, group: Group, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        protocol_type, protocol_name = (group.protocol_type, group.protocol_name) if not error else (None, None)
        for member in group.members.values():
            if member.complete_sync(SyncResult(error, protocol_type, protocol_name, member.assignment)):
                self._sessions.schedule_heartbeat(group, member, member.session_timeout_ms)

    # --- members leaving ---------------------------------------------------------------------------

    def member_expired(self, group: Group, member: Member) -> None:
        """The member's session ran out (the session timers report it)."""
        self.remove_member_and_update(group, member, f"session of {member.member_id} expired")

    def pending_member_expired(self, group: Group, member_id: str) -> None:
        log.info("pending member never rejoined; removed", group=group.group_id, member_id=member_id)
        group.pending_members.pop(member_id, None)
        if group.is_in(PREPARING) and group.has_all_members_joined():
            self.complete_join(group)

    def drop_member(self, group: Group, member: Member) -> None:
        """Take a member out: whoever waits for it is answered UNKNOWN_MEMBER_ID, its timer stops."""
        member.complete_join(JoinResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.complete_sync(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        self._sessions.stop_heartbeat(member)
        group.remove(member.member_id)

    def remove_member_and_update(self, group: Group, member: Member, reason: str) -> None:
        self.drop_member(group, member)
        if group.is_in(STABLE, COMPLETING):
            self.maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(PREPARING) and group.has_all_members_joined():
            self.complete_join(group)

    async def _store_group_quietly(self, group: Group) -> None:
        try:
            await self._store_group(group.group_id, group_value(group))
        except GroupError as exc:
            # Safe to lose: the previous generation comes back after a restart and its members expire.
            log.warning("could not write group metadata", group=group.group_id, error=exc.error_code.name)
