"""One consumer group of KIP-848's protocol, its members, and how a member moves towards its target
(Kafka's CurrentAssignmentBuilder).

The group epoch moves when a member joins, leaves, expires or changes its subscription, or a subscribed
topic appears, goes or grows; the target assignment is then recomputed by the group's server-side
assignor (consumer_assignors.py) at a heartbeat, once the group's assignment interval has passed since
the last computation (KIP-1263: member_group.target_due); meanwhile the members reconcile towards the
target they have, of which a member gets only the topics it still subscribes to. A member reconciles at
its heartbeats: partitions it holds that the target gives elsewhere, or of a topic it left, are revoked
first (UNREVOKED_PARTITIONS, the member keeps its epoch until it reports them gone; a topic it leaves
meanwhile is added to them at once); a partition of its target
still held by another member is withheld until released (UNRELEASED_PARTITIONS); otherwise it takes the
target and the assignment epoch (STABLE). A partition is thus never held by two members at once. States
are Kafka's ConsumerGroupState: Empty, Assigning, Reconciling, Stable, Dead.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from enum import StrEnum

from broker.group.member_group import Assignment, MemberGroup

GROUP_TYPE = "consumer"
PROTOCOL_TYPE = "consumer"
STATIC_LEAVE_EPOCH = -2
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1  # ConsumerGroupDescribe v1's MemberType

# The member epoch since which a member holds each of its partitions (KIP-1251's assignment epochs).
HeldSince = dict[tuple[uuid.UUID, int], int]


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(StrEnum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(eq=False)
class ClassicMeta:
    """What a member speaking the classic protocol (JoinGroup/SyncGroup) brings into a consumer group:
    Kafka's ClassicMemberMetadata, kept in its member record."""
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]  # (name, ConsumerProtocolSubscription), the JoinGroup's order

    @property
    def protocol_name(self) -> str:
        """The name its JoinGroup answer carried and its SyncGroup must repeat: its first protocol's."""
        return self.protocols[0][0]


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    client_id: str
    client_host: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = 0
    subscribed: list[str] = field(default_factory=list)
    regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # For each partition in `assigned` or `pending_revocation`: the epoch the member was given it at.
    # Replaced whole, never changed in place (ChangeSnapshot keeps the old map).
    held_since: HeldSince = field(default_factory=dict)
    classic: ClassicMeta | None = None  # set while the member speaks the classic protocol
    session_timeout_ms: int = 45_000  # its session timer's, last armed
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    # A classic member's JoinGroup timeout ("join": told to rejoin) and SyncGroup timeout ("sync": joined,
    # not synced), each on its own as in Kafka.
    classic_timers: dict[str, asyncio.TimerHandle] = field(default_factory=dict)

    def epoch_held_since(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """The epoch since which the member holds the partition (assigned or to revoke); None if it does
        not. A held partition missing from `held_since` counts from the member's epoch (0 for a static member
        gone for now), as Kafka reads a record without assignment epochs."""
        if partition in self.assigned.get(topic_id, ()) or partition in self.pending_revocation.get(topic_id, ()):
            return self.held_since.get((topic_id, partition), max(self.epoch, 0))
        return None

    def cancel_timers(self) -> None:
        for timer in (self.session_timer, self.rebalance_timer):
            if timer is not None:
                timer.cancel()
        self.session_timer = self.rebalance_timer = None
        self.cancel_classic_timer()

    def cancel_classic_timer(self, kind: str | None = None) -> None:
        """The classic timer of that kind, or both."""
        for name in [kind] if kind is not None else list(self.classic_timers):
            if (timer := self.classic_timers.pop(name, None)) is not None:
                timer.cancel()


@dataclass(eq=False)
class ConsumerGroup(MemberGroup[ConsumerMember]):
    assignor: str = ""

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.state != MemberState.STABLE for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def classic_only_without(self, leaving: set[str]) -> bool:
        """Whether members remain once `leaving` (member ids) are gone, and all of them speak the classic
        protocol (Kafka's allMembersUseClassicProtocolExcept, and not empty): the group may turn classic."""
        rest = [m for m in self.members.values() if m.member_id not in leaving]
        return bool(rest) and all(m.classic is not None for m in rest)

    def waiting_on_unreleased(self, member: ConsumerMember) -> bool:
        """Whether a partition of the member's target is still held by another member."""
        for topic_id, parts in self.target.get(member.member_id, {}).items():
            for p in parts - member.assigned.get(topic_id, set()):
                holder = self.owner(topic_id, p)
                if holder is not None and holder is not member:
                    return True
        return False

    def static_member(self, instance_id: str) -> ConsumerMember | None:
        return next((m for m in self.members.values() if m.instance_id == instance_id), None)

    def owner(self, topic_id: uuid.UUID, partition: int) -> ConsumerMember | None:
        """The member holding the partition, assigned or still to revoke."""
        for member in self.members.values():
            if partition in member.assigned.get(topic_id, ()) or partition in member.pending_revocation.get(
                    topic_id, ()):
                return member
        return None


def owned_matches_nothing_of(owned: Assignment | None, revoked: Assignment) -> bool:
    """Whether the member reported its partitions and none of `revoked` is among them."""
    if owned is None:
        return False
    return all(not (owned.get(t, set()) & parts) for t, parts in revoked.items())


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None,
              subscribed: Callable[[], set[uuid.UUID]], resubscribed: bool = False) -> None:
    """Move the member one step towards its target (Kafka's CurrentAssignmentBuilder). `subscribed`: the
    ids of the existing topics the member subscribes to now (asked only when needed); `resubscribed`: this
    request changed its subscription."""
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if not owned_matches_nothing_of(owned, member.pending_revocation):
            if resubscribed:
                _revoke_unsubscribed(member, subscribed(), owned)
            return
        member.pending_revocation = {}
        _next(group, member, owned, subscribed())
        return
    if member.epoch != group.assignment_epoch or member.state == MemberState.UNRELEASED_PARTITIONS:
        _next(group, member, owned, subscribed())
    elif resubscribed:
        # At the target's epoch with a new subscription: the target waits for the assignment interval
        # (target_due), so the topics the member left are given up now, before any new target.
        _revoke_unsubscribed(member, subscribed(), owned)


