"""A follower rebuilds its producer table lazily (replica/partition.py load_producer_state). The
rebuild reads the log off the event loop, so batches arrive, roles change and the log is truncated
while it runs: the table it leaves must be exactly the log's, or an idempotent producer is answered
OUT_OF_ORDER_SEQUENCE_NUMBER after a failover. Here the host's I/O is held half way through a
rebuild (at its first header read) while the partition changes under it."""

import asyncio
import uuid

from broker.cluster.partition_state import PartitionState
from broker.log import LogManager, TopicPartition
from broker.replica.partition import Partition
from protocol.records import RecordBatch, build_batch
from tests.unit.test_partition_with_a_fake_host import FakeHost

TP = TopicPartition("t", 0)
PID = 7


class HeldHost(FakeHost):
    """run_io waits while `held` is set, once `hold_after` calls have passed (a rebuild half way)."""

    def __init__(self):
        super().__init__()
        self.calls = 0
        self.hold_after: int | None = None
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    async def run_io(self, fn, *args):
        self.calls += 1
        if self.hold_after is not None and self.calls > self.hold_after:
            self.hold_after = None
            self.reached.set()
            await self.release.wait()
        return await super().run_io(fn, *args)


def batch(base_offset: int, sequence: int, count: int = 2, epoch: int = 1) -> memoryview:
    return memoryview(bytearray(build_batch([(None, b"v", [], 1)] * count, base_offset=base_offset,
                                            producer_id=PID, producer_epoch=0, base_sequence=sequence,
                                            partition_leader_epoch=epoch)))


async def lead_next(partition, sequence: int) -> int:
    """The producer's next batch, to the partition now leading at epoch 2: its offset."""
    data = bytes(batch(0, sequence, epoch=2))
    return (await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), 1)).base_offset


async def follower(tmp_path, host):
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    log_ = await logs.get_or_create_log(TP)
    partition = Partition(host, TP, uuid.uuid4(), [1, 2], log_,
                          PartitionState(leader=2, leader_epoch=1, isr=(1, 2), controller_epoch=1))
    return logs, partition


async def rebuild_held(partition, host) -> asyncio.Task:
    """Start a rebuild and return once it is held inside its I/O."""
    # The snapshot read and the abort index reset pass; the header reads, past the point where the
    # rebuild has taken the log end to read to, wait.
    host.hold_after = host.calls + 2
    loading = asyncio.ensure_future(partition.load_producer_state())
    await asyncio.wait_for(host.reached.wait(), 5)
    host.reached.clear()
    return loading


async def test_batches_appended_while_the_rebuild_reads_are_in_the_table(tmp_path):
    host = HeldHost()
    logs, partition = await follower(tmp_path, host)
    try:
        await partition.append_as_follower(batch(0, 0))
        loading = await rebuild_held(partition, host)
        await partition.append_as_follower(batch(2, 2))  # after the rebuild looked at the log end
        await partition.append_as_follower(batch(4, 4))
        host.release.set()
        await asyncio.wait_for(loading, 5)
        assert partition.producers_loaded
        assert partition.producers.producers[PID].last_seq == 5
        await partition.append_as_follower(batch(6, 6))  # loaded now: applied as it comes, once
        assert [b.first_seq for b in partition.producers.producers[PID].batches] == [0, 2, 4, 6]

        # Promoted: the leader takes the producer's next batch, not OUT_OF_ORDER_SEQUENCE_NUMBER.
        partition.make_leader(2, {1, 2})
        assert await lead_next(partition, 8) == 8
    finally:
        await logs.shutdown()


async def test_a_role_change_during_the_rebuild_discards_it(tmp_path):
    host = HeldHost()
    logs, partition = await follower(tmp_path, host)
    try:
        await partition.append_as_follower(batch(0, 0))
        loading = await rebuild_held(partition, host)
        stale = partition._producers_loading
        partition.make_leader(2, {1, 2})  # resets the table: the held rebuild must not land
        host.release.set()
        await asyncio.wait_for(loading, 5)  # its caller waits for the next load instead
        assert stale is not None and stale.cancelled()
        assert partition.producers_loaded and partition.producers.producers[PID].last_seq == 1
        assert await lead_next(partition, 2) == 2
    finally:
        await logs.shutdown()


async def follower_with_a_table(tmp_path):
    """A follower with three batches of producer PID (sequences 0-5) and its table loaded."""
    logs, partition = await follower(tmp_path, HeldHost())
    for n in range(3):
        await partition.append_as_follower(batch(2 * n, 2 * n))
    await partition.load_producer_state()
    return logs, partition


async def test_truncation_resets_the_table_and_drops_a_snapshot_beyond_it(tmp_path):
    logs, partition = await follower_with_a_table(tmp_path)
    try:
        assert partition.producers.producers[PID].last_seq == 5
        assert await partition.write_producer_snapshot()
        assert partition.producers.snapshot_path.exists()

        await partition.truncate_as_follower(-1, -1)  # nothing to compare: back to the high watermark (0)
        assert partition.log.log_end_offset == 0
        assert not partition.producers_loaded and not partition.producers.snapshot_path.exists()
        await partition.append_as_follower(batch(0, 0))  # the new leader's history
        await partition.load_producer_state()
        assert [b.first_seq for b in partition.producers.producers[PID].batches] == [0]
    finally:
        await logs.shutdown()


async def test_no_snapshot_of_the_cut_batches_while_the_truncation_waits_for_its_checkpoint(tmp_path):
    logs, partition = await follower_with_a_table(tmp_path)
    try:
        wrote = []

        async def checkpoint_sink(force: bool) -> None:  # the start offset checkpoint write, where truncate_to waits
            wrote.append(await partition.write_producer_snapshot())  # the periodic snapshot round meanwhile
            partition.log.start_offset_checkpointed(partition.log.log_start_offset)

        partition.log.start_offset_sink = checkpoint_sink
        partition.log.start_offset_checkpointed(-1)  # a start move not checkpointed yet
        await partition.truncate_as_follower(-1, -1)  # back to the high watermark (0)
        assert wrote == [False] and not partition.producers.snapshot_path.exists()
    finally:
        await logs.shutdown()


async def test_a_follower_past_its_leaders_end_truncates_its_table_and_snapshot_too(tmp_path):
    from broker.config import ReplicationConfig
    from broker.replica.fetcher import ReplicaFetcher
    from protocol.enums import SpecialTimestamp

    logs, partition = await follower_with_a_table(tmp_path)
    try:
        assert await partition.write_producer_snapshot()  # covers offsets 0-5
        fetcher = ReplicaFetcher(1, 2, lambda _: None, lambda _: asyncio.sleep(0, {}), ReplicationConfig())

        async def connect():
            return None

        async def list_offset(_connection, _partition, timestamp):
            return 0 if timestamp == SpecialTimestamp.EARLIEST else 2  # the leader ends at 2

        fetcher._connect = connect
        fetcher._list_offset = list_offset
        await fetcher._reset_out_of_range(partition)
        assert partition.log.log_end_offset == 2
        assert not partition.producers_loaded and not partition.producers.snapshot_path.exists()
        await partition.load_producer_state()
        assert [b.first_seq for b in partition.producers.producers[PID].batches] == [0]
    finally:
        await logs.shutdown()
