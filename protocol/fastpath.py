"""Hand-written codecs for the messages of the data path.

The compiled construct path reads through BytesIO, so every record set is copied on decode and
again on encode. Here, Produce requests are parsed over a memoryview and their `records` are
zero-copy slices of the frame; Fetch responses are written as a list of chunks in which the record
data appears as-is, ready for `transport.writelines`. Produce responses, one per produce request,
are packed field by field when every partition has the usual shape (the generic builder's walk over
every field and default costs more than the rest of the answer). All of them produce exactly what
the construct path produces (tests/protocol/test_fastpath.py checks it byte for byte and value for
value).
"""

from __future__ import annotations

import struct
import uuid
from typing import Literal, overload

from protocol.enums import ApiKey

from .errors import ErrorCode, ProtocolError
from .framing import Request, encode_response, encode_response_header_into, response_header
from .messages import FetchResponse, ProduceRequest, RequestHeader
from .wire import I16, I32, I64, ZERO_UUID, uvarint_bytes

try:  # a request's partitions read in one call; setup.py builds it with `pip install -e .`
    from ._produce_read import read_partitions as _read_partitions
except ImportError:  # a checkout without a C compiler: the Python reader alone
    _read_partitions = None
try:  # a Fetch answer's headers written in one call (the same bytes)
    from ._fetch_write import encode as _encode_fetch
except ImportError:
    _encode_fetch = None
try:  # the usual Produce answer written in one call (the same bytes)
    from ._produce_write import encode as _encode_produce
except ImportError:
    _encode_produce = None

_TopicData = ProduceRequest.TopicProduceData
_PartitionData = _TopicData.PartitionProduceData
_PRODUCE_FLEXIBLE = 9
_PRODUCE_TOPIC_IDS = 13
_FETCH_FLEXIBLE = 12


