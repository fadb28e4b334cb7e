"""READ_COMMITTED by batch headers (client/aborted.py), as Kafka's consumer does it: both the client's
decoder and the compiled column decoder drop an aborted producer's transactional batches from its first
offset to its ABORT marker, keep committed and non-transactional ones, and never return markers."""

import pytest

from client.aborted import BatchFilter
from client.consumer import decode_partition
from client.types import TopicPartition
from pipeline.fast_read import arrow_schema
from pipeline.record_columns import decode
from protocol.control_records import CONTROL_KEY, MARKER_VALUE, ControlType
from protocol.records import NewRecord, build_batch

TP = TopicPartition("t", 0)


def data(base, pid, count, transactional=True):
    return build_batch([NewRecord(None, b"%d" % (base + i), (), 1000) for i in range(count)], base_offset=base,
                       producer_id=pid, producer_epoch=0, base_sequence=0 if pid >= 0 else -1,
                       is_transactional=transactional)


def marker(base, pid, kind):
    record = NewRecord(CONTROL_KEY.pack(0, kind), MARKER_VALUE.pack(0, 3), (), 1000)
    return build_batch([record], base_offset=base, producer_id=pid, producer_epoch=0,
                       is_transactional=True, is_control=True)


# pid 7 aborts [0, 1], commits [6, 7], aborts [9, 10] again; pid 8 commits 2; offset 3 is no transaction's
LOG = (data(0, 7, 2) + data(2, 8, 1) + data(3, -1, 1, transactional=False) + marker(4, 7, ControlType.ABORT)
       + marker(5, 8, ControlType.COMMIT) + data(6, 7, 2) + marker(8, 7, ControlType.COMMIT) + data(9, 7, 2)
       + marker(11, 7, ControlType.ABORT) + data(12, 8, 1))
ABORTED = [(7, 0), (7, 9)]  # (producer id, first offset), as a Fetch answer lists them


def both(position, aborted, end=100):
    records, after = decode_partition(TP, position, LOG, BatchFilter(aborted))
    batch, after_columns = decode(LOG, position, end, TP.topic, TP.partition, arrow_schema(False),
                                  BatchFilter(aborted))
    assert batch.column("offset").to_pylist() == [r.offset for r in records if r.offset < end]
    assert after == after_columns == 13
    return [r.offset for r in records]


@pytest.mark.parametrize("position", [0, 1, 3])
def test_read_committed_drops_aborted_batches_and_markers(position):
    assert both(position, ABORTED) == [o for o in (2, 3, 6, 7, 12) if o >= position]


def test_read_uncommitted_drops_only_markers():
    assert both(0, None) == [0, 1, 2, 3, 6, 7, 9, 10, 12]


def test_an_aborted_transaction_first_listed_below_the_position_still_counts():
    # a fetch from 1 is told of pid 7's transaction from 0: batch [0, 1] (partly below) stays hidden
    assert both(1, [(7, 0)]) == [2, 3, 6, 7, 9, 10, 12]
