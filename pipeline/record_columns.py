"""Fetched record batches to one Arrow record batch, the per-record work compiled.

Python walks the batches of one partition's fetched bytes — framing, CRC-32C and decompression with
protocol/records.py, a few calls per batch — and pipeline/_recordcols.c decodes the records of all of
them in one call into Arrow's buffers, which pyarrow wraps without another copy. Decoding record by
record in Python costs about 2 µs a record; librdkafka's message objects cost about as much to take
apart in Python; this costs a few tens of nanoseconds.
"""

from __future__ import annotations

import pyarrow as pa

from client.aborted import BatchFilter
from protocol.errors import ErrorCode, ProtocolError
from protocol.record_format import Buffer
from protocol.records import TimestampType, iter_batches

try:
    from . import _recordcols
except ImportError as exc:  # a checkout used without `pip install -e .`, or a build without a C compiler
    raise ImportError("pipeline/_recordcols.c is not built: run `pip install -e .` (it needs a C compiler and "
                      "Python's headers)") from exc

def decode(records: Buffer | None, position: int, end: int, topic: str, partition: int,
           schema: pa.Schema, batches: BatchFilter | None = None) -> tuple[pa.RecordBatch, int]:
    """The records at offsets [position, end) of a fetched record set as rows of `schema` (the
    source's, with or without headers), and the offset a reader goes on from. Control batches and
    those `batches` drops (aborted transactions) are left out by their headers, never decoded.
    Raises ProtocolError (CORRUPT_MESSAGE) on a bad CRC, codec or record."""
    sections = []
    next_position = position
    if batches is None:
        batches = BatchFilter()
    for batch in iter_batches(records or b"", allow_partial_tail=True):
        dropped = batches.skip(batch)  # the filter sees every batch, in order
        if batch.next_offset <= position:
            continue
        if not dropped:
            batch.validate()
            base_offset, _, _, _, _, _, _, base_timestamp, max_timestamp, _, _, _, count = batch.header()
            log_append_time = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
            sections.append((batch.body(), count, base_offset, base_timestamp, log_append_time, max_timestamp))
        next_position = batch.next_offset
        if next_position >= end:
            break
    with_headers = "headers" in schema.names
    try:
        rows, offsets, stamps, types, keys, values, headers = _recordcols.decode(sections, position, end, with_headers)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"{topic}-{partition}: {exc}") from exc
    arrays = [_bytes_column(pa.binary(), rows, keys), _bytes_column(pa.binary(), rows, values),
              pa.repeat(pa.scalar(topic, pa.string()), rows), pa.repeat(pa.scalar(partition, pa.int32()), rows),
              _fixed(pa.int64(), rows, offsets), _fixed(schema.field("timestamp").type, rows, stamps),
              _fixed(pa.int32(), rows, types)]
    if with_headers:
        arrays.append(_headers(schema.field("headers").type, rows, headers, topic, partition))
    return pa.RecordBatch.from_arrays(arrays, schema=schema), next_position


def _fixed(kind: pa.DataType, rows: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(data)])


def _bytes_column(kind: pa.DataType, rows: int, column: tuple[int, bytes | None, bytes, bytes]) -> pa.Array:
    nulls, valid, offsets, data = column
    validity = None if valid is None else pa.py_buffer(valid)
    return pa.Array.from_buffers(kind, rows, [validity, pa.py_buffer(offsets), pa.py_buffer(data)],
                                 null_count=nulls)


def _headers(kind: pa.ListType, rows: int, headers: tuple, topic: str, partition: int) -> pa.Array:
    lists, keys, values = headers
    count = int.from_bytes(lists[-4:], "little")  # the last list ends after every header
    entry = kind.value_type
    header_keys = _bytes_column(entry.field("key").type, count, keys)
    try:
        header_keys.validate(full=True)  # Kafka's header keys are UTF-8 strings
    except pa.ArrowInvalid as exc:
        raise ProtocolError(ErrorCode.CORRUPT_MESSAGE, f"{topic}-{partition}: a header key is not UTF-8") from exc
    entries = pa.StructArray.from_arrays([header_keys, _bytes_column(entry.field("value").type, count, values)],
                                         fields=[entry.field("key"), entry.field("value")])
    return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(lists)], children=[entries])
