"""The records inside a magic-2 batch, one by one: the decoded and to-be-written record types, and the
record layout (varint-framed, zigzag-encoded):

    length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
    key bytes | value bytes | header_count varint | headers (key string, value bytes)

protocol/records.py frames batches around them; the broker itself never decodes records it only stores.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from protocol.errors import ErrorCode, ProtocolError
from protocol.varint import read_varint, read_varlong, write_varint

Buffer = bytes | bytearray | memoryview
Headers = list[tuple[str, bytes | None]]
NO_TIMESTAMP = -1


def corrupt(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.CORRUPT_MESSAGE, message)


@dataclass(slots=True)
class Record:
    """One decoded record, with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers = field(default_factory=list)


@dataclass(slots=True)
class NewRecord:
    """A record to be written; `build_batch` also takes plain (key, value, headers, timestamp) tuples."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    timestamp: int = NO_TIMESTAMP


def read_bytes(body: bytes, pos: int, end: int) -> tuple[bytes | None, int]:
    # A varint length (-1 for null), then that many bytes, all inside the record ending at `end`.
    length, pos = read_varint(body, pos)
    if 0 <= length <= end - pos:
        return body[pos : pos + length], pos + length
    if length == -1:
        return None, pos
    raise corrupt(f"field of {length} bytes at position {pos} does not fit in its record")


def read_headers(body: bytes, pos: int, end: int, index: int, count: int) -> tuple[Headers, int]:
    """The `count` headers of record `index` from `pos`, inside the record ending at `end`."""
    if count < 0:
        raise corrupt(f"record {index} has header count {count}")
    headers: Headers = []
    for _ in range(count):
        header_key, pos = read_bytes(body, pos, end)
        if header_key is None:
            raise corrupt(f"record {index} has a null header key")
        try:
            name = header_key.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise corrupt(f"record {index} has a header key that is not UTF-8") from exc
        header_value, pos = read_bytes(body, pos, end)
        headers.append((name, header_value))
    return headers, pos


def decode_records(
    body: bytes, count: int, base_offset: int, base_timestamp: int, log_append_time: int | None
) -> Iterator[Record]:
    # Record: length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
    #         key bytes | value bytes | header_count varint | headers (key string, value bytes)
    # Varint reads are bounded by the buffer, not the record; the check that a record's fields add up
    # to its length catches any that strayed past it.
    pos = 0
    body_end = len(body)
    for index in range(count):
        length, pos = read_varint(body, pos)
        if length < 1 or length > body_end - pos:
            raise corrupt(f"record {index} claims {length} bytes, {body_end - pos} are left")
        end = pos + length
        timestamp_delta, pos = read_varlong(body, pos + 1)  # + 1 skips the (unused) record attributes
        offset_delta, pos = read_varint(body, pos)
        key, pos = read_bytes(body, pos, end)
        value, pos = read_bytes(body, pos, end)
        header_count, pos = read_varint(body, pos)
        headers: Headers = []
        if header_count:
            headers, pos = read_headers(body, pos, end, index, header_count)
        if pos != end:
            raise corrupt(f"record {index} claims {length} bytes but its fields take {length + pos - end}")
        timestamp = base_timestamp + timestamp_delta if log_append_time is None else log_append_time
        yield Record(base_offset + offset_delta, timestamp, key, value, headers)
    if pos != body_end:
        raise corrupt(f"{body_end - pos} bytes left over after {count} records")


# One record as the log cleaner sees it: (start, end) of its bytes in the record section (length varint
# included), offset_delta, timestamp_delta, key, value_is_null. protocol/_record_spans.c makes them too.
RecordSpan = tuple[int, int, int, int, bytes | None, bool]


def record_spans_in_python(body: bytes, count: int) -> list[RecordSpan]:
    """Where each of `count` records of an uncompressed record section lies, with its key and deltas,
    nothing else copied; raises ProtocolError (CORRUPT_MESSAGE) where decode_records would. The
    reference of the compiled walk, and where its errors are worded."""
    if count < 0:
        raise corrupt(f"records_count {count}")
    spans: list[RecordSpan] = []
    pos = 0
    body_end = len(body)
    for index in range(count):
        start = pos
        length, pos = read_varint(body, pos)
        if length < 1 or length > body_end - pos:
            raise corrupt(f"record {index} claims {length} bytes, {body_end - pos} are left")
        end = pos + length
        timestamp_delta, pos = read_varlong(body, pos + 1)
        offset_delta, pos = read_varint(body, pos)
        key, pos = read_bytes(body, pos, end)
        value_length, pos = read_varint(body, pos)
        if value_length > end - pos or value_length < -1:
            raise corrupt(f"field of {value_length} bytes at position {pos} does not fit in its record")
        pos += max(value_length, 0)
        header_count, pos = read_varint(body, pos)
        if header_count:
            _, pos = read_headers(body, pos, end, index, header_count)
        if pos != end:
            raise corrupt(f"record {index} claims {length} bytes but its fields take {length + pos - end}")
        spans.append((start, end, offset_delta, timestamp_delta, key, value_length < 0))
    if pos != body_end:
        raise corrupt(f"{body_end - pos} bytes left over after {count} records")
    return spans


try:  # the same walk compiled; setup.py builds it with `pip install -e .`
    from protocol._record_spans import spans as _compiled_spans
except ImportError:  # a checkout without a C compiler
    _compiled_spans = None


def record_spans(body: bytes, count: int) -> list[RecordSpan]:
    """record_spans_in_python, in one compiled call where it is built and the records are sound."""
    if _compiled_spans is not None:
        spans = _compiled_spans(body, count)
        if spans is not None:
            return spans
    return record_spans_in_python(body, count)


def write_bytes(out: bytearray, data: Buffer | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
        return
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"record fields must be bytes-like or None, not {type(data).__name__}")
    write_varint(out, len(data))
    out += data
