"""SharePartitionManager (broker/share/manager.py) around one replica stand-in: share-partitions go
with their leadership, state-file I/O errors become partition error codes, and a state file read
under way when its group's offsets are deleted is not kept."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.log.common import TopicPartition
from broker.log.io import LogIO
from broker.share.manager import SharePartitionManager, ShareSettings, ShareStateError
from broker.share.partition import ShareLimits
from protocol.errors import ErrorCode
from tests.broker.data_wire import batch


class _Log:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.io = LogIO()
        self.failures: list[str] = []

    def io_failed(self, action: str, exc: BaseException) -> None:
        self.failures.append(action)


class _Partition:
    def __init__(self, directory: Path) -> None:
        self.topic_id = uuid.uuid4()
        self.topic_partition = TopicPartition("t", 0)
        self.is_leader = True
        self.log = _Log(directory)
        self.log_start_offset = 0
        self.high_watermark = 10


def _manager() -> SharePartitionManager:
    replicas = SimpleNamespace(leadership_listeners=[], forget_listeners=[],
                               fetches=SimpleNamespace(notify=lambda tp: None))
    return SharePartitionManager(replicas)  # type: ignore[arg-type]


async def test_leadership_leaving_drops_the_share_partition(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    await manager.set_start("g", partition, 5)  # type: ignore[arg-type]
    before = manager.share_partition("g", partition)  # type: ignore[arg-type]
    partition.is_leader = False
    manager._role_changed(partition)  # type: ignore[arg-type]
    assert manager.share_partition("g", partition) is None  # type: ignore[arg-type]
    assert manager._writing == {} and manager._owners == {}
    partition.is_leader = True  # leading again: read back from the state file, a new object
    again = await manager.stored("g", partition)  # type: ignore[arg-type]
    assert again is not None and again is not before and again.start_offset == 5


async def test_a_forgotten_replica_drops_its_share_partitions(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    await manager.set_start("g", partition, 3)  # type: ignore[arg-type]
    manager._forgotten(TopicPartition("t", 0))
    assert manager.partitions == {}


async def test_state_write_errors_are_partition_errors(tmp_path):
    manager = _manager()
    gone = _Partition(tmp_path / "deleted-topic-dir")  # the topic's deletion removed the dir
    with pytest.raises(ShareStateError) as refused:
        await manager.set_start("g", gone, 1)  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and gone.log.failures == []
    broken = _Partition(tmp_path)
    await manager.set_start("g", broken, 1)  # type: ignore[arg-type]
    [state] = tmp_path.glob("share-*.state")
    state.unlink()
    state.mkdir()  # the rename onto it fails: an I/O error that is not a missing dir
    with pytest.raises(ShareStateError) as refused:
        await manager.persist("g", broken)  # type: ignore[arg-type]
    assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broken.log.failures == ["share-partition state write"]  # the dir goes offline, as the log's


async def test_a_read_under_way_when_the_offsets_are_deleted_is_not_kept(tmp_path):
    manager, partition = _manager(), _Partition(tmp_path)
    await manager.set_start("g", partition, 7)  # type: ignore[arg-type]
    partition.is_leader = False
    manager._role_changed(partition)  # type: ignore[arg-type]
    partition.is_leader = True
    reading = asyncio.ensure_future(manager.stored("g", partition))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the read is in the pool now
    topic = SimpleNamespace(replicas={0: None})
    manager._replicas.partition_of = lambda t, i: partition  # type: ignore[attr-defined]
    await manager.forget("g", [topic])  # type: ignore[list-item]
    assert await reading is None
    assert manager.partitions == {} and list(tmp_path.glob("share-*.state")) == []


async def test_a_fetch_whose_share_partition_was_replaced_during_its_read_acquires_nothing(tmp_path):
    """AlterShareGroupOffsets while a ShareFetch reads the log: the records go to nobody, and the new
    share-partition holds nothing in flight."""
    manager, partition = _manager(), _Partition(tmp_path)
    partition.last_stable_offset = partition.high_watermark = 2
    partition.check_leader = lambda: None  # type: ignore[attr-defined]
    partition.log.read = lambda offset, max_bytes, max_offset: SimpleNamespace(slices=["slice"])  # type: ignore

    async def read_slices(slices):
        await manager.set_start("g", partition, 0)  # type: ignore[arg-type]
        return [memoryview(batch([b"a", b"b"]))]

    manager._replicas.read_slices = read_slices  # type: ignore[attr-defined]
    limits = ShareLimits(lock_ms=30_000, delivery_limit=5, max_locks=100)
    settings = ShareSettings(limits, "earliest", read_committed=False)
    read = await manager.fetch("g", "m", partition, settings, 1 << 20, 100)  # type: ignore[arg-type]
    assert (read.acquired, read.records) == ((), b"")
    share = manager.share_partition("g", partition)  # type: ignore[arg-type]
    assert share is not None and (share.end_offset, share.next_fetch_offset()) == (0, 0)
