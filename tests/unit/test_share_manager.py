"""SharePartitionManager (broker/share/manager.py) around one replica stand-in and an in-memory share
coordinator: share-partitions go with their leadership and come back from the coordinator, the
persister's errors become partition error codes (a share-partition without state is not made by its
leader), a read under way when its group's offsets are deleted is not kept, and an older Ebb's state file
moves into the coordinator once."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.log.common import TopicPartition
from broker.log.io import LogIO
from broker.log.txn_index import AbortedTxn
from broker.share.manager import SharePartitionManager, ShareSettings, ShareStateError, _batches
from broker.share.partition import ShareLimits, SharePartition
from broker.share.persister import PersisterError
from broker.share.state_log import DELETED_START, ShareState
from protocol.batch_header import assign_offsets
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import ErrorCode
from protocol.records import build_batch
from tests.broker.data_wire import batch


class _Log:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.io = LogIO()
        self.failures: list[str] = []
        self.log_end_offset = 10

    def io_failed(self, action: str, exc: BaseException) -> None:
        self.failures.append(action)


class _Partition:
    def __init__(self, directory: Path) -> None:
        self.topic_id = uuid.uuid4()
        self.topic_partition = TopicPartition("t", 0)
        self.is_leader = True
        self.leader_epoch = 0
        self.log = _Log(directory)
        self.log_start_offset = 0
        self.high_watermark = 10


class _Persister:
    """The share coordinator as the leader sees it: states by key; `failing` refuses every call."""

    def __init__(self) -> None:
        self.states: dict = {}
        self.failing: ErrorCode | None = None
        self.reads = 0

    def _check(self) -> None:
        if self.failing is not None:
            raise PersisterError(self.failing)

    async def read(self, key, leader_epoch):
        self._check()
        self.reads += 1
        await asyncio.sleep(0)  # a round trip: the loop turns
        if key not in self.states or self.states[key].deleted:  # no state: refused, as Kafka's coordinator does
            raise PersisterError(ErrorCode.INVALID_REQUEST)
        return self.states[key]

    async def write(self, key, state_epoch, leader_epoch, start_offset, batches):
        self._check()
        old = self.states.get(key)
        if old is None or old.deleted:
            raise PersisterError(ErrorCode.INVALID_REQUEST)
        if state_epoch < old.state_epoch:
            raise PersisterError(ErrorCode.FENCED_STATE_EPOCH)
        self.states[key] = ShareState(state_epoch, leader_epoch, start_offset, batches, 0)

    async def initialize_at(self, state_epoch, starts):
        errors = {}
        for key, start in starts.items():
            old = self.states.get(key)
            if self.failing is not None:
                errors[key] = self.failing
            elif old is not None and not old.deleted and old.state_epoch > state_epoch:
                errors[key] = ErrorCode.FENCED_STATE_EPOCH
            else:
                self.states[key] = ShareState(state_epoch, 0, start, (), 0)
                errors[key] = ErrorCode.NONE
        return errors

    async def move_in(self, key, state_epoch, leader_epoch, start_offset, batches):
        errors = await self.initialize_at(state_epoch, {key: start_offset})
        if errors[key] != ErrorCode.NONE:
            raise PersisterError(errors[key])
        await self.write(key, state_epoch, leader_epoch, start_offset, batches)

    async def delete(self, key):
        self._check()
        old = self.states.get(key)
        if old is not None and not old.deleted:
            self.states[key] = ShareState(old.state_epoch + 1, old.leader_epoch, DELETED_START, (), 0)


def _manager() -> SharePartitionManager:
    replicas = SimpleNamespace(leadership_listeners=[], forget_listeners=[],
                               fetches=SimpleNamespace(notify=lambda tp: None))
    return SharePartitionManager(replicas, _Persister())  # type: ignore[arg-type]


def _topic(manager, partition):
    """The topic of `partition` (its one replica) as the admin methods take it."""
    manager._replicas.partition_of = lambda t, i: partition
    manager._replicas.partition = lambda name, i: partition
    return SimpleNamespace(name="t", topic_id=partition.topic_id, replicas={0: None})


async def _started(manager, partition, offset: int, state_epoch: int = 1):
    """AlterShareGroupOffsets (at the group epoch `state_epoch`), then the first fetch's read: the
    share-partition in memory."""
    _topic(manager, partition)
    assert await manager.set_starts("g", state_epoch, {(partition.topic_id, 0): offset}) == {
        (partition.topic_id, 0): ErrorCode.NONE}
    return await manager.stored("g", partition)


async def test_leadership_leaving_drops_the_share_partition(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    before = await _started(manager, partition, 5)
    partition.is_leader = False
    manager._role_changed(partition)  # type: ignore[arg-type]
    assert manager.share_partition("g", partition) is None  # type: ignore[arg-type]
    assert len(manager._writing) == 0 and manager._owners == {}
    partition.is_leader = True  # leading again: read back from the coordinator, a new object
    again = await manager.stored("g", partition)  # type: ignore[arg-type]
    assert again is not None and again is not before and again.start_offset == 5


async def test_a_forgotten_replica_drops_its_share_partitions(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    await _started(manager, partition, 3)
    manager._forgotten(TopicPartition("t", 0))
    assert manager.partitions == {}


async def test_persister_errors_are_partition_errors(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    manager.persister.failing = ErrorCode.COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
    where = (partition.topic_id, 0)
    assert await manager.set_starts("g", 1, {where: 1}) == {where: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    with pytest.raises(ShareStateError) as refused:  # a share-partition not in memory cannot be read
        await manager.stored("g", partition)  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_an_old_state_file_moves_into_the_coordinator_once(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    old = SharePartition.restore(b'{"version":0,"group":"g","start":4,"end":7,"records":[[4,0,1],[5,2,1],[6,0,2]]}',
                                 "g", released=lambda: None)
    (tmp_path / f"share-{hashlib.sha256(b'g').hexdigest()[:32]}.state").write_bytes(old.snapshot("g"))
    found = await manager.stored("g", partition)  # type: ignore[arg-type]
    assert found is not None and (found.start_offset, found.next_fetch_offset(), found.end_offset) == (4, 4, 7)
    assert list(tmp_path.glob("share-*.state")) == []  # read once: the coordinator has it now
    stored = manager.persister.states[("g", partition.topic_id, 0)]  # type: ignore[attr-defined]
    assert (stored.start_offset, stored.batches) == (4, ((4, 4, 0, 1), (5, 5, 2, 1), (6, 6, 0, 2)))
    # above the state epoch an older Ebb's group has its missing states initialized at: that cannot reset it
    assert stored.state_epoch == found.state_epoch == 1



async def test_an_old_state_file_moves_even_when_the_coordinator_holds_only_a_leader_epoch(tmp_path):
    """A read with a leader epoch stores a "none" state (start -1, state epoch 0): not a deletion."""
    manager, partition = _manager(), _Partition(tmp_path)
    manager.persister.states[("g", partition.topic_id, 0)] = ShareState(0, 0, -1, (), 0)  # type: ignore
    old = SharePartition.restore(b'{"version":0,"group":"g","start":4,"end":5,"records":[[4,2,1]]}',
                                 "g", released=lambda: None)
    (tmp_path / f"share-{hashlib.sha256(b'g').hexdigest()[:32]}.state").write_bytes(old.snapshot("g"))
    found = await manager.stored("g", partition)  # type: ignore[arg-type]
    assert found is not None and (found.start_offset, found.end_offset) == (4, 5)


async def test_a_read_under_way_when_the_offsets_are_deleted_is_not_kept(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    await _started(manager, partition, 7)
    partition.is_leader = False
    manager._role_changed(partition)  # type: ignore[arg-type]
    partition.is_leader = True
    reading = asyncio.ensure_future(manager.stored("g", partition))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the read is on its way to the coordinator now
    _topic(manager, partition)
    await manager.forget("g", {partition.topic_id: ("t", [0])})
    assert await reading is None
    assert manager.partitions == {}
    [deleted] = manager.persister.states.values()  # type: ignore[attr-defined]
    assert deleted.deleted and deleted.state_epoch == 2  # a newer epoch than the alter's


async def test_a_fetch_whose_share_partition_was_replaced_during_its_read_acquires_nothing(tmp_path):
    """AlterShareGroupOffsets while a ShareFetch reads the log: the records go to nobody, and the new
    share-partition holds nothing in flight."""
    manager, partition = _manager(), _Partition(tmp_path)
    _readable(partition)

    async def read_slices(slices):
        await manager.set_starts("g", 2, {(partition.topic_id, 0): 0})
        return [memoryview(batch([b"a", b"b"]))]

    manager._replicas.read_slices = read_slices  # type: ignore[attr-defined]
    _initialized(manager, partition)
    read = await manager.fetch("g", "m", partition, EARLIEST, 1 << 20, 100)  # type: ignore[arg-type]
    assert (read.error, read.acquired, read.records) == (ErrorCode.NONE, (), b"")
    assert manager.share_partition("g", partition) is None  # type: ignore[arg-type]  # read again next time
    again = await manager.stored("g", partition)  # type: ignore[arg-type]
    assert again is not None and (again.state_epoch, again.end_offset, again.next_fetch_offset()) == (2, 0, 0)


EARLIEST = ShareSettings(ShareLimits(lock_ms=30_000, delivery_limit=5, max_locks=100), "earliest",
                         read_committed=False)


def _initialized(manager, partition, state_epoch: int = 1) -> None:
    """The group coordinator's InitializeShareGroupState: a state with no start offset (the reset rule's)."""
    manager.persister.states[("g", partition.topic_id, 0)] = ShareState(state_epoch, 0, -1, (), 0)


def _readable(partition) -> None:
    """A leader whose log holds two records at offsets 0-1."""
    partition.last_stable_offset = partition.high_watermark = 2
    partition.check_leader = lambda: None
    partition.log.read = lambda offset, max_bytes, max_offset: SimpleNamespace(slices=["slice"])


async def test_a_share_partition_its_coordinator_has_no_state_for_is_not_made_by_its_leader(tmp_path):
    """Kafka 4.3.1: the share coordinator refuses the read (INVALID_REQUEST), the leader answers the fetch
    UNKNOWN_SERVER_ERROR, keeps nothing and writes nothing; once the group coordinator initialized the
    state, the next fetch reads it and starts where share.auto.offset.reset says."""
    manager, partition = _manager(), _Partition(tmp_path)
    _readable(partition)

    async def read_slices(slices):
        return [memoryview(batch([b"a", b"b"]))]

    manager._replicas.read_slices = read_slices  # type: ignore[attr-defined]
    for _ in range(2):  # asked again at each fetch, as Kafka's leader drops the failed share-partition
        read = await manager.fetch("g", "m", partition, EARLIEST, 1 << 20, 100)  # type: ignore[arg-type]
        assert (read.error, read.acquired) == (ErrorCode.UNKNOWN_SERVER_ERROR, ())
        assert manager.partitions == {} and manager.persister.states == {}  # type: ignore[attr-defined]
    assert manager.persister.reads == 2  # type: ignore[attr-defined]
    assert await manager.stored("g", partition) is None  # type: ignore[arg-type]  # described as no state
    _initialized(manager, partition, state_epoch=3)
    read = await manager.fetch("g", "m", partition, EARLIEST, 1 << 20, 100)  # type: ignore[arg-type]
    assert read.error == ErrorCode.NONE and [(a.first, a.last) for a in read.acquired] == [(0, 1)]
    assert manager.share_partition("g", partition).state_epoch == 3  # type: ignore[arg-type,union-attr]


# A share coordinator's error and the leader's answer for it (Kafka 4.3.1's SharePartition.fetchPersisterError)
_PERSISTER_ERRORS = [
    (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_ID_NOT_FOUND),
    (ErrorCode.NETWORK_EXCEPTION, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_SERVER_ERROR),
]


@pytest.mark.parametrize("refused, answered", _PERSISTER_ERRORS)
async def test_a_failed_state_read_is_answered_as_kafkas_leader_answers_it(tmp_path, refused, answered):
    manager, partition = _manager(), _Partition(tmp_path)
    _readable(partition)
    _initialized(manager, partition)
    manager.persister.failing = refused  # type: ignore[attr-defined]
    read = await manager.fetch("g", "m", partition, EARLIEST, 1 << 20, 100)  # type: ignore[arg-type]
    assert read.error == answered and manager.partitions == {}


@pytest.mark.parametrize("refused, answered", _PERSISTER_ERRORS)
async def test_a_failed_state_write_is_answered_as_kafkas_leader_answers_it(tmp_path, refused, answered):
    """An acknowledgement whose write the share coordinator refuses hears the error as Kafka's
    SharePartition maps it (fetchPersisterError, as for a read), never the coordinator's own code."""
    manager, partition = _manager(), _Partition(tmp_path)
    held = await _started(manager, partition, 5)
    manager.persister.failing = refused  # type: ignore[attr-defined]
    with pytest.raises(ShareStateError) as failed:
        await manager.persist("g", partition, held)  # type: ignore[arg-type]
    assert failed.value.error_code == answered


