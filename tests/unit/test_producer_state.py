"""Idempotent producer state: Kafka's sequence and epoch rules, snapshots, replaying headers read back from the log."""

import os

import pytest

from broker.log import FileSlice
from broker.log.segment_file import OpenSegments, SegmentFile
from broker.replica.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateError,
    ProducerStateManager,
    in_sequence,
    last_sequence,
)
from protocol.control_records import ControlType
from protocol.errors import ErrorCode
from protocol.records import build_batch


def _append(state, pid, epoch, first_seq, count, offset):
    batch = BatchMetadata(first_seq, last_sequence(first_seq, count - 1), offset, offset + count - 1, 1000)
    assert state.check(pid, epoch, batch.first_seq, batch.last_seq) is None
    state.update(pid, epoch, batch)
    return batch


def test_unknown_producer_may_start_at_any_sequence(tmp_path):
    state = ProducerStateManager(tmp_path)
    assert state.check(7, 0, 42, 45) is None


def test_in_order_batches_and_duplicates_of_the_last_five(tmp_path):
    state = ProducerStateManager(tmp_path)
    batches = [_append(state, 7, 0, i * 2, 2, 100 + i * 2) for i in range(7)]
    for batch in batches[-5:]:
        assert state.check(7, 0, batch.first_seq, batch.last_seq) == batch
    # older than the last five: no longer recognised, and out of sequence
    with pytest.raises(ProducerStateError) as exc:
        state.check(7, 0, batches[0].first_seq, batches[0].last_seq)
    assert exc.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_gap_is_out_of_order(tmp_path):
    state = ProducerStateManager(tmp_path)
    _append(state, 7, 0, 0, 3, 0)
    with pytest.raises(ProducerStateError) as exc:
        state.check(7, 0, 4, 4)
    assert exc.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs(tmp_path):
    state = ProducerStateManager(tmp_path)
    _append(state, 7, 1, 0, 3, 0)
    with pytest.raises(ProducerStateError) as exc:
        state.check(7, 0, 3, 3)
    assert exc.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(ProducerStateError) as exc:
        state.check(7, 2, 3, 3)  # a new epoch starts at 0
    assert exc.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    _append(state, 7, 2, 0, 1, 3)
    assert state.producers[7].epoch == 2 and len(state.producers[7].batches) == 1


def test_sequences_wrap_after_int32_max():
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert last_sequence(INT32_MAX, 0) == INT32_MAX
    assert in_sequence(INT32_MAX, 0) and not in_sequence(INT32_MAX, 1)


def test_the_next_batch_across_the_wrap_and_duplicates_on_both_sides(tmp_path):
    state = ProducerStateManager(tmp_path)
    before = _append(state, 7, 0, INT32_MAX - 3, 4, 0)  # ends at INT32_MAX
    after = _append(state, 7, 0, 0, 2, 4)  # in sequence: sequences wrap to 0
    assert state.check(7, 0, before.first_seq, before.last_seq) == before
    assert state.check(7, 0, after.first_seq, after.last_seq) == after
    assert state.check(7, 0, 2, 2) is None  # the next one


def test_snapshot_round_trip_and_expiry(tmp_path):
    state = ProducerStateManager(tmp_path)
    _append(state, 7, 0, 0, 3, 10)
    _append(state, 9, 4, 0, 1, 13)
    data = state.snapshot(14)
    again = ProducerStateManager(tmp_path)
    assert again.restore(data) == 14
    assert {pid: (e.epoch, list(e.batches)) for pid, e in again.producers.items()} == \
        {pid: (e.epoch, list(e.batches)) for pid, e in state.producers.items()}
    # by the batches' timestamp (1000), not when they were appended (1): 4,000 ms old at 5000
    assert again.expire(4001, now_ms=5000) == 0
    assert again.expire(4000, now_ms=5000) == 2 and len(again) == 0


def test_last_timestamp_is_the_last_batch_or_marker_and_survives_snapshots(tmp_path):
    import json

    state = ProducerStateManager(tmp_path)
    _append(state, 7, 0, 0, 3, 10)  # written at 1000
    assert state.producers[7].last_timestamp == 1000
    state.complete_txn(7, 0, ControlType.COMMIT, 3, 13, marker_timestamp=5000)
    assert state.producers[7].last_timestamp == 5000  # Kafka's lastTimestamp moves with the marker
    again = ProducerStateManager(tmp_path)
    again.restore(state.snapshot(14))
    assert again.producers[7].last_timestamp == 5000
    older = json.loads(state.snapshot(14))
    del older["producers"]["7"]["last_timestamp"]  # a snapshot from before the field: the last batch's
    again.restore(json.dumps(older).encode())
    assert again.producers[7].last_timestamp == 1000


def test_snapshot_of_an_unknown_version_is_refused(tmp_path):
    with pytest.raises(ValueError):
        ProducerStateManager(tmp_path).restore(b'{"version": 99, "offset": 0, "producers": {}}')


def test_replay_reads_producer_fields_through_the_logs_slices(tmp_path):
    first = build_batch([(None, b"x" * 100_000, [], 5)], producer_id=3, producer_epoch=1, base_sequence=0)
    second = bytearray(build_batch([(None, b"y", [], 6), (None, b"z", [], 7)], producer_id=3, producer_epoch=1,
                                   base_sequence=1))
    second[0:8] = (1).to_bytes(8, "big")
    path = tmp_path / "seg"
    path.write_bytes(first + second)
    file = SegmentFile(path, os.open(path, os.O_RDWR | os.O_APPEND), OpenSegments(4))
    piece = FileSlice(file, 0, len(first) + len(second))
    try:
        headers, position = piece.headers(0, limit=1)  # the first body (larger than a read window) is skipped
        assert position == len(first)
        rest, position = piece.headers(position, limit=10)
        assert position == piece.length
    finally:
        file.close()
    headers += rest
    assert [(h.base_offset, h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == \
        [(0, 0, 3, 1, 0), (1, 2, 3, 1, 1)]
    state = ProducerStateManager(tmp_path)
    for header in headers:
        state.apply(header)
    assert list(state.producers[3].batches) == [BatchMetadata(0, 0, 0, 0, 5), BatchMetadata(1, 2, 1, 2, 7)]


def _txn_append(state: ProducerStateManager, producer_id: int, epoch: int, first_offset: int) -> None:
    state.update(producer_id, epoch, BatchMetadata(0, 0, first_offset, 0, 1000), transactional=True)


def test_a_transactions_version_2_marker_must_carry_an_epoch_above_the_producers(tmp_path):
    state = ProducerStateManager(tmp_path)
    _txn_append(state, 7, 3, 0)  # a transaction open at epoch 3
    state.check_marker(7, 3, 0)  # a classic marker at the producer's epoch
    with pytest.raises(ProducerStateError) as refused:
        state.check_marker(7, 3, 0, transaction_version=2)  # version 2 bumped it at the end: a stale one
    assert refused.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    state.check_marker(7, 4, 0, transaction_version=2)
    state.complete_txn(7, 4, ControlType.COMMIT, 0, 1, marker_timestamp=1000)
    state.check_marker(7, 4, 0, transaction_version=2)  # its retry, nothing open any more: taken
    with pytest.raises(ProducerStateError):
        state.check_marker(7, 3, 0, transaction_version=2)
    _txn_append(state, 7, 4, 2)  # the next transaction, at the bumped epoch
    with pytest.raises(ProducerStateError):
        state.check_marker(7, 4, 0, transaction_version=2)  # open at that epoch: not a retry
