"""A consumer group changing type, ConsumerGroups' part that applies consumer_migration.py's conversions to
the groups served: the upgrade of a classic group with members when a consumer member joins it, the fencing
of members that leaves only classic ones (then the downgrade, if the policy allows), and each change's undo
(the group as it was, its members' timers armed again) that the record log runs when the write fails.
It is apart from consumer_groups.py because it is the one place that moves a group id between the classic
and the consumer groups (ClassicIds, what it needs of the classic side); the heartbeat, timers and loads
stay there, and what it uses of them is declared here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.group.consumer_group import ConsumerGroup, ConsumerMember
from broker.group.consumer_migration import Migration, may_downgrade, to_classic_group, to_consumer_group
from broker.group.consumer_protocol import MalformedProtocol
from broker.group.consumer_topics import SubscribedTopics
from broker.group.group import Group, GroupError, GroupState
from broker.group.metadata import group_value
from broker.group.record_log import GroupRecordLog
from broker.group.records import group_key
from broker.group.records import group_value as group_value_bytes
from protocol.errors import ErrorCode

log = structlog.get_logger("groups")


@dataclass(frozen=True)
class ClassicIds:
    """What the consumer groups need of the classic groups: is the id one, and is it empty; `adopt` drops
    it as its id turns into a consumer group (its parked joins and syncs answered REBALANCE_IN_PROGRESS);
    `group` is the classic group an upgrade converts, `install` takes a downgraded group (its members'
    sessions, then a rebalance if asked)."""
    exists: Callable[[str], bool]
    empty: Callable[[str], bool]
    adopt: Callable[[str], None]
    group: Callable[[str], Group | None] = lambda group_id: None
    install: Callable[[Group, bool], None] = lambda group, rebalance: None


class TypeChanges(ABC):
    """ConsumerGroups' type changes. What they use of it: the groups served, the migration policy,
    group.consumer.max.size, the subscribed topics, the record log, the classic groups, and the member
    timers, assignor choice and removal below."""

    groups: dict[str, ConsumerGroup]
    migration: Migration
    max_size: int
    topics: SubscribedTopics
    records: GroupRecordLog
    _classic: ClassicIds

    @abstractmethod
    def arm_session(self, group: ConsumerGroup, member: ConsumerMember, timeout_ms: int) -> None:
        """Start (again) the member's session timeout."""

    @abstractmethod
    def rearm(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """The timers of a member an undo puts back."""

    @abstractmethod
    def assignor_of(self, group: ConsumerGroup) -> str:
        """The server assignor the group uses."""

    @abstractmethod
    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        """The member leaves the group (the group epoch moves)."""

    def _upgrade(self, classic: Group) -> ConsumerGroup:
        """A consumer member joins a classic group with members: it becomes a consumer group keeping them."""
        group = to_consumer_group(classic, self.migration, self.max_size, self.topics.now())
        gid, stable = group.group_id, classic.is_in(GroupState.STABLE)
        self._classic.adopt(gid)
        self.groups[gid] = group
        group.assignor = self.assignor_of(group)
        group.topics = self.topics.of(group)

        def undo() -> None:  # the classic group back, its members' sessions running, as it was
            if self.groups.get(gid) is group:
                self._forget(group)
                self._classic.install(classic, not stable)
                log.info("classic group upgrade reverted", group=gid)
        self.records.type_changed(gid, undo, before=[(group_key(gid), None)])
        for member in group.members.values():
            assert member.classic is not None  # every member of a converted group is a classic one
            self.arm_session(group, member, member.classic.session_timeout_ms)
        log.info("classic group upgraded to a consumer group", group=group.group_id, members=len(group.members))
        return group

    def fence(self, group: ConsumerGroup, members: list[ConsumerMember]) -> None:
        """Members leave or are fenced (Kafka's consumerGroupFenceMembers): when only classic members remain
        and the policy allows, the group turns classic (a rebalance follows); else they are removed."""
        leaving = {m.member_id for m in members}
        if may_downgrade(group, leaving, self.migration):
            self.downgrade(group, leaving, rebalance=True)
            return
        for member in members:
            self._remove(group, member)

    def downgrade(self, group: ConsumerGroup, leaving: set[str], *, rebalance: bool) -> None:
        """The group's members but `leaving`, all classic ones, make a classic group (Kafka's
        convertToClassicGroup); it rebalances if asked. When a member's metadata for the protocol the
        classic group would choose is not the consumer protocol: Kafka's GROUP_ID_NOT_FOUND, the group
        unchanged (nobody leaves)."""
        try:
            classic = to_classic_group(group, leaving, self.topics.now())
        except MalformedProtocol as exc:
            log.warning("consumer group not downgraded", group=group.group_id, error=exc.message)
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND,
                             f"Cannot downgrade the classic group {group.group_id}: {exc.message}.") from exc
        gid = group.group_id
        self._forget(group)

        def undo() -> None:  # the consumer group back, with every member, its timers armed again
            if gid not in self.groups and self._classic.group(gid) is classic:
                self._classic.adopt(gid)
                self.groups[gid] = group
                for member in group.members.values():
                    self.rearm(group, member)
                log.info("consumer group downgrade reverted", group=gid)
        self.records.type_changed(gid, undo, after=[(group_key(gid), group_value_bytes(group_value(classic)))])
        self._classic.install(classic, rebalance)
        log.info("consumer group downgraded to a classic group", group=group.group_id, members=len(classic.members))

    def _forget(self, group: ConsumerGroup) -> None:
        """The group leaves memory (it changed type): its members' timers stop."""
        for member in group.members.values():
            member.cancel_timers()
        del self.groups[group.group_id]
        self.topics.forget(group.group_id)
