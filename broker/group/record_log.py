"""A group's records in `__consumer_offsets` as the log holds them, for the group kinds whose state is a
set of keyed records (KIP-848 consumer groups: consumer_records.py; share groups: share_records.py).

Each group's records are kept as a map key bytes -> value bytes (the latest of each key, what compaction
keeps): a state change writes the difference, in the order Kafka's coordinator writes its records, and a
load rebuilds the groups from the maps replayed.
"""

from __future__ import annotations

import hashlib
import struct
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar, cast

import structlog

from broker.aio import KeyedLocks
from broker.coordinator_partitions import Spawn
from broker.group.group import GroupError
from broker.group.member_group import MemberGroup
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import (
    ApiMessage,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberValue,
)

log = structlog.get_logger("groups")

Records = dict[bytes, bytes]  # key -> value, the latest of each key
# OffsetsStore.append: writes one group's records as one batch (GroupError with the coordinator's error).
AppendRecords = Callable[[str, Sequence[tuple[bytes, bytes | None]]], Awaitable[int]]
# The group's records now (empty when it is gone); with a member id, only the group's own and that member's.
RecordsNow = Callable[[str, "str | None"], Records]

_I16 = struct.Struct(">h")
_VERSION = _I16.pack(0)


def record_type(key: bytes) -> int:
    if len(key) < 2:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"record key of {len(key)} bytes has no record type")
    return _I16.unpack_from(key, 0)[0]


def changes(written: Records, now: Records, write_order: Mapping[int, int], tombstone_order: Mapping[int, int],
            *, whole: bool = True) -> list[tuple[bytes, bytes | None]]:
    """The records that turn `written` into `now` (new or changed values, and when `now` is the `whole`
    group, tombstones for keys gone), sorted by their record type's rank in Kafka's order."""
    out: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in now.items() if written.get(k) != v]
    if whole:
        out += [(k, None) for k in written if k not in now]
    out.sort(key=lambda kv: (write_order if kv[1] is not None else tombstone_order)[record_type(kv[0])])
    return out


# The layouts both kinds share: a key is its int16 record type then the key v0, a value its int16
# version 0 then the value v0; assignments are topic id -> partitions.
def key_bytes(record_type: int, cls: type[ApiMessage], group_id: str, member_id: str | None = None) -> bytes:
    fields = {"group_id": group_id} if member_id is None else {"group_id": group_id, "member_id": member_id}
    return _I16.pack(record_type) + cls[0].encode(cls(**fields))


def value_bytes(value: ApiMessage) -> bytes:
    return _VERSION + type(value)[0].encode(value)


def topic_partitions(assignment: Mapping[uuid.UUID, set[int]], cls) -> list:
    return [cls(topic_id=t, partitions=sorted(p)) for t, p in sorted(assignment.items()) if p]


def assignment_of(topics) -> dict[uuid.UUID, set[int]]:
    found: dict[uuid.UUID, set[int]] = {}
    for t in topics:
        if t.partitions:
            found.setdefault(t.topic_id, set()).update(t.partitions)
    return found


def topics_hash(topics: dict[str, tuple[uuid.UUID, int]]) -> int:
    """Ebb's hash of a group's subscribed topics (names, ids, partition counts), as a signed int64: a load
    that finds another hash sees the topics changed while the coordinator was away. Not Kafka's function."""
    if not topics:
        return 0
    digest = hashlib.blake2b(digest_size=8)
    for name, (topic_id, partitions) in sorted(topics.items()):
        digest.update(f"{name}\0{topic_id}\0{partitions}\0".encode())
    return int.from_bytes(digest.digest(), "big", signed=True)


def value_body(record_type: int, raw: bytes) -> memoryview:
    """A value's v0 body (any newer version only adds tagged fields, read as v0's)."""
    if len(raw) < 2 or _I16.unpack_from(raw, 0)[0] < 0:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"record value of type {record_type} has no version")
    return memoryview(raw)[2:]


_G = TypeVar("_G", bound=MemberGroup)
_M = TypeVar("_M")
# The value classes GroupKind builds and reads itself: the group's epoch record, a member's target.
MetadataValue = type[ConsumerGroupMetadataValue] | type[ShareGroupMetadataValue]
TargetMemberValue = type[ConsumerGroupTargetAssignmentMemberValue] | type[ShareGroupTargetAssignmentMemberValue]


