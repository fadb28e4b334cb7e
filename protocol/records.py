"""Record batches, magic 2: the one module the rest of the code imports them from. The header's layout,
its one-unpack reader and the leader's in-place edits are protocol/batch_header.py's (re-exported
here); this module holds the batch as a whole: a zero-copy view (RecordBatch), the walk over a run of
batches (iter_batches), and building and rewriting batches (RecordBatchBuilder, build_batch,
with_records). The records inside one: protocol/record_format.py.

The broker stays on the header (RecordBatch, iter_batches, read_header, assign_offsets,
set_log_append_time) and decodes records only when it must (RecordBatch.records). Every decoding path
raises ProtocolError and nothing else.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any

from crc32c import crc32c

from protocol.batch_header import (
    ATTRIBUTES_AT,
    BASE_OFFSET_AT,
    BASE_SEQUENCE_AT,
    BASE_TIMESTAMP_AT,
    BATCH_FRAMING,
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_AT,
    CODEC_MASK,
    CONTROL_BIT,
    CRC_AT,
    DELETE_HORIZON_BIT,
    FRAMING_SIZE,
    HEADER,
    LAST_OFFSET_DELTA_AT,
    LEADER_EPOCH_AT,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_AT,
    MAX_TIMESTAMP_AT,
    MIN_BATCH_LENGTH,
    PRODUCER_EPOCH_AT,
    PRODUCER_ID_AT,
    RECORDS_COUNT_AT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    TimestampType,
    as_header,
    assign_offsets,
    batch_size_at,
    check_magic,
    read_header,
    set_create_time,
    set_log_append_time,
)
from protocol.compression import Compression, compress
from protocol.inflate import inflate
from protocol.record_format import NO_TIMESTAMP, Buffer, NewRecord, Record, corrupt, decode_records, write_bytes
from protocol.varint import INT32_MAX, java_long, write_varint, write_varlong
from protocol.wire import I8, I16, I32, I64, U32

__all__ = [
    "BATCH_FRAMING", "BATCH_HEADER_SIZE", "CODEC_MASK", "CONTROL_BIT", "DELETE_HORIZON_BIT", "FRAMING_SIZE",
    "LOG_OVERHEAD", "MAGIC", "NO_TIMESTAMP", "TIMESTAMP_TYPE_BIT", "TRANSACTIONAL_BIT", "Compression", "TimestampType",
    "Record", "NewRecord",
    "RecordBatch", "BatchHeader", "RecordBatchBuilder", "assign_offsets", "batch_of_section", "batch_size_at",
    "build_batch",
    "iter_batches", "read_header", "set_create_time", "set_log_append_time", "with_records",
]


# --- the zero-copy view ---------------------------------------------------------------------------


def _header_field(layout: struct.Struct, offset: int) -> property:
    """A read-only property for one fixed-width header field, read straight from the buffer."""

    def read(self: RecordBatch) -> int:
        return layout.unpack_from(self.buffer, self.position + offset)[0]

    return property(read)


class RecordBatch:
    """A view over one magic-2 batch that starts at `position` in `buffer`; nothing is copied.

    Construction checks the framing (header present, magic 2, sane batch_length, batch inside the
    buffer), so every header property is safe to read. `validate()` checks the contents.
    """

    __slots__ = ("buffer", "position")

    buffer: Buffer
    position: int

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        available = len(buffer) - position
        if position < 0 or available < BATCH_HEADER_SIZE:
            if 0 <= position and available > MAGIC_AT:
                check_magic(buffer[position + MAGIC_AT], position)
            raise corrupt(f"record batch at position {position} is shorter than a batch header")
        if buffer[position + MAGIC_AT] != MAGIC:
            check_magic(I8.unpack_from(buffer, position + MAGIC_AT)[0], position)  # raises
        (batch_length,) = I32.unpack_from(buffer, position + BATCH_LENGTH_AT)
        if batch_length < MIN_BATCH_LENGTH:
            raise corrupt(f"record batch at position {position} has batch_length {batch_length}")
        if batch_length + LOG_OVERHEAD > available:
            raise corrupt(
                f"record batch at position {position} needs {batch_length + LOG_OVERHEAD} bytes, "
                f"{available} are left"
            )
        self.buffer = buffer
        self.position = position

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records_count={self.records_count}, size={self.size}, attributes={self.attributes:#x})"
        )

    # -- header fields, each read on demand --

    base_offset = _header_field(I64, BASE_OFFSET_AT)

    batch_length = _header_field(I32, BATCH_LENGTH_AT)

    @property
    def size(self) -> int:
        """Bytes the whole batch takes: batch_length + LOG_OVERHEAD."""
        return self.batch_length + LOG_OVERHEAD

    partition_leader_epoch = _header_field(I32, LEADER_EPOCH_AT)

    magic = _header_field(I8, MAGIC_AT)

    crc = _header_field(U32, CRC_AT)

    attributes = _header_field(I16, ATTRIBUTES_AT)

    @property
    def compression(self) -> Compression:
        codec = self.attributes & CODEC_MASK
        if codec > Compression.ZSTD:
            raise corrupt(f"record batch at position {self.position} has unknown compression codec {codec}")
        return Compression(codec)

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_BIT:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the log cleaner may drop this batch's tombstones: set (in base_timestamp) the first time
        a cleaner kept tombstones of it; None before."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    last_offset_delta = _header_field(I32, LAST_OFFSET_DELTA_AT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    base_timestamp = _header_field(I64, BASE_TIMESTAMP_AT)

    max_timestamp = _header_field(I64, MAX_TIMESTAMP_AT)

    producer_id = _header_field(I64, PRODUCER_ID_AT)

    producer_epoch = _header_field(I16, PRODUCER_EPOCH_AT)

    base_sequence = _header_field(I32, BASE_SEQUENCE_AT)

    records_count = _header_field(I32, RECORDS_COUNT_AT)

    def header(self) -> BatchHeader:
        """All 13 header fields at once (one unpack instead of one per property)."""
        return as_header(BatchHeader, HEADER.unpack_from(self.buffer, self.position))

    def raw(self) -> memoryview:
        """The batch's bytes, without copying."""
        return memoryview(self.buffer)[self.position : self.position + self.size]

    # -- integrity --

    def compute_crc(self) -> int:
        start = self.position
        return crc32c(memoryview(self.buffer)[start + ATTRIBUTES_AT : start + self.size])

    def crc_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def validate(self, header: BatchHeader | None = None) -> None:
        """Check the CRC and the header's counts; raise ProtocolError(CORRUPT_MESSAGE) if wrong.
        `header`: this batch's, if the caller has read it already."""
        buffer, position = self.buffer, self.position
        if header is None:
            header = self.header()
        end = position + LOG_OVERHEAD + header.batch_length
        stored, computed = header.crc, crc32c(memoryview(buffer)[position + ATTRIBUTES_AT : end])
        if stored != computed:
            raise corrupt(f"record batch at position {position}: CRC {stored:#010x}, data {computed:#010x}")
        if header.records_count < 0:
            raise corrupt(f"record batch at position {position} has records_count {header.records_count}")
        if header.last_offset_delta < 0:
            raise corrupt(f"record batch at position {position} has last_offset_delta {header.last_offset_delta}")
        if header.attributes & CODEC_MASK > Compression.ZSTD:
            codec = header.attributes & CODEC_MASK
            raise corrupt(f"record batch at position {position} has unknown compression codec {codec}")

    # -- records --

    def records(self) -> Iterator[Record]:
        """Decode the records, decompressing first if need be. Does not check the CRC."""
        base_offset, _, _, _, _, attributes, _, base_timestamp, max_timestamp, _, _, _, count = self.header()
        if count < 0:
            raise corrupt(f"record batch at position {self.position} has records_count {count}")
        # One copy of the record section up front: indexing and slicing bytes beats a memoryview.
        body = bytes(self.body())
        log_append_time = max_timestamp if attributes & TIMESTAMP_TYPE_BIT else None
        return decode_records(body, count, base_offset, base_timestamp, log_append_time)

    def body(self) -> Buffer:
        """The record section after the header, decompressed if need be (a view when it is not), no
        further than its records_count records need (protocol/inflate.py: a producer's batch may be a
        decompression bomb)."""
        section = memoryview(self.buffer)[self.position + BATCH_HEADER_SIZE : self.position + self.size]
        if not self.attributes & CODEC_MASK:  # no Compression enum made: the cleaner asks for every batch's
            return section
        return inflate(self.compression, section, self.records_count)


