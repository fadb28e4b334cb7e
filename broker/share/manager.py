"""The share-partitions this broker leads and the share sessions of the consumers fetching from it
(Kafka's SharePartitionManager): ShareFetch's reads and acquisitions, ShareAcknowledge's
acknowledgements.

A share-partition starts, on its first fetch, where the group's share.auto.offset.reset says: the log
start offset (earliest), the high watermark (latest, the default) or the first offset at or after now
minus the duration (by_duration:<ISO-8601>). Reads go to the high watermark, or to the last stable
offset under share.isolation.level=read_committed. Record bytes are the log's own batches, read off
the event loop and sent as stored: only their headers are looked at, to learn their offsets.

Each share-partition's state is a file in its partition's directory, `share-<sha256 of the group id>.state`
(SharePartition.snapshot), written atomically (rename, without fsync: an acknowledgement waits for the
write, not for the disk) off the event loop after every change that finishes or releases records, and
read back on the partition's first fetch after a start: the start offset, what
was acknowledged or archived past it and the delivery counts survive a restart (records acquired then
become Available again). A deleted topic's directory takes the files with it. The file stays with the
replica that wrote it: a new leader elsewhere starts from share.auto.offset.reset (docs/features.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from broker.log.common import LogError
from broker.replica import Partition, PartitionError, ReplicaManager
from broker.share.partition import Acquired, Batch, ShareLimits, SharePartition
from broker.share.sessions import ShareSessionCache
from broker.topic import Topic
from protocol.batch_header import ATTRIBUTES_AT, CONTROL_BIT, LAST_OFFSET_DELTA_AT, LOG_OVERHEAD
from protocol.errors import ErrorCode

log = structlog.get_logger("share")

MAX_SHARE_SESSIONS = 2000  # Kafka's group.share.max.share.sessions default
_FRAME = struct.Struct(">qi")  # base offset, batch length
_SMALL = struct.Struct(">h")
_INT = struct.Struct(">i")
_DURATION = re.compile(r"\+?P(?:\+?(\d+)D)?(?:T(?:\+?(\d+)H)?(?:\+?(\d+)M)?(?:\+?(\d+(?:[.,]\d{0,9})?)S)?)?",
                       re.IGNORECASE)


@dataclass(frozen=True)
class ShareSettings:
    """A group's share.* configs as one fetch uses them."""

    limits: ShareLimits
    reset: str  # earliest, latest, by_duration:<duration>
    read_committed: bool

    @classmethod
    def of(cls, overrides: Mapping[str, str], broker: Mapping[str, int]) -> ShareSettings:
        def number(name: str) -> int:
            return int(overrides.get(name, broker["group." + name]))
        return cls(ShareLimits(number("share.record.lock.duration.ms"), number("share.delivery.count.limit"),
                               number("share.partition.max.record.locks")),
                   overrides.get("share.auto.offset.reset", "latest"),
                   overrides.get("share.isolation.level", "read_uncommitted") == "read_committed")


@dataclass
class PartitionRead:
    """One partition's part of a ShareFetch answer."""

    records: bytes = b""
    acquired: tuple[Acquired, ...] = ()
    error: ErrorCode = ErrorCode.NONE


