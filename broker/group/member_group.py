"""What KIP-848 consumer groups and share groups alone share (classic groups have none of it): the fields
both kinds of group hold (MemberGroup), what their members hold (Assignment), the epoch they leave with
(LEAVE_EPOCH), what their heartbeats are answered (HeartbeatAnswer), when a heartbeat computes a new target
(target_due, new_target_now: the assignment interval of KIP-1263, the same rule for both kinds), and the
check of a member the group does not know (check_joining)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from broker.group.group import GroupError
from protocol.errors import ErrorCode

# What a KIP-848 consumer group's or a share group's member holds: topic id -> partition indexes.
Assignment = dict[uuid.UUID, set[int]]
LEAVE_EPOCH = -1  # the member epoch a KIP-848 or share group member leaves with (Kafka's LEAVE_GROUP_MEMBER_EPOCH)

_M = TypeVar("_M")


@dataclass(eq=False)
class MemberGroup(Generic[_M]):
    """What a KIP-848 consumer group and a share group both hold (`_M`: their member type)."""
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, _M] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)  # member id -> its target assignment
    # The subscribed topics as last seen: name -> (id, partition count); a change bumps the group epoch.
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    dead: bool = False
    assignment_ms: int = 0  # when the target was last computed, wall clock (record 6's AssignmentTimestamp)


def target_due(group: MemberGroup, interval_ms: int, now_ms: int) -> bool:
    """Whether a target moved behind the group epoch may be computed now (Kafka's
    canComputeNextTargetAssignment, KIP-1263): at once for a target never computed (or whose time is not
    known: 0) or an interval of 0, else once `interval_ms` have passed since the last computation. Until
    then the members reconcile towards the target they have."""
    return group.assignment_ms == 0 or interval_ms == 0 or now_ms >= group.assignment_ms + interval_ms


def new_target_now(group: MemberGroup, interval_ms: int, now_ms: int) -> bool:
    """Whether a heartbeat computes a new target now (Kafka's maybeUpdateTargetAssignment, for consumer and
    share groups alike): the group epoch moved past the target and `target_due`. Otherwise the members are
    given the target they have, at its epoch."""
    return group.group_epoch > group.assignment_epoch and target_due(group, interval_ms, now_ms)


@dataclass(frozen=True)
class HeartbeatAnswer:
    """What a ConsumerGroupHeartbeat or a ShareGroupHeartbeat answers."""
    member_id: str
    member_epoch: int
    assignment: Assignment | None  # None: not sent (unchanged since the member's last heartbeat)

    @property
    def left(self) -> bool:
        return self.member_epoch == LEAVE_EPOCH


def check_joining(group: MemberGroup, group_type: str, member_id: str, *, epoch: int, max_size: int) -> None:
    """A member `group` does not know (`group_type`: its kind's GROUP_TYPE, as ListGroups names it): it
    must join (epoch 0), into a group of fewer than `max_size` members, as Kafka checks."""
    if epoch != 0:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                         f"Member {member_id} is not a member of group {group.group_id}.")
    if len(group.members) >= max_size:
        raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                         f"The {group_type} group has reached its maximum capacity of {max_size} members.")
