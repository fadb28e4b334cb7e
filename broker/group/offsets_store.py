"""Committed offsets and group metadata as records in `__consumer_offsets`.

The topic is created on first use (internal, `cleanup.policy=compact`,
`offsets.topic.num.partitions` partitions, `offsets.topic.replication.factor`), or adopted with
whatever partition count it already has. A group lives in partition
`abs(java String.hashCode(group_id)) % partitions` (Kafka's GroupCoordinator.partitionFor), so all
of one group's records are ordered in one log.

Writes go through ReplicaManager.append_records, as Produce's do, with acks=-1 and
`offsets.commit.timeout.ms`: the ISR must hold min.insync.replicas before the append, and the write
waits until the high watermark covers it, so offsets replicate like any partition. Only then does the
in-memory view change, and an entry remembers the log offset of its record, so a slower write never
overwrites a newer one (nor brings back an offset a newer tombstone deleted). At start-up every
partition is replayed from its log start to its log end (committed offsets, their tombstones, group
metadata), so a restart — clean or SIGKILL — loses no acknowledged commit.

Append errors are mapped as Kafka maps them for the coordinator (CoordinatorOperationExceptionHelper;
the older GroupMetadataManager mapped the same): UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS
(also after the append) and REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE; NOT_LEADER_OR_FOLLOWER
and KAFKA_STORAGE_ERROR -> NOT_COORDINATOR (and, where TxnOffsetCommit's transaction coordinator was
out of reach, NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS); MESSAGE_TOO_LARGE,
RECORD_LIST_TOO_LARGE -> the caller's choice (INVALID_COMMIT_OFFSET_SIZE for commits,
UNKNOWN_SERVER_ERROR for group metadata). So with min.insync.replicas=2 and an ISR of one an
OffsetCommit is COORDINATOR_NOT_AVAILABLE and stores nothing. Kafka 4.3 answers it the same, but
only after `offsets.commit.timeout.ms`: its coordinator appends with acks=1 and its high watermark
does not move while the ISR is below the minimum (KAFKA-15583), a rule Ebb's high watermark does
not follow (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import structlog

from broker.aio import SharedRun, run_to_completion
from broker.group import consumer_records, records, share_records
from broker.group.group import GroupError, now_ms
from broker.group.record_log import record_type
from broker.log import FileSlice, OffsetOutOfRangeError, ReadBound, StorageError
from broker.replica import AppendOrigin, AppendResult, Partition, PartitionError
from broker.replica.outcomes import Appended, AppendEntry
from broker.topic_placement import TopicError
from protocol.control_records import ControlType, read_marker
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import GroupMetadataKey, GroupMetadataValue
from protocol.records import RecordBatch, build_batch, iter_batches

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.topic import Topic

log = structlog.get_logger("groups")

OFFSETS_TOPIC = "__consumer_offsets"
# Kafka's offsets.topic.segment.bytes and offsets.topic.compression.codec defaults.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer"}
LOAD_READ_BYTES = 1 << 20

_COORDINATOR_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    # a transaction coordinator out of reach while TxnOffsetCommit's transaction is verified
    ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
}
_TOO_LARGE = (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE)

TopicPartitionKey = tuple[str, int]
ConsumerReplay = Callable[[bytes, bytes | None], None]


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """What the group coordinator answers for an error of its write or of the transaction verification
    before it (Kafka's CoordinatorOperationExceptionHelper; too large a write is the caller's to word)."""
    return _COORDINATOR_ERRORS.get(code, code)


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, h = 31 * h + unit, in int32."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's partitionFor: Utils.abs(groupId.hashCode) % partitions (abs(INT32_MIN) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


@dataclass(slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None  # explicit retention (OffsetCommit v2-v4), else None
    record_offset: int = -1  # position of its record in __consumer_offsets


@dataclass(slots=True, eq=False)
class PendingOffset:
    """A TxnOffsetCommit's offset until its transaction's marker. Registered before its append (Kafka's
    prepareTxnOffsetCommit), so a marker landing before the commit's task resumes still finds it.
    A marker settles only the offsets written before it in the log, as a replay of the partition (and
    Kafka's, OffsetMetadataManager) sees them; `offset.record_offset` is -1 until the append."""

    offset: CommittedOffset
    # Markers (log offset, committed) of its producer reported before its record offset was known:
    # the first one after that offset settles it once it is.
    markers: list[tuple[int, bool]] = field(default_factory=list)


@dataclass
class LoadStats:
    records: int = 0
    skipped: int = 0
    offsets: int = 0
    groups: int = 0


@dataclass(frozen=True)
class OffsetsTopicSettings:
    """The `offsets.*` settings the store follows."""

    num_partitions: int  # offsets.topic.num.partitions, for a topic not created yet
    replication_factor: int  # offsets.topic.replication.factor
    commit_timeout_ms: int  # offsets.commit.timeout.ms: how long a write waits for the ISR

    @classmethod
    def of(cls, config: BrokerConfig) -> OffsetsTopicSettings:
        return cls(config.offsets_topic_num_partitions, config.offsets_topic_replication_factor,
                   config.offsets_commit_timeout_ms)


class OffsetsTopics(Protocol):
    """What the store needs of the broker's topics (TopicManager): the offsets topic, and creating it."""

    def get(self, name: str) -> Topic | None: ...
    def create(self, name: str, num_partitions: int, replication_factor: int,
               configs: Mapping[str, str | None] | None = None) -> Awaitable[Topic]: ...


class OffsetsReplicas(Protocol):
    """What the store needs of the data path (ReplicaManager): appending its records, and the
    partitions and bytes it replays."""

    async def append_records(self, entries: Sequence[AppendEntry], required_acks: int, timeout_ms: int,
                             origin: AppendOrigin, internal_topics_allowed: bool = False,
                             verification_guards: Mapping[tuple[str, int], object] | None = None, *,
                             appended: Appended | None = None) -> list[AppendResult]: ...
    def partition(self, topic: str, index: int) -> Partition: ...
    async def read_slices(self, groups: Sequence[Sequence[FileSlice]]) -> list[memoryview]: ...


class OffsetsStore:
    def __init__(self, settings: OffsetsTopicSettings, topics: OffsetsTopics, replicas: OffsetsReplicas) -> None:
        self.settings = settings
        self.topics = topics
        self.replicas = replicas
        self._creating = SharedRun(self._create_topic)
        self._by_group: dict[str, dict[TopicPartitionKey, CommittedOffset]] = {}
        self._by_partition: dict[TopicPartitionKey, dict[str, CommittedOffset]] = {}
        # TxnOffsetCommit's offsets, by producer id, until their transaction's marker.
        self._pending: dict[int, dict[tuple[str, str, int], PendingOffset]] = {}
        # OffsetCommits between their append and their `_put`, and the record offsets of the
        # tombstones written meanwhile: a commit whose task resumes after a later tombstone's must
        # not bring back what the log deleted. Emptied when no commit is in flight.
        self._commits_in_flight = 0
        self._tombstones: dict[tuple[str, str, int], int] = {}
        # Bumped each time an offsets partition is unloaded: a write begun before that finds its
        # in-memory state replaced (maybe by a replay that did not see its batch), and answers
        # NOT_COORDINATOR as Kafka fails the writes of an unloaded coordinator.
        self._unloads: dict[int, int] = {}
        self.commit_timeout_ms = settings.commit_timeout_ms

    # --- the topic ---------------------------------------------------------------------------------

    def partition_count(self) -> int:
        topic = self.topics.get(OFFSETS_TOPIC)
        return len(topic.replicas) if topic is not None else self.settings.num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    def topic_exists(self) -> bool:
        return self.topics.get(OFFSETS_TOPIC) is not None

    async def ensure_topic(self) -> None:
        """Create __consumer_offsets if nothing has yet; COORDINATOR_NOT_AVAILABLE if that fails.
        One creation at a time, and a caller that goes away (its client disconnected) does not
        interrupt it."""
        if self.topic_exists():
            return
        await self._creating.run()

    async def _create_topic(self) -> None:
        settings = self.settings
        try:
            await self.topics.create(OFFSETS_TOPIC, settings.num_partitions, settings.replication_factor,
                                     dict(OFFSETS_TOPIC_CONFIGS))
        except TopicError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS or self.topic_exists():
                return
            log.error("cannot create the offsets topic", error=ErrorCode(exc.error_code).name, reason=exc.message)
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             f"cannot create {OFFSETS_TOPIC}: {exc.message}") from None
        except Exception as exc:
            log.error("cannot create the offsets topic", error=repr(exc))
            raise GroupError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"cannot create {OFFSETS_TOPIC}: {exc!r}") from None
        log.info("created the offsets topic", partitions=settings.num_partitions)

    # --- writing -----------------------------------------------------------------------------------

    async def append(self, group_id: str, entries: Sequence[tuple[bytes, bytes | None]],
                     too_large: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR, timestamp: int | None = None,
                     producer: tuple[int, int] | None = None, appended: Callable[[int], None] | None = None,
                     verification_guard: object | None = None) -> int:
        """Append records for one group as one batch; returns the offset of the first. Waits until
        the high watermark covers them. GroupError with the coordinator's error code otherwise.
        `producer` (id, epoch): a transactional batch, pending until its transaction's marker, and
        `verification_guard` the one it presents (KIP-890). `appended` is told the first offset once
        the batch is in this log, before that wait."""
        await self.ensure_topic()
        index = self.partition_for(group_id)
        timestamp = now_ms() if timestamp is None else timestamp
        producer_id, producer_epoch = producer if producer is not None else (-1, -1)
        data = build_batch([(key, value, [], timestamp) for key, value in entries], producer_id=producer_id,
                           producer_epoch=producer_epoch, is_transactional=producer is not None)
        [result] = await self.replicas.append_records(
            [(OFFSETS_TOPIC, index, memoryview(data), RecordBatch(data))], required_acks=-1,
            timeout_ms=self.commit_timeout_ms, origin=AppendOrigin.COORDINATOR, internal_topics_allowed=True,
            verification_guards=None if verification_guard is None else {(OFFSETS_TOPIC, index): verification_guard},
            appended=None if appended is None else lambda _, placed: appended(placed.base_offset))
        code = result.error_code
        if code != ErrorCode.NONE:
            # Leadership moved, or the ISR did not take it in time: the record may be cut from this
            # log, and the write is not acknowledged.
            mapped = too_large if code in _TOO_LARGE else coordinator_error(code)
            log.warning("offsets topic append failed", group=group_id, partition=index, error=ErrorCode(code).name,
                        answered=ErrorCode(mapped).name, reason=result.error_message)
            raise GroupError(mapped, result.error_message or "")
        return result.base_offset

    async def commit(self, group_id: str, offsets: dict[TopicPartitionKey, CommittedOffset]) -> None:
        if offsets:
            await run_to_completion(self._commit(group_id, offsets))

    async def _commit(self, group_id: str, offsets: dict[TopicPartitionKey, CommittedOffset]) -> None:
        entries = [(records.offset_key(group_id, topic, partition),
                    records.offset_value(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp, c.expire_timestamp))
                   for (topic, partition), c in offsets.items()]
        timestamp = max(c.commit_timestamp for c in offsets.values())
        unloads = self._unloads_of(group_id)
        self._commits_in_flight += 1
        try:
            base = await self.append(group_id, entries, too_large=ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
                                     timestamp=timestamp)
            self._check_still_loaded(group_id, unloads)
            for i, ((topic, partition), committed) in enumerate(offsets.items()):
                committed.record_offset = base + i
                if self._tombstones.get((group_id, topic, partition), -1) > committed.record_offset:
                    continue  # deleted by a tombstone written after it
                self._put(group_id, topic, partition, committed)
        finally:
            self._commits_in_flight -= 1
            if not self._commits_in_flight:
                self._tombstones.clear()

    async def commit_transactional(self, group_id: str, offsets: dict[TopicPartitionKey, CommittedOffset],
                                   producer_id: int, producer_epoch: int,
                                   verification_guard: object | None = None) -> None:
        """TxnOffsetCommit: the offsets are written now and count once their transaction commits."""
        if offsets:
            await run_to_completion(self._commit_transactional(group_id, offsets, producer_id, producer_epoch,
                                                               verification_guard))

    async def _commit_transactional(self, group_id: str, offsets: dict[TopicPartitionKey, CommittedOffset],
                                    producer_id: int, producer_epoch: int, verification_guard: object | None) -> None:
        entries = [(records.offset_key(group_id, topic, partition),
                    records.offset_value(c.offset, c.leader_epoch, c.metadata, c.commit_timestamp, c.expire_timestamp))
                   for (topic, partition), c in offsets.items()]
        # Pending before the append: its marker may be written, and reported, before this task resumes.
        mine = {(group_id, topic, partition): PendingOffset(committed)
                for (topic, partition), committed in offsets.items()}
        unloads = self._unloads_of(group_id)
        self._pending.setdefault(producer_id, {}).update(mine)

        def placed(first: int) -> None:
            if self._unloads_of(group_id) == unloads:  # else its entries went with the unload
                self._placed(producer_id, mine, first)

        try:
            base = await self.append(group_id, entries, too_large=ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
                                     producer=(producer_id, producer_epoch), appended=placed,
                                     verification_guard=verification_guard)
            self._check_still_loaded(group_id, unloads)
        except BaseException:
            self._drop_pending(producer_id, mine)  # a later commit of the same key keeps its own entry
            raise
        placed(base)  # nothing left to do once the data path has told

    def _unloads_of(self, group_id: str) -> int:
        return self._unloads.get(self.partition_for(group_id), 0)

    def _check_still_loaded(self, group_id: str, unloads: int) -> None:
        """A write that began when the group's offsets partition had been unloaded `unloads` times: if
        it was unloaded since, what the write would change in memory is gone (a reload replayed the log,
        maybe before this batch was in it), so the write answers NOT_COORDINATOR and the client retries."""
        if self._unloads_of(group_id) != unloads:
            raise GroupError(ErrorCode.NOT_COORDINATOR, "the group's offsets partition was unloaded during the write")

    def _placed(self, producer_id: int, entries: Mapping[tuple[str, str, int], PendingOffset], base: int) -> None:
        """A TxnOffsetCommit's batch is in the log from `base`, maybe not replicated yet: its offsets
        learn their record offsets, and a marker reported before that settles them if it lies after them."""
        if any(entry.offset.record_offset >= 0 for entry in entries.values()):
            return  # told already
        pending = self._pending.get(producer_id, {})
        for i, (key, entry) in enumerate(entries.items()):
            entry.offset.record_offset = base + i
            after = [marker for marker in entry.markers if marker[0] > entry.offset.record_offset]
            entry.markers.clear()
            if after and pending.get(key) is entry:
                self._settle(producer_id, key, committed=min(after)[1])

    def _settle(self, producer_id: int, key: tuple[str, str, int], committed: bool) -> None:
        """The producer's pending offset of `key` meets its marker: stored (commit) or dropped (abort)."""
        pending = self._pending[producer_id]
        entry = pending.pop(key)
        if not pending:
            del self._pending[producer_id]
        if committed:
            self._put(*key, entry.offset)

    def _drop_pending(self, producer_id: int, entries: Mapping[tuple[str, str, int], PendingOffset]) -> None:
        pending = self._pending.get(producer_id, {})
        for key, entry in entries.items():
            if pending.get(key) is entry:
                del pending[key]
        if not pending:
            self._pending.pop(producer_id, None)

    def transaction_completed(self, partition_index: int, producer_id: int, committed: bool,
                              marker_offset: int) -> None:
        """A marker for `producer_id` at `marker_offset` of offsets partition `partition_index`: its
        offsets written there before the marker are committed (kept in place of older ones) or dropped.
        Those written after it wait for a later marker, as a replay of the partition leaves them (and
        Kafka's); those not yet written are settled when their append says where they went."""
        pending = self._pending.get(producer_id)
        if not pending:
            return
        for key, entry in list(pending.items()):
            if self.partition_for(key[0]) != partition_index:
                continue
            if entry.offset.record_offset < 0:
                entry.markers.append((marker_offset, committed))
            elif entry.offset.record_offset < marker_offset:
                self._settle(producer_id, key, committed)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """An offset of this group and partition waits for its transaction (OffsetFetch's require_stable;
        retention leaves the partition's committed offset alone meanwhile)."""
        return any((group_id, topic, partition) in p for p in self._pending.values())

    def pending_partitions(self, group_id: str) -> set[TopicPartitionKey]:
        """The partitions of the group with an offset waiting for its transaction."""
        return {(topic, partition) for p in self._pending.values() for group, topic, partition in p
                if group == group_id}

    def offset_keys(self, group_id: str) -> list[TopicPartitionKey]:
        """The partitions with a committed or a pending offset: what deleting the group tombstones
        (Kafka's deleteAllOffsets)."""
        committed = self._by_group.get(group_id, {})
        return [*committed, *sorted(self.pending_partitions(group_id) - committed.keys())]

    def _drop_pending_before(self, group_id: str, topic: str, partition: int, tombstone_offset: int) -> None:
        """A tombstone takes with it the pending offsets of its key written before it, as Kafka's replay
        of one does: their transaction's commit marker no longer brings them back."""
        key = (group_id, topic, partition)
        for producer_id, pending in list(self._pending.items()):
            entry = pending.get(key)
            if entry is not None and 0 <= entry.offset.record_offset < tombstone_offset:
                del pending[key]
                if not pending:
                    del self._pending[producer_id]

    async def delete(self, group_id: str, keys: Iterable[TopicPartitionKey], *, group_tombstone: bool = False) -> None:
        """Tombstones for these offsets (and the group's metadata if asked), then forget them."""
        await run_to_completion(self._delete(group_id, list(keys), group_tombstone))

    async def _delete(self, group_id: str, keys: list[TopicPartitionKey], group_tombstone: bool) -> None:
        entries: list[tuple[bytes, bytes | None]] = [(records.offset_key(group_id, t, p), None) for t, p in keys]
        if group_tombstone:
            entries.append((records.group_key(group_id), None))
        if not entries:
            return
        base = await self.append(group_id, entries)
        for i, (topic, partition) in enumerate(keys):
            if self._commits_in_flight:
                key = (group_id, topic, partition)
                self._tombstones[key] = max(self._tombstones.get(key, -1), base + i)
            self._remove(group_id, topic, partition, base + i)
            self._drop_pending_before(group_id, topic, partition, base + i)

    async def store_group(self, group_id: str, value: GroupMetadataValue) -> int:
        record = (records.group_key(group_id), records.group_value(value))
        return await run_to_completion(self.append(group_id, [record]))

    # --- the in-memory view --------------------------------------------------------------------------

    def get(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._by_group.get(group_id, {}).get((topic, partition))

    def group_offsets(self, group_id: str) -> dict[TopicPartitionKey, CommittedOffset]:
        return dict(self._by_group.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._by_group.get(group_id))

    def groups_with_offsets(self) -> list[str]:
        return list(self._by_group)

    def partition_offsets(self, topic: str, partition: int) -> dict[str, CommittedOffset]:
        return dict(self._by_partition.get((topic, partition), {}))

    def _put(self, group_id: str, topic: str, partition: int, committed: CommittedOffset) -> None:
        current = self.get(group_id, topic, partition)
        if current is not None and current.record_offset > committed.record_offset:
            return  # a newer commit of the same partition was written after this one
        self._by_group.setdefault(group_id, {})[(topic, partition)] = committed
        self._by_partition.setdefault((topic, partition), {})[group_id] = committed

    def _remove(self, group_id: str, topic: str, partition: int, record_offset: int) -> None:
        current = self.get(group_id, topic, partition)
        if current is None or current.record_offset > record_offset:
            return
        offsets = self._by_group[group_id]
        del offsets[(topic, partition)]
        if not offsets:
            del self._by_group[group_id]
        by_partition = self._by_partition[(topic, partition)]
        del by_partition[group_id]
        if not by_partition:
            del self._by_partition[(topic, partition)]

    # --- loading -------------------------------------------------------------------------------------

    async def load(self, replay_group: Callable[[str, GroupMetadataValue | None], None],
                   replay_consumer: ConsumerReplay) -> LoadStats:
        """Replay every partition of the offsets topic (one broker): offsets into this store, group
        metadata through `replay_group(group_id, value or None for a tombstone)`, KIP-848 consumer
        and share group records through `replay_consumer(key, value or None)`."""
        stats = LoadStats()
        topic = self.topics.get(OFFSETS_TOPIC)
        if topic is None:
            return stats
        for index in sorted(topic.replicas):
            try:
                partition = self.replicas.partition(OFFSETS_TOPIC, index)
            except PartitionError as exc:
                log.error("offsets partition not loadable", partition=index, error=exc.message)
                continue
            await self._load_partition(partition, replay_group, replay_consumer, stats)
        stats.offsets = sum(len(v) for v in self._by_group.values())
        return stats

    def local_partitions(self) -> list:
        """The offsets topic's partitions with a replica here (a cluster broker hosts some of them)."""
        topic = self.topics.get(OFFSETS_TOPIC)
        found = []
        for index in sorted(topic.replicas) if topic is not None else []:
            try:
                found.append(self.replicas.partition(OFFSETS_TOPIC, index))
            except PartitionError:
                continue
        return found

    async def load_partition(self, partition, replay_group: Callable[[str, GroupMetadataValue | None], None],
                             replay_consumer: ConsumerReplay) -> None:
        """Replay one partition (this broker just became its leader)."""
        await self._load_partition(partition, replay_group, replay_consumer, LoadStats())

    async def _load_partition(self, partition, replay_group, replay_consumer: ConsumerReplay, stats: LoadStats) -> None:
        partition_log = partition.log
        offset = partition_log.log_start_offset
        while offset < partition_log.log_end_offset:
            try:
                info = partition_log.read(offset, LOAD_READ_BYTES, bound=ReadBound.LOG_END, min_one_batch=True)
            except (OffsetOutOfRangeError, StorageError) as exc:
                log.error("offsets partition read failed", partition=str(partition.topic_partition), offset=offset,
                          error=exc.message)
                return
            if not info.slices:
                return
            (data,) = await self.replicas.read_slices([info.slices])
            for batch in iter_batches(data, allow_partial_tail=True):
                if batch.last_offset < offset:
                    continue
                if batch.is_control:
                    self._replay_marker(batch, partition.topic_partition.partition)
                    continue
                transactional = batch.producer_id if batch.is_transactional else None
                for record in batch.records():
                    if record.offset >= offset:
                        self._replay(record, replay_group, replay_consumer, stats, transactional)
            if info.next_offset <= offset:
                return
            offset = info.next_offset

    def _replay_marker(self, batch: RecordBatch, partition_index: int) -> None:
        try:
            control_type = read_marker(batch)[0]
        except ProtocolError:
            return
        if control_type >= 0:
            self.transaction_completed(partition_index, batch.producer_id, control_type == ControlType.COMMIT,
                                       batch.base_offset)

    def _replay(self, record, replay_group, replay_consumer: ConsumerReplay, stats: LoadStats,
                producer_id: int | None = None) -> None:
        stats.records += 1
        if record.key is None:
            stats.skipped += 1
            log.debug("offsets topic record without a key skipped", offset=record.offset)
            return
        try:
            key = records.parse_key(record.key)
            if isinstance(key, GroupMetadataKey):
                group_value = None if record.value is None else records.parse_group_value(record.value)
                replay_group(key.group, group_value)
                stats.groups += 1
                return
            if record.value is None:
                self._remove(key.group, key.topic, key.partition, record.offset)
                self._drop_pending_before(key.group, key.topic, key.partition, record.offset)
                return
            value = records.parse_offset_value(record.value)
        except records.UnknownRecord as exc:
            kind = record_type(record.key)
            # A KIP-848 consumer group's or a share group's (checked after the classic types).
            if kind in consumer_records.KNOWN_TYPES or kind in share_records.KNOWN_TYPES:
                if kind in consumer_records.WRITTEN_TYPES or kind in share_records.WRITTEN_TYPES:
                    replay_consumer(bytes(record.key), None if record.value is None else bytes(record.value))
                return
            stats.skipped += 1
            log.debug("offsets topic record of an unknown type skipped", offset=record.offset, reason=str(exc))
            return
        except ProtocolError as exc:
            stats.skipped += 1
            log.debug("malformed offsets topic record skipped", offset=record.offset, error=exc.message)
            return
        expire = value.expire_timestamp if value.expire_timestamp >= 0 else None
        committed = CommittedOffset(value.offset, value.leader_epoch, value.metadata, value.commit_timestamp, expire,
                                    record.offset)
        if producer_id is not None:  # a TxnOffsetCommit's: it counts once its marker says commit
            self._pending.setdefault(producer_id, {})[(key.group, key.topic, key.partition)] = PendingOffset(
                committed)
            return
        self._put(key.group, key.topic, key.partition, committed)

    def forget_group(self, group_id: str) -> None:
        for topic, partition in list(self._by_group.get(group_id, {})):
            self._remove(group_id, topic, partition, 1 << 62)

    def forget_pending(self, partition_index: int) -> None:
        """Offsets partition `partition_index` is led elsewhere now: its pending offsets go with its
        groups, so that a later load holds exactly what its replay finds (not an entry whose marker
        another leader wrote meanwhile, or whose batch it truncated). The writes in flight to it see
        the unload after their append (`_check_still_loaded`)."""
        self._unloads[partition_index] = self._unloads.get(partition_index, 0) + 1
        for producer_id, pending in list(self._pending.items()):
            for key in [key for key in pending if self.partition_for(key[0]) == partition_index]:
                del pending[key]
            if not pending:
                del self._pending[producer_id]
