"""One producer batch stored with another codec: what Kafka's LogValidator does when a topic's
`compression.type` names a codec other than the batch's (buildRecordsAndAssignOffsets). The layout is
protocol/records.py's; this module only decides which record bytes go into the new batch.

Kafka rebuilds the batch with its MemoryRecordsBuilder: the same records (timestamps, keys, values,
headers) at offset deltas 0..n-1, timestamp deltas from the first record's timestamp, record
attributes 0; the producer id, epoch, base sequence and transactional flag of the batch; CreateTime
with the records' largest timestamp (the leader stamps LogAppendTime afterwards, as for any batch).
When the records already have that form (what every client writes) their bytes are kept and only the
codec changes; otherwise they are written again.
"""

from __future__ import annotations

from crc32c import crc32c

from protocol.batch_header import (
    ATTRIBUTES_AT,
    BATCH_HEADER_SIZE,
    CRC_AT,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
)
from protocol.compression import Compression, compress
from protocol.errors import ErrorCode, ProtocolError
from protocol.record_format import NO_TIMESTAMP, decode_records, record_spans
from protocol.records import RecordBatch, RecordBatchBuilder
from protocol.varint import java_long
from protocol.wire import U32


def recompressed(batch: RecordBatch, codec: Compression, level: int | None) -> bytearray:
    """`batch` (magic 2, CRC checked by the caller) as a new batch compressed with `codec` at `level`;
    base offset 0 and partition leader epoch -1 until the leader stamps them. Raises ProtocolError
    (CORRUPT_MESSAGE) if its records do not decode."""
    header = batch.header()
    body = bytes(batch.body())
    count = header.records_count
    spans = record_spans(body, count)
    log_append_time = header.attributes & TIMESTAMP_TYPE_BIT
    if not log_append_time and all(span[2] == index for index, span in enumerate(spans)) \
            and (not spans or spans[0][3] == 0):
        base = header.base_timestamp
        # Kafka's builder: Java's long sums, and a maximum that starts at NO_TIMESTAMP
        timestamps = [java_long(base + span[3]) for span in spans]
        _refuse_negative(timestamps)
        return _framed(header, codec, compress(codec, body, level), base, max(timestamps, default=NO_TIMESTAMP))
    builder = RecordBatchBuilder(compression=Compression.NONE, producer_id=header.producer_id,
                                 producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                                 is_transactional=bool(header.attributes & TRANSACTIONAL_BIT))
    stamped = header.max_timestamp if log_append_time else None  # what Kafka reads such records' timestamps as
    records = list(decode_records(body, count, 0, header.base_timestamp, stamped))
    _refuse_negative([java_long(record.timestamp) for record in records])
    for record in records:
        builder.append(record.key, record.value, record.headers, java_long(record.timestamp))
    rebuilt = RecordBatch(builder.build())
    new_header = rebuilt.header()
    section = bytes(rebuilt.body())
    return _framed(new_header, codec, compress(codec, section, level), new_header.base_timestamp,
                   new_header.max_timestamp)


def _refuse_negative(timestamps: list[int]) -> None:
    """Kafka's batch builder throws on a negative timestamp other than NO_TIMESTAMP (one that wrapped
    past Long.MAX, say), and Kafka answers that exception as UNKNOWN_SERVER_ERROR."""
    for timestamp in timestamps:
        if timestamp < NO_TIMESTAMP:
            raise ProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Invalid negative timestamp {timestamp}")


def _framed(header: BatchHeader, codec: Compression, payload: bytes, base_timestamp: int,
            max_timestamp: int) -> bytearray:
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    attributes = int(codec) | (header.attributes & TRANSACTIONAL_BIT)
    HEADER.pack_into(out, 0, 0, len(out) - LOG_OVERHEAD, -1, MAGIC, 0, attributes, header.records_count - 1,
                     base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
                     header.base_sequence, header.records_count)
    U32.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return out