def _revoke_unsubscribed(member: ConsumerMember, subscribed: set[uuid.UUID], owned: Assignment | None) -> None:
    """Kafka's updateCurrentAssignment: the topics the member left are taken from its assignment at once, at
    its epoch; it must revoke them first if it may still hold them (their partitions keep their epochs)."""
    gone = {t: parts for t, parts in member.assigned.items() if t not in subscribed}
    if not gone:
        return
    revoke = {t: set(p) for t, p in member.pending_revocation.items()}
    for topic_id, parts in gone.items():
        revoke.setdefault(topic_id, set()).update(parts)
    member.assigned = {t: parts for t, parts in member.assigned.items() if t in subscribed}
    member.previous_epoch = member.epoch  # a step at the same epoch, as Kafka's updateMemberEpoch
    if not owned_matches_nothing_of(owned, revoke):
        member.state, member.pending_revocation = MemberState.UNREVOKED_PARTITIONS, revoke
    else:  # it reported holding none of them: they are gone already
        member.held_since = {k: e for k, e in member.held_since.items() if k[0] not in gone}


def _next(group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None, subscribed: set[uuid.UUID]) -> None:
    """Kafka's computeNextAssignment: revoke first (at the member's epoch), else take what is free of the
    target and its epoch, the same after a revocation as from STABLE (no step of one epoch at a time). The
    target counts only for the topics the member subscribes to now: a target computed before it changed
    its subscription, or before a topic went, gives it nothing of the others."""
    epoch = group.assignment_epoch
    target = {t: parts for t, parts in group.target.get(member.member_id, {}).items() if t in subscribed}
    kept: Assignment = {}
    revoke: Assignment = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        want = target.get(topic_id, set())
        have = member.assigned.get(topic_id, set())
        if both := have & want:
            kept[topic_id] = set(both)
        if gone := have - want:
            revoke[topic_id] = set(gone)
    # Kafka 4.3.1 waits for a revocation only if the member says it still holds what it must give up.
    if revoke and not owned_matches_nothing_of(owned, revoke):
        member.state = MemberState.UNREVOKED_PARTITIONS
        member.assigned, member.pending_revocation = kept, revoke  # its epoch stays until it revokes
        member.previous_epoch = member.epoch  # Kafka re-sets the epoch here: the one before is forgotten
        return  # every partition it held it still holds, since the same epoch
    assigned = {t: set(p) for t, p in kept.items()}
    for topic_id, want in target.items():
        for p in sorted(want - kept.get(topic_id, set())):
            holder = group.owner(topic_id, p)
            if holder is None or holder is member:
                assigned.setdefault(topic_id, set()).add(p)
            else:
                unreleased = True
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    # Kept partitions keep the epoch they were given at; new ones count from the target's epoch.
    old = member.held_since
    member.held_since = {(t, p): old.get((t, p), member.epoch) if p in kept.get(t, ()) else epoch
                         for t, parts in assigned.items() for p in parts}
    member.assigned, member.pending_revocation = assigned, {}
    # As Kafka's updateMemberEpoch: the epoch before this step, even when it does not move.
    member.previous_epoch, member.epoch = member.epoch, epoch


