"""The share coordinator (KIP-932's ShareCoordinatorService/Shard): the state of every share-partition
whose key ("group:topicId:partition") falls in a `__share_group_state` partition led here, kept in
memory and written to that partition (broker/share/state_log.py) before a write is answered.

One broker replays the whole topic at start. In a cluster a key belongs to the leader of its
partition: a partition whose leadership moves here is replayed (COORDINATOR_LOAD_IN_PROGRESS
meanwhile), one that moves away is dropped (NOT_COORDINATOR), through CoordinatorPartitions as the
group and transaction coordinators do. Share-partition leaders reach it through
broker/share/persister.py: directly when it is this broker, else ReadShareGroupState (84) and
WriteShareGroupState (85).

As Kafka's shard, a read or write carrying an older leader epoch than the stored one is FENCED_LEADER_EPOCH
(an old leader that has not yet heard it lost the partition must not overwrite its successor's state), checked
first and on its own; then a write carrying an older state epoch is FENCED_STATE_EPOCH (the admin APIs reset the
state since its leader read it: the leader reads it again). The leader epoch fencing is the highest
since the key's last deletion (Kafka's leaderEpochMap: an initialization's record carries 0 but lowers
nothing); the state epoch is the last initialization's (a write keeps it). A deletion
(DeleteShareGroupState) stores a deleted mark (state_log.DELETED_START) rather than a tombstone: it is no state
to every API, as Kafka's tombstone leaves none (a read or write of it INVALID_REQUEST, a delete NONE, a summary
none, an initialization fenced by nothing and stored at the epochs asked). A leader refused as INVALID_REQUEST
drops its share-partition (broker/share/manager.py); one that wrote nothing while the state was deleted is then
not fenced, as in Kafka. The states of a deleted topic (nobody can write them again: writes of unknown topics
are refused) are removed with tombstones, as Kafka's shard does.

A read or write of a key with no state is refused (INVALID_REQUEST, as Kafka's shard refuses those of an
uninitialized share-partition, before any fencing): a state is made only by InitializeShareGroupState (the
group coordinator, before it assigns the partition or for AlterShareGroupOffsets; the persister, moving an
older Ebb's state file in), never by a leader. A read carrying a leader epoch is a write too (Kafka's
readStateAndMaybeUpdateLeaderEpoch): an older one than stored is FENCED_LEADER_EPOCH, a newer one is
stored before the answer, so that the old leader's later writes are fenced. Reads, writes and deletes
of one key run one at a time, from the fencing check through the append to the memory update: two in
flight at once would both pass the check against the same stored state and the one appended last would
win.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from broker.aio import KeyedLocks, SharedRun
from broker.config import BrokerConfig
from broker.coordinator_partitions import CoordinatorPartitions
from broker.replica import AppendOrigin, Partition, ReplicaManager
from broker.share.partition import RecordState
from broker.share.state_log import (
    DELETED_START,
    SHARE_STATE_TOPIC,
    ShareState,
    StateBatch,
    StateKey,
    key_bytes,
    partition_of,
    raise_leader_epoch,
    replay_partition,
    value_bytes,
)
from broker.topics import TopicError, TopicManager
from protocol.errors import ErrorCode
from protocol.records import RecordBatch, build_batch

log = structlog.get_logger("share")

WRITE_TIMEOUT_MS = 5000
_APPEND_ERRORS = {  # an append's error as the coordinator answers it (Kafka's mapping)
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ShareCoordinator:
    def __init__(self, config: BrokerConfig, topics: TopicManager, replicas: ReplicaManager, *,
                 in_cluster: bool) -> None:
        self.settings = config.share_coordinator
        self.topics = topics
        self.replicas = replicas
        self.in_cluster = in_cluster
        self.active = False
        self.states: dict[StateKey, ShareState] = {}
        # Kafka's leaderEpochMap: the highest leader epoch of a key's records since its last deletion, which
        # fences reads and writes (a record's own leader epoch is what it was written with: 0 by an
        # initialization, as a summary shows)
        self.leader_epochs: dict[StateKey, int] = {}
        self._locks = KeyedLocks()  # one read/write/delete of a key at a time
        self._tasks: set[asyncio.Task] = set()
        self._creating = SharedRun(self._create_topic)
        self.unloaded: set[int] = set()  # one broker: partitions whose replay failed at start (not served)
        self.partitions = CoordinatorPartitions(
            SHARE_STATE_TOPIC, self._spawn, lambda index: replicas.partition(SHARE_STATE_TOPIC, index),
            load=self._load_partition, unload=self._unload_partition)

    # --- lifecycle (a broker service) ------------------------------------------------------------

    async def start(self) -> None:
        self.topics.deletion_listeners.append(self._topic_deleted)
        if self.in_cluster:
            self.active = True
            self.replicas.leadership_listeners.append(self._partition_moved)
            self.replicas.forget_listeners.append(self.partitions.forgotten)
            self.partitions.follow(self._local_partitions())
        else:
            for partition in self._local_partitions():
                try:
                    await self._replay(partition)
                except Exception as exc:  # that partition stays unserved, the others load (as in a cluster)
                    self.unloaded.add(partition.topic_partition.partition)
                    log.error("share group state not loaded", partition=str(partition.topic_partition),
                              error=str(exc))
            self.active = True
            log.info("share group state loaded", share_partitions=len(self.states))

    async def stop(self) -> None:
        self.active = False
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _local_partitions(self) -> list[Partition]:
        topic = self.topics.get(SHARE_STATE_TOPIC)
        return self.partitions.local(sorted(topic.replicas) if topic is not None else [])

    def _partition_moved(self, partition: Partition) -> None:
        if self.active:
            self.partitions.moved(partition)

    async def _replay(self, partition: Partition) -> tuple[int, int]:
        """One `__share_group_state` partition read into memory, all or nothing (its states and leader epoch
        fences): (records read, share-partitions with state)."""
        found: dict[StateKey, ShareState | None] = {}
        epochs: dict[StateKey, int] = {}
        records = await replay_partition(partition, self.replicas.read_slices, found, epochs)
        kept = {k: s for k, s in found.items() if s is not None}
        self.states.update(kept)
        self.leader_epochs.update(epochs)
        return records, len(kept)

    async def _load_partition(self, index: int, partition: Partition) -> None:
        records, states = await self._replay(partition)
        log.info("share group state loaded: this broker leads its partition now", partition=index,
                 records=records, share_partitions=states)

    def _unload_partition(self, index: int) -> None:
        for key in [k for k in self.states if self.partition_of(k) == index]:
            del self.states[key]
            self.leader_epochs.pop(key, None)

    # --- the topic -------------------------------------------------------------------------------

    def partition_count(self) -> int:
        topic = self.topics.get(SHARE_STATE_TOPIC)
        return len(topic.replicas) if topic is not None else self.settings.num_partitions

    def partition_of(self, key: StateKey) -> int:
        return partition_of(key, self.partition_count())

    async def ensure_topic(self) -> None:
        """Create `__share_group_state` on first use; TopicError(COORDINATOR_NOT_AVAILABLE) if that fails."""
        if self.topics.get(SHARE_STATE_TOPIC) is None:
            await self._creating.run()

    async def _create_topic(self) -> None:
        s = self.settings
        configs = {"cleanup.policy": "compact", "segment.bytes": str(s.segment_bytes),
                   "min.insync.replicas": str(s.min_isr), "compression.type": "uncompressed",
                   "unclean.leader.election.enable": "false"}
        try:
            await self.topics.create(SHARE_STATE_TOPIC, s.num_partitions, s.replication_factor, configs)
        except TopicError as exc:
            if exc.error_code == ErrorCode.TOPIC_ALREADY_EXISTS or self.topics.get(SHARE_STATE_TOPIC):
                return
            raise TopicError(ErrorCode.COORDINATOR_NOT_AVAILABLE,
                             f"cannot create {SHARE_STATE_TOPIC}: {exc.message}") from None
        log.info("created the share group state topic", partitions=s.num_partitions)

    def not_served(self, key: StateKey) -> ErrorCode | None:
        """Why this broker cannot answer for `key` now, or None."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.topics.get(SHARE_STATE_TOPIC) is None:  # no partition of it is led anywhere yet (Kafka's answer)
            return ErrorCode.NOT_COORDINATOR
        if not self.in_cluster:
            return ErrorCode.NOT_COORDINATOR if self.partition_of(key) in self.unloaded else None
        return self.partitions.not_served(self.partition_of(key))

    # --- reads and writes (ReadShareGroupState, WriteShareGroupState) ----------------------------

    async def read(self, key: StateKey, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        """The stored state (start offset -1: left to the leader's share.auto.offset.reset); INVALID_REQUEST
        when there is none, or it was deleted (see above). A leader epoch (not -1)
        older than the stored one is fenced; a newer one is stored first. Kafka's order of checks:
        not served or a negative partition, no state, the leader epoch, the topic."""
        async with self._locks.held(key):
            refused = self._refused_before_lookup(key)
            if refused is not None:
                return refused, None
            old = self.states.get(key)
            if old is None or old.deleted:
                return ErrorCode.INVALID_REQUEST, None
            fenced = self._fenced(key, old, -1, leader_epoch)
            if fenced is not None:
                return fenced, None
            refused = self._unknown_topic(key)
            if refused is not None:
                return refused, None
            if leader_epoch < 0 or self.leader_epochs.get(key) == leader_epoch:
                return ErrorCode.NONE, old
            now = _now_ms()
            state = ShareState(old.state_epoch, leader_epoch, old.start_offset, old.batches, old.create_ms,
                               old.snapshot_epoch + 1)
            error = await self._store(key, state, now)
            return error, state if error == ErrorCode.NONE else None

    async def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: tuple[StateBatch, ...]) -> ErrorCode:
        """Store the share-partition's state (`start_offset` -1: keep the stored one); NONE once the
        record is in the log at acks=-1. Kafka's order of checks: not served or a negative partition, no
        state (INVALID_REQUEST), the epochs, the topic; then Ebb's own of the state written."""
        async with self._locks.held(key):
            return await self._write(key, state_epoch, leader_epoch, start_offset, batches)

    async def _write(self, key: StateKey, state_epoch: int, leader_epoch: int, start_offset: int,
                     batches: tuple[StateBatch, ...]) -> ErrorCode:
        refused = self._refused_before_lookup(key)
        if refused is not None:
            return refused
        old = self.states.get(key)
        if old is None or old.deleted:
            return ErrorCode.INVALID_REQUEST
        fenced = self._fenced(key, old, state_epoch, leader_epoch)
        if fenced is not None:
            return fenced
        if start_offset < 0 and old.start_offset < 0:
            return ErrorCode.INVALID_REQUEST
        refused = self._unknown_topic(key) or _bad_state(start_offset, batches)
        if refused is not None:
            return refused
        now = _now_ms()
        # the state epoch is the initialization's (Kafka's write keeps it)
        state = ShareState(old.state_epoch, leader_epoch if leader_epoch != -1 else old.leader_epoch,
                           start_offset if start_offset >= 0 else old.start_offset, batches, old.create_ms,
                           old.snapshot_epoch + 1)
        return await self._store(key, state, now)

    def summary(self, key: StateKey) -> tuple[ErrorCode, ShareState | None]:
        """ReadShareGroupStateSummary: the committed state as it is (no leader epoch fencing, nothing
        written, so no wait behind the key's write in flight, and no await: memory holds only what is in
        the log); None when the key has none (or it was deleted)."""
        refused = self._refused_before_lookup(key) or self._unknown_topic(key)
        if refused is not None:
            return refused, None
        state = self.states.get(key)
        return ErrorCode.NONE, None if state is None or state.deleted else state

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> ErrorCode:
        """InitializeShareGroupState: a new snapshot of the key at `state_epoch` with `start_offset` (-1:
        left to the leader's share.auto.offset.reset) and nothing in flight, as Kafka's shard stores it:
        leader epoch 0 (the fencing keeps the highest, `leader_epochs`). A state epoch older than stored
        (not -1) is FENCED_STATE_EPOCH, unless the stored state is deleted (Kafka's tombstone forgot it) or
        empty (`_empty`)."""
        async with self._locks.held(key):
            refused = self._refused_before_lookup(key)
            if refused is not None:
                return refused
            old = self.states.get(key)
            live = old is not None and not old.deleted
            if live and not _empty(old) and self._fenced(key, old, state_epoch, -1) is not None:  # type: ignore[arg-type]
                return ErrorCode.FENCED_STATE_EPOCH
            refused = self._unknown_topic(key) or (ErrorCode.INVALID_REQUEST if start_offset < -1 else None)
            if refused is not None:
                return refused
            now = _now_ms()
            return await self._store(key, ShareState(state_epoch, 0, start_offset, (), now,
                                                     old.snapshot_epoch + 1 if old is not None else 0), now)

    async def delete(self, key: StateKey) -> ErrorCode:
        """The share-partition's state goes: a deleted mark (see above); NONE without writing when there is
        none."""
        async with self._locks.held(key):
            refused = self.not_served(key)
            if refused is not None:
                return refused
            old = self.states.get(key)
            if old is None or old.deleted:
                return ErrorCode.NONE
            now = _now_ms()
            return await self._store(key, ShareState(old.state_epoch + 1, old.leader_epoch, DELETED_START, (), now,
                                                     old.snapshot_epoch + 1), now)

    def _fenced(self, key: StateKey, old: ShareState, state_epoch: int, leader_epoch: int) -> ErrorCode | None:
        """Kafka's shard fencing of a read, write or initialization against the stored state: the leader epoch
        (the highest since its last deletion) first and on its own, then the state epoch; -1 asks for neither."""
        if leader_epoch != -1 and self.leader_epochs.get(key, old.leader_epoch) > leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if state_epoch != -1 and old.state_epoch > state_epoch:
            return ErrorCode.FENCED_STATE_EPOCH
        return None

    def _refused_before_lookup(self, key: StateKey) -> ErrorCode | None:
        """Why a read, write or initialization of `key` is refused before its stored state is looked up:
        not served here (not_served's error), or a negative partition (INVALID_REQUEST)."""
        refused = self.not_served(key)
        return ErrorCode.INVALID_REQUEST if refused is None and key[2] < 0 else refused

    def _unknown_topic(self, key: StateKey) -> ErrorCode | None:
        """UNKNOWN_TOPIC_OR_PARTITION unless the key names a partition of a topic that exists: checked after
        the fencing (a write then checks the state it brings, `_bad_state`), and for a summary with the
        refusals before any lookup."""
        topic = self.topics.by_id(key[1])
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None or key[2] not in topic.replicas else None

    def _topic_deleted(self, name: str) -> None:
        if self.active:
            self._spawn(self._remove_deleted_topics())

    async def _remove_deleted_topics(self) -> None:
        """Tombstones for the states here whose topic is gone (any deleted topic: the listener gives
        only its name, and the topic id is what keys hold)."""
        for key in [k for k in self.states if self.topics.by_id(k[1]) is None]:
            async with self._locks.held(key):
                if key in self.states and self.topics.by_id(key[1]) is None and self.not_served(key) is None:
                    await self._store(key, None, _now_ms())

    async def _store(self, key: StateKey, state: ShareState | None, now_ms: int) -> ErrorCode:
        """Append the state (None: a tombstone) at acks=-1, then hold it in memory."""
        value = None if state is None else value_bytes(state, now_ms)
        data = build_batch([(key_bytes(key), value, [], now_ms)])
        [result] = await self.replicas.append_records(
            [(SHARE_STATE_TOPIC, self.partition_of(key), memoryview(data), RecordBatch(data))],
            required_acks=-1, timeout_ms=WRITE_TIMEOUT_MS, origin=AppendOrigin.COORDINATOR,
            internal_topics_allowed=True)
        error = ErrorCode(result.error_code)
        if error != ErrorCode.NONE:
            log.warning("share group state write failed", key=str(key), error=error.name)
            return _APPEND_ERRORS.get(error, error)
        if self.not_served(key) is None:
            if state is None:
                self.states.pop(key, None)
            else:
                self.states[key] = state
            raise_leader_epoch(self.leader_epochs, key, state)
        return error


def _empty(state: ShareState) -> bool:
    """No start offset and nothing in flight: what an initialization without a start offset stores, and
    also what an older Ebb wrote for a deletion (start offset -1 under the next state epoch; the two records
    cannot be told apart). Such a state fences no initialization, so that the older Ebb's deletion does not
    refuse the recreated group's initializations at its lower group epochs. (Kafka fences a stale one over
    an empty state too; Ebb's group coordinator initializes in group epoch order, so only a late request
    from an older group epoch is stored where Kafka refuses it.)"""
    return state.start_offset == -1 and not state.batches


_STATES = frozenset(RecordState)


def _bad_state(start_offset: int, batches: tuple[StateBatch, ...]) -> ErrorCode | None:
    """INVALID_REQUEST for a state no leader writes: offsets below -1 or reversed, an unknown delivery
    state, a negative delivery count (Kafka stores them as sent; Ebb's leaders would fail to read them)."""
    if start_offset < -1:
        return ErrorCode.INVALID_REQUEST
    for first, last, state, count in batches:
        if first < 0 or first > last or state not in _STATES or count < 0:
            return ErrorCode.INVALID_REQUEST
    return None
