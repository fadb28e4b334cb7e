"""KIP-890's verification guard on a partition leader (broker/replica/producer_state.py,
Partition.append_records_as_leader): a batch verified with the coordinator opens a transaction only
if no marker for its producer was written while the question was out."""

import contextlib
import uuid

import pytest

from broker.cluster.partition_state import PartitionState
from broker.log import LogManager, TopicPartition
from broker.replica import AppendOrigin, PartitionError
from broker.replica.partition import Partition
from broker.replica.producer_state import (
    OPEN_TRANSACTION_ONLY,
    BatchMetadata,
    ProducerStateError,
    ProducerStateManager,
)
from protocol.control_records import ControlType, build_marker_batch
from protocol.errors import ErrorCode
from protocol.records import RecordBatch, build_batch
from tests.unit.test_partition_with_a_fake_host import FakeHost

TP = TopicPartition("t", 0)
PID, EPOCH = 5, 0


def _txn(sequence: int, epoch: int = EPOCH, records: int = 1) -> bytes:
    return build_batch([(None, b"v", [], 1)] * records, producer_id=PID, producer_epoch=epoch,
                       base_sequence=sequence, is_transactional=True)


async def _append(partition: Partition, data: bytes, guard: object | None = None,
                  origin: AppendOrigin = AppendOrigin.CLIENT):
    return await partition.append_records_as_leader(memoryview(bytearray(data)), RecordBatch(data), 1, origin, guard)


@contextlib.asynccontextmanager
async def _leader(tmp_path):
    """The partition led here, on a log of its own, its producer table loaded."""
    logs = LogManager(tmp_path / "logs")
    await logs.startup(background_tasks=False)
    try:
        partition = Partition(FakeHost(), TP, uuid.uuid4(), [1], await logs.get_or_create_log(TP),
                              PartitionState(leader=1, leader_epoch=0, isr=(1,), controller_epoch=1))
        await partition.load_producer_state()
        yield partition
    finally:
        await logs.shutdown()


async def test_a_marker_while_verifying_refuses_the_verified_batch(tmp_path):
    async with _leader(tmp_path) as partition:
        stale = partition.producers.start_verification(PID, EPOCH, 0)
        assert stale is not None
        # the coordinator ends the producer's transaction before the verified batch is appended
        marker = build_marker_batch(ControlType.ABORT, PID, EPOCH, 0, 1)
        await _append(partition, marker, origin=AppendOrigin.COORDINATOR)
        with pytest.raises(PartitionError) as refused:
            await _append(partition, _txn(0), stale)
        assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
        assert partition.log.log_end_offset == 1  # only the marker

        fresh = partition.producers.start_verification(PID, EPOCH, 0)
        assert fresh is not None and fresh is not stale
        assert (await _append(partition, _txn(0), fresh)).base_offset == 1
        # the transaction is open here now: no further verification, and the guard is spent
        assert partition.producers.start_verification(PID, EPOCH) is OPEN_TRANSACTION_ONLY
        assert PID not in partition.producers.verifying
        assert (await _append(partition, _txn(1), fresh)).base_offset == 2


def test_a_guard_never_spent_expires_with_the_idle_producers(tmp_path):
    """Kafka's removeExpiredProducers drops verification states producer.id.expiration.ms after they
    were made, spent or not: a producer that never came back leaves nothing behind."""
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


async def test_a_later_batch_is_out_of_order_while_the_first_waits_on_its_verification(tmp_path):
    """franz-go's TestTxnEtl on transactions version 2: the first batch of the producer's next
    transaction (epoch 1, sequence 0) met CONCURRENT_TRANSACTIONS while the last commit's markers were
    written; a later batch of it (sequence 3) was verified once they were, and was written: the client,
    which resends everything after the refused batch, then met OUT_OF_ORDER_SEQUENCE_NUMBER on its
    sequence 0. Kafka refuses the later batch (the marker left no batch at epoch 1, and sequence 0 was
    seen verifying), so the client's resend from 0 goes through."""
    async with _leader(tmp_path) as partition:
        first = partition.producers.start_verification(PID, 0, 0, epoch_bump=True)
        await _append(partition, _txn(0, records=3), first)
        # the commit's marker carries the bumped epoch
        await partition.append_records_as_leader(
            memoryview(bytearray(marker := build_marker_batch(ControlType.COMMIT, PID, 1, 0, 1))),
            RecordBatch(marker), 1, AppendOrigin.COORDINATOR, marker_transaction_version=2)
        refused_first = partition.producers.start_verification(PID, 1, 0, epoch_bump=True)  # then refused
        later = partition.producers.start_verification(PID, 1, 3, epoch_bump=True)
        assert later is refused_first and later.lowest_seq == 0
        with pytest.raises(PartitionError) as refused:
            await _append(partition, _txn(3, epoch=1), later)
        assert refused.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await _append(partition, _txn(0, epoch=1, records=3), later)).base_offset == 4
        assert (await _append(partition, _txn(3, epoch=1))).base_offset == 7


