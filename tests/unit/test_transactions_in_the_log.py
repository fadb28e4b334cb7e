"""Transactions on the log side, on real logs: transactional batches and COMMIT/ABORT markers through
Partition.append_records_as_leader, the last stable offset, the aborted-transaction index (its
`.txnindex` files in Kafka's layout), and both coming back after a clean stop and a crash."""

import struct
import uuid

import pytest

from broker.log import LogManager, StartOffsetReason, TopicPartition
from broker.log.txn_index import AbortedTxn, txn_index_path
from broker.replica import AppendOrigin
from broker.replica.partition import Partition, PartitionError
from protocol.control_records import ControlType, build_marker_batch, read_marker
from protocol.errors import ErrorCode
from protocol.records import CONTROL_BIT, TRANSACTIONAL_BIT, RecordBatch, build_batch
from tests.unit.test_partition_with_a_fake_host import FakeHost

TP = TopicPartition("t", 0)


async def _append(partition: Partition, data: bytes):
    batch = RecordBatch(data)  # markers are the coordinator's: a client's are refused
    origin = AppendOrigin.COORDINATOR if batch.is_control else AppendOrigin.CLIENT
    return await partition.append_records_as_leader(memoryview(bytearray(data)), batch, 1, origin)


def _txn_batch(pid: int, epoch: int, seq: int, count: int = 2) -> bytes:
    return build_batch([(None, b"v%d" % i, [], 1) for i in range(count)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=True)


def _marker(kind: ControlType, pid: int, epoch: int, coordinator_epoch: int = 0) -> bytes:
    return build_marker_batch(kind, pid, epoch, coordinator_epoch, timestamp_ms=1)


class Broker:
    """One partition led here on a real log directory, reopened as a restart would."""

    def __init__(self, directory):
        self.directory = directory
        self.logs: LogManager | None = None

    async def start(self) -> Partition:
        self.logs = LogManager(self.directory)
        await self.logs.startup(background_tasks=False)
        log_ = await self.logs.get_or_create_log(TP)
        partition = Partition(FakeHost(), TP, uuid.uuid4(), [1], log_)
        await partition.load_producer_state()
        return partition

    async def stop(self, partition: Partition | None = None) -> None:
        if partition is not None:
            await partition.write_producer_snapshot()
        await self.logs.shutdown()

    def crash(self) -> None:
        self.logs.abandon()


def test_a_marker_batch_has_kafkas_control_record_layout():
    data = _marker(ControlType.COMMIT, 7, 3, coordinator_epoch=5)
    batch = RecordBatch(data)
    header = batch.header()
    assert header.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT) == CONTROL_BIT | TRANSACTIONAL_BIT
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, -1)
    record = next(batch.records())
    assert record.key == struct.pack(">hh", 0, 1) and record.value == struct.pack(">hi", 0, 5)
    assert read_marker(batch) == (ControlType.COMMIT, 5)


async def test_the_last_stable_offset_waits_for_the_earliest_open_transaction(tmp_path):
    broker = Broker(tmp_path)
    partition = await broker.start()
    try:
        await _append(partition, build_batch([(None, b"plain", [], 1)]))  # offset 0
        await _append(partition, _txn_batch(10, 0, 0))  # 1-2, producer 10 opens
        await _append(partition, _txn_batch(11, 0, 0))  # 3-4, producer 11 opens
        assert partition.high_watermark == 5 and partition.last_stable_offset == 1
        await _append(partition, _marker(ControlType.COMMIT, 10, 0))  # 5
        assert partition.last_stable_offset == 3  # producer 11 still open
        await _append(partition, _marker(ControlType.ABORT, 11, 0))  # 6
        assert partition.last_stable_offset == partition.high_watermark == 7
        assert partition.aborted_transactions(0, 7) == [AbortedTxn(11, 3, 6, 7)]
        assert partition.aborted_transactions(7, 9) == []  # ended before the fetch
        # Kafka's .txnindex: version, producer id, first, last, last stable offset; 34 bytes each.
        assert txn_index_path(partition.log.directory, 0).read_bytes() == struct.pack(">hqqqq", 0, 11, 3, 6, 7)
    finally:
        await broker.stop()


