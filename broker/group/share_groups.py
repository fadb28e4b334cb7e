"""The share groups (KIP-932) this coordinator serves, beside its classic groups: ShareGroupHeartbeat's
membership, epochs and assignment, member sessions, and what listing, describing and deleting need.

One group id has one type: a heartbeat for a classic group's id is GROUP_ID_NOT_FOUND ("is not a share
group"), as Kafka's coordinator answers. The heartbeat follows Kafka's GroupMetadataManager: epoch 0
joins (SubscribedTopicNames required), -1 leaves, any other epoch must be the member's own or the one
before (a lost answer), else FENCED_MEMBER_EPOCH; a member that is not known is UNKNOWN_MEMBER_ID, a
group that is not known with an epoch other than 0 GROUP_ID_NOT_FOUND. The group epoch moves when a
member joins, leaves, expires or changes its subscription, or the subscribed topics change (created,
deleted, grown); the target assignment is then recomputed (share_group.assign) and each member takes
its part at its next heartbeat with the new epoch.

Each state change is written to __consumer_offsets as Kafka's records (share_records.py) before the
heartbeat is answered; a failed write answers it with the coordinator's error. A restarted or failed-over
coordinator rebuilds the groups from those records (epochs, members, target and current assignments) and
restarts their members' sessions, so the members carry on without rejoining.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from broker.coordinator_partitions import Spawn
from broker.group import consumer_records, share_records
from broker.group.group import GroupError
from broker.group.record_log import AppendRecords, GroupRecordLog
from broker.group.share_group import LEAVE_EPOCH, Assignment, ShareGroup, ShareMember, assign
from broker.group_configs import MemberTimeouts
from protocol.errors import ErrorCode

log = structlog.get_logger("groups")

# A subscribed topic as the coordinator sees it: (id, partition count), or None when it does not exist.
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]


@dataclass(frozen=True)
class ShareHeartbeat:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None
    subscribed: list[str] | None
    client_id: str
    client_host: str


@dataclass(frozen=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    assignment: Assignment | None  # None: unchanged since the member's last heartbeat

    @property
    def left(self) -> bool:
        return self.member_epoch == LEAVE_EPOCH


class ShareGroups:
    def __init__(self, max_size: int, topic: TopicLookup, is_classic: Callable[[str], bool], append: AppendRecords,
                 spawn: Spawn) -> None:
        """`topic` resolves a subscribed name; `is_classic` says whether the id is a classic group's (or a
        KIP-848 consumer group's); `append` writes a group's records, `spawn` runs the writes a timer's
        removal of a member makes."""
        self.groups: dict[str, ShareGroup] = {}
        self.records = GroupRecordLog("share", self._records_now, share_records.group_id_of,
                                      (share_records.WRITE_ORDER, share_records.TOMBSTONE_ORDER), append, spawn)
        # Told (group id, member id) when a member leaves or expires (what it holds is released: broker/share/).
        self.member_left: list[Callable[[str, str], None]] = []
        self._max_size = max_size
        self._topic = topic
        self._is_classic = is_classic

    # --- ShareGroupHeartbeat -----------------------------------------------------------------------

    def heartbeat(self, request: ShareHeartbeat, timeouts: MemberTimeouts) -> HeartbeatAnswer:
        _check_request(request)
        group_id, member_id, epoch = request.group_id, request.member_id, request.member_epoch
        if epoch == LEAVE_EPOCH:
            return self._leave(group_id, member_id)
        group = self._group(group_id, create=epoch == 0)
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {member_id} is not a member of group {group_id}.")
            if len(group.members) >= self._max_size:
                raise GroupError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                 f"The share group has reached its maximum capacity of {self._max_size} members.")
            member = ShareMember(member_id, request.client_id, request.client_host)
            log.info("member joins the share group", group=group_id, member=member_id)
        else:
            _check_epoch(member, epoch)
        before = {t: set(p) for t, p in member.assignment.items()}
        changed = member_id not in group.members
        group.members[member_id] = member
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.subscribed is not None and list(request.subscribed) != member.subscribed:
            member.subscribed = list(request.subscribed)
            changed = True
        topics = self._subscribed_topics(group)
        if changed or topics != group.topics:
            group.topics = topics
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
        if member.epoch != group.assignment_epoch:  # reconcile: share groups take the target at once
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
            member.assignment = {t: set(p) for t, p in group.target.get(member_id, {}).items()}
        self._arm_session(group, member, timeouts.session_timeout_ms)
        show = epoch == 0 or member.assignment != before
        return HeartbeatAnswer(member_id, member.epoch, member.assignment if show else None)

    def _leave(self, group_id: str, member_id: str) -> HeartbeatAnswer:
        group = self._group(group_id, create=False)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group_id}.")
        self._remove(group, member)
        log.info("member left the share group", group=group_id, member=member_id)
        return HeartbeatAnswer(member_id, LEAVE_EPOCH, None)

    def _group(self, group_id: str, *, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if self._is_classic(group_id):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")
        if not create:
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {group_id} not found.")
        group = self.groups[group_id] = ShareGroup(group_id)
        return group

    def _subscribed_topics(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        found = {}
        for name in sorted(group.subscribed_names()):
            if (topic := self._topic(name)) is not None:
                found[name] = topic
        return found

    def _compute_target(self, group: ShareGroup) -> None:
        self.records.changed_whole(group.group_id)
        group.target = assign({m.member_id: m.subscribed for m in group.members.values()}, group.topics,
                              {m: a for m, a in group.target.items() if m in group.members})
        group.assignment_epoch = group.group_epoch

    def _remove(self, group: ShareGroup, member: ShareMember) -> None:
        self.records.changed_whole(group.group_id)
        if member.session_timer is not None:
            member.session_timer.cancel()
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.topics = self._subscribed_topics(group)
        group.group_epoch += 1
        self._compute_target(group)
        for listener in self.member_left:
            listener(group.group_id, member.member_id)

    # --- sessions ----------------------------------------------------------------------------------

    def _arm_session(self, group: ShareGroup, member: ShareMember, timeout_ms: int) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()
        member.session_timer = asyncio.get_running_loop().call_later(
            timeout_ms / 1000, self._expire, group, member)

    def _expire(self, group: ShareGroup, member: ShareMember) -> None:
        if group.members.get(member.member_id) is member:
            member.session_timer = None
            self._remove(group, member)
            log.info("share group member's session expired", group=group.group_id, member=member.member_id)
            self.records.persist_later(group.group_id)

    def stop(self) -> None:
        self.unload(lambda group_id: True)

    def unload(self, doomed: Callable[[str], bool]) -> None:
        """Forget the groups `doomed` names (their __consumer_offsets partition is led elsewhere now)."""
        for group_id in [g for g in self.groups if doomed(g)]:
            for member in self.groups.pop(group_id).members.values():
                if member.session_timer is not None:
                    member.session_timer.cancel()
        self.records.unload(doomed)

    # --- __consumer_offsets -------------------------------------------------------------------------

    def _records_now(self, group_id: str, member_id: str | None) -> share_records.Records:
        group = self.groups.get(group_id)
        return {} if group is None else share_records.group_records(group, member_id)

    async def persist(self, group_id: str, member_id: str | None = None) -> None:
        """Write what changed in the group since its last write (record_log.GroupRecordLog.persist)."""
        await self.records.persist(group_id, member_id)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """A share group record at load (groups are rebuilt from them by `loaded`)."""
        self.records.replay(key, value)

    def loaded(self, session_timeout_ms: int, taken: Callable[[str], bool]) -> list[str]:
        """Rebuild the groups replayed since the last load (not those whose id `taken` says another kind
        of group holds); their members' sessions start now, as Kafka's coordinator starts them."""
        rebuilt = []
        for group_id, found in list(self.records.written.items()):
            if group_id in self.groups or taken(group_id):
                continue
            try:
                made = share_records.group_from_records(group_id, found)
            except Exception as exc:  # a malformed record: the group's members rejoin
                log.error("share group records not readable", group=group_id, error=repr(exc))
                made = None
            if made is None:
                continue
            group, metadata_hash = made
            self.groups[group_id] = group
            topics = self._subscribed_topics(group)
            # Topics changed while away: left unseen, so that the next heartbeat bumps the group epoch.
            group.topics = topics if consumer_records.topics_hash(topics) == metadata_hash else {}
            for member in group.members.values():
                self._arm_session(group, member, session_timeout_ms)
            rebuilt.append(group_id)
        return rebuilt

    # --- the admin APIs ----------------------------------------------------------------------------

    def ensure(self, group_id: str) -> ShareGroup:
        """AlterShareGroupOffsets: the group, made (Empty, and written) if it does not exist; GroupError for
        a classic group's id."""
        made = group_id not in self.groups
        group = self._group(group_id, create=True)
        if made:
            self.records.persist_later(group_id)
        return group

    def existing(self, group_id: str) -> ShareGroup:
        return self._group(group_id, create=False)

    # --- listing, describing, deleting -------------------------------------------------------------

    def live(self) -> list[ShareGroup]:
        return [g for g in self.groups.values() if not g.dead]

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: only an Empty one (its records' tombstones are the caller's to
        write, with `persist`)."""
        group = self.groups[group_id]
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        group.dead = True
        del self.groups[group_id]
        log.info("deleted share group", group=group_id)
        return ErrorCode.NONE


def _check_request(request: ShareHeartbeat) -> None:
    """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid (a blank string counts as empty)."""
    for value, what in ((request.member_id, "MemberId"), (request.group_id, "GroupId"),
                        (request.rack_id, "RackId")):
        if value is not None and not value.strip():
            raise GroupError(ErrorCode.INVALID_REQUEST, f"{what} can't be empty.")
    if request.member_epoch == 0:
        if not request.subscribed:
            raise GroupError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_EPOCH:
        raise GroupError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, epoch: int) -> None:
    if epoch > member.epoch:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a greater member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.epoch}). The member must abandon all its partitions "
                         "and rejoin.")
    if epoch < member.epoch and epoch != member.previous_epoch:
        raise GroupError(ErrorCode.FENCED_MEMBER_EPOCH,
                         f"The share group member has a smaller member epoch ({epoch}) than the one known by "
                         f"the group coordinator ({member.epoch}), and it does not match the previous member "
                         f"epoch ({member.previous_epoch}). The member must abandon all its partitions and "
                         "rejoin.")
