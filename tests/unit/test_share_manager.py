"""SharePartitionManager (broker/share/manager.py) around one replica stand-in and an in-memory share
coordinator: share-partitions go with their leadership and come back from the coordinator, the
persister's errors become partition error codes, a read under way when its group's offsets are
deleted is not kept, and an older Ebb's state file moves into the coordinator once."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.log.common import TopicPartition
from broker.log.io import LogIO
from broker.share.manager import SharePartitionManager, ShareSettings, ShareStateError
from broker.share.partition import ShareLimits, SharePartition
from broker.share.persister import PersisterError
from broker.share.state_log import ShareState
from protocol.errors import ErrorCode
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
        return self.states.get(key)

    async def write(self, key, state_epoch, leader_epoch, start_offset, batches):
        self._check()
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            raise PersisterError(ErrorCode.FENCED_STATE_EPOCH)
        self.states[key] = ShareState(state_epoch, leader_epoch, start_offset, batches, 0)

    async def delete(self, key):
        self._check()
        old = self.states.get(key)
        if old is not None:
            self.states[key] = ShareState(old.state_epoch + 1, old.leader_epoch, -1, (), 0)


def _manager() -> SharePartitionManager:
    replicas = SimpleNamespace(leadership_listeners=[], forget_listeners=[],
                               fetches=SimpleNamespace(notify=lambda tp: None))
    return SharePartitionManager(replicas, _Persister())  # type: ignore[arg-type]


def _topic(manager, partition):
    """The topic of `partition` (its one replica) as the admin methods take it."""
    manager._replicas.partition_of = lambda t, i: partition
    manager._replicas.partition = lambda name, i: partition
    return SimpleNamespace(name="t", topic_id=partition.topic_id, replicas={0: None})


async def _started(manager, partition, offset: int):
    """AlterShareGroupOffsets, then the first fetch's read: the share-partition in memory."""
    await manager.set_start("g", _topic(manager, partition), 0, offset)
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
    with pytest.raises(ShareStateError) as refused:
        await manager.set_start("g", _topic(manager, partition), 0, 1)
    assert refused.value.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
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
    assert (deleted.start_offset, deleted.state_epoch) == (-1, 2)  # none, a newer epoch than the alter's


async def test_a_fetch_whose_share_partition_was_replaced_during_its_read_acquires_nothing(tmp_path):
    """AlterShareGroupOffsets while a ShareFetch reads the log: the records go to nobody, and the new
    share-partition holds nothing in flight."""
    manager, partition = _manager(), _Partition(tmp_path)
    partition.last_stable_offset = partition.high_watermark = 2
    partition.check_leader = lambda: None  # type: ignore[attr-defined]
    partition.log.read = lambda offset, max_bytes, max_offset: SimpleNamespace(slices=["slice"])  # type: ignore

    async def read_slices(slices):
        await manager.set_start("g", _topic(manager, partition), 0, 0)
        return [memoryview(batch([b"a", b"b"]))]

    manager._replicas.read_slices = read_slices  # type: ignore[attr-defined]
    limits = ShareLimits(lock_ms=30_000, delivery_limit=5, max_locks=100)
    settings = ShareSettings(limits, "earliest", read_committed=False)
    read = await manager.fetch("g", "m", partition, settings, 1 << 20, 100)  # type: ignore[arg-type]
    assert (read.acquired, read.records) == ((), b"")
    assert manager.share_partition("g", partition) is None  # type: ignore[arg-type]  # read again next time
    again = await manager.stored("g", partition)  # type: ignore[arg-type]
    assert again is not None and (again.state_epoch, again.end_offset, again.next_fetch_offset()) == (1, 0, 0)


async def test_an_acknowledgement_of_a_share_partition_gone_meanwhile_is_not_answered_as_stored(tmp_path):
    """persist() of the share-partition an acknowledgement changed: dropped (leadership moved) or
    replaced (AlterShareGroupOffsets) before its write, nothing is written and the caller hears
    NOT_LEADER_OR_FOLLOWER rather than NONE (or the replacement's state written in its name)."""
    manager, partition = _manager(), _Partition(tmp_path)
    acked = await _started(manager, partition, 5)
    key = ("g", partition.topic_id, 0)
    await manager.set_start("g", _topic(manager, partition), 0, 8)  # replaced...
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
    assert manager.persister.states[("g", partition.topic_id, 0)].start_offset == -1  # type: ignore[attr-defined]
