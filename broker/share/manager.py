"""The share-partitions this broker leads and the share sessions of the consumers fetching from it
(Kafka's SharePartitionManager): ShareFetch's reads and acquisitions, ShareAcknowledge's
acknowledgements.

A share-partition starts, on its first fetch, where the group's share.auto.offset.reset says: the log
start offset (earliest), the high watermark (latest, the default) or the first offset at or after now
minus the duration (by_duration:<ISO-8601>). Reads go to the high watermark, or to the last stable
offset under share.isolation.level=read_committed. Record bytes are the log's own batches, read off
the event loop and sent as stored: only their headers are looked at, to learn their offsets.
"""

from __future__ import annotations

import re
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from broker.log.common import LogError
from broker.replica import Partition, PartitionError, ReplicaManager
from broker.share.partition import Acquired, Batch, ShareLimits, SharePartition
from broker.share.sessions import ShareSessionCache
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

    def share_partition(self, group_id: str, partition: Partition) -> SharePartition | None:
        tp = partition.topic_partition
        return self.partitions.get((group_id, tp.topic, tp.partition))

    async def _share_partition(self, group_id: str, partition: Partition, settings: ShareSettings) -> SharePartition:
        tp = partition.topic_partition
        key = (group_id, tp.topic, tp.partition)
        found = self.partitions.get(key)
        if found is None:
            start = await self._initial_offset(partition, settings.reset)
            found = self.partitions.get(key)  # another fetch may have made it meanwhile
            if found is None:
                fetches = self._replicas.fetches
                found = self.partitions[key] = SharePartition(start, released=lambda: _wake(fetches, tp))
                log.info("share-partition initialised", group=group_id, partition=str(tp), start_offset=start)
        found.move_start(partition.log_start_offset)
        return found

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

    def group_state(self, group_id: str) -> dict[str, dict[int, SharePartition]]:
        """{topic: {partition: its share-partition}} of a group, over the partitions led here."""
        found: dict[str, dict[int, SharePartition]] = {}
        for (group, topic, index), share in sorted(self.partitions.items(), key=lambda kv: kv[0]):
            if group == group_id:
                found.setdefault(topic, {})[index] = share
        return found

    def lag(self, share: SharePartition, partition: Partition) -> int:
        """Records from the start offset up to the high watermark not finished with (KIP-1226)."""
        return max(0, partition.high_watermark - share.start_offset - share.finished_in_flight())

    def set_start(self, group_id: str, partition: Partition, offset: int) -> None:
        """AlterShareGroupOffsets: the share-partition starts again at `offset`, nothing in flight."""
        tp = partition.topic_partition
        key = (group_id, tp.topic, tp.partition)
        old = self.partitions.pop(key, None)
        if old is not None:
            old.close()
        fetches = self._replicas.fetches
        self.partitions[key] = SharePartition(offset, released=lambda: _wake(fetches, tp))
        log.info("share-partition start offset set", group=group_id, partition=str(tp), start_offset=offset)

    def delete_state(self, group_id: str, topic: str) -> None:
        """DeleteShareGroupOffsets: the group forgets the topic (a later fetch starts from the reset rule)."""
        for key in [k for k in self.partitions if k[0] == group_id and k[1] == topic]:
            self.partitions.pop(key).close()

    def forget_group(self, group_id: str) -> None:
        """The group was deleted: its share-partitions go too."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            self.partitions.pop(key).close()

    def end_session(self, group_id: str, member_id: str, partitions: list[Partition], delivery_limit: int) -> None:
        """The member's share session closed: what it holds on these partitions is released."""
        for partition in partitions:
            share = self.share_partition(group_id, partition)
            if share is not None:
                share.release_member(member_id, delivery_limit)


def _wake(fetches, tp) -> None:
    fetches.notify(tp)  # a ShareFetch parked on the partition may take the released records


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