class _GroupKey(Protocol):  # what every key class of these records holds
    group_id: str


class _MemberKey(_GroupKey, Protocol):  # and a member record's key
    member_id: str


class GroupKind(ABC, Generic[_G, _M]):
    """One kind's records. Consumer and share groups write the same five, numbered apart and each with
    its own classes: the group's epoch and its topics' hash, its target's epoch, each member's target,
    and each member's subscription and current assignment. A kind's module names its record types and
    classes and writes and reads the fields only it has; what both share is here: the keys, the order
    Kafka writes the records in, the records a group makes, and the walk that reads a group back."""

    def __init__(self, *, name: str, keys: Mapping[int, type[ApiMessage]], group_metadata: int,
                 member_metadata: int, target_metadata: int, target_member: int, current_assignment: int,
                 metadata_value: MetadataValue, target_member_value: TargetMemberValue,
                 new_group: Callable[[str], _G], new_member: Callable[[str], _M]) -> None:
        """`name` names the groups in logs; `keys`: record type -> its key class (every type the kind
        reads back, not only the five it writes); one argument names each written record's type;
        `metadata_value` and `target_member_value` are the two value classes built and read here;
        `new_member` makes a member whose fields its records fill in."""
        self.name = name
        self.keys = keys
        self.group_metadata, self.member_metadata = group_metadata, member_metadata
        self.target_metadata, self.target_member = target_metadata, target_member
        self.current_assignment = current_assignment
        self.metadata_value, self.target_member_value = metadata_value, target_member_value
        self.new_group, self.new_member = new_group, new_member
        # The order Kafka's coordinator writes them in: a member's tombstones (current assignment, target,
        # subscription), then subscriptions, the group epoch, targets, the target epoch and current
        # assignments, then the group's own tombstones.
        self.write_order = {self.member_metadata: 0, self.group_metadata: 1, self.target_member: 2,
                            self.target_metadata: 3, self.current_assignment: 4}
        # (6 is left for a kind's own group record between them: share groups' type 15.)
        self.tombstone_order = {self.current_assignment: -3, self.target_member: -2, self.member_metadata: -1,
                                self.target_metadata: 5, self.group_metadata: 7}

    @abstractmethod
    def target_metadata_of(self, group: _G) -> ApiMessage:
        """The value of the group's target metadata record (the target assignment's epoch)."""

    @abstractmethod
    def member_metadata_of(self, member: _M) -> ApiMessage:
        """The value of the member's metadata record (its subscription and client)."""

    @abstractmethod
    def current_assignment_of(self, member: _M) -> ApiMessage:
        """The value of the member's current assignment record (its epochs and partitions)."""

    @abstractmethod
    def read_target_metadata(self, group: _G, body: memoryview) -> None:
        """Sets the group's fields from its target metadata record's value."""

    @abstractmethod
    def read_member_metadata(self, member: _M, body: memoryview) -> None:
        """Sets the member's fields from its member metadata record's value."""

    @abstractmethod
    def read_current_assignment(self, member: _M, body: memoryview) -> None:
        """Sets the member's fields from its current assignment record's value."""

    def own_records(self, group: _G) -> Records:
        """The group records only this kind writes (none unless it says), written after the five and
        tombstoned with the group."""
        return {}

    def read_own(self, group: _G, record_type: int, body: memoryview) -> None:
        """Sets the group's fields from one of its own records (`own_records`); other types are skipped."""

    def key(self, record_type: int, group_id: str, member_id: str | None = None) -> bytes:
        return key_bytes(record_type, self.keys[record_type], group_id, member_id)

    def group_records(self, group: _G, only: str | None = None) -> Records:
        """Every record that describes the group now; with `only`, the group's own and that member's."""
        gid = group.group_id
        members = group.members if only is None else {only: group.members[only]} if only in group.members else {}
        targets = group.target if only is None else {only: group.target[only]} if only in group.target else {}
        metadata = self.metadata_value(epoch=group.group_epoch, metadata_hash=topics_hash(group.topics))
        found: Records = {self.key(self.group_metadata, gid): value_bytes(metadata),
                          self.key(self.target_metadata, gid): value_bytes(self.target_metadata_of(group))}
        partitions = self.target_member_value.TopicPartition
        for member_id, target in targets.items():
            found[self.key(self.target_member, gid, member_id)] = value_bytes(
                self.target_member_value(topic_partitions=topic_partitions(target, partitions)))
        for member_id, member in members.items():
            found[self.key(self.member_metadata, gid, member_id)] = value_bytes(self.member_metadata_of(member))
            found[self.key(self.current_assignment, gid, member_id)] = value_bytes(self.current_assignment_of(member))
        found.update(self.own_records(group))
        return found

    def group_id_of(self, key: bytes) -> str:
        return cast(_GroupKey, self.keys[record_type(key)][0].decode(memoryview(key)[2:])).group_id

    def member_id_of(self, key: bytes) -> str:
        return cast(_MemberKey, self.keys[record_type(key)][0].decode(memoryview(key)[2:])).member_id

    def group_from_records(self, group_id: str, found: Records) -> tuple[_G, int] | None:
        """The group its records describe (its topics left to the caller) and its topics' hash; None
        without its group epoch record (tombstoned or never written)."""
        group = self.new_group(group_id)
        metadata_hash = 0
        seen_epoch = False
        for key, raw in found.items():
            key_type = record_type(key)
            body = value_body(key_type, raw)
            if key_type == self.group_metadata:
                metadata = self.metadata_value[0].decode(body)
                group.group_epoch, metadata_hash, seen_epoch = metadata.epoch, metadata.metadata_hash, True
            elif key_type == self.target_metadata:
                self.read_target_metadata(group, body)
            elif key_type == self.target_member:
                value = self.target_member_value[0].decode(body)
                group.target[self.member_id_of(key)] = assignment_of(value.topic_partitions)
            elif key_type in (self.member_metadata, self.current_assignment):
                member_id = self.member_id_of(key)
                if (member := group.members.get(member_id)) is None:
                    member = group.members[member_id] = self.new_member(member_id)
                if key_type == self.member_metadata:
                    self.read_member_metadata(member, body)
                else:
                    self.read_current_assignment(member, body)
            else:
                self.read_own(group, key_type, body)
        return (group, metadata_hash) if seen_epoch else None