def test_a_producer_with_no_batch_at_its_epoch_starts_at_sequence_0(tmp_path):
    """Kafka's checkSequence: after a transactions version 2 marker moved the producer to a new epoch,
    the epoch has no last sequence (NO_SEQUENCE): only 0 follows it."""
    producers = ProducerStateManager(tmp_path)
    producers.update(PID, 0, BatchMetadata(0, 9, 0, 9, 1), transactional=True)
    producers.complete_txn(PID, 1, ControlType.COMMIT, 0, 10, 1)
    with pytest.raises(ProducerStateError) as refused:
        producers.check(PID, 1, 10, 10, True)
    assert refused.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert producers.check(PID, 1, 0, 0, True) is None
    assert producers.check(PID + 1, 0, 7, 7, True) is None  # no state at all: any sequence


def test_a_verification_under_way_bounds_the_sequences_of_a_producer_with_no_state(tmp_path):
    """Kafka's VerificationStateEntry: the lowest sequence seen verifying (a newer epoch starts it
    again), and for transactions version 2 sequence 0 first."""
    def refused(producers, sequence: int, epoch: int = 0) -> bool:
        try:
            producers.check(PID, epoch, sequence, sequence, True)
        except ProducerStateError as exc:
            assert exc.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            return True
        return False

    tv1 = ProducerStateManager(tmp_path)
    tv1.start_verification(PID, 0, 5)
    tv1.start_verification(PID, 0, 9)
    assert refused(tv1, 9) and not refused(tv1, 5)
    tv1.start_verification(PID, 1, 7)  # a newer epoch: its own lowest
    assert refused(tv1, 9, 1) and not refused(tv1, 7, 1)

    tv2 = ProducerStateManager(tmp_path)
    tv2.start_verification(PID, 0, 5, epoch_bump=True)
    assert refused(tv2, 5)
    tv2.start_verification(PID, 0, 0, epoch_bump=True)
    assert not refused(tv2, 0)


async def test_a_zombie_epoch_leaves_no_guard_to_refuse_the_live_producer(tmp_path):
    """Kafka Streams' zombie fencing: a fenced producer (epoch 2) sends sequence 2 while the live one
    (epoch 3) has 0-4 written. Kafka's maybeStartTransactionVerification refuses the older epoch
    before making any verification state, so the live producer's sequence 5 goes through."""
    async with _leader(tmp_path) as partition:
        producers = partition.producers
        live = producers.start_verification(PID, 3, 0)
        await _append(partition, _txn(0, epoch=3, records=5), live)
        with pytest.raises(ProducerStateError) as refused:
            producers.start_verification(PID, 2, 2)
        assert refused.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert PID not in producers.verifying
        assert (await _append(partition, _txn(5, epoch=3))).base_offset == 5


async def test_every_transactional_batch_spends_the_guard(tmp_path):
    """Kafka's updateProducers clears the verification state on each transactional batch, not only
    on the one that opens a transaction: a guard taken for a newer epoch while the older epoch's
    transaction is open here is spent by the batch it verified, and bounds none after it."""
    async with _leader(tmp_path) as partition:
        producers = partition.producers
        await _append(partition, _txn(0, records=3), producers.start_verification(PID, 0, 0))
        newer = producers.start_verification(PID, 1, 0)
        assert newer is not None
        assert (await _append(partition, _txn(0, epoch=1), newer)).base_offset == 3
        assert PID not in producers.verifying
        assert (await _append(partition, _txn(1, epoch=1))).base_offset == 4