# --- walking a buffer of batches ------------------------------------------------------------------


def iter_batches(buf: Buffer, *, allow_partial_tail: bool = False) -> Iterator[RecordBatch]:
    """Yield a view over each batch in `buf`, a run of batches back to back.

    Legacy message sets raise UNSUPPORTED_FOR_MESSAGE_FORMAT and unknown magics CORRUPT_MESSAGE. A
    batch cut short at the end of `buf` raises CORRUPT_MESSAGE, unless `allow_partial_tail` is set
    (fetch responses may end that way), in which case iteration just stops there.
    """
    new_view = object.__new__  # iter_batches has checked the framing that RecordBatch() would
    end = len(buf)
    pos = 0
    while pos < end:
        available = end - pos
        if available < LOG_OVERHEAD:
            if allow_partial_tail:
                return
            raise corrupt(f"{available} stray bytes after the last record batch at position {pos}")
        (batch_length,) = I32.unpack_from(buf, pos + BATCH_LENGTH_AT)
        if available > MAGIC_AT and buf[pos + MAGIC_AT] != MAGIC:
            check_magic(buf[pos + MAGIC_AT], pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise corrupt(f"record batch at position {pos} has batch_length {batch_length}")
        size = batch_length + LOG_OVERHEAD
        if size > available:
            if allow_partial_tail:
                return
            raise corrupt(f"record batch at position {pos} needs {size} bytes, {available} are left")
        batch = new_view(RecordBatch)
        batch.buffer, batch.position = buf, pos
        yield batch
        pos += size


# --- building -------------------------------------------------------------------------------------


def with_records(batch: RecordBatch, section: Buffer, count: int, max_timestamp: int) -> bytes:
    """`batch` holding `count` of its own records instead, their bytes as they were (`section`,
    uncompressed; compressed here with the batch's codec): offsets, base timestamp, producer fields and
    attributes stay, so each record's deltas keep their meaning; batch_length, records_count,
    max_timestamp and the CRC are rewritten (the log cleaner's copy of a batch that lost records)."""
    codec = batch.compression
    payload = compress(codec, section) if codec else section
    out = bytearray(batch.buffer[batch.position : batch.position + BATCH_HEADER_SIZE])
    out += payload
    I32.pack_into(out, BATCH_LENGTH_AT, len(out) - LOG_OVERHEAD)
    I64.pack_into(out, MAX_TIMESTAMP_AT, max_timestamp)
    I32.pack_into(out, RECORDS_COUNT_AT, count)
    U32.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return bytes(out)


def batch_of_section(section: Buffer, count: int, timestamp_ms: int,
                     compression: Compression = Compression.NONE) -> bytes:
    """A producer's batch (CREATE_TIME, no producer id) around `count` records already laid out in
    `section` with offset deltas 0 to count-1 and timestamp deltas 0 from `timestamp_ms` (the Spark
    writer's sections, pipeline/_recordenc.c); compressed here with `compression`."""
    payload = compress(compression, section) if compression else section
    out = bytearray(BATCH_HEADER_SIZE)
    out += payload
    HEADER.pack_into(out, 0, 0, len(out) - LOG_OVERHEAD, -1, MAGIC, 0, int(compression), count - 1, timestamp_ms,
                     timestamp_ms, -1, -1, -1, count)
    U32.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
    return bytes(out)



class RecordBatchBuilder:
    """Accumulates records and writes one batch. Offsets are consecutive unless `append` is given one."""

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: Compression = Compression.NONE,
        timestamp_type: TimestampType = TimestampType.CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        partition_leader_epoch: int = -1,
        is_transactional: bool = False,
        is_control: bool = False,
        delete_horizon_ms: int | None = None,
    ) -> None:
        """`delete_horizon_ms`: a cleaned batch's delete horizon, written as its base timestamp (the
        records' timestamp deltas are relative to it) with the delete-horizon attribute bit."""
        self.base_offset = base_offset
        self.compression = Compression(compression)
        self.timestamp_type = TimestampType(timestamp_type)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.partition_leader_epoch = partition_leader_epoch
        self.is_transactional = is_transactional
        self.is_control = is_control
        self._body = bytearray()
        self._scratch = bytearray()
        self._count = 0
        self._delete_horizon = delete_horizon_ms
        self._base_timestamp: int | None = delete_horizon_ms
        self._max_timestamp = NO_TIMESTAMP
        self._last_offset_delta = -1

    @property
    def records_count(self) -> int:
        return self._count

    def append(
        self,
        key: Buffer | None,
        value: Buffer | None,
        headers: Iterable[tuple[str, Buffer | None]] = (),
        timestamp: int = NO_TIMESTAMP,
        *,
        offset: int | None = None,
    ) -> int:
        """Add a record and return its offset. Explicit offsets must increase (gaps are allowed)."""
        if offset is None:
            offset_delta = self._last_offset_delta + 1
        else:
            offset_delta = offset - self.base_offset
            if offset_delta <= self._last_offset_delta:
                previous = self.base_offset + self._last_offset_delta
                raise ValueError(f"offset {offset} does not follow {previous}")
        if offset_delta > INT32_MAX:
            raise ValueError(f"offset {self.base_offset + offset_delta} is too far from the base offset")
        if self._base_timestamp is None:
            self._base_timestamp = timestamp

        record = self._scratch
        record.clear()
        record.append(0)  # record attributes
        write_varlong(record, java_long(timestamp - self._base_timestamp))  # a delta wraps as Java's long
        write_varint(record, offset_delta)
        write_bytes(record, key)
        write_bytes(record, value)
        headers = list(headers)
        write_varint(record, len(headers))
        for name, header_value in headers:
            if not isinstance(name, str):
                raise TypeError(f"header key must be str, not {type(name).__name__}")
            write_bytes(record, name.encode("utf-8"))
            write_bytes(record, header_value)
        write_varint(self._body, len(record))
        self._body += record

        self._count += 1
        self._last_offset_delta = offset_delta
        self._max_timestamp = max(self._max_timestamp, timestamp)
        return self.base_offset + offset_delta

    def build(self, *, last_offset: int | None = None, max_timestamp: int | None = None) -> bytes:
        """The batch. `last_offset` keeps a cleaned batch's original last offset (the producer's last
        sequence stays derivable); `max_timestamp` overrides the records' maximum (an empty batch's)."""
        payload = compress(self.compression, self._body) if self.compression else self._body
        attributes = int(self.compression)
        if self._delete_horizon is not None:
            attributes |= DELETE_HORIZON_BIT
        last_offset_delta = max(self._last_offset_delta, 0) if last_offset is None else last_offset - self.base_offset
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            attributes |= TIMESTAMP_TYPE_BIT
        if self.is_transactional:
            attributes |= TRANSACTIONAL_BIT
        if self.is_control:
            attributes |= CONTROL_BIT
        out = bytearray(BATCH_HEADER_SIZE)
        out += payload
        HEADER.pack_into(
            out, 0,
            self.base_offset,
            len(out) - LOG_OVERHEAD,
            self.partition_leader_epoch,
            MAGIC,
            0,  # CRC, filled in below once the rest is in place
            attributes,
            last_offset_delta,
            NO_TIMESTAMP if self._base_timestamp is None else self._base_timestamp,
            self._max_timestamp if max_timestamp is None else max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._count,
        )
        U32.pack_into(out, CRC_AT, crc32c(memoryview(out)[ATTRIBUTES_AT:]))
        return bytes(out)


def build_batch(
    records: Iterable[NewRecord | Record | tuple[Buffer | None, Buffer | None, Any, int]],
    *,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
) -> bytes:
    """One batch holding `records`, given as (key, value, headers, timestamp) tuples or objects with
    those attributes (NewRecord, or a decoded Record, whose offset is then ignored)."""
    builder = RecordBatchBuilder(
        base_offset=base_offset,
        compression=compression,
        timestamp_type=timestamp_type,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=is_transactional,
        is_control=is_control,
    )
    for item in records:
        if isinstance(item, tuple):
            key, value, headers, timestamp = item
        else:
            key, value, headers, timestamp = item.key, item.value, item.headers, item.timestamp
        builder.append(key, value, headers, timestamp)
    return builder.build()
