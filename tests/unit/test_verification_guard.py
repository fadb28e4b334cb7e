"""KIP-890's verification guard on a partition leader (broker/replica/producer_state.py,
Partition.append_records_as_leader): a batch verified with the coordinator opens a transaction only
if no marker for its producer was written while the question was out."""

import uuid

import pytest

from broker.cluster.partition_state import PartitionState
from broker.log import LogManager, TopicPartition
from broker.replica import AppendOrigin, PartitionError
from broker.replica.partition import Partition
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import ErrorCode
from protocol.records import RecordBatch, build_batch
from tests.unit.test_partition_with_a_fake_host import FakeHost

TP = TopicPartition("t", 0)
PID, EPOCH = 5, 0


def _txn(sequence: int) -> bytes:
    return build_batch([(None, b"v", [], 1)], producer_id=PID, producer_epoch=EPOCH, base_sequence=sequence,
                       is_transactional=True)


async def _append(partition: Partition, data: bytes, guard: object | None = None,
                  origin: AppendOrigin = AppendOrigin.CLIENT):
    return await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), 1, origin, guard)


async def test_a_marker_while_verifying_refuses_the_verified_batch(tmp_path):
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    try:
        partition = Partition(FakeHost(), TP, uuid.uuid4(), [1], await logs.get_or_create_log(TP),
                              PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1))
        await partition.load_producer_state()
        stale = partition.producers.start_verification(PID, EPOCH)
        assert stale is not None
        # the coordinator ends the producer's transaction before the verified batch is appended
        marker = build_marker_batch(ControlType.ABORT, PID, EPOCH, 0, 1)
        await _append(partition, marker, origin=AppendOrigin.COORDINATOR)
        with pytest.raises(PartitionError) as refused:
            await _append(partition, _txn(0), stale)
        assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
        assert partition.log.log_end_offset == 1  # only the marker

        fresh = partition.producers.start_verification(PID, EPOCH)
        assert fresh is not None and fresh is not stale
        assert (await _append(partition, _txn(0), fresh)).base_offset == 1
        # the transaction is open here now: no further verification, and the guard is spent
        assert partition.producers.start_verification(PID, EPOCH) is None
        assert PID not in partition.producers.verifying
        assert (await _append(partition, _txn(1), fresh)).base_offset == 2
    finally:
        await logs.shutdown()


def test_a_guard_never_spent_expires_with_the_idle_producers(tmp_path):
    """Kafka's removeExpiredProducers drops verification states producer.id.expiration.ms after they
    were made, spent or not: a producer that never came back leaves nothing behind."""
    from broker.replica.producer_state import ProducerStateManager

    producers = ProducerStateManager(tmp_path)
    old = producers.start_verification(PID, EPOCH, now_ms=1_000)
    assert producers.start_verification(PID, EPOCH, now_ms=5_000) is old  # taken again: not made younger
    young = producers.start_verification(PID + 1, EPOCH, now_ms=5_000)
    producers.dirty = False
    assert producers.expire(10_000, now_ms=10_999) == 0
    assert set(producers.verifying) == {PID, PID + 1}
    assert producers.expire(10_000, now_ms=11_000) == 0  # guards are not counted as producers
    assert producers.verifying == {PID + 1: young}
    assert not producers.dirty  # guards are not in the snapshot