def test_a_retry_or_a_fenced_epoch_is_judged_before_the_verification_bounds(tmp_path):
    """Kafka checks a batch for a duplicate, then its epoch, then its sequence (the verification
    state's lowest sequence first among those): a retry of a written batch is answered as one, and
    a fenced epoch is INVALID_PRODUCER_EPOCH, even while a later batch of the producer is verified."""
    producers = ProducerStateManager(tmp_path)
    producers.update(PID, 1, BatchMetadata(0, 4, 0, 4, 1))  # idempotent, no transaction open
    producers.update(PID, 1, BatchMetadata(5, 9, 5, 9, 1))
    producers.start_verification(PID, 2, 0)  # a newer epoch's first batch is verified: lowest 0
    assert producers.check(PID, 1, 5, 9, True) == BatchMetadata(5, 9, 5, 9, 1)
    with pytest.raises(ProducerStateError) as refused:
        producers.check(PID, 0, 7, 7, True)
    assert refused.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


async def test_a_coordinators_batch_verified_inside_an_open_transaction_needs_it_still_open(tmp_path):
    """TxnOffsetCommit checked while its transaction was open on the offsets partition already takes no
    guard; it presents OPEN_TRANSACTION_ONLY (Kafka's sentinel), which a marker written before the
    append turns into INVALID_TXN_STATE, where no guard at all let the batch open a transaction."""
    async with _leader(tmp_path) as partition:
        producers = partition.producers
        await _append(partition, _txn(-1), producers.start_verification(PID, EPOCH), AppendOrigin.COORDINATOR)
        assert producers.start_verification(PID, EPOCH) is OPEN_TRANSACTION_ONLY  # open here: nothing to verify
        assert (await _append(partition, _txn(-1), OPEN_TRANSACTION_ONLY, AppendOrigin.COORDINATOR)).base_offset == 1
        await _append(partition, build_marker_batch(ControlType.COMMIT, PID, EPOCH, 0, 1),
                      origin=AppendOrigin.COORDINATOR)
        with pytest.raises(PartitionError) as refused:
            await _append(partition, _txn(-1), OPEN_TRANSACTION_ONLY, AppendOrigin.COORDINATOR)
        assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
        assert partition.producers.first_unstable_offset() is None


async def test_a_fenced_epoch_is_answered_before_a_dropped_guard(tmp_path):
    """Kafka 4.3.1's UnifiedLog checks a transactional batch's epoch before its verification: a batch
    verified at epoch 0 whose transaction ended with a bumped epoch (transactions version 2) is
    INVALID_PRODUCER_EPOCH, not INVALID_TXN_STATE."""
    async with _leader(tmp_path) as partition:
        stale = partition.producers.start_verification(PID, EPOCH, 0)
        await _append(partition, build_marker_batch(ControlType.ABORT, PID, EPOCH + 1, 0, 1),
                      origin=AppendOrigin.COORDINATOR)
        with pytest.raises(PartitionError) as refused:
            await _append(partition, _txn(0), stale)
        assert refused.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


async def test_a_retried_batch_is_a_duplicate_before_its_guard_is_checked(tmp_path):
    """Kafka 4.3.1's UnifiedLog answers a client's retry with its original offsets before it checks the
    verification: a batch retried after its transaction's marker presents OPEN_TRANSACTION_ONLY (the
    transaction was open when it was checked) and is still the duplicate it is, not INVALID_TXN_STATE."""
    async with _leader(tmp_path) as partition:
        batch = _txn(0, records=2)
        assert (await _append(partition, batch, partition.producers.start_verification(PID, EPOCH, 0))).base_offset == 0
        await _append(partition, build_marker_batch(ControlType.COMMIT, PID, EPOCH, 0, 1),
                      origin=AppendOrigin.COORDINATOR)
        retried = await _append(partition, batch, OPEN_TRANSACTION_ONLY)
        assert (retried.duplicate, retried.base_offset, retried.last_offset) == (True, 0, 1)
        with pytest.raises(PartitionError) as refused:  # a new batch is refused as before
            await _append(partition, _txn(2), OPEN_TRANSACTION_ONLY)
        assert refused.value.error_code == ErrorCode.INVALID_TXN_STATE
        assert partition.log.log_end_offset == 3
