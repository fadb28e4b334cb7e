"""Kafka's LogValidator rules that may need a producer batch's records, for the leader's appends:
record timestamps against `message.timestamp.after.max.ms` / `before.max.ms` (CreateTime topics), and
the codec a batch is stored with (`compression.type`).

The header decides whether any record is read (`needs_validation`, a few comparisons per batch):
- no record is later than the header's max timestamp, so with that inside `now + after.max.ms` the
  after-check holds for all of them; only beyond it are the records read, to name which are out;
- `before.max.ms` (off at its default, Long.MAX) has no header bound (deltas may be negative): when it
  is set every batch's timestamps are read, except a one-record batch whose base and max timestamps
  agree;
- a producer batch marked LogAppendTime is read as Kafka reads it (every record at the header's max
  timestamp): refused on a LogAppendTime topic, or when that timestamp is missing or out of bounds,
  else stored as CreateTime;
- a codec to store other than the batch's: the batch is rebuilt (protocol/recompress.py).
Reading an uncompressed batch's timestamps happens on the event loop (a walk over varints);
decompressing and compressing run in the replica manager's thread pool, since cramjam lets go of the
GIL: the loop keeps serving while a large batch is recompressed, and a thread needs no copy of the
batch (a process would). Kafka does this work on its request handler threads.

Records are read through RecordBatch.body(), which decompresses no further than the declared records
need (protocol/inflate.py: decompression bombs); records that do not parse are INVALID_RECORD without
a message (UnnamedAppendError), as Kafka answers its record iterator's exception.

A refused batch answers INVALID_TIMESTAMP ("One or more records have been rejected due to invalid
timestamp") with one record error per record out of range, worded as Kafka's; on a compacted topic a
keyless record's error joins them (compacted_keys.py), as in Kafka, and the whole batch is refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from broker.log.batch_check import check_batches
from broker.log.common import InvalidRecordError, TopicPartition, UnnamedAppendError
from broker.log.compacted_keys import KEYLESS_MESSAGE, rejected_for_keys
from broker.log.config import LONG_MAX, LogConfig
from protocol.compression import CodecError, Compression
from protocol.errors import ErrorCode, ProtocolError
from protocol.recompress import recompressed
from protocol.record_format import NO_TIMESTAMP, Record, decode_records
from protocol.records import (
    CODEC_MASK,
    CONTROL_BIT,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    RecordBatch,
    set_create_time,
)
from protocol.varint import java_long

RunInPool = Callable[..., Awaitable[Any]]

_TARGETS = {"uncompressed": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
            "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


def target_codec(config: LogConfig, attributes: int) -> Compression | None:
    """The codec to store a batch with, or None to keep it as it came (`producer`, the same codec, or
    an uncompressed control batch, which Kafka never compresses)."""
    target = _TARGETS.get(config.compression_type)
    if target is None or target == attributes & CODEC_MASK:
        return None
    if attributes & CONTROL_BIT and not attributes & CODEC_MASK:
        return None
    return target


def needs_validation(config: LogConfig, header: BatchHeader, now: int) -> bool:
    """Whether the leader must read this producer batch's records (above); False for ordinary batches."""
    attributes = header.attributes
    if attributes & TIMESTAMP_TYPE_BIT:
        return True
    if config.compression_type != "producer" and target_codec(config, attributes) is not None:
        return True
    if config.message_timestamp_type != "CreateTime":
        return False
    if java_long(header.max_timestamp - now) > config.message_timestamp_after_max_ms:
        return True
    before = config.message_timestamp_before_max_ms
    if before == LONG_MAX:
        return False
    return not (header.records_count == 1 and header.base_timestamp == header.max_timestamp
                and java_long(now - header.base_timestamp) <= before)


async def validate(config: LogConfig, tp: TopicPartition, records: memoryview, batch: RecordBatch, now: int,
                   run_in_pool: RunInPool) -> tuple[memoryview, RecordBatch]:
    """Check the records of one producer batch that `needs_validation`, and rebuild it if the topic
    stores another codec. Returns the records to append (the same when not rebuilt). InvalidRecordError
    with Kafka's code: the framing, CRC and size checks first (as the log's), then the records."""
    check_batches(records, config, from_producer=True)
    header = batch.header()
    target = target_codec(config, header.attributes)
    if target is None and not header.attributes & CODEC_MASK:
        check_records(config, tp, batch, batch.body(), now)  # an uncompressed walk: on the loop
        rebuilt = None
    else:
        rebuilt = await run_in_pool(_check_and_rebuild, config, tp, batch, now, target)
    if rebuilt is None:
        if header.attributes & TIMESTAMP_TYPE_BIT:  # passed the checks: Kafka stores it as CreateTime
            records = memoryview(bytearray(records))
            set_create_time(records, 0)
            return records, RecordBatch(records)
        return records, batch
    return memoryview(rebuilt), RecordBatch(rebuilt)