async def test_an_acknowledgement_of_a_share_partition_gone_meanwhile_is_not_answered_as_stored(tmp_path):
    """persist() of the share-partition an acknowledgement changed: dropped (leadership moved) or
    replaced (AlterShareGroupOffsets) before its write, nothing is written and the caller hears
    NOT_LEADER_OR_FOLLOWER rather than NONE (or the replacement's state written in its name)."""
    manager, partition = _manager(), _Partition(tmp_path)
    acked = await _started(manager, partition, 5)
    key = ("g", partition.topic_id, 0)
    await manager.set_starts("g", 1, {(partition.topic_id, 0): 8})  # replaced...
    assert await manager.stored("g", partition) is not acked  # type: ignore[arg-type]
    with pytest.raises(ShareStateError) as refused:
        await manager.persist("g", partition, acked)  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    stored = manager.persister.states[key]  # type: ignore[attr-defined]
    assert stored.start_offset == 8
    current = manager.share_partition("g", partition)  # type: ignore[arg-type]
    partition.is_leader = False  # ...or dropped
    manager._role_changed(partition)  # type: ignore[arg-type]
    with pytest.raises(ShareStateError) as refused:
        await manager.persist("g", partition, current)  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert manager.persister.states[key] is stored  # type: ignore[attr-defined]


