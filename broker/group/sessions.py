"""Member sessions and the rebalance timers of classic groups, all asyncio TimerHandles (nothing polls).

Each heartbeat, commit or completed join/sync pushes a member's deadline out by its session timeout;
one timer per member fires at the deadline and reports the member expired (the rebalance protocol
removes it) unless it is parked in a JoinGroup or SyncGroup. The other timers (a group's join phase,
its sync phase, a pending member's first rejoin) run the action they were set with, and only while
the group is still the one this coordinator serves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import structlog

from broker.group.group import Group, GroupState, Member

log = structlog.get_logger("groups")


class ServedGroups(Protocol):
    """The groups this coordinator serves now, and whether it serves any (the group registry)."""

    active: bool
    groups: dict[str, Group]


class SessionTimers:
    def __init__(self, served: ServedGroups, expired: Callable[[Group, Member], None]) -> None:
        self._served = served
        self._expired = expired  # a member's session ran out: take it out of its group

    def _is_current(self, group: Group) -> bool:
        return self._served.groups.get(group.group_id) is group

    # --- sessions ----------------------------------------------------------------------------------

    def schedule_heartbeat(self, group: Group, member: Member, timeout_ms: int) -> None:
        """Push the member's session deadline out; the timer is moved only when it would fire late."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        member.heartbeat_deadline = deadline
        timer = member.heartbeat_timer
        if timer is not None:
            if timer.when() <= deadline:
                return  # fires first, sees the new deadline and sleeps on
            timer.cancel()
        member.heartbeat_timer = loop.call_at(deadline, self._heartbeat_expired, group, member)

    def member_seen(self, group: Group, member: Member) -> None:
        """A sign of life other than a heartbeat (an offset commit) pushes the session out."""
        self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def resume_sessions(self, group: Group) -> None:
        """A loaded group's members each get a fresh session timeout."""
        for member in group.members.values():
            self.schedule_heartbeat(group, member, member.session_timeout_ms)

    def stop_heartbeat(self, member: Member) -> None:
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None

    def _heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if not self._is_current(group) or group.members.get(member.member_id) is not member:
            return
        if not self._served.active or group.is_in(GroupState.DEAD):
            return
        loop = asyncio.get_running_loop()
        if loop.time() < member.heartbeat_deadline:
            member.heartbeat_timer = loop.call_at(member.heartbeat_deadline, self._heartbeat_expired, group, member)
            return
        if member.has_satisfied_heartbeat():
            return  # parked in a join or sync; completing it schedules the next deadline
        log.info("member session expired; removing it", group=group.group_id, member_id=member.member_id,
                 session_timeout_ms=member.session_timeout_ms)
        self._expired(group, member)

    # --- pending members (KIP-394) -----------------------------------------------------------------

    def add_pending_member(self, group: Group, member_id: str, timeout_ms: int,
                           expired: Callable[[Group, str], None]) -> None:
        """The member got its id and has `timeout_ms` to come back with it."""

        def fire() -> None:
            if self._is_current(group) and group.is_pending(member_id):
                expired(group, member_id)

        group.pending_members[member_id] = asyncio.get_running_loop().call_later(timeout_ms / 1000, fire)

    def remove_pending_member(self, group: Group, member_id: str) -> None:
        timer = group.pending_members.pop(member_id)
        if timer is not None:
            timer.cancel()

    # --- the join and sync phases ------------------------------------------------------------------

    def set_join_timer(self, group: Group, delay_ms: int, action: Callable[[], None]) -> None:
        self.cancel_join_timer(group)

        def fire() -> None:
            group.join_timer = None
            if self._is_current(group) and self._served.active:
                action()

        group.join_timer = asyncio.get_running_loop().call_later(delay_ms / 1000, fire)

    def cancel_join_timer(self, group: Group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None

    def set_sync_timer(self, group: Group, delay_ms: int, action: Callable[[], None]) -> None:
        def fire() -> None:
            group.sync_timer = None
            if self._is_current(group) and self._served.active:
                action()

        group.sync_timer = asyncio.get_running_loop().call_later(delay_ms / 1000, fire)

    def cancel_sync_timer(self, group: Group) -> None:
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def cancel_all(self, group: Group) -> None:
        """Every timer of the group and its members (the group is unloaded, deleted or the broker stops)."""
        for timer in (group.join_timer, group.sync_timer, *group.pending_members.values(),
                      *(m.heartbeat_timer for m in group.members.values())):
            if timer is not None:
                timer.cancel()
        group.join_timer = group.sync_timer = None
        for member in group.members.values():
            member.heartbeat_timer = None