class _Reader:
    """A cursor over a memoryview; every read checks bounds and raises the typed error."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: memoryview):
        self.buf = buf
        self.pos = 0
        self.end = len(buf)

    def _need(self, n: int) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"Produce: truncated at byte {start}")
        self.pos = start + n
        return start

    # The reads below are on every field of every request: the common case is spelled out inline.

    def fields(self, layout: struct.Struct) -> tuple:
        """Several fixed-width fields in a row, in one unpack."""
        start = self.pos
        if start + layout.size > self.end:
            self._need(layout.size)  # raises
        self.pos = start + layout.size
        return layout.unpack_from(self.buf, start)

    def int16(self) -> int:
        start = self.pos
        if start + 2 > self.end:
            self._need(2)  # raises
        self.pos = start + 2
        return I16.unpack_from(self.buf, start)[0]

    def int32(self) -> int:
        start = self.pos
        if start + 4 > self.end:
            self._need(4)  # raises
        self.pos = start + 4
        return I32.unpack_from(self.buf, start)[0]

    def uvarint(self) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        if pos < end and buf[pos] < 0x80:  # one byte: every count, string length and tag count below 128
            self.pos = pos + 1
            return buf[pos]
        result = 0
        for shift in range(0, 35, 7):
            if pos >= end:
                raise ProtocolError(ErrorCode.INVALID_REQUEST, f"Produce: truncated at byte {pos}")
            b = buf[pos]
            pos += 1
            if b < 0x80:
                self.pos = pos
                return result | b << shift
            result |= (b & 0x7F) << shift
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "Produce: varint longer than 5 bytes")

    def length(self, compact: bool, size16: bool = False) -> int:
        """A length or count; -1 means null."""
        n = self.uvarint() - 1 if compact else (self.int16() if size16 else self.int32())
        if n < -1:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, f"Produce: invalid length {n}")
        return n

    def take(self, n: int) -> memoryview:
        start = self.pos
        end = start + n
        if n < 0 or end > self.end:
            self._need(n)  # raises
        self.pos = end
        return self.buf[start:end]

    @overload
    def string(self, compact: bool, nullable: Literal[False]) -> str: ...
    @overload
    def string(self, compact: bool, nullable: bool) -> str | None: ...

    def string(self, compact: bool, nullable: bool) -> str | None:
        n = self.length(compact, size16=True)
        if n < 0:
            if nullable:
                return None
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "Produce: null in a non-nullable string")
        try:
            return str(self.take(n), "utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "Produce: string is not valid UTF-8") from None

    def skip_tags(self) -> None:
        pos = self.pos
        if pos < self.end and self.buf[pos] == 0:  # no tagged fields: nearly always
            self.pos = pos + 1
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())

    def count(self, compact: bool) -> int:
        n = self.length(compact)
        if n < 0:
            raise ProtocolError(ErrorCode.INVALID_REQUEST, "Produce: null in a non-nullable array")
        return n


_KEY_VERSION_CORRELATION = struct.Struct(">hhi")
_ACKS_TIMEOUT = struct.Struct(">hi")


def decode_produce_request(frame: bytes | bytearray) -> Request[ProduceRequest]:
    """Parse a Produce request frame (no size prefix). `records` are memoryviews into `frame`."""
    if _compiled_decode is not None:
        request = _compiled_decode(frame)
        if request is not None:
            return request
    return decode_produce_in_python(frame)


def decode_produce_in_python(frame: bytes | bytearray) -> Request[ProduceRequest]:
    """decode_produce_request without the compiled decoder: its reference in the tests, and the reader of
    every frame that one leaves (v13, bytes that do not fit), whose errors it words."""
    r = _Reader(memoryview(frame))
    api_key, version, correlation_id = r.fields(_KEY_VERSION_CORRELATION)
    if api_key != ApiKey.PRODUCE:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, f"not a Produce request (api key {api_key})")
    if version not in ProduceRequest.valid_versions:
        raise ProtocolError(ErrorCode.UNSUPPORTED_VERSION, f"Produce v{version} is not supported")
    flexible = version >= _PRODUCE_FLEXIBLE
    client_id = r.string(compact=False, nullable=True)
    if flexible:
        r.skip_tags()
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=correlation_id, client_id=client_id or "")
    body = ProduceRequest.__new__(ProduceRequest)
    body.transactional_id = r.string(flexible, nullable=True)
    body.acks, body.timeout_ms = r.fields(_ACKS_TIMEOUT)
    body.topic_data = [_read_topic(r, version, flexible) for _ in range(r.count(flexible))]
    if flexible:
        r.skip_tags()
    return Request(header, api_key, version, correlation_id, body)  # trailing bytes ignored, as decode_request


try:  # decode_produce_request's common case in one call (setup.py builds it): the same frames, the same objects
    from ._produce_read import configure as _configure_decode
    from ._produce_read import decode as _compiled_decode
    _configure_decode(Request, RequestHeader, ProduceRequest, _TopicData, _PartitionData, ZERO_UUID)
except ImportError:  # a checkout without a C compiler: the Python decoder alone
    _compiled_decode = None


def _read_topic(r: _Reader, version: int, flexible: bool):
    topic = _TopicData.__new__(_TopicData)
    if version >= _PRODUCE_TOPIC_IDS:
        topic.name = ""
        topic.topic_id = uuid.UUID(bytes=bytes(r.take(16)))
    else:
        topic.name = r.string(flexible, nullable=False)
        topic.topic_id = ZERO_UUID
    read = None if _read_partitions is None else _read_partitions(r.buf, r.pos, flexible, _PartitionData)
    if read is None:  # not built, or the bytes do not fit: the Python reader says where and why
        topic.partition_data = _read_partitions_in_python(r, flexible)
    else:
        topic.partition_data, r.pos = read
    if flexible:
        r.skip_tags()
    return topic


def _read_partitions_in_python(r: _Reader, flexible: bool) -> list:
    """What protocol/_produce_read.c reads, and the reference its tests compare it with."""
    partitions = []
    for _ in range(r.count(flexible)):
        partition = _PartitionData.__new__(_PartitionData)
        partition.index = r.int32()
        size = r.length(flexible)
        partition.records = None if size < 0 else r.take(size)
        if flexible:
            r.skip_tags()
        partitions.append(partition)
    return partitions


# --- Produce response -----------------------------------------------------------------------------

_PRODUCE_START_OFFSET = 5  # LogStartOffset from v5; RecordErrors and ErrorMessage from v8; the
_PRODUCE_RECORD_ERRORS = 8  # tagged CurrentLeader and NodeEndpoints from v10
_PRODUCE_CURRENT_LEADER = 10
_PRODUCE_PARTITION_V3 = struct.Struct(">ihqq")
_PRODUCE_PARTITION_V5 = struct.Struct(">ihqqq")
# From v8: no record errors and a null error message, then (flexible) no tagged fields.
_PRODUCE_NO_DETAILS = b"\0\0\0\0\xff\xff"
_PRODUCE_NO_DETAILS_FLEXIBLE = b"\x01\x00\x00"


def encode_produce_response(body, version: int, correlation_id: int) -> list:
    """A whole Produce response frame (size prefix first) as one chunk."""
    if _encode_produce is not None:
        chunks = _encode_produce(body, version, correlation_id)
        if chunks is not None:
            return chunks
    return encode_produce_response_in_python(body, version, correlation_id)


def encode_produce_response_in_python(body, version: int, correlation_id: int) -> list:
    """What protocol/_produce_write.c's encode writes, and every answer it leaves. Partitions with record
    errors, an error message or a leader hint, leader endpoints, and the versions that name topics by
    id go through the generic builder: rare answers, where speed does not matter."""
    if version >= _PRODUCE_TOPIC_IDS or (version >= _PRODUCE_CURRENT_LEADER and body.node_endpoints):
        return [encode_response(body, version, correlation_id)]
    flexible = version >= _PRODUCE_FLEXIBLE
    with_start_offset = version >= _PRODUCE_START_OFFSET
    with_details = version >= _PRODUCE_RECORD_ERRORS
    with_leader = version >= _PRODUCE_CURRENT_LEADER
    details = _PRODUCE_NO_DETAILS_FLEXIBLE if flexible else _PRODUCE_NO_DETAILS
    end_of_struct = b"\x00" if flexible else b""  # no tagged fields
    out = bytearray(b"\0\0\0\0")
    out += response_header(ApiKey.PRODUCE, version, correlation_id)
    out += _array_length(body.responses, flexible)
    for topic in body.responses:
        out += _string_bytes(topic.name, flexible)
        out += _array_length(topic.partition_responses, flexible)
        for p in topic.partition_responses:
            if with_start_offset:
                out += _PRODUCE_PARTITION_V5.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                                  p.log_start_offset)
            else:
                out += _PRODUCE_PARTITION_V3.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            if with_details:
                if p.record_errors or p.error_message is not None or (
                        with_leader and (p.current_leader.leader_id, p.current_leader.leader_epoch) != _NO_EPOCH):
                    return [encode_response(body, version, correlation_id)]
                out += details
        out += end_of_struct
    out += I32.pack(body.throttle_time_ms)
    out += end_of_struct
    I32.pack_into(out, 0, len(out) - 4)
    return [out]


# --- Fetch response -------------------------------------------------------------------------------

def encode_fetch_response(body, version: int, correlation_id: int) -> list:
    """A whole Fetch response frame as chunks (size prefix first); record data is not copied."""
    if _encode_fetch is not None:
        chunks = _encode_fetch(body, version, correlation_id)
        if chunks is not None:
            return chunks
    return encode_fetch_response_in_python(body, version, correlation_id)


def encode_fetch_response_in_python(body, version: int, correlation_id: int) -> list:
    """What protocol/_fetch_write.c's encode writes, and every answer it leaves (a tagged field with a
    value, a number its field cannot hold, another version)."""
    if version not in FetchResponse.valid_versions:
        raise ProtocolError(ErrorCode.UNSUPPORTED_VERSION, f"Fetch v{version} is not supported")
    flexible = version >= _FETCH_FLEXIBLE
    w = _ChunkWriter()
    w.write(b"\0\0\0\0")
    encode_response_header_into(w, 1, version, correlation_id)
    w.write(I32.pack(body.throttle_time_ms))
    if version >= 7:
        w.write(I16.pack(body.error_code) + I32.pack(body.session_id))
    _array_len(w, body.responses, flexible)
    for topic in body.responses:
        if version >= 13:
            w.write(topic.topic_id.bytes)
        else:
            _string(w, topic.topic, flexible)
        _array_len(w, topic.partitions, flexible)
        for partition in topic.partitions:
            _write_partition(w, partition, version, flexible)
        if flexible:
            w.write(b"\x00")
    if flexible:
        _write_top_tags(w, body, version)
    chunks = w.finish()
    chunks[0][0:4] = I32.pack(sum(map(len, chunks)) - 4)  # map: no generator frame per chunk
    return chunks


class _ChunkWriter:
    """Collects small writes in a bytearray and cuts a new chunk around each record set."""

    __slots__ = ("chunks", "head")

    def __init__(self):
        self.chunks: list = []
        self.head = bytearray()

    def write(self, data) -> None:
        self.head += data

    def records(self, data) -> None:
        self.chunks.append(self.head)
        self.chunks.append(data)
        self.head = bytearray()

    def finish(self) -> list:
        if self.head or not self.chunks:
            self.chunks.append(self.head)
        return self.chunks


def _array_len(w, items, flexible: bool) -> None:
    w.write(_array_length(items, flexible))


def _array_length(items, flexible: bool) -> bytes:
    """An array's length field; null is -1 (compact: length + 1 as a varint, null 0)."""
    if items is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return uvarint_bytes(len(items) + 1) if flexible else I32.pack(len(items))


