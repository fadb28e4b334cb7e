"""Checks on a run of incoming batches before any byte of it is written to a segment."""

from __future__ import annotations

from crc32c import crc32c

from broker.log.common import InvalidRecordError
from broker.log.config import LogConfig
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import LOG_OVERHEAD, iter_batches

try:  # the walk every sound run takes, compiled; setup.py builds it with `pip install -e .`
    from protocol._batch_scan import scan as _compiled_scan
except ImportError:  # a checkout without a C compiler: the same checks, in Python only
    _compiled_scan = None

# One incoming batch, as checked: (position in the request's buffer, size, base_offset as sent — the
# leader overwrites it —, last_offset_delta, max_timestamp, partition_leader_epoch). A plain tuple:
# protocol/_batch_scan.c makes them.
IncomingBatch = tuple[int, int, int, int, int, int]


def check_batches(buf: bytearray | memoryview, config: LogConfig, *, from_producer: bool) -> list[IncomingBatch]:
    """Framing, CRC, size limits and, for a producer's batches, that the record count matches the
    offsets the batch spans. Raises InvalidRecordError with Kafka's error code at the first bad batch."""
    if _compiled_scan is not None:
        max_size = min(config.max_message_bytes, config.segment_bytes)
        batches = _compiled_scan(buf, max_size, from_producer, crc32c)
        if batches is not None:
            return batches
    return check_batches_in_python(buf, config, from_producer=from_producer)  # names the problem


def check_batches_in_python(buf: bytearray | memoryview, config: LogConfig, *,
                            from_producer: bool) -> list[IncomingBatch]:
    """check_batches without the compiled walk: the reference the compiled one is tested against,
    and where every error is worded."""
    result = []
    try:
        for batch in iter_batches(buf):
            header = batch.header()
            size = header.batch_length + LOG_OVERHEAD
            if size > config.max_message_bytes:
                raise InvalidRecordError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}",
                )
            if size > config.segment_bytes:
                raise InvalidRecordError(
                    ErrorCode.RECORD_LIST_TOO_LARGE,
                    f"batch of {size} bytes exceeds segment.bytes {config.segment_bytes}",
                )
            batch.validate(header)
            delta, count = header.last_offset_delta, header.records_count
            if from_producer and (count <= 0 or count != delta + 1):
                raise InvalidRecordError(
                    ErrorCode.INVALID_RECORD, f"batch claims {count} records over {delta + 1} offsets"
                )
            result.append((batch.position, size, header.base_offset, delta, header.max_timestamp,
                           header.partition_leader_epoch))
    except ProtocolError as exc:
        raise InvalidRecordError(exc.error_code, exc.message) from exc
    return result