class SharePartitionManager:
    def __init__(self, replicas: ReplicaManager) -> None:
        self._replicas = replicas
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions = ShareSessionCache(MAX_SHARE_SESSIONS)
        self._writing: dict[tuple[str, str, int], asyncio.Lock] = {}  # one state write at a time per file

    def share_partition(self, group_id: str, partition: Partition) -> SharePartition | None:
        tp = partition.topic_partition
        return self.partitions.get((group_id, tp.topic, tp.partition))

    async def _share_partition(self, group_id: str, partition: Partition, settings: ShareSettings) -> SharePartition:
        tp = partition.topic_partition
        key = (group_id, tp.topic, tp.partition)
        found = self.partitions.get(key)
        if found is None:
            saved = _checked(await partition.log.io.run(_read_if_there, _state_path(group_id, partition)), group_id,
                             partition)
            start = None if saved is not None else await self._initial_offset(partition, settings.reset)
            found = self.partitions.get(key)  # another fetch may have made it meanwhile
            if found is None:
                if saved is not None:
                    found = SharePartition.restore(saved, group_id,
                                                   released=lambda: self._released(group_id, partition))
                    log.info("share-partition state read back", group=group_id, partition=str(tp),
                             start_offset=found.start_offset)
                else:
                    assert start is not None
                    found = SharePartition(start, released=lambda: self._released(group_id, partition))
                    log.info("share-partition initialised", group=group_id, partition=str(tp), start_offset=start)
                self.partitions[key] = found
        found.move_start(partition.log_start_offset)
        return found

    def _released(self, group_id: str, partition: Partition) -> None:
        """Records went back to Available (a lock expired, a session ended): a parked ShareFetch may take
        them, and the state file follows."""
        self._replicas.fetches.notify(partition.topic_partition)
        partition.log.io.spawn(self.persist(group_id, partition), "share-partition state")

    async def persist(self, group_id: str, partition: Partition) -> None:
        """Write the share-partition's state file as it is now (after acknowledgements: durable on return)."""
        tp = partition.topic_partition
        key = (group_id, tp.topic, tp.partition)
        async with self._writing.setdefault(key, asyncio.Lock()):
            share = self.partitions.get(key)
            path = _state_path(group_id, partition)
            if share is None:
                await partition.log.io.remove_files([path])
            else:
                await partition.log.io.write_atomically(path, share.snapshot(group_id), sync=False)

    async def _initial_offset(self, partition: Partition, reset: str) -> int:
        if reset == "earliest":
            return partition.log_start_offset
        if reset.startswith("by_duration:"):
            match = _DURATION.fullmatch(reset[len("by_duration:"):])
            assert match is not None  # group_configs.py checked it
            days, hours, minutes, seconds = (float((g or "0").replace(",", ".")) for g in match.groups())
            back_ms = int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)
            found = await self._replicas.run_io(partition.log.offset_for_timestamp, int(time.time() * 1000) - back_ms)
            return partition.high_watermark if found is None else min(found.offset, partition.high_watermark)
        if reset != "latest":
            raise ValueError(f"share.auto.offset.reset {reset!r}")
        return partition.high_watermark

    def _bound(self, partition: Partition, settings: ShareSettings) -> int:
        return partition.last_stable_offset if settings.read_committed else partition.high_watermark

    def ready_now(self, group_id: str, partition: Partition, settings: ShareSettings) -> bool:
        """Whether a fetch would find something to acquire now (a parked ShareFetch asks)."""
        share = self.share_partition(group_id, partition)
        if share is None:
            return True
        return share.has_available() or self._bound(partition, settings) > share.end_offset

    async def fetch(self, group_id: str, member_id: str, partition: Partition, settings: ShareSettings,
                    max_bytes: int, max_records: int) -> PartitionRead:
        try:
            partition.check_leader()
            share = await self._share_partition(group_id, partition, settings)
            offset = share.next_fetch_offset()
            bound = self._bound(partition, settings)
            if offset >= bound or max_records <= 0:
                return PartitionRead()
            read = partition.log.read(offset, max(1, max_bytes), max_offset=bound)
        except (PartitionError, LogError) as exc:
            return PartitionRead(error=exc.error_code)
        if not read.slices:
            return PartitionRead()
        [data] = await self._replicas.read_slices([read.slices])
        spans = _batches(data)
        taken, acquired = share.acquire(member_id, [batch for batch, _ in spans], max_records, settings.limits)
        if not acquired:
            return PartitionRead()
        return PartitionRead(b"".join(bytes(data[spans[i][1]]) for i in taken), tuple(acquired))

    # --- the admin APIs (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) ---

    async def stored(self, group_id: str, partition: Partition) -> SharePartition | None:
        """The group's share-partition: in memory, else read back from its state file, else None."""
        tp = partition.topic_partition
        key = (group_id, tp.topic, tp.partition)
        found = self.partitions.get(key)
        if found is None:
            saved = _checked(await partition.log.io.run(_read_if_there, _state_path(group_id, partition)), group_id,
                             partition)
            found = self.partitions.get(key)
            if found is None and saved is not None:
                found = self.partitions[key] = SharePartition.restore(
                    saved, group_id, released=lambda: self._released(group_id, partition))
        return found

    async def group_state(self, group_id: str, topics: list[Topic]) -> dict[str, dict[int, SharePartition]]:
        """{topic: {partition: its share-partition}} of a group, over the partitions of `topics` led here
        (in memory or in a state file)."""
        found: dict[str, dict[int, SharePartition]] = {}
        for partition in self._led(topics):
            share = await self.stored(group_id, partition)
            if share is not None:
                found.setdefault(partition.topic_partition.topic, {})[partition.topic_partition.partition] = share
        return found

    def _led(self, topics: list[Topic]) -> list[Partition]:
        led = []
        for topic in topics:
            for index in sorted(topic.replicas):
                with contextlib.suppress(PartitionError):
                    partition = self._replicas.partition_of(topic, index)
                    if partition.is_leader:
                        led.append(partition)
        return led

    def lag(self, share: SharePartition, partition: Partition) -> int:
        """Records from the start offset up to the high watermark not finished with (KIP-1226)."""
        return max(0, partition.high_watermark - share.start_offset - share.finished_in_flight())

    async def set_start(self, group_id: str, partition: Partition, offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts again at `offset`, nothing in flight."""
        tp = partition.topic_partition
        key = (group_id, tp.topic, tp.partition)
        old = self.partitions.pop(key, None)
        if old is not None:
            old.close()
        self.partitions[key] = SharePartition(offset, released=lambda: self._released(group_id, partition))
        await self.persist(group_id, partition)
        log.info("share-partition start offset set", group=group_id, partition=str(tp), start_offset=offset)

    async def forget(self, group_id: str, topics: list[Topic]) -> None:
        """DeleteShareGroupOffsets (those topics) and a deleted group (every topic): the group's state of
        the partitions led here goes, in memory and on disk; a later fetch starts from the reset rule."""
        for partition in self._led(topics):
            tp = partition.topic_partition
            old = self.partitions.pop((group_id, tp.topic, tp.partition), None)
            if old is not None:
                old.close()
            await self.persist(group_id, partition)  # no state: the file is removed

    def member_left(self, group_id: str, member_id: str) -> None:
        """The member left its share group or its session timed out (Kafka's ShareGroupListener): its
        share sessions end and what it holds here goes back to the others."""
        session = self.sessions.sessions.get((group_id, member_id))
        if session is not None:
            self.sessions.close(session)
        for (group, _, _), share in list(self.partitions.items()):
            if group == group_id:
                share.release_member(member_id, share.delivery_limit)

    def end_session(self, group_id: str, member_id: str, partitions: list[Partition], delivery_limit: int) -> None:
        """The member's share session closed: what it holds on these partitions is released."""
        for partition in partitions:
            share = self.share_partition(group_id, partition)
            if share is not None:
                share.release_member(member_id, delivery_limit)


def _state_path(group_id: str, partition: Partition) -> Path:
    """A name of bounded length for any group id (ids run to 32,767 bytes); the file names its group."""
    return partition.log.directory / f"share-{hashlib.sha256(group_id.encode()).hexdigest()[:32]}.state"


def _checked(saved: bytes | None, group_id: str, partition: Partition) -> bytes | None:
    """A state file's bytes if they restore for this group; else None (logged): the share-partition starts
    again from share.auto.offset.reset rather than failing every fetch."""
    if saved is None:
        return None
    try:
        SharePartition.restore(saved, group_id, released=lambda: None)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("share-partition state file unreadable: starting afresh", group=group_id,
                    partition=str(partition.topic_partition), error=str(exc))
        return None
    return saved


def _read_if_there(path: Path) -> bytes | None:
    """Blocking (the I/O pool): a state file's bytes, or None when there is none."""
    with contextlib.suppress(FileNotFoundError):
        with open(path, "rb") as f:
            return f.read()
    return None


def _batches(data: memoryview) -> list[tuple[Batch, slice]]:
    """The batches of a read as their headers tell them (records are not looked at), with where each lies."""
    out = []
    position, end = 0, len(data)
    while position + LOG_OVERHEAD <= end:
        base, length = _FRAME.unpack_from(data, position)
        size = LOG_OVERHEAD + length
        if position + size > end:
            break  # a partial batch at the end of a read is not sent
        last = base + _INT.unpack_from(data, position + LAST_OFFSET_DELTA_AT)[0]
        control = bool(_SMALL.unpack_from(data, position + ATTRIBUTES_AT)[0] & CONTROL_BIT)
        out.append((Batch(base, last, control), slice(position, position + size)))
        position += size
    return out

