"""What a ConsumerGroupHeartbeat brings (its answer is member_group.py's HeartbeatAnswer, as a share group's),
and the checks Kafka makes of it before the group is touched (throwIfConsumerGroupHeartbeatRequestIsInvalid)
and of a member's epoch."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from broker.group.consumer_group import STATIC_LEAVE_EPOCH, ConsumerGroup, ConsumerMember
from broker.group.consumer_regex import check_regex
from broker.group.group import GroupError, check_storable_member_id
from broker.group.member_group import Assignment
from broker.group.requests import MemberCheck
from protocol.errors import ErrorCode

__all__ = ["ConsumerHeartbeat", "check_commit", "check_epoch", "check_request"]


@dataclass(frozen=True)
class ConsumerHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed: list[str] | None
    regex: str | None
    server_assignor: str | None
    owned: Assignment | None
    client_id: str
    client_host: str


def check_request(request: ConsumerHeartbeat, assignors: list[str]) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid (v1: the member id always set)."""
    for value, what in ((request.member_id, "MemberId"), (request.group_id, "GroupId"),
                        (request.instance_id, "InstanceId"), (request.rack_id, "RackId")):
        if value is not None and not value:
            raise GroupError(ErrorCode.INVALID_REQUEST, f"{what} can't be empty.")
    check_storable_member_id(request.member_id)
    epoch = request.member_epoch
    if epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise GroupError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise GroupError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed is None and request.regex is None:
            raise GroupError(ErrorCode.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex "
                             "must be non-null when (re-)joining.")
    elif epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise GroupError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    if request.server_assignor is not None and request.server_assignor not in assignors:
        raise GroupError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                         f"{', '.join(assignors)}.")
    if request.regex:
        check_regex(request.regex)


def check_epoch(member: ConsumerMember, epoch: int, owned: Assignment | None) -> None:
    if epoch > member.epoch:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.epoch}). The member must abandon all its partitions "
                         "and rejoin.")
    if epoch < member.epoch:
        # The answer carrying the new epoch may have been lost: the epoch before, holding no more than now.
        subset = owned is not None and all(parts <= member.assigned.get(t, set()) for t, parts in owned.items())
        if epoch != member.previous_epoch or not subset:
            raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                             f"by the group coordinator ({member.epoch}). The member must abandon all its "
                             "partitions and rejoin.")


def check_commit(group: ConsumerGroup, check: MemberCheck, topic_ids: Mapping[str, uuid.UUID]) -> None:
    """Kafka 4.3.1's ConsumerGroup.validateOffsetCommit / validateOffsetFetch, in their order: a commit at
    epoch < 0 while the group is empty is taken whatever its member id (a fetch: without a member), as
    is a transactional one without member, generation or instance id; else the member must exist, a
    KIP-848 member commit with OffsetCommit v9+, and send its epoch. A commit at an older epoch is taken
    when the member has held every partition committed since that epoch or before (KIP-1251; `topic_ids`
    names the topics); a fetch wants the epoch itself. Refusals: UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION,
    STALE_MEMBER_EPOCH, ILLEGAL_GENERATION (a classic member's, or any transactional commit's)."""
    epoch = check.epoch
    if epoch < 0 and (not check.member_id if check.fetch else not group.members):
        return
    if check.transactional and epoch == -1 and not check.member_id and check.instance_id is None:
        return  # a producer committing for the group without being one of its members
    member = group.members.get(check.member_id)
    if member is None:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                         f"Member {check.member_id} is not a member of group {group.group_id}.")
    classic = member.classic is not None  # its generation is its member epoch, its OffsetCommit any version
    if not classic and 0 <= check.version < 9:
        raise GroupError(ErrorCode.UNSUPPORTED_VERSION,
                         "OffsetCommit version 9 or above must be used by members using the modern group "
                         "protocol")
    if epoch == member.epoch:
        return
    code = ErrorCode.ILLEGAL_GENERATION if classic or check.transactional else ErrorCode.STALE_MEMBER_EPOCH
    what = "generation id" if classic else "member epoch"
    if check.fetch or epoch > member.epoch:
        raise GroupError(code, f"The received {what} {epoch} does not match the current member epoch "
                               f"{member.epoch}.")
    for topic, partition in check.partitions:
        topic_id = topic_ids.get(topic)
        since = None if topic_id is None else member.epoch_held_since(topic_id, partition)
        if since is None:
            raise GroupError(code, f"Partition {topic}-{partition} is neither assigned to the member nor "
                                   "being revoked from it.")
        if epoch < since:
            raise GroupError(code, f"The received {what} {epoch} is older than the epoch {since} the member "
                                   f"was given partition {topic}-{partition} at.")
