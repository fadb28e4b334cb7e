"""What the group coordinator takes and answers for JoinGroup and SyncGroup (the handlers build a
JoinRequest and turn the results into responses), and who commits or fetches a KIP-848 consumer
group's offsets (MemberCheck, built by offsets.py, judged by consumer_requests.check_commit)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.group.group import UNKNOWN_MEMBER_ID, Group, Member
from protocol.errors import ErrorCode


@dataclass(frozen=True)
class MemberCheck:
    """Who commits (or fetches) offsets of a KIP-848 consumer group, as its coordinator checks them."""
    member_id: str
    epoch: int  # the member epoch, or a classic member's generation
    fetch: bool = False  # OffsetFetch: the epoch must be the member's
    version: int = -1  # a non-transactional OffsetCommit's version (KIP-848 members need 9+); -1 unchecked
    transactional: bool = False  # TxnOffsetCommit: its stale epochs are ILLEGAL_GENERATION
    instance_id: str | None = None
    # The partitions committed (topic, index) whose metadata is storable: an older epoch is judged by them.
    partitions: tuple[tuple[str, int], ...] = ()


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_id: str
    client_host: str
    version: int
    reason: str | None = None


@dataclass
class JoinResult:
    error: ErrorCode = ErrorCode.NONE
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error: ErrorCode = ErrorCode.NONE
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def answer_parked(group: Group, error: ErrorCode) -> None:
    """Answer every JoinGroup and SyncGroup parked in the group with `error` (the group leaves this broker)."""
    for member in group.members.values():
        member.complete_join(JoinResult(error, member.member_id))
        member.complete_sync(SyncResult(error))


def join_answer(group: Group, member: Member, *, with_members: bool, leader: str | None = None,
                skip_assignment: bool = False) -> JoinResult:
    """A successful JoinGroup answer for the group's current generation (the leader gets every member)."""
    members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
               for m in group.members.values()] if with_members else []
    return JoinResult(ErrorCode.NONE, member.member_id, group.generation_id, group.protocol_type,
                      group.protocol_name, (group.leader_id or "") if leader is None else leader, members,
                      skip_assignment)