async def test_producer_and_coordinator_checks_on_transactional_writes(tmp_path):
    broker = Broker(tmp_path)
    partition = await broker.start()
    try:
        await _append(partition, _txn_batch(10, 1, 0))
        plain = build_batch([(None, b"x", [], 1)], producer_id=10, producer_epoch=1, base_sequence=2)
        with pytest.raises(PartitionError) as refused:
            await _append(partition, plain)
        assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
        await _append(partition, _marker(ControlType.COMMIT, 10, 1, coordinator_epoch=4))
        with pytest.raises(PartitionError) as fenced:
            await _append(partition, _marker(ControlType.ABORT, 10, 1, coordinator_epoch=3))
        assert fenced.value.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
        with pytest.raises(PartitionError) as old:
            await _append(partition, _marker(ControlType.ABORT, 10, 0, coordinator_epoch=4))
        assert old.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert partition.log_end_offset == 3  # nothing refused was written
        await _append(partition, plain)  # the transaction is over: a plain idempotent batch is fine
    finally:
        await broker.stop()


async def test_deleting_records_past_an_open_transaction_keeps_the_lso_at_the_log_start(tmp_path):
    broker = Broker(tmp_path)
    partition = await broker.start()
    try:
        await _append(partition, _txn_batch(10, 0, 0, count=4))  # 0-3 open
        await _append(partition, build_batch([(None, b"plain", [], 1)]))  # 4
        assert partition.last_stable_offset == 0
        partition.delete_records_on_leader(2, StartOffsetReason.CLIENT_RECORD_DELETION)
        assert partition.last_stable_offset == 2
        await _append(partition, _marker(ControlType.ABORT, 10, 0))
        assert partition.last_stable_offset == partition.high_watermark == 6
        assert partition.aborted_transactions(2, 6) == [AbortedTxn(10, 0, 5, 6)]
    finally:
        await broker.stop()


@pytest.mark.parametrize("stop", ["clean", "crash"])
async def test_open_transactions_and_aborted_index_survive_a_restart(tmp_path, stop):
    broker = Broker(tmp_path)
    partition = await broker.start()
    await _append(partition, _txn_batch(10, 0, 0))  # 0-1
    await _append(partition, _marker(ControlType.ABORT, 10, 0))  # 2
    await _append(partition, _txn_batch(11, 2, 0))  # 3-4, stays open
    await _append(partition, build_batch([(None, b"plain", [], 1)]))  # 5
    if stop == "clean":
        await broker.stop(partition)
    else:
        await partition.write_producer_snapshot()  # covers offsets below 6 ...
        await _append(partition, _txn_batch(12, 0, 0))  # ... 6-7 and its abort at 8 only in the log
        await _append(partition, _marker(ControlType.ABORT, 12, 0))
        # The abort at 8 reached the log but not its index (a write lost with the machine): the replay
        # from the snapshot rebuilds what lies after it.
        index_file = txn_index_path(partition.log.directory, 0)
        index_file.write_bytes(index_file.read_bytes()[:34])
        broker.crash()
    partition = await broker.start()
    try:
        assert partition.last_stable_offset == 3
        expected = [AbortedTxn(10, 0, 2, 3)] + ([AbortedTxn(12, 6, 8, 3)] if stop == "crash" else [])
        assert partition.aborted_transactions(0, 10) == expected
        await _append(partition, _marker(ControlType.COMMIT, 11, 2))
        assert partition.last_stable_offset == partition.high_watermark
    finally:
        await broker.stop()


async def test_an_unwritable_txn_index_still_hides_the_abort_and_fails_the_partition(tmp_path):
    broker = Broker(tmp_path)
    partition = await broker.start()
    await _append(partition, _txn_batch(10, 0, 0))  # 0-1
    index_file = txn_index_path(partition.log.directory, 0)
    index_file.mkdir()  # the `.txnindex` cannot be opened for writing
    with pytest.raises(Exception) as raised:
        await _append(partition, _marker(ControlType.ABORT, 10, 0))  # 2: in the log, not in the file
    assert not isinstance(raised.value, OSError)
    assert raised.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert partition.log.offline_reason is not None  # the storage-error path: the partition is offline
    # read_committed readers still skip the aborted records
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in partition.aborted_transactions(0, 10)] \
        == [(10, 0, 2)]
    broker.crash()
    index_file.rmdir()  # the disk is fixed: the next load replays the marker into the index
    partition = await broker.start()
    try:
        assert [(t.producer_id, t.first_offset, t.last_offset) for t in partition.aborted_transactions(0, 10)] \
            == [(10, 0, 2)]
    finally:
        await broker.stop()
