"""What __consumer_offsets holds of each KIP-848 consumer group, and writing what changed: the records last
written (or replayed at load) per group, the groups whose next write compares all their records (a member
went or was replaced, the target was recomputed), and the classic group's record a type change adds to
that write (its tombstone before an upgrade's records, its GroupMetadata after a downgrade's tombstones),
so that the change is one batch, as Kafka writes it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import structlog

from broker.group import consumer_records
from broker.group.consumer_group import ConsumerGroup
from broker.group.group import GroupError

log = structlog.get_logger("groups")

# OffsetsStore.append: writes one group's records as one batch (GroupError with the coordinator's error).
AppendRecords = Callable[[str, Sequence[tuple[bytes, bytes | None]]], Awaitable[int]]
Entries = list[tuple[bytes, bytes | None]]


class GroupWrites:
    def __init__(self, append: AppendRecords) -> None:
        self._append = append
        self.written: dict[str, consumer_records.Records] = {}
        self._whole: set[str] = set()
        self._before: dict[str, Entries] = {}
        self._after: dict[str, Entries] = {}

    def changed_whole(self, group_id: str) -> None:
        self._whole.add(group_id)

    def type_changed(self, group_id: str, *, before: Entries | None = None, after: Entries | None = None) -> None:
        self._whole.add(group_id)
        if before:
            self._before[group_id] = before
        if after:
            self._after[group_id] = after

    async def write(self, group_id: str, group: ConsumerGroup | None, member_id: str | None) -> None:
        """Write what changed in the group since its last write (tombstones for a group gone). With
        `member_id` (a heartbeat's), only the group's own records and that member's are encoded and
        compared, unless the group changed as a whole since (membership, target): a heartbeat costs
        the same whatever the group's size."""
        whole = member_id is None or group_id in self._whole or group_id not in self.written
        self._whole.discard(group_id)
        now = {} if group is None else consumer_records.group_records(group, None if whole else member_id)
        before, after = self._before.pop(group_id, []), self._after.pop(group_id, [])
        changed = consumer_records.changes(self.written.get(group_id, {}), now, whole=whole)
        if not (entries := [*before, *changed, *after]):
            return
        try:
            await self._append(group_id, entries)
        except GroupError:
            if whole:
                self._whole.add(group_id)
            if before or after:  # the type change is written with the group's next write
                self.type_changed(group_id, before=before, after=after)
            raise
        written = self.written.setdefault(group_id, {})
        for key, value in changed:
            if value is None:
                written.pop(key, None)
            else:
                written[key] = value
        if not written:
            del self.written[group_id]

    def replay(self, key: bytes, value: bytes | None) -> None:
        """A consumer group record at load."""
        try:
            group_id = consumer_records.group_id_of(key)
        except Exception as exc:  # a malformed key: skipped, as the store skips malformed records
            log.warning("malformed consumer group record skipped", error=repr(exc))
            return
        if value is not None:
            self.written.setdefault(group_id, {})[key] = value
        elif (written := self.written.get(group_id)) is not None:
            written.pop(key, None)
            if not written:
                del self.written[group_id]

    def forget(self, doomed: Callable[[str], bool]) -> None:
        for group_id in [g for g in self.written if doomed(g)]:
            del self.written[group_id]
        for kept in (self._before, self._after):
            for group_id in [g for g in kept if doomed(g)]:
                del kept[group_id]
        self._whole = {g for g in self._whole if not doomed(g)}
