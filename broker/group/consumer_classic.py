"""Classic members inside a KIP-848 consumer group (Kafka's mixed groups): JoinGroup, SyncGroup, Heartbeat and
LeaveGroup for a consumer group with members, served as Kafka 4.3.1's GroupMetadataManager serves them
(classicGroupJoinToConsumerGroup and its Sync, Heartbeat and Leave siblings).

- JoinGroup: refused with INCONSISTENT_GROUP_PROTOCOL when group.consumer.migration.policy is disabled,
  the protocol type is not "consumer" or no protocol is one every classic member offers; a v4+ dynamic
  member without an id gets MEMBER_ID_REQUIRED and a new id (nothing kept for it); metadata that is not
  a ConsumerProtocolSubscription is UNKNOWN_SERVER_ERROR, as Kafka answers it. The member's
  subscription comes from its first protocol's ConsumerProtocolSubscription, a changed one moves the group
  epoch and the server assignor computes the target (once the group's assignment interval has passed, as
  for a KIP-848 heartbeat); the member then reconciles like a KIP-848 member,
  the partitions its metadata says it owns standing for the ones it reports. The answer: generation = the
  member epoch, protocol name = its first protocol's, no leader and no members (it never assigns). Its
  session timeout is its JoinGroup's; it must sync within its rebalance timeout.
- SyncGroup: its assigned partitions as a ConsumerProtocolAssignment at its subscription's version;
  REBALANCE_IN_PROGRESS when the target's epoch moved past its epoch (unless it is still revoking).
- Heartbeat: REBALANCE_IN_PROGRESS when it must rejoin: the target's epoch passed its own (not the
  group epoch: a member that left changes no target until a member joins or heartbeats), it has
  partitions to revoke, or partitions withheld from it are free now; it must rejoin within its
  rebalance timeout.
- LeaveGroup: members leave (any protocol: the admin path by instance id) as consumer_groups.fence does,
  which turns the group classic when only classic members remain and the policy allows.
Changes are written to __consumer_offsets before the answer (member records carry ClassicMemberMetadata).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import uuid

import structlog

from broker.group import consumer_protocol as cp
from broker.group.consumer_group import (
    ClassicMeta,
    ConsumerGroup,
    ConsumerMember,
    GroupSnapshot,
    MemberState,
    reconcile,
)
from broker.group.consumer_groups import ConsumerGroups
from broker.group.consumer_migration import may_downgrade
from broker.group.group import CONSUMER_PROTOCOL_TYPE, UNKNOWN_MEMBER_ID, GroupError, check_storable_member_id
from broker.group.requests import JoinRequest, JoinResult, SyncResult
from protocol.errors import ErrorCode

log = structlog.get_logger("groups")


class ClassicMembers:
    def __init__(self, consumer: ConsumerGroups, max_record_bytes: int) -> None:
        """`max_record_bytes`: the largest batch __consumer_offsets takes (message.max.bytes)."""
        self._consumer = consumer
        self._max_record_bytes = max_record_bytes

    def serves(self, group_id: str) -> bool:
        """Whether the id is a consumer group with members (an empty one turns classic at a JoinGroup)."""
        group = self._consumer.groups.get(group_id)
        return group is not None and bool(group.members)

    # --- JoinGroup ---------------------------------------------------------------------------------

    async def join(self, request: JoinRequest, interval_ms: int) -> JoinResult:
        """`interval_ms`: the group's consumer.assignment.interval.ms in force (a new target waits for it)."""
        consumer = self._consumer
        group = consumer.groups[request.group_id]
        before = GroupSnapshot.of(group)
        joined: ConsumerMember | None = None
        after: GroupSnapshot | None = None
        try:
            member = self._join(group, request, interval_ms)
            if isinstance(member, JoinResult):
                return member
            joined = member
            assert member.classic is not None  # set by _join
            if consumer.groups.get(group.group_id) is group:  # not downgraded by the join
                consumer.arm_session(group, member, member.classic.session_timeout_ms)
                member.cancel_classic_timer("join")
                self._arm(group, member, "sync", request.rebalance_timeout_ms)
            after = GroupSnapshot.of(group)
            # The change is in __consumer_offsets before the member hears of it, as in Kafka.
            await consumer.persist(group.group_id, member.member_id)
        except GroupError as exc:
            # Not written: the join is undone (a downgrade it made was by the record log), unless another
            # request changed the group meanwhile (its answer stands): then only a member it added goes.
            if consumer.groups.get(group.group_id) is group:
                if after is None or GroupSnapshot.of(group) == after:
                    for back in before.restore(group):
                        consumer.rearm(group, back)
                    consumer.records.changed_whole(group.group_id)
                elif joined is not None and joined.member_id not in before.members \
                        and group.members.get(joined.member_id) is joined:
                    with contextlib.suppress(GroupError):  # it stays when the group cannot turn classic
                        consumer.fence(group, [joined])
            return JoinResult(exc.error_code, request.member_id)
        return JoinResult(ErrorCode.NONE, member.member_id, member.epoch, CONSUMER_PROTOCOL_TYPE,
                          member.classic.protocol_name, "", [])

    def _join(self, group: ConsumerGroup, request: JoinRequest, interval_ms: int) -> ConsumerMember | JoinResult:
        consumer = self._consumer
        if not consumer.migration.classic_may_join:
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Cannot join the consumer group {group.group_id} with the classic protocol because "
                             "the group migration is disabled.")
        unknown = request.member_id == UNKNOWN_MEMBER_ID
        check_storable_member_id(request.member_id)
        if sum(len(name) + len(metadata) for name, metadata in request.protocols) > self._max_record_bytes:
            # Its member record could never be written, nor any later one of the group: refused first,
            # with the error Kafka answers for a record too large.
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR, "The member's protocols are too large to be stored.")
        member_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode() if unknown \
            else request.member_id
        if member_id not in group.members and len(group.members) >= consumer.max_size:
            raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                             f"The consumer group has reached its maximum capacity of {consumer.max_size} members.")
        if not _supports(group, request.protocol_type, [n for n, _ in request.protocols]):
            raise GroupError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"Member {member_id}'s protocols are not supported.")
        if unknown and request.group_instance_id is None and request.version >= 4:
            log.info("classic member without an id joins the consumer group: it rejoins with one",
                     group=group.group_id, member=member_id)
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        try:
            subscription = cp.decode_subscription(request.protocols[0][1])
        except cp.MalformedProtocol as exc:  # Kafka's IllegalStateException here: UNKNOWN_SERVER_ERROR
            raise GroupError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             "Malformed embedded consumer protocol in subscription deserialization.") from exc
        replaces_consumer = _replaces_consumer_member(group, request.group_instance_id, unknown)
        member, changed = self._member(group, member_id, request, unknown)
        if subscription.rack_id is not None:
            member.rack_id = subscription.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        resubscribed = sorted(subscription.topics) != sorted(member.subscribed) or member.regex is not None
        if resubscribed:
            member.subscribed, member.regex, changed = list(subscription.topics), None, True
        member.client_id, member.client_host = request.client_id, request.client_host
        member.classic = ClassicMeta(request.session_timeout_ms, list(request.protocols))
        owned = cp.by_id(subscription.owned, consumer.topics_now())

        def subscribed() -> set[uuid.UUID]:
            return consumer.subscribed_ids(group, member)
        if replaces_consumer and may_downgrade(group, set(), consumer.migration):
            # The last KIP-848 member's instance comes back classic (Kafka's
            # validateOnlineDowngradeWithReplacedMember): the group epoch moves first for a changed
            # subscription or topics no heartbeat has seen yet; the group turns classic, rebalancing if the
            # target is behind the group epoch (so too a target waiting for the assignment interval), else
            # with the member reconciled to the target it took over.
            consumer.bump(group, changed)
            stale = group.assignment_epoch < group.group_epoch
            if not stale:
                reconcile(group, member, owned, subscribed)
            consumer.downgrade(group, set(), rebalance=stale)  # GroupError, undone by join, if it cannot
            return member
        consumer.refresh(group, changed, interval_ms)
        reconcile(group, member, owned, subscribed, resubscribed)
        if member.rebalance_timer is not None:  # a classic member's join and sync timeouts stand in for it
            member.rebalance_timer.cancel()
            member.rebalance_timer = None
        return member

    def _member(self, group: ConsumerGroup, member_id: str, request: JoinRequest,
                unknown: bool) -> tuple[ConsumerMember, bool]:
        """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for a classic member; True if new."""
        instance_id = request.group_instance_id
        if instance_id is None:
            member = group.members.get(member_id)
        else:
            previous = group.static_member(instance_id)
            if not unknown:
                if previous is None:
                    raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
                if previous.member_id != member_id:
                    raise GroupError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {member_id} with instance id {instance_id} was fenced by "
                                     f"member {previous.member_id}.")
                return previous, False
            if previous is not None:  # the instance comes back under a new id: it takes the old one's place
                return self._consumer.replace_static(group, previous, member_id), False
            member = None
        if member is None:
            member = group.members[member_id] = ConsumerMember(member_id, request.client_id, request.client_host,
                                                               instance_id=instance_id)
            log.info("member joins the consumer group using the classic protocol", group=group.group_id,
                     member=member_id)
            return member, True
        return member, False

    # --- SyncGroup, Heartbeat, LeaveGroup ------------------------------------------------------------

    def sync(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> SyncResult:
        group = self._consumer.groups[group_id]
        try:
            member = _classic_member(group, member_id, instance_id, generation_id)
            assert member.classic is not None  # checked by _classic_member
            if protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE or \
                    protocol_name is not None and protocol_name != member.classic.protocol_name:
                return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        except GroupError as exc:
            return SyncResult(exc.error_code)
        # Kafka's throwIfRebalanceInProgress: behind the target's epoch (a member leaving moves only the
        # group epoch), unless still revoking.
        if group.assignment_epoch > member.epoch and member.state != MemberState.UNREVOKED_PARTITIONS:
            self._arm(group, member, "join", member.rebalance_timeout_ms, if_absent=True)
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member.cancel_classic_timer("sync")
        self._consumer.arm_session(group, member, member.classic.session_timeout_ms)
        held = cp.by_name(member.assigned, self._consumer.topics_now())
        return SyncResult(ErrorCode.NONE, protocol_type, protocol_name,
                          cp.encode_assignment(cp.version_of(member.classic.protocols[0][1]), held))

    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
        group = self._consumer.groups[group_id]
        try:
            member = _classic_member(group, member_id, instance_id, generation_id)
        except GroupError as exc:
            return exc.error_code
        assert member.classic is not None  # checked by _classic_member
        self._consumer.arm_session(group, member, member.classic.session_timeout_ms)
        # The target's epoch, as Kafka 4.3.1: a member leaving moves only the group epoch, and the
        # others are told once a join or a KIP-848 heartbeat has recomputed the target.
        if member.epoch < group.assignment_epoch or member.state == MemberState.UNREVOKED_PARTITIONS or (
                member.state == MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member)):
            self._arm(group, member, "join", member.rebalance_timeout_ms, if_absent=True)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    async def leave(self, group_id: str, leaving: list[tuple[str, str | None]]) -> tuple[ErrorCode, list[ErrorCode]]:
        group = self._consumer.groups[group_id]
        errors: list[ErrorCode] = []
        gone: list[ConsumerMember] = []
        for member_id, instance_id in leaving:
            member = group.members.get(member_id) if instance_id is None else group.static_member(instance_id)
            if member is None:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
            elif instance_id is not None and member_id != UNKNOWN_MEMBER_ID and member.member_id != member_id:
                errors.append(ErrorCode.FENCED_INSTANCE_ID)
            else:
                errors.append(ErrorCode.NONE)
                if member not in gone:
                    gone.append(member)
        if gone:
            log.info("members left the consumer group through LeaveGroup", group=group_id,
                     members=[m.member_id for m in gone])
            try:
                self._consumer.fence(group, gone)
                await self._consumer.persist(group_id)
            except GroupError as exc:
                return exc.error_code, []
        return ErrorCode.NONE, errors

    # --- timers ------------------------------------------------------------------------------------

    def _arm(self, group: ConsumerGroup, member: ConsumerMember, kind: str, timeout_ms: int, *,
             if_absent: bool = False) -> None:
        """The JoinGroup timeout (told to rejoin) or SyncGroup timeout (joined): past it the member is fenced."""
        if if_absent and kind in member.classic_timers:
            return
        member.cancel_classic_timer(kind)
        member.classic_timers[kind] = asyncio.get_running_loop().call_later(
            max(timeout_ms, 0) / 1000, self._expire, group, member, kind)

    def _expire(self, group: ConsumerGroup, member: ConsumerMember, kind: str) -> None:
        member.classic_timers.pop(kind, None)
        self._consumer.expire(group, member, f"classic {kind}")


def _replaces_consumer_member(group: ConsumerGroup, instance_id: str | None, unknown: bool) -> bool:
    """Whether the join replaces a static member that speaks KIP-848's protocol."""
    previous = None if instance_id is None or not unknown else group.static_member(instance_id)
    return previous is not None and previous.classic is None


def _supports(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
    """Kafka's supportsClassicProtocols: type "consumer" and a protocol every classic member offers."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    classic = [m.classic for m in group.members.values() if m.classic is not None]
    return any(all(any(n == name for n, _ in c.protocols) for c in classic) for name in names)


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None,
                    generation_id: int) -> ConsumerMember:
    """Kafka's validateConsumerGroupMember, then the member must speak the classic protocol and send its epoch."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of {group.group_id}.")
    else:
        member = group.static_member(instance_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
        if member.member_id != member_id:
            raise GroupError(ErrorCode.FENCED_INSTANCE_ID, f"Instance id {instance_id} is not {member_id}'s.")
    if member.classic is None:
        raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} does not use the classic protocol.")
    if generation_id != member.epoch:
        raise GroupError(ErrorCode.ILLEGAL_GENERATION,
                         f"The request generation id {generation_id} is not equal to the member epoch "
                         f"{member.epoch} of member {member_id}.")
    return member