# A member's state without its timers: what a snapshot keeps.
_TIMERS = ("session_timer", "rebalance_timer", "classic_timers")
_MEMBER_STATE = tuple(f.name for f in fields(ConsumerMember) if not f.name.startswith(_TIMERS))


def _copied(value: object) -> object:
    """A copy of a member's field that later changes cannot reach (ClassicMeta is replaced, never changed)."""
    return copy.deepcopy(value) if isinstance(value, (dict, list, set)) else value


_Epochs = tuple[int, int, int, str]  # group epoch, assignment epoch, when the target was computed, assignor


def _epochs_of(group: ConsumerGroup) -> _Epochs:
    return group.group_epoch, group.assignment_epoch, group.assignment_ms, group.assignor


def _put_epochs(group: ConsumerGroup, epochs: _Epochs) -> None:
    group.group_epoch, group.assignment_epoch, group.assignment_ms, group.assignor = epochs


@dataclass(frozen=True)
class GroupSnapshot:
    """A consumer group's state at one moment, to put back when the write of what changed it fails; two
    snapshots are equal when nothing changed in between."""
    epochs: _Epochs
    target: dict[str, Assignment]
    topics: dict[str, tuple[uuid.UUID, int]]
    members: dict[str, tuple[ConsumerMember, dict[str, object]]]

    @classmethod
    def of(cls, group: ConsumerGroup) -> GroupSnapshot:
        return cls(_epochs_of(group), copy.deepcopy(group.target),
                   dict(group.topics), {mid: (m, {n: _copied(getattr(m, n)) for n in _MEMBER_STATE})
                                        for mid, m in group.members.items()})

    def restore(self, group: ConsumerGroup) -> list[ConsumerMember]:
        """Put the group back as it was; the members that were not in it since (their timers stopped)."""
        kept = {mid: m for mid, (m, _) in self.members.items()}
        for member in group.members.values():
            if kept.get(member.member_id) is not member:
                member.cancel_timers()
        back = [m for mid, m in kept.items() if group.members.get(mid) is not m]
        for member, state in self.members.values():
            for name, value in state.items():
                setattr(member, name, value)
        group.members = kept
        _put_epochs(group, self.epochs)
        group.target, group.topics = self.target, self.topics
        return back


@dataclass(frozen=True)
class ChangeSnapshot:
    """What undoes one request's change of a group when its write fails: the group's own fields and, of
    its members, only the requester's (a KIP-848 heartbeat or a timer alters no other member's fields, so
    the snapshot costs the same whatever the group's size). Values are kept, not copied: a change replaces
    a member's assignments and subscription, never changes them in place (reconcile, _next)."""
    epochs: _Epochs
    members: dict[str, ConsumerMember]
    target: dict[str, Assignment]  # replaced or popped by a change, never changed in place
    topics: dict[str, tuple[uuid.UUID, int]]
    member: ConsumerMember | None
    state: dict[str, object]

    @classmethod
    def of(cls, group: ConsumerGroup, member_id: str | None) -> ChangeSnapshot:
        member = group.members.get(member_id) if member_id is not None else None
        return cls(_epochs_of(group), dict(group.members),
                   dict(group.target), group.topics, member,
                   {n: getattr(member, n) for n in _MEMBER_STATE} if member is not None else {})

    def restore(self, group: ConsumerGroup) -> list[ConsumerMember]:
        """Put the group back; the members the change took out (their timers stopped, to be armed again).
        Members the change added lose their timers."""
        for member in group.members.values():
            if self.members.get(member.member_id) is not member:
                member.cancel_timers()
        back = [m for mid, m in self.members.items() if group.members.get(mid) is not m]
        _put_epochs(group, self.epochs)
        group.members, group.target, group.topics = dict(self.members), dict(self.target), self.topics
        if self.member is not None:
            for name, value in self.state.items():
                setattr(self.member, name, value)
        return back