def _string(w, value: str, flexible: bool) -> None:
    w.write(_string_bytes(value, flexible))


def _string_bytes(value: str, flexible: bool) -> bytes:
    """A non-null string: its length field, then its UTF-8 bytes."""
    data = value.encode("utf-8")
    return (uvarint_bytes(len(data) + 1) if flexible else I16.pack(len(data))) + data


_NO_EPOCH = (-1, -1)


# A partition answer's fixed head, by version: index, error, high watermark, last stable offset and
# (v5+) log start offset in one pack
_FETCH_PARTITION_V4 = struct.Struct(">ihqq")
_FETCH_PARTITION_V5 = struct.Struct(">ihqqq")


def _write_partition(w: _ChunkWriter, p, version: int, flexible: bool) -> None:
    head = w.head
    if version >= 5:
        head += _FETCH_PARTITION_V5.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                                         p.log_start_offset)
    else:
        head += _FETCH_PARTITION_V4.pack(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset)
    aborted = p.aborted_transactions
    if not aborted:  # null (READ_UNCOMMITTED) or empty (READ_COMMITTED, nothing aborted): no call
        if aborted is None:
            head += b"\x00" if flexible else b"\xff\xff\xff\xff"
        else:
            head += b"\x01" if flexible else b"\x00\x00\x00\x00"
    else:
        head += _array_length(aborted, flexible)
        for txn in aborted or ():
            head += I64.pack(txn.producer_id) + I64.pack(txn.first_offset)
            if flexible:
                head += b"\x00"
    if version >= 11:
        head += I32.pack(p.preferred_read_replica)
    records = p.records
    if records is None:
        head += b"\x00" if flexible else b"\xff\xff\xff\xff"
    else:
        size = len(records)
        head += uvarint_bytes(size + 1) if flexible else I32.pack(size)
        if size:  # w.records(records) spelled out (once per partition with data); `head` is done with
            chunks = w.chunks
            chunks.append(head)
            chunks.append(records)
            w.head = bytearray()
    if flexible:
        _write_partition_tags(w, p)