async def test_forgetting_tells_each_topic_whose_stored_state_could_not_be_deleted(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    await _started(manager, partition, 4)
    _topic(manager, partition)
    topics = {partition.topic_id: ("t", [0])}
    manager.persister.failing = ErrorCode.COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
    assert await manager.forget("g", topics) == {partition.topic_id: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert manager.persister.states[("g", partition.topic_id, 0)].start_offset == 4  # type: ignore[attr-defined]
    manager.persister.failing = None  # type: ignore[attr-defined]
    assert await manager.forget("g", topics) == {partition.topic_id: ErrorCode.NONE}
    assert manager.persister.states[("g", partition.topic_id, 0)].deleted  # type: ignore[attr-defined]


def test_read_committed_batches_of_aborted_transactions_are_told_from_their_headers():
    """Producer 7 aborts 1-4 (marker at 5), producer 8's transaction beside it commits, and 7's next
    transaction (7-8, marker 9) commits: only 7's data batches before its ABORT marker are aborted."""
    def data(base: int, count: int, producer_id: int = -1, transactional: bool = False) -> bytes:
        return build_batch([(None, b"v", [], 1)] * count, base_offset=base, producer_id=producer_id,
                           producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1,
                           is_transactional=transactional)

    def marker(offset: int, producer_id: int, kind: ControlType) -> bytes:
        stamped = bytearray(build_marker_batch(kind, producer_id, 0, 0, 1))
        assign_offsets(stamped, 0, offset, 0)
        return bytes(stamped)

    log = b"".join([data(0, 1), data(1, 2, 7, True), data(3, 1, 8, True), data(4, 1, 7, True),
                    marker(5, 7, ControlType.ABORT), marker(6, 8, ControlType.COMMIT), data(7, 2, 7, True),
                    marker(9, 7, ControlType.COMMIT), data(10, 1, 7)])
    read = memoryview(log)
    aborted = [AbortedTxn(producer_id=7, first_offset=1, last_offset=5, last_stable_offset=3)]
    assert [(b.base, b.aborted) for b, _ in _batches(read, aborted)] == [
        (0, False), (1, True), (3, False), (4, True), (5, False), (6, False), (7, False), (9, False), (10, False)]
    assert not any(b.aborted for b, _ in _batches(read, []))  # read_uncommitted: nothing aborted
    # a read from inside the transaction (its first offset below the read) still knows it
    from_three = memoryview(log)[len(data(0, 1)) + len(data(1, 2, 7, True)):]
    assert [(b.base, b.aborted) for b, _ in _batches(from_three, aborted)][:2] == [(3, False), (4, True)]


async def test_a_write_refused_because_the_state_was_deleted_drops_the_share_partition(tmp_path):
    """DeleteShareGroupOffsets through another broker's coordinator: the leader here still holds the
    share-partition; its next write is refused (INVALID_REQUEST: no state, as Kafka's coordinator answers),
    and it drops it, so that the next fetch reads again (and is refused until the group initializes it)."""
    manager, partition = _manager(), _Partition(tmp_path)
    held = await _started(manager, partition, 5)
    await manager.persister.delete(("g", partition.topic_id, 0))  # type: ignore[attr-defined]
    with pytest.raises(ShareStateError) as refused:
        await manager.persist("g", partition, held)  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR  # as Kafka's leader maps INVALID_REQUEST
    assert manager.share_partition("g", partition) is None  # type: ignore[arg-type]
    assert await manager.stored("g", partition) is None  # type: ignore[arg-type]  # no state to read
