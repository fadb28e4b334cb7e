"""A leader validates a producer batch in the pool (recompression, timestamp checks) before its
producer checks (replica/partition.py append_records_as_leader). Leadership may go and come back
during that await, and each role change resets the producer table: the checks after it must run
against the table loaded again from the log, never against the empty one the reset left (which
lets a retry be written twice and records it in a table the next load throws away)."""

import asyncio
import uuid

import pytest

from broker.cluster.partition_state import PartitionState
from broker.log import LogConfig, LogManager, TopicPartition
from broker.replica.outcomes import PartitionError
from broker.replica.partition import Partition
from protocol.errors import ErrorCode
from protocol.records import RecordBatch, build_batch
from tests.unit.test_producer_table_rebuild import HeldHost

TP = TopicPartition("t", 0)
PID = 7


def producer_batch(sequence: int, epoch: int = 0) -> tuple[memoryview, RecordBatch]:
    data = build_batch([(None, b"v", [], 1)] * 2, producer_id=PID, producer_epoch=epoch, base_sequence=sequence)
    return memoryview(bytearray(data)), RecordBatch(data)


async def held_validation(partition: Partition, host: HeldHost, sequence: int, epoch: int = 0) -> asyncio.Task:
    """Start the append of the producer's batch and return once its validation is held in the pool."""
    host.hold_after = host.calls
    appending = asyncio.ensure_future(partition.append_records_as_leader(*producer_batch(sequence, epoch), 1))
    await asyncio.wait_for(host.reached.wait(), 5)
    host.reached.clear()
    return appending


async def leader(tmp_path, host: HeldHost):
    """A leader of a gzip topic (so an uncompressed batch is recompressed in the pool) where the
    producer wrote sequences 0-1 at epoch 0."""
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    log_ = await logs.get_or_create_log(TP, config=LogConfig(compression_type="gzip"))
    partition = Partition(host, TP, uuid.uuid4(), [1, 2], log_,
                          PartitionState(leader=1, leader_epoch=1, isr=(1, 2), controller_epoch=1))
    assert (await partition.append_records_as_leader(*producer_batch(0), 1)).base_offset == 0
    return logs, partition


def bounce(partition: Partition) -> None:
    """Leadership goes and comes back: the table is reset twice and not loaded."""
    partition.make_follower(2, 2, {1, 2})
    partition.make_leader(3, {1, 2})


async def test_a_retry_validated_across_a_leadership_bounce_is_still_a_duplicate(tmp_path):
    host = HeldHost()
    logs, partition = await leader(tmp_path, host)
    try:
        appending = await held_validation(partition, host, 0)  # the retry of sequences 0-1
        bounce(partition)
        host.release.set()
        result = await asyncio.wait_for(appending, 5)
        assert result.duplicate and result.base_offset == 0
        assert partition.log.log_end_offset == 2  # written once
        assert partition.producers_loaded and partition.producers.producers[PID].last_seq == 1
    finally:
        await logs.shutdown()


@pytest.mark.parametrize("sequence, epoch, change, error", [
    (2, 0, bounce, ErrorCode.INVALID_PRODUCER_EPOCH),  # a zombie of the fenced epoch 0
    (6, 1, bounce, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),  # a gap: epoch 1 is at sequence 3
    (2, 1, lambda p: p.make_follower(2, 2, {1, 2}), ErrorCode.NOT_LEADER_OR_FOLLOWER),
])
async def test_a_batch_validated_across_a_role_change_is_checked_after_it(tmp_path, sequence, epoch, change, error):
    host = HeldHost()
    logs, partition = await leader(tmp_path, host)
    try:
        assert (await partition.append_records_as_leader(*producer_batch(0, epoch=1), 1)).base_offset == 2
        assert (await partition.append_records_as_leader(*producer_batch(2, epoch=1), 1)).base_offset == 4
        appending = await held_validation(partition, host, sequence, epoch)
        change(partition)
        host.release.set()
        with pytest.raises(PartitionError) as refused:
            await asyncio.wait_for(appending, 5)
        assert refused.value.error_code == error
        assert partition.log.log_end_offset == 6
    finally:
        await logs.shutdown()
