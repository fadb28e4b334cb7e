"""A compacted topic keeps the latest record of each key, so a record without a key has no place in
it: Kafka's LogValidator refuses such a batch at Produce (INVALID_RECORD, with one record error per
keyless record). The append path decodes records here (only for producers' batches to topics with
`compact` in `cleanup.policy`) and in validator.py (timestamps out of bounds, recompression)."""

from __future__ import annotations

from collections.abc import Sequence

from broker.log.common import InvalidRecordError, TopicPartition, UnnamedAppendError
from protocol.compression import CodecError
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import RecordBatch
from protocol.varint import read_varint, read_varlong

_SHOWN = 3  # Kafka's summary names at most the first three record errors
KEYLESS_MESSAGE = "Compacted topic cannot accept message without key in topic partition"


def rejected_for_keys(errors: list[tuple[int, str]]) -> InvalidRecordError:
    """Kafka's INVALID_RECORD for a batch with record errors (their (index, message)) and no timestamp's."""
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in errors[:_SHOWN])
    return InvalidRecordError(
        ErrorCode.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]", record_errors=errors)


def _keyless_records(body: bytes, count: int) -> list[int]:
    """Indexes of the records whose key is null, reading each record only up to its key length
    (length, attributes, timestamp delta, offset delta, key length: protocol/record_format.py)."""
    keyless = []
    position = 0
    for index in range(count):
        length, start = read_varint(body, position)
        if length < 1 or start + length > len(body):
            raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"record {index} claims {length} bytes")
        _, after = read_varlong(body, start + 1)
        _, after = read_varint(body, after)
        key_length, _ = read_varint(body, after)
        if key_length == -1:
            keyless.append(index)
        position = start + length
    if position != len(body):
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"{len(body) - position} bytes left over after {count} records")
    return keyless


def refuse_keyless_records(buf: bytearray | memoryview, positions: Sequence[int], tp: TopicPartition) -> None:
    """Raise INVALID_RECORD if a record of the batches starting at `positions` in `buf` has no key."""
    for position in positions:
        batch = RecordBatch(buf, position)
        if batch.is_control:
            continue
        try:
            keyless = _keyless_records(bytes(batch.body()), batch.records_count)
        except CodecError as exc:
            raise InvalidRecordError(exc.error_code, exc.message) from exc
        except ProtocolError as exc:  # records that do not parse: Kafka's InvalidRecordException
            raise UnnamedAppendError(exc.message) from exc
        if keyless:
            raise rejected_for_keys([(index, f"{KEYLESS_MESSAGE} {tp}") for index in keyless])