def _check_and_rebuild(config: LogConfig, tp: TopicPartition, batch: RecordBatch, now: int,
                       target: Compression | None) -> bytearray | None:
    """In the pool: decompress, check, recompress."""
    try:
        check_records(config, tp, batch, batch.body(), now, partial=target is None)
        if target is None:
            return None
        level = {Compression.GZIP: config.compression_gzip_level, Compression.LZ4: config.compression_lz4_level,
                 Compression.ZSTD: config.compression_zstd_level}.get(target)
        if target == Compression.GZIP and level == -1:  # Deflater's DEFAULT_COMPRESSION; zstd's -1 is a level
            level = None
        return recompressed(batch, target, level)
    except ProtocolError as exc:
        raise _refusal(exc) from exc


def check_records(config: LogConfig, tp: TopicPartition, batch: RecordBatch, body: Any, now: int,
                  partial: bool = False) -> None:
    """Kafka's validateRecord per record (key on compacted topics, then timestamp): any error refuses the
    batch, INVALID_TIMESTAMP if one is a timestamp's, else INVALID_RECORD. `partial`: a compressed batch
    kept in its codec, which Kafka reads without keys and values (its records print otherwise)."""
    header = batch.header()
    stamped = header.attributes & TIMESTAMP_TYPE_BIT
    try:
        decoded = decode_records(bytes(body), header.records_count, header.base_offset, header.base_timestamp,
                                 header.max_timestamp if stamped else None)
        compacted = config.compact_enabled
        errors: list[tuple[int, str]] = []
        timestamps_wrong = False
        for index, record in enumerate(decoded):
            if compacted and record.key is None:
                errors.append((index, f"{KEYLESS_MESSAGE} {tp}"))
                continue
            problem = _timestamp_problem(config, record, bool(stamped), now, partial)
            if problem is not None:
                errors.append((index, problem))
                timestamps_wrong = True
    except ProtocolError as exc:
        raise _refusal(exc) from exc
    if timestamps_wrong:
        raise InvalidRecordError(ErrorCode.INVALID_TIMESTAMP,
                                 "One or more records have been rejected due to invalid timestamp", errors)
    if errors:
        raise rejected_for_keys(errors)


def _refusal(exc: ProtocolError) -> InvalidRecordError:
    """A codec that cannot decode stays CORRUPT_MESSAGE; records that do not parse (bytes left over
    after records_count of them included) are Kafka's InvalidRecordException."""
    if isinstance(exc, CodecError):
        return InvalidRecordError(exc.error_code, exc.message)
    return UnnamedAppendError(exc.message, exc.error_code if exc.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
                              else ErrorCode.INVALID_RECORD)


def _timestamp_problem(config: LogConfig, record: Record, stamped: bool, now: int, partial: bool) -> str | None:
    timestamp = java_long(record.timestamp)  # base + delta, as Kafka adds them
    if config.message_timestamp_type == "CreateTime" and timestamp != NO_TIMESTAMP:
        before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
        difference = java_long(now - timestamp)
        if difference > before or java_long(-difference) > after:
            return (f"Timestamp {timestamp} of message with offset {record.offset} is out of range. The timestamp "
                    f"should be within [{java_long(now - before)}, {java_long(now + after)}]")
        return None
    if stamped:  # DefaultRecord.toString counts a null key or value as 0 bytes, PartialDefaultRecord as -1
        absent = -1 if partial else 0
        key = absent if record.key is None else len(record.key)
        value = absent if record.value is None else len(record.value)
        return (f"Invalid timestamp type in message {'PartialDefaultRecord' if partial else 'DefaultRecord'}"
                f"(offset={record.offset}, timestamp={timestamp}, key={key} bytes, value={value} bytes). "
                "Producer should not set timestamp type to LogAppendTime.")
    return None
