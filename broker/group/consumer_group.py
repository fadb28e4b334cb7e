"""One consumer group of KIP-848's protocol, its members, and how a member moves towards its target
(Kafka's CurrentAssignmentBuilder).

The group epoch moves when a member joins, leaves, expires or changes its subscription, or a subscribed
topic appears, goes or grows; the target assignment is then recomputed by the group's server-side
assignor (consumer_assignors.py). A member reconciles at its heartbeats: partitions it holds that the
target gives elsewhere are revoked first (UNREVOKED_PARTITIONS, the member keeps its epoch until it
reports them gone); a partition of its target still held by another member is withheld until released
(UNRELEASED_PARTITIONS); otherwise it takes the target and the assignment epoch (STABLE). A partition
is thus never held by two members at once. States are Kafka's ConsumerGroupState: Empty, Assigning,
Reconciling, Stable, Dead.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from enum import StrEnum

GROUP_TYPE = "consumer"
PROTOCOL_TYPE = "consumer"
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1  # ConsumerGroupDescribe v1's MemberType

# What a member holds: topic id -> partition indexes.
Assignment = dict[uuid.UUID, set[int]]


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
    classic: ClassicMeta | None = None  # set while the member speaks the classic protocol
    session_timer: asyncio.TimerHandle | None = None
    rebalance_timer: asyncio.TimerHandle | None = None
    # A classic member's JoinGroup timeout (told to rejoin) or SyncGroup timeout (joined, not synced).
    classic_timer: asyncio.TimerHandle | None = None
    classic_timer_kind: str = ""

    def cancel_timers(self) -> None:
        for timer in (self.session_timer, self.rebalance_timer, self.classic_timer):
            if timer is not None:
                timer.cancel()
        self.session_timer = self.rebalance_timer = self.classic_timer = None

    def cancel_classic_timer(self) -> None:
        if self.classic_timer is not None:
            self.classic_timer.cancel()
            self.classic_timer = None


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> its target assignment
    # The subscribed topics as last seen: name -> (id, partition count); a change bumps the group epoch.
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    dead: bool = False

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


def reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> None:
    """Move the member one step towards its target (Kafka's CurrentAssignmentBuilder)."""
    target_epoch = group.assignment_epoch
    if member.state == MemberState.UNREVOKED_PARTITIONS:
        if not owned_matches_nothing_of(owned, member.pending_revocation):
            return
        member.pending_revocation = {}
        _next(group, member, min(member.epoch + 1, target_epoch), owned)
        return
    if member.epoch != target_epoch or member.state == MemberState.UNRELEASED_PARTITIONS:
        _next(group, member, target_epoch, owned)
        return
    # Same epoch: a subscription change may have dropped topics the target no longer gives it.
    if any(t not in group.target.get(member.member_id, {}) for t in member.assigned):
        _next(group, member, target_epoch, owned)


def _next(group: ConsumerGroup, member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    target = group.target.get(member.member_id, {})
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
        return
    assigned = {t: set(p) for t, p in kept.items()}
    for topic_id, want in target.items():
        for p in sorted(want - kept.get(topic_id, set())):
            holder = group.owner(topic_id, p)
            if holder is None or holder is member:
                assigned.setdefault(topic_id, set()).add(p)
            else:
                unreleased = True
    member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    member.assigned, member.pending_revocation = assigned, {}
    if member.epoch != epoch:
        member.previous_epoch, member.epoch = member.epoch, epoch