def _write_partition_tags(w, p) -> None:
    tags = []
    if (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) != _NO_EPOCH:
        tags.append((0, I32.pack(p.diverging_epoch.epoch) + I64.pack(p.diverging_epoch.end_offset) + b"\x00"))
    if (p.current_leader.leader_id, p.current_leader.leader_epoch) != _NO_EPOCH:
        tags.append((1, I32.pack(p.current_leader.leader_id) + I32.pack(p.current_leader.leader_epoch) + b"\x00"))
    if (p.snapshot_id.end_offset, p.snapshot_id.epoch) != _NO_EPOCH:
        tags.append((2, I64.pack(p.snapshot_id.end_offset) + I32.pack(p.snapshot_id.epoch) + b"\x00"))
    _tag_section(w, tags)


def _write_top_tags(w, body, version: int) -> None:
    tags = []
    if version >= 16 and body.node_endpoints:
        data = _ChunkWriter()
        _array_len(data, body.node_endpoints, True)
        for node in body.node_endpoints:
            data.write(I32.pack(node.node_id))
            _string(data, node.host, True)
            data.write(I32.pack(node.port))
            if node.rack is None:
                data.write(b"\x00")
            else:
                _string(data, node.rack, True)
            data.write(b"\x00")
        tags.append((0, bytes(data.head)))
    _tag_section(w, tags)


def _tag_section(w, tags: list[tuple[int, bytes]]) -> None:
    w.write(uvarint_bytes(len(tags)))
    for tag, data in tags:
        w.write(uvarint_bytes(tag) + uvarint_bytes(len(data)) + data)
