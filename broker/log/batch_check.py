"""Checks on a run of incoming batches before any byte of it is written to a segment."""

from __future__ import annotations

from typing import NamedTuple

from broker.log.common import InvalidRecordError
from broker.log.config import LogConfig
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import LOG_OVERHEAD, iter_batches


class IncomingBatch(NamedTuple):
    position: int  # in the request's buffer
    size: int
    base_offset: int  # as sent; the leader overwrites it
    last_offset_delta: int
    max_timestamp: int
    leader_epoch: int


def check_batches(buf: bytearray | memoryview, config: LogConfig, *, from_producer: bool) -> list[IncomingBatch]:
    """Framing, CRC, size limits and, for a producer's batches, that the record count matches the
    offsets the batch spans. Raises InvalidRecordError with Kafka's error code at the first bad batch."""
    result = []
    try:
        for batch in iter_batches(buf):
            header = batch.header()
            size = header.batch_length + LOG_OVERHEAD
            if size > config.max_message_bytes:
                raise InvalidRecordError(
                    f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                    ErrorCode.MESSAGE_TOO_LARGE,
                )
            if size > config.segment_bytes:
                raise InvalidRecordError(
                    f"batch of {size} bytes exceeds segment.bytes {config.segment_bytes}",
                    ErrorCode.RECORD_LIST_TOO_LARGE,
                )
            batch.validate(header)
            delta, count = header.last_offset_delta, header.records_count
            if from_producer and (count <= 0 or count != delta + 1):
                raise InvalidRecordError(
                    f"batch claims {count} records over {delta + 1} offsets", ErrorCode.INVALID_RECORD
                )
            result.append(IncomingBatch(batch.position, size, header.base_offset, delta, header.max_timestamp,
                                        header.partition_leader_epoch))
    except ProtocolError as exc:
        raise InvalidRecordError(exc.message, exc.error_code) from exc
    return result
