"""The partitions of an internal topic that make a broker a coordinator: `__consumer_offsets` for the
group coordinator, `__transaction_state` for the transaction coordinator. One owner for both.

In a cluster a key (a group id, a transactional id) belongs to the leader of its partition. When
leadership of such a partition moves here its state is replayed from the log (answers meanwhile:
COORDINATOR_LOAD_IN_PROGRESS); when it moves away the state is dropped from memory and the
coordinator answers NOT_COORDINATOR (Kafka's onElection / onResignation). A partition is served
only once its load succeeded: a load that fails is dropped (whatever it replayed) and tried again
after a backoff, COORDINATOR_LOAD_IN_PROGRESS meanwhile, never served half-loaded or empty (ids
unknown there would get new producer ids, and prepared transactions would never complete). The
coordinator says how to load and unload one partition; this class follows the leadership changes
and the loads in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, Protocol, TypeVar

import structlog

from broker.log import OffsetOutOfRangeError, ReadBound, StorageError, TopicPartition
from broker.replica import PartitionError
from protocol.errors import ErrorCode
from protocol.records import iter_batches

log = structlog.get_logger("coordinator")

Spawn = Callable[[Coroutine[Any, Any, Any]], asyncio.Task]


class LedPartition(Protocol):
    """What is read here of a replica (replica/partition.py's Partition): whose it is, and its role."""

    @property
    def topic_partition(self) -> TopicPartition: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def leader_epoch(self) -> int: ...


# The replica type the coordinator loads from (the real Partition; tests' fakes).
P = TypeVar("P", bound=LedPartition)
LOAD_RETRY_S = 0.1  # the first backoff after a failed load, doubled up to LOAD_RETRY_MAX_S
LOAD_RETRY_MAX_S = 10.0
LOAD_READ_BYTES = 1 << 20


async def replay_log(partition, read_slices: Callable, on_record: Callable[[int, bytes, bytes | None], None], *,
                     stop_on_error: bool) -> int:
    """Read one coordinator partition from its log start to its end, calling `on_record(offset, key,
    value)` for each keyed record of a data batch; returns the records read. A read that fails stops
    the replay (`stop_on_error`: what was read is kept) or raises (the load is tried again)."""
    partition_log = partition.log
    offset = partition_log.log_start_offset
    count = 0
    while offset < partition_log.log_end_offset:
        try:
            info = partition_log.read(offset, LOAD_READ_BYTES, bound=ReadBound.LOG_END, min_one_batch=True)
        except (OffsetOutOfRangeError, StorageError) as exc:
            log.error("coordinator partition read failed", partition=str(partition.topic_partition),
                      offset=offset, error=exc.message)
            if stop_on_error:
                break
            raise
        if not info.slices:
            break
        (data,) = await read_slices([info.slices])
        for batch in iter_batches(data, allow_partial_tail=True):
            if batch.is_control or batch.last_offset < offset:
                continue
            for record in batch.records():
                if record.offset < offset or record.key is None:
                    continue
                count += 1
                on_record(record.offset, record.key, record.value)
        if info.next_offset <= offset:
            break
        offset = info.next_offset
    return count


class CoordinatorPartitions(Generic[P]):
    def __init__(self, topic: str, spawn: Spawn, lookup: Callable[[int], P], *,
                 load: Callable[[int, P], Awaitable[None]], unload: Callable[[int], None]) -> None:
        """`lookup(index)` is the topic's partition with this index as this broker's replica
        (PartitionError if none); `load(index, partition)` replays one partition led here now;
        `unload(index)` drops what came from it (also before a reload, so a load always starts from
        nothing)."""
        self.topic = topic
        self._spawn = spawn
        self._lookup = lookup
        self._load = load
        self._unload = unload
        self.loading: dict[int, asyncio.Task] = {}  # partitions being replayed after this broker became leader
        self.loaded: set[int] = set()  # partitions whose last load succeeded (and not dropped since)

    def moved(self, partition: P) -> None:
        """A partition's role here changed (ReplicaManager's leadership listeners): for one of this
        topic, its state is dropped, and replayed when this broker is the new leader."""
        tp = partition.topic_partition
        if tp.topic != self.topic:
            return
        self._drop(tp.partition)
        if partition.is_leader:
            self.loading[tp.partition] = self._spawn(self._run_load(tp.partition, partition))

    def forgotten(self, tp: TopicPartition) -> None:
        """The replica is gone from this broker (ReplicaManager's forget listeners: reassigned away,
        its log dir failed, its log replaced): what came from it is dropped."""
        if tp.topic == self.topic:
            self._drop(tp.partition)

    def _drop(self, index: int) -> None:
        loading = self.loading.pop(index, None)
        if loading is not None:
            loading.cancel()
        self.loaded.discard(index)
        self._unload(index)

    def local(self, indexes: list[int]) -> list[P]:
        """The replicas this broker has of these partitions of the topic."""
        found = []
        for index in indexes:
            try:
                found.append(self._lookup(index))
            except PartitionError:
                continue
        return found

    def follow(self, local: list[P]) -> None:
        """At start: each partition led here is loaded as if leadership had just moved here."""
        for partition in local:
            if partition.is_leader:
                self.moved(partition)

    async def _run_load(self, index: int, partition: P) -> None:
        backoff = LOAD_RETRY_S
        try:
            while True:
                try:
                    await self._load(index, partition)
                    break
                except Exception as exc:  # the partition stays unserved (and empty) until a load succeeds
                    log.error("coordinator partition load failed; retrying", topic=self.topic, partition=index,
                              retry_in_s=backoff, error=repr(exc), exc_info=exc)
                    self._unload(index)  # what the failed load replayed must not be served
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, LOAD_RETRY_MAX_S)
            if self.loading.get(index) is asyncio.current_task():
                self.loaded.add(index)
        finally:
            if self.loading.get(index) is asyncio.current_task():
                del self.loading[index]

    def not_served(self, index: int) -> ErrorCode | None:
        """Why keys of partition `index` are not served here now, or None when they are."""
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        try:
            partition = self._lookup(index)
        except PartitionError:
            return ErrorCode.NOT_COORDINATOR
        return None if partition.is_leader and index in self.loaded else ErrorCode.NOT_COORDINATOR

    def leader_epoch(self, index: int) -> int:
        """The leader epoch of partition `index` here (Kafka's coordinator epoch), -1 without a replica."""
        try:
            return self._lookup(index).leader_epoch
        except PartitionError:
            return -1