class GroupRecordLog(Generic[_G, _M]):
    def __init__(self, kind: GroupKind[_G, _M], now: RecordsNow, append: AppendRecords, spawn: Spawn) -> None:
        self._kind = kind
        self._now = now
        self._append = append
        self._spawn = spawn
        # Each group's records as __consumer_offsets holds them (written, or replayed at load), and the
        # groups whose next write must compare all their records (a member went or was replaced, or the
        # target was recomputed).
        self.written: dict[str, Records] = {}
        self._whole: set[str] = set()
        # One write of a group at a time: each diff is taken against what the one before it wrote (a group
        # re-created while its tombstones are in flight is written whole after them, equal bytes or not).
        self._writing = KeyedLocks()
        # The groups with a write in flight; an unload drops them, so that a write landing after it does not
        # bring back the map of a group now led elsewhere.
        self._in_flight: dict[str, object] = {}
        # Records of another kind a group's type change adds to its next write, before and after its
        # own (a consumer group's upgrade: the classic group's tombstone; its downgrade: the classic
        # group's record after the tombstones), so that the change is one batch, as Kafka writes it.
        self._before: dict[str, list[tuple[bytes, bytes | None]]] = {}
        self._after: dict[str, list[tuple[bytes, bytes | None]]] = {}
        # How to undo a group's type change not yet written: a failed write reverts it, as Kafka's
        # coordinator rolls back what a failed append would have changed.
        self._undo: dict[str, Callable[[], None]] = {}
        # Per group: type changes reverted by a failed write, and that write's error. A request that
        # changed the group while the write was in flight fails with it, as in Kafka (its change is gone).
        self._reverted: dict[str, tuple[int, GroupError]] = {}
        # Per group: how many writes were asked for, so that an undo can tell whether another request's
        # change of the group went to the log after its own.
        self.writes_asked: dict[str, int] = {}

    def changed_whole(self, group_id: str) -> None:
        self._whole.add(group_id)

    def type_changed(self, group_id: str, undo: Callable[[], None], *,
                     before: list[tuple[bytes, bytes | None]] | None = None,
                     after: list[tuple[bytes, bytes | None]] | None = None) -> None:
        """The group changed type: its next write carries `before` and `after` (replacing any earlier
        change's, which that one's undo dropped); `undo` reverts the change if that write fails."""
        self._whole.add(group_id)
        self._before[group_id], self._after[group_id] = before or [], after or []
        self._undo[group_id] = undo

    def undo_type_change(self, group_id: str) -> bool:
        """Revert the group's type change not yet written (its write failed, or the request that made it
        was refused after it); False when there is none."""
        self._before.pop(group_id, None)
        self._after.pop(group_id, None)
        undo = self._undo.pop(group_id, None)
        if undo is None:
            return False
        self._whole.add(group_id)
        undo()
        return True

    async def persist(self, group_id: str, member_id: str | None = None) -> None:
        """Write what changed in the group since its last write (tombstones for a group gone). With
        `member_id` (a heartbeat's), only the group's own records and that member's are encoded and
        compared, unless the group changed as a whole since (membership, target): a heartbeat costs the
        same whatever the group's size."""
        self.writes_asked[group_id] = self.writes_asked.get(group_id, 0) + 1
        reverted = self._reverted.get(group_id)
        async with self._writing.held(group_id):
            if (now_reverted := self._reverted.get(group_id)) is not reverted and now_reverted is not None:
                raise now_reverted[1]
            whole = member_id is None or group_id in self._whole or group_id not in self.written
            self._whole.discard(group_id)
            now = self._now(group_id, None if whole else member_id)
            entries = changes(self.written.get(group_id, {}), now, self._kind.write_order, self._kind.tombstone_order,
                              whole=whole)
            before, after = self._before.pop(group_id, []), self._after.pop(group_id, [])
            undo = self._undo.pop(group_id, None)
            if not (entries or before or after):
                return
            token = self._in_flight[group_id] = object()
            try:
                await self._append(group_id, [*before, *entries, *after])
            except GroupError as exc:
                if whole:
                    self._whole.add(group_id)
                if undo is not None and self._undo.get(group_id) is None:  # no newer type change since
                    self._undo[group_id] = undo
                    self.undo_type_change(group_id)
                    self._reverted[group_id] = (self._reverted.get(group_id, (0, exc))[0] + 1, exc)
                raise
            finally:
                unloaded = self._in_flight.get(group_id) is not token
                if not unloaded:
                    del self._in_flight[group_id]
            if unloaded:
                return
            written = self.written.setdefault(group_id, {})
            for key, value in entries:
                if value is None:
                    written.pop(key, None)
                else:
                    written[key] = value
            if not written:
                del self.written[group_id]

    def persist_later(self, group_id: str) -> None:
        self._spawn(self._persist_logged(group_id))

    async def _persist_logged(self, group_id: str) -> None:
        try:
            await self.persist(group_id)
        except GroupError as exc:  # written again with the group's next change
            log.warning(f"{self._kind.name} group records not written", group=group_id, error=exc.error_code.name)

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One of these groups' records at load (the groups are rebuilt from the maps afterwards)."""
        try:
            group_id = self._kind.group_id_of(key)
        except Exception as exc:  # a malformed key: skipped, as the store skips malformed records
            log.warning(f"malformed {self._kind.name} group record skipped", error=repr(exc))
            return
        if value is not None:
            self.written.setdefault(group_id, {})[key] = value
        elif (written := self.written.get(group_id)) is not None:
            written.pop(key, None)
            if not written:
                del self.written[group_id]

    def rebuilt(self, skip: Callable[[str], bool]) -> Iterator[tuple[_G, int]]:
        """The groups replayed, but those `skip` names (asked as each comes, after the one before it is
        taken in), with their topics' hash; a group whose records cannot be read is left out (its members
        join again)."""
        for group_id, found in list(self.written.items()):
            if skip(group_id):
                continue
            try:
                made = self._kind.group_from_records(group_id, found)
            except Exception as exc:  # a malformed record
                log.error(f"{self._kind.name} group records not readable", group=group_id, error=repr(exc))
                continue
            if made is not None:
                yield made

    def unload(self, doomed: Callable[[str], bool]) -> None:
        for kept in (self.written, self._before, self._after, self._in_flight, self._undo, self._reverted,
                     self.writes_asked):
            for group_id in [g for g in kept if doomed(g)]:
                del kept[group_id]
        self._whole = {g for g in self._whole if not doomed(g)}
