"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete, retention, and the broker-side API
that later features use to trim what every group has consumed.

Commits are checked as Kafka's ClassicGroup.validateOffsetCommit checks them:

- unknown group: generation < 0 (admin or "simple" consumers, no membership) creates an Empty group
  without a protocol type and commits; otherwise GROUP_ID_NOT_FOUND (v9+) / ILLEGAL_GENERATION;
- Dead: COORDINATOR_NOT_AVAILABLE;
- generation < 0 on an Empty group: accepted (an admin resetting offsets);
- otherwise the member must exist (UNKNOWN_MEMBER_ID; a static member under another id:
  FENCED_INSTANCE_ID) and the generation match (ILLEGAL_GENERATION); a group completing a rebalance
  answers REBALANCE_IN_PROGRESS. Commits are accepted while PreparingRebalance (consumers commit
  before they rejoin), and refresh the member's session;
- metadata longer than offset.metadata.max.bytes (4096): OFFSET_METADATA_TOO_LARGE for that partition.

Retention (Kafka's OffsetExpirationCondition, checked every offsets.retention.check.interval.ms):
an offset with an explicit expire timestamp (OffsetCommit v2-v4 RetentionTimeMs) expires then;
otherwise after offsets.retention.minutes counted from when an Empty group became empty, from the
commit for a group without a protocol type, and from the commit for topics a Stable consumer group
no longer subscribes to. Groups with members keep the offsets of topics they consume. Expired
offsets get tombstones; an Empty group left without offsets is deleted (a group tombstone). A
partition with a TxnOffsetCommit offset pending keeps its committed offset until that transaction
ends, and a group with one is not deleted (Kafka's cleanupExpiredOffsets).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import structlog

from broker.group.group import Group, GroupError, GroupState, Member, now_ms
from broker.group.offsets_store import CommittedOffset, OffsetsStore
from broker.group.requests import MemberCheck
from protocol.errors import ErrorCode

log = structlog.get_logger("groups")

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE,
                                              GroupState.COMPLETING_REBALANCE, GroupState.STABLE, GroupState.DEAD)
NO_RETENTION = -1
MAX_TIMESTAMP_MS = 2**63 - 1


class MinCommittedOffset(NamedTuple):
    """The smallest offset any group committed for a partition (None: no group has one), and the
    groups with live members that consume the partition's topic (or committed for the partition).
    A group listed there without an entry in `committed_offsets` has not committed yet."""

    offset: int | None
    active_groups: tuple[str, ...]


class OffsetCommit(NamedTuple):
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(frozen=True)
class OffsetSettings:
    metadata_max_bytes: int  # offset.metadata.max.bytes
    retention_ms: int  # offsets.retention.minutes
    check_interval_ms: int  # offsets.retention.check.interval.ms


class ServedGroups(Protocol):
    """What offsets need of the group registry: the groups, and whether this broker serves one now."""

    active: bool
    groups: dict[str, Group]

    def check_active(self) -> None: ...

    def check_served(self, group_id: str) -> None: ...

    def forget_if_unused(self, group: Group) -> None: ...

    def is_share(self, group_id: str) -> bool: ...

    consumer_check: Callable[[str, MemberCheck], bool]
    consumer_topics: Callable[[str], set[str] | None]
    consumer_ids: Callable[[], list[str]]
    consumer_drop_empty: Callable[[str], bool]


# Told the (topic, partition) keys of every stored commit (broker/group/trim.py).
CommitListener = Callable[[Iterable[tuple[str, int]]], None]


class OffsetManager:
    def __init__(self, settings: OffsetSettings, store: OffsetsStore, groups: ServedGroups, *,
                 member_seen: Callable[[Group, Member], None], stop_timers: Callable[[Group], None]) -> None:
        """`member_seen` pushes a member's session out (a commit is a sign of life); `stop_timers` stops
        those of a group that retention deletes."""
        self.store = store
        self._groups = groups
        self._member_seen = member_seen
        self._stop_timers = stop_timers
        self.commit_listeners: list[CommitListener] = []
        self.metadata_max_bytes = settings.metadata_max_bytes
        self.retention_ms = settings.retention_ms
        self.check_interval_ms = settings.check_interval_ms

    # --- OffsetCommit ------------------------------------------------------------------------------

    async def commit(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                     retention_time_ms: int, commits: list[OffsetCommit], version: int,
                     producer: tuple[int, int] | None = None,
                     verification_guard: object | None = None) -> list[ErrorCode]:
        """One error per commit (NONE or OFFSET_METADATA_TOO_LARGE); GroupError for the whole request.
        `producer` (id, epoch): TxnOffsetCommit, whose offsets count once the transaction commits;
        `verification_guard`: the offsets partition's KIP-890 guard its append presents."""
        groups = self._groups
        groups.check_active()
        groups.check_served(group_id)
        group = groups.groups.get(group_id)
        created = False
        if group is None and groups.consumer_check(group_id, MemberCheck(
                member_id, generation_id, version=version if producer is None else -1,
                transactional=producer is not None, instance_id=group_instance_id,
                partitions=tuple((c.topic, c.partition) for c in commits if self._storable(c)))):
            return await self._store_commits(group_id, None, False, retention_time_ms, commits, producer,
                                             verification_guard)
        if group is None:
            if groups.is_share(group_id):  # one id, one type: Kafka answers GROUP_ID_NOT_FOUND
                raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a classic group.")
            if generation_id >= 0:
                if version >= 9:
                    raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
                raise GroupError(ErrorCode.ILLEGAL_GENERATION, f"group {group_id} does not exist")
            group = groups.groups[group_id] = Group(group_id)
            created = True
        member = self._validate_commit(group, generation_id, member_id, group_instance_id)
        if member is not None and group.is_in(STABLE, PREPARING):
            self._member_seen(group, member)
        return await self._store_commits(group_id, group, created, retention_time_ms, commits, producer,
                                         verification_guard)

    async def _store_commits(self, group_id: str, group: Group | None, created: bool, retention_time_ms: int,
                             commits: list[OffsetCommit], producer: tuple[int, int] | None,
                             verification_guard: object | None) -> list[ErrorCode]:
        groups = self._groups
        now = now_ms()
        # v2-v4 carry any int64 here: a time past the int64 range means never
        expire = None if retention_time_ms == NO_RETENTION else min(now + retention_time_ms, MAX_TIMESTAMP_MS)
        errors = []
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for c in commits:
            if not self._storable(c):
                errors.append(ErrorCode.OFFSET_METADATA_TOO_LARGE)
                continue
            errors.append(ErrorCode.NONE)
            accepted[(c.topic, c.partition)] = CommittedOffset(c.offset, c.leader_epoch, c.metadata or "", now, expire)
        try:
            if producer is not None:
                await self.store.commit_transactional(group_id, accepted, *producer, verification_guard)
                return errors
            await self.store.commit(group_id, accepted)
        except GroupError:
            if created and group is not None:
                groups.forget_if_unused(group)
            raise
        for listener in self.commit_listeners:
            listener(accepted.keys())
        return errors

    def _storable(self, commit: OffsetCommit) -> bool:
        """Whether the commit's metadata fits `offset.metadata.max.bytes` (else OFFSET_METADATA_TOO_LARGE)."""
        return commit.metadata is None or len(commit.metadata) <= self.metadata_max_bytes

    @staticmethod
    def _validate_commit(group: Group, generation_id: int, member_id: str,
                         group_instance_id: str | None) -> Member | None:
        if group.is_in(DEAD):
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"group {group.group_id} is being deleted")
        if generation_id < 0 and group.is_in(EMPTY):
            return None  # an admin or a consumer without group membership
        member = None
        if generation_id >= 0 or member_id or group_instance_id is not None:
            member = group.validate_member(member_id, group_instance_id)
            if generation_id != group.generation_id:
                raise GroupError(ErrorCode.ILLEGAL_GENERATION,
                                 f"generation {generation_id} is not the group's {group.generation_id}")
        else:
            raise GroupError(ErrorCode.UNKNOWN_MEMBER_ID, "commits without a member are only taken by empty groups")
        if group.is_in(COMPLETING):
            raise GroupError(ErrorCode.REBALANCE_IN_PROGRESS, f"group {group.group_id} is completing a rebalance")
        return member

    # --- OffsetFetch -------------------------------------------------------------------------------

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None, member_id: str = "",
              member_epoch: int = -1) -> list[tuple[str, list[tuple[int, CommittedOffset | None]]]]:
        """Committed offsets per topic; None entries for partitions without one. `topics=None` means
        every partition the group has an offset for. A consumer group's member (OffsetFetch v9+) is
        checked: UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH."""
        self._groups.check_active()
        self._groups.check_served(group_id)
        group = self._groups.groups.get(group_id)
        consumer = group is None and self._groups.consumer_check(group_id, MemberCheck(member_id, member_epoch,
                                                                                             fetch=True))
        offsets = self.store.group_offsets(group_id) if consumer or (group is not None and not group.is_in(DEAD)) \
            else {}
        if topics is None:
            by_topic: dict[str, list[tuple[int, CommittedOffset | None]]] = {}
            for (topic, partition), committed in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append((partition, committed))
            return list(by_topic.items())
        return [(topic, [(p, offsets.get((topic, p))) for p in partitions]) for topic, partitions in topics]

    # --- OffsetDelete ------------------------------------------------------------------------------

    async def delete(self, group_id: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """Kafka's OffsetDelete: GROUP_SUBSCRIBED_TO_TOPIC for topics the group consumes;
        GroupError(GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP) for the request. A partition with a committed
        or a pending transactional offset gets a tombstone, which takes the pending one too."""
        self._groups.check_active()
        self._groups.check_served(group_id)
        group = self._groups.groups.get(group_id)
        consumer_topics = self._groups.consumer_topics(group_id) if group is None else None
        if consumer_topics is not None:  # a KIP-848 group: the topics its members subscribe to stay
            subscribed: Callable[[str], bool] = consumer_topics.__contains__
        elif group is None or group.is_in(DEAD):
            raise GroupError(ErrorCode.GROUP_ID_NOT_FOUND, f"group {group_id} does not exist")
        elif group.is_in(STABLE, PREPARING, COMPLETING) and not group.uses_consumer_protocol:
            raise GroupError(ErrorCode.NON_EMPTY_GROUP, f"group {group_id} has members and is not a consumer group")
        else:
            subscribed = group.is_subscribed_to_topic
        results: dict[tuple[str, int], ErrorCode] = {}
        doomed = []
        for topic, partition in partitions:
            if subscribed(topic):
                results[(topic, partition)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            results[(topic, partition)] = ErrorCode.NONE
            stored = self.store.get(group_id, topic, partition) is not None or \
                self.store.has_pending(group_id, topic, partition)  # Kafka tombstones a pending one too
            if stored and (topic, partition) not in doomed:
                doomed.append((topic, partition))
        await self.store.delete(group_id, doomed)
        if doomed:
            log.info("deleted committed offsets", group=group_id, partitions=len(doomed))
        return results

    # --- retention ---------------------------------------------------------------------------------

    async def expire_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.check_interval_ms / 1000)
            try:
                await self.expire()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("offset expiration round failed", error=repr(exc))

    async def expire(self, now: int | None = None) -> int:
        """One retention pass; returns how many offsets expired."""
        groups = self._groups
        now = now_ms() if now is None else now
        removed = 0
        for group_id in sorted(set(groups.groups) | set(self.store.groups_with_offsets()) | set(groups.consumer_ids())):
            group = groups.groups.get(group_id)
            if group is None and groups.active:
                removed += await self._expire_consumer_group(group_id, now)
            if group is None or group.is_in(DEAD) or not groups.active:
                continue
            base = self._expiry_base(group)
            offsets = self.store.group_offsets(group_id)
            pending = self.store.pending_partitions(group_id)
            expired = [tp for tp, c in offsets.items()
                       if base is not None and not group.is_subscribed_to_topic(tp[0])
                       and tp not in pending and self._expired(c, base, now)]
            drop_group = (group.is_in(EMPTY) and not group.members and not group.pending_members
                          and len(expired) == len(offsets) and not pending)
            if not expired and not drop_group:
                continue
            if drop_group:
                group.transition_to(DEAD)
                self._stop_timers(group)
                del groups.groups[group_id]
            try:
                await self.store.delete(group_id, expired, group_tombstone=drop_group)
            except GroupError as exc:
                log.warning("could not expire offsets", group=group_id, error=exc.error_code.name)
                if drop_group and group_id not in groups.groups:
                    groups.groups[group_id] = Group(group_id, generation_id=group.generation_id,
                                                    protocol_type=group.protocol_type)
                continue
            removed += len(expired)
            log.info("expired committed offsets", group=group_id, offsets=len(expired), group_deleted=drop_group)
        return removed

    async def _expire_consumer_group(self, group_id: str, now: int) -> int:
        """Kafka's ConsumerGroup rules: offsets of topics the group does not subscribe to (all, once it is
        empty) expire by retention from their commit; an empty group left without offsets is deleted."""
        subscribed = self._groups.consumer_topics(group_id)
        if subscribed is None:
            return 0
        offsets = self.store.group_offsets(group_id)
        pending = self.store.pending_partitions(group_id)
        expired = [tp for tp, c in offsets.items() if tp[0] not in subscribed and tp not in pending
                   and self._expired(c, lambda c: c.commit_timestamp, now)]
        if expired:
            try:
                await self.store.delete(group_id, expired)
            except GroupError as exc:
                log.warning("could not expire offsets", group=group_id, error=exc.error_code.name)
                return 0
            log.info("expired committed offsets", group=group_id, offsets=len(expired))
        # Asked after the tombstones' write: an offset committed meanwhile keeps the group.
        if not self.store.has_offsets(group_id) and not self.store.pending_partitions(group_id) \
                and self._groups.consumer_drop_empty(group_id):
            log.info("deleted empty consumer group without offsets", group=group_id)
        return len(expired)

    def _expiry_base(self, group: Group) -> Callable[[CommittedOffset], int] | None:
        """Kafka's ClassicGroup.offsetExpirationCondition: what retention counts from, or None."""
        if group.protocol_type is None:
            return lambda c: c.commit_timestamp
        if group.is_in(EMPTY):
            since = group.state_timestamp_ms
            return lambda c: since if since is not None else c.commit_timestamp
        if group.uses_consumer_protocol and group.subscribed_topics is not None and group.is_in(STABLE):
            return lambda c: c.commit_timestamp
        return None

    def _expired(self, committed: CommittedOffset, base: Callable[[CommittedOffset], int], now: int) -> bool:
        if committed.expire_timestamp is not None:
            return now >= committed.expire_timestamp
        return now - base(committed) >= self.retention_ms

    # --- the broker-side API -----------------------------------------------------------------------

    def committed_offsets(self, topic: str, partition: int) -> dict[str, int]:
        return {group: c.offset for group, c in sorted(self.store.partition_offsets(topic, partition).items())}

    def min_committed_offset(self, topic: str, partition: int) -> MinCommittedOffset:
        committed = self.committed_offsets(topic, partition)
        active = sorted(group_id for group_id, group in self._groups.groups.items()
                        if group.members and not group.is_in(DEAD)
                        and (group.is_subscribed_to_topic(topic) or group_id in committed))
        return MinCommittedOffset(min(committed.values()) if committed else None, tuple(active))
