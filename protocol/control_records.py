"""Control records: the one record of a control batch (attributes bit CONTROL_BIT, see records.py).

A transaction coordinator ends a transaction on each partition it touched by writing a control batch
with the producer's id and epoch, the transactional bit set, base sequence -1 and one record:

    key   = version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
    value = version int16 (0) | coordinator_epoch int32       (Kafka's EndTransactionMarker)

Other control types exist in Kafka (KRaft's LEADER_CHANGE, snapshot headers...); a broker that meets
one in a data partition keeps it and treats it as no marker.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from protocol.errors import ProtocolError
from protocol.record_format import Buffer, corrupt
from protocol.records import NewRecord, RecordBatch, build_batch

CONTROL_KEY = struct.Struct(">hh")
MARKER_VALUE = struct.Struct(">hi")
CURRENT_CONTROL_KEY_VERSION = 0
CURRENT_MARKER_VERSION = 0


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1


def build_marker_batch(control_type: ControlType, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """An end-of-transaction marker batch, uncompressed, offsets to be assigned by the leader."""
    record = NewRecord(
        key=CONTROL_KEY.pack(CURRENT_CONTROL_KEY_VERSION, control_type),
        value=MARKER_VALUE.pack(CURRENT_MARKER_VERSION, coordinator_epoch),
        timestamp=timestamp_ms,
    )
    return build_batch([record], producer_id=producer_id, producer_epoch=producer_epoch,
                       is_transactional=True, is_control=True)


def read_marker(batch: RecordBatch) -> tuple[int, int]:
    """(control type, coordinator epoch) of a control batch; the type is -1 for a control record that
    is no transaction marker. ProtocolError(CORRUPT_MESSAGE) for a batch that does not hold exactly
    one control record with a readable key."""
    records = list(batch.records())
    if len(records) != 1:
        raise corrupt(f"a control batch holds {len(records)} records, not 1")
    key, value = records[0].key, records[0].value
    if key is None or len(key) < CONTROL_KEY.size:
        raise corrupt("a control record without a key")
    _, control_type = CONTROL_KEY.unpack_from(key)
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return -1, -1
    if value is None or len(value) < MARKER_VALUE.size:
        raise corrupt("a transaction marker without its coordinator epoch")
    return control_type, MARKER_VALUE.unpack_from(value)[1]


def marker_type_in(data: Buffer) -> int:
    """The control type of the control batch in `data` (its whole bytes), -1 if unreadable or not a
    marker: for replaying a log, where a damaged marker must not stop the replay."""
    try:
        return read_marker(RecordBatch(data))[0]
    except ProtocolError:
        return -1
