"""One classic group and its members: the state Kafka's ClassicGroup keeps, without the timers.

States and their legal predecessors (Kafka's ClassicGroupState):

    Empty               <- PreparingRebalance            (no members; offsets may remain)
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance            (joined; waiting for the leader's SyncGroup)
    Stable              <- CompletingRebalance
    Dead                <- any                           (deleted, or expired with no offsets left)

The coordinator (coordinator.py) drives the transitions and owns the timers; this module holds the
membership, the protocol vote and the subscribed topics, and answers questions about them.

It also holds what every kind of group shares: GroupError and the member id's storable length (what
KIP-848 and share groups alone share is in member_group.py).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from enum import StrEnum
from io import BytesIO

from protocol.errors import CodedError, ErrorCode, ProtocolError
from protocol.messages import ConsumerProtocolSubscription
from protocol.wire import MAX_SHORT_STRING_BYTES, fits_short_string

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE = "classic"
UNKNOWN_MEMBER_ID = ""


class GroupState(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


class GroupError(CodedError):
    """A group request refused with a Kafka error code."""


def check_storable_member_id(member_id: str | None) -> None:
    """A member id must fit its member records' keys (an int16 length): Kafka fails writing them,
    UNKNOWN_SERVER_ERROR, and so does Ebb, before anything changes."""
    if member_id is not None and not fits_short_string(member_id):
        raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, "The member id is too long to be stored.")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), the member's preference order
    assignment: bytes = b""
    is_new: bool = False
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None
    heartbeat_deadline: float = 0.0  # loop time after which the session expires
    heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's hasSatisfiedHeartbeat, asked when the session timer fires: members parked in a
        JoinGroup or SyncGroup are kept (unless new: a new member's join can time out)."""
        if self.is_new:
            return False
        return self.awaiting_join or self.awaiting_sync

    def complete_join(self, result) -> bool:
        future, self.join_future = self.join_future, None
        if future is not None and not future.done():  # awaiting_join
            future.set_result(result)
            return True
        return False

    def complete_sync(self, result) -> bool:
        future, self.sync_future = self.sync_future, None
        if future is not None and not future.done():  # awaiting_sync
            future.set_result(result)
            return True
        return False


class Group:
    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY, *, generation_id: int = 0,
                 protocol_type: str | None = None, protocol_name: str | None = None, leader_id: str | None = None,
                 state_timestamp_ms: int | None = None) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state = GroupState.DEAD
        self.state_timestamp_ms: int | None = now_ms() if state_timestamp_ms is None else state_timestamp_ms
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}  # MEMBER_ID_REQUIRED, not yet rejoined
        self.pending_sync: set[str] = set()
        self.supported_protocols: dict[str, int] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False
        self.join_timer: asyncio.TimerHandle | None = None
        self.sync_timer: asyncio.TimerHandle | None = None

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation={self.generation_id}, " \
               f"members={len(self.members)})"

    # --- state -------------------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state.value} -> {state.value}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp_ms = now_ms()

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    # --- members -----------------------------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def validate_member(self, member_id: str, group_instance_id: str | None) -> Member:
        """Kafka's ClassicGroup.validateMember: UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"no static member with instance id {group_instance_id} in group {self.group_id}")
            if existing != member_id:
                raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"instance id {group_instance_id} belongs to member {existing}, not {member_id}")
        member = self.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"member {member_id!r} is not in group {self.group_id}")
        return member

    def add(self, member: Member, join_future: asyncio.Future | None = None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.join_future = join_future
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
                del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        timer = self.pending_members.pop(member_id, None)
        if timer is not None:
            timer.cancel()
        self.pending_sync.discard(member_id)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, join_future: asyncio.Future | None) -> None:
        self._count_protocols(member, -1)
        member.protocols = list(protocols)
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_future = join_future

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str,
                              fenced_join, fenced_sync) -> Member:
        """A static member rejoined with an unknown member id: it takes over the old member's place.
        Whoever still waits under the old id is answered FENCED_INSTANCE_ID."""
        old = self.members.pop(old_member_id)
        old.complete_join(fenced_join)
        old.complete_sync(fenced_sync)
        if old.heartbeat_timer is not None:
            old.heartbeat_timer.cancel()
        new = Member(new_member_id, old.group_instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
                     old.session_timeout_ms, old.protocol_type, list(old.protocols), old.assignment)
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        return new

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick a member that did; False when nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        suffix = f"-{uuid.uuid4()}"
        if not fits_short_string(prefix + suffix):  # JoinGroup v0-5 and DescribeGroups v0-4 must carry it
            room = MAX_SHORT_STRING_BYTES - len(suffix)
            prefix = prefix.encode("utf-8")[:room].decode("utf-8", "ignore")
        return prefix + suffix

    # --- protocols ---------------------------------------------------------------------------------

    def _count_protocols(self, member: Member, delta: int) -> None:
        for name in member.protocol_names():
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + delta

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty type and list; otherwise the
        type must match and one of the names must be supported by every member."""
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == len(self.members) for name in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those every member supports;
        the most votes win (ties: the first protocol to reach the top count, in member order)."""
        if not self.members:
            raise RuntimeError(f"cannot select a protocol for empty group {self.group_id}")
        candidates = {name for name, count in self.supported_protocols.items() if count == len(self.members)}
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=votes.__getitem__)

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the consumer-protocol members subscribe to; None when unknown (another protocol
        type, no protocol selected yet, or metadata that is not a ConsumerProtocolSubscription)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is not None:
            return topic in self.subscribed_topics
        return self.uses_consumer_protocol

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync.clear()


def parse_subscription(metadata: bytes) -> list[str] | None:
    """The topic list of a ConsumerProtocolSubscription (int16 version, then the v0 prefix every
    version shares), or None if the bytes are not one."""
    if len(metadata) < 2:
        return None
    try:
        return list(ConsumerProtocolSubscription[0].codec.decode_from(BytesIO(bytes(metadata)[2:])).topics)
    except ProtocolError:
        return None
    except Exception:  # a codec that trips over garbage must not break the group
        return None
