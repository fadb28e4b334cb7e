"""Record batches (magic 2): round trips, kafka-python as an oracle, CRC handling, legacy formats, fuzz."""

from __future__ import annotations

import struct

import cramjam
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import encode_varint as kp_encode_varint

from protocol import compression as ebb_compression
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import (
    BATCH_FRAMING,
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    Compression,
    NewRecord,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    TimestampType,
    assign_offsets,
    batch_size_at,
    build_batch,
    iter_batches,
    read_header,
    set_log_append_time,
)
from protocol.varint import (
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
    read_unsigned_varint,
    read_varint,
    varint_size,
    write_unsigned_varint,
)

ALL_CODECS = list(Compression)
FAST = settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])


# kafka-python reads and writes snappy, lz4 and zstd through its optional packages (python-snappy, lz4,
# zstandard), which the test extras install: for lz4 and zstd these are implementations independent
# of the cramjam codecs we use.


# --- strategies -----------------------------------------------------------------------------------

maybe_bytes = st.none() | st.binary(max_size=40)
headers = st.lists(st.tuples(st.text(max_size=8), maybe_bytes), max_size=3)
timestamps = st.integers(min_value=-1, max_value=1 << 45)
record_tuples = st.tuples(maybe_bytes, maybe_bytes, headers, timestamps)
record_lists = st.lists(record_tuples, min_size=1, max_size=12)


def expected(records: list[tuple], base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(records)]


def decode_all(buf: bytes | bytearray, **kwargs: bool) -> list[Record]:
    out: list[Record] = []
    for batch in iter_batches(buf, **kwargs):
        batch.validate()
        out.extend(batch.records())
    return out


def kafka_python_read(buf: bytes | bytearray) -> list[tuple]:
    out = []
    records = MemoryRecords(bytes(buf))
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def kafka_python_build(records: list[tuple], codec: int) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30,
    )
    for offset, (key, value, hdrs, ts) in enumerate(records):
        assert builder.append(offset, ts, key, value, hdrs) is not None
    return builder.build()


def raw_batch(body: bytes, count: int, codec: int = 0, attributes: int = 0) -> bytearray:
    """A batch around an arbitrary record section, with a correct header and CRC."""
    payload = ebb_compression.compress(Compression(codec), body) if codec else body
    out = bytearray(BATCH_HEADER_SIZE) + payload
    struct.pack_into(
        ">qiibIhiqqqhii", out, 0, 0, len(out) - LOG_OVERHEAD, -1, 2, 0, attributes | codec,
        max(count - 1, 0), 0, 0, -1, -1, -1, count,
    )
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return out


# --- round trips ----------------------------------------------------------------------------------


@FAST
@given(record_lists, st.sampled_from(ALL_CODECS), st.integers(0, 1 << 40))
def test_round_trip(records: list[tuple], codec: Compression, base_offset: int) -> None:
    buf = build_batch(records, compression=codec, base_offset=base_offset)
    (batch,) = iter_batches(buf)
    batch.validate()
    assert batch.compression == codec
    assert batch.base_offset == base_offset
    assert batch.records_count == len(records)
    assert batch.last_offset == base_offset + len(records) - 1
    assert batch.base_timestamp == records[0][3]
    assert batch.max_timestamp == max(r[3] for r in records)
    assert batch.size == len(buf)
    assert list(batch.records()) == expected(records, base_offset)


@FAST
@given(st.lists(st.tuples(record_lists, st.sampled_from(ALL_CODECS)), min_size=1, max_size=4))
def test_concatenated_batches(batches: list[tuple[list[tuple], Compression]]) -> None:
    buf = bytearray()
    want: list[Record] = []
    offset = 0
    for records, codec in batches:
        buf += build_batch(records, compression=codec, base_offset=offset)
        want += expected(records, offset)
        offset += len(records)
    assert decode_all(buf) == want


def test_header_fields() -> None:
    buf = build_batch(
        [NewRecord(b"k", b"v", [("a", None)], 1700000000000), NewRecord(None, b"w", (), 1699999999000)],
        base_offset=42, compression=Compression.GZIP, producer_id=7, producer_epoch=3, base_sequence=11,
        partition_leader_epoch=5, is_transactional=True,
    )
    batch = RecordBatch(buf)
    assert (batch.base_offset, batch.partition_leader_epoch, batch.magic) == (42, 5, 2)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 3, 11)
    assert batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == TimestampType.CREATE_TIME
    assert (batch.last_offset_delta, batch.last_offset, batch.next_offset) == (1, 43, 44)
    assert (batch.base_timestamp, batch.max_timestamp) == (1700000000000, 1700000000000)
    assert batch.attributes == 0x10 | Compression.GZIP
    assert batch.batch_length + LOG_OVERHEAD == batch.size == len(buf)
    assert bytes(batch.raw()) == buf
    assert batch.crc_valid()
    assert [r.timestamp for r in batch.records()] == [1700000000000, 1699999999000]


def test_header_read_at_a_position_matches_the_view() -> None:
    control = build_batch([(None, b"m", [], 3)], base_offset=7, is_control=True)
    data = b"\x00" * 5 + control
    header = read_header(data, 5)
    assert header == RecordBatch(data, 5).header()
    assert (header.size, header.last_offset, header.is_control) == (len(control), 7, True)
    assert batch_size_at(data, 5) == len(control)
    assert BATCH_FRAMING.unpack_from(data, 5) == (len(control) - LOG_OVERHEAD, MAGIC)
    assert not read_header(build_batch([(None, b"m", [], 3)])).is_control


def test_explicit_offsets_and_empty_batch() -> None:
    builder = RecordBatchBuilder(base_offset=100)
    assert builder.append(b"a", b"1", timestamp=5, offset=100) == 100
    assert builder.append(b"b", b"2", timestamp=6, offset=104) == 104
    with pytest.raises(ValueError):
        builder.append(b"c", b"3", timestamp=7, offset=104)
    buf = builder.build()
    assert [r.offset for r in RecordBatch(buf).records()] == [100, 104]
    assert [r[0] for r in kafka_python_read(buf)] == [100, 104]

    empty = RecordBatch(build_batch([], compression=Compression.ZSTD))
    empty.validate()
    assert empty.records_count == 0 and list(empty.records()) == []


def test_view_over_memoryview_at_an_offset() -> None:
    buf = bytearray(b"\xaa" * 7) + build_batch([(b"k", b"v", [], 1)])
    batch = RecordBatch(memoryview(buf), 7)
    batch.validate()
    assert [r.value for r in batch.records()] == [b"v"]


# --- kafka-python as an oracle --------------------------------------------------------------------


@FAST
@given(record_lists, st.sampled_from(ALL_CODECS))
def test_kafka_python_reads_ours(records: list[tuple], codec: Compression) -> None:
    buf = build_batch(records, compression=codec, base_offset=9)
    assert DefaultRecordBatch(buf).compression_type == codec
    theirs = kafka_python_read(buf)
    assert theirs == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in expected(records, 9)]


@FAST
@given(record_lists, st.sampled_from(ALL_CODECS))
def test_we_read_kafka_python(records: list[tuple], codec: Compression) -> None:
    buf = kafka_python_build(records, codec)
    assert decode_all(buf) == expected(records)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_we_read_kafka_python_compressed(codec: Compression) -> None:
    # Repetitive values, so kafka-python keeps the compressed form instead of falling back.
    records = [(b"key-%d" % i, b"value " * 2000, [("h", b"x" * i)], 1000 + i) for i in range(30)]
    buf = kafka_python_build(records, codec)
    batch = RecordBatch(buf)
    assert batch.compression == codec
    assert decode_all(buf) == expected(records)
    assert kafka_python_read(build_batch(records, compression=codec)) == kafka_python_read(buf)


def test_kafka_python_memory_records_builder() -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=1, batch_size=1 << 20, offset=0)
    for i in range(5):
        builder.append(1000 + i, b"k%d" % i, b"v%d" % i, [("n", str(i).encode())])
    builder.close()
    records = decode_all(builder.buffer())
    assert [(r.key, r.headers) for r in records] == [(b"k%d" % i, [("n", str(i).encode())]) for i in range(5)]


def test_snappy_is_written_xerial_framed_and_raw_snappy_is_read() -> None:
    records = [(b"k", b"v" * 100_000, [], 0)]  # more than one 32 KiB xerial block
    buf = build_batch(records, compression=Compression.SNAPPY)
    assert buf[BATCH_HEADER_SIZE : BATCH_HEADER_SIZE + 8] == b"\x82SNAPPY\x00"
    plain = build_batch(records)
    section = plain[BATCH_HEADER_SIZE:]
    # librdkafka's way: one bare raw snappy block, no framing.
    raw = raw_batch(bytes(cramjam.snappy.compress_raw(section)), 1, attributes=Compression.SNAPPY)
    assert decode_all(raw) == expected(records)
    # Two xerial streams back to back read as one.
    xerial = ebb_compression.compress(Compression.SNAPPY, section[:10])
    xerial += ebb_compression.compress(Compression.SNAPPY, section[10:])
    assert ebb_compression.decompress(Compression.SNAPPY, xerial) == section


def test_lz4_frame_has_independent_blocks() -> None:
    records = [(b"k", bytes(range(256)) * 1000, [], 0)]  # 256 KB: several 64 KiB blocks
    frame = build_batch(records, compression=Compression.LZ4)[BATCH_HEADER_SIZE:]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    assert frame[4] & 0x20, "Kafka's Java reader rejects linked LZ4 blocks"
    assert 4 <= (frame[5] >> 4) & 7 <= 7
    assert decode_all(build_batch(records, compression=Compression.LZ4)) == expected(records)


def test_short_or_misplaced_views_are_corrupt() -> None:
    buf = build_batch([(b"a", b"b", [], 1)])
    for bad in (buf[:60], buf[:-1], b""):
        with pytest.raises(ProtocolError) as info:
            RecordBatch(bad)
        assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    for position in (-1, 1, len(buf)):
        with pytest.raises(ProtocolError):
            RecordBatch(buf, position)


# --- CRC and in-place edits -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_any_flipped_byte_under_the_crc_is_detected(codec: Compression) -> None:
    buf = bytearray(build_batch([(b"key", b"value", [("h", b"1")], 12345)] * 3, compression=codec))
    for position in range(21, len(buf)):
        for flip in (0x01, 0x80):
            buf[position] ^= flip
            batch = RecordBatch(buf)
            assert not batch.crc_valid()
            with pytest.raises(ProtocolError) as info:
                batch.validate()
            assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
            buf[position] ^= flip
    RecordBatch(buf).validate()


def test_assign_offsets_keeps_crc() -> None:
    first = build_batch([(b"a", b"1", [], 1), (b"b", b"2", [], 2)], compression=Compression.GZIP)
    second = build_batch([(b"c", b"3", [], 3)])
    buf = bytearray(first + second)
    assert assign_offsets(buf, 0, 1000, 7) == 1001
    assert assign_offsets(memoryview(buf), len(first), 1002, 7) == 1002
    batches = list(iter_batches(buf))
    for batch in batches:
        batch.validate()
        assert batch.partition_leader_epoch == 7
    assert [r.offset for r in decode_all(buf)] == [1000, 1001, 1002]
    assert [r[0] for r in kafka_python_read(buf)] == [1000, 1001, 1002]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_set_log_append_time(codec: Compression) -> None:
    first = build_batch([(b"x", b"y", [], 5)])
    buf = bytearray(first + build_batch([(b"a", b"1", [], 10), (b"b", b"2", [], 20)], compression=codec))
    set_log_append_time(buf, len(first), 99_000)
    _, batch = iter_batches(buf)
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.compression == codec
    assert batch.max_timestamp == 99_000
    assert [r.timestamp for r in batch.records()] == [99_000, 99_000]
    kp = DefaultRecordBatch(bytes(batch.raw()))
    assert kp.validate_crc() and kp.timestamp_type == 1
    assert [r.timestamp for r in kp] == [99_000, 99_000]


# --- framing: legacy formats, magics, truncation --------------------------------------------------


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1])
def test_legacy_message_sets_are_unsupported(magic: int, codec: int) -> None:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i in range(3):
        builder.append(1000 + i if magic else None, b"k", b"v%d" % i)
    builder.close()
    buf = bytes(builder.buffer())
    assert buf[16] == magic
    for partial in (False, True):
        with pytest.raises(ProtocolError) as info:
            list(iter_batches(buf, allow_partial_tail=partial))
        assert info.value.error_code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    with pytest.raises(ProtocolError) as info:
        RecordBatch(buf)
    assert info.value.error_code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    # ...also after a good batch.
    with pytest.raises(ProtocolError) as info:
        list(iter_batches(build_batch([(b"a", b"b", [], 1)]) + buf))
    assert info.value.error_code == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("magic", [3, 99, 0x80, 0xFF])
def test_unknown_magic_is_corrupt(magic: int) -> None:
    buf = bytearray(build_batch([(b"a", b"b", [], 1)]))
    buf[16] = magic
    with pytest.raises(ProtocolError) as info:
        list(iter_batches(buf))
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_partial_tail() -> None:
    batches = [build_batch([(b"k%d" % i, b"v" * i, [], i)], compression=Compression.GZIP) for i in range(3)]
    buf = b"".join(batches)
    boundaries = {0, len(batches[0]), len(batches[0]) + len(batches[1]), len(buf)}
    for cut in range(len(buf) + 1):
        complete = sum(1 for b in boundaries if 0 < b <= cut)
        assert len(list(iter_batches(buf[:cut], allow_partial_tail=True))) == complete
        if cut in boundaries:
            assert len(decode_all(buf[:cut])) == complete
        else:
            with pytest.raises(ProtocolError) as info:
                list(iter_batches(buf[:cut]))
            assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("batch_length", [-1, 0, 48, -(1 << 31)])
def test_bad_batch_length(batch_length: int) -> None:
    buf = bytearray(build_batch([(b"a", b"b", [], 1)]))
    struct.pack_into(">i", buf, 8, batch_length)
    for partial in (False, True):
        with pytest.raises(ProtocolError) as info:
            list(iter_batches(buf, allow_partial_tail=partial))
        assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    ("field", "fmt", "value"),
    [(57, ">i", -1), (23, ">i", -1), (21, ">h", 5), (21, ">h", 7)],
    ids=["records_count", "last_offset_delta", "codec5", "codec7"],
)
def test_validate_rejects_bad_header_fields(field: int, fmt: str, value: int) -> None:
    # records() needs a sane count and codec; it does not care about last_offset_delta.
    buf = bytearray(build_batch([(b"a", b"b", [], 1)]))
    struct.pack_into(fmt, buf, field, value)
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    batch = RecordBatch(buf)
    with pytest.raises(ProtocolError) as info:
        batch.validate()
    assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    if field != 23:
        with pytest.raises(ProtocolError):
            list(batch.records())


def test_record_level_corruption() -> None:
    good = build_batch([(b"a", b"b", [("h", b"v")], 1)])[BATCH_HEADER_SIZE:]
    cases = {
        "count too high": raw_batch(good, 2),
        "count too low": raw_batch(good, 0),
        "trailing bytes": raw_batch(good + b"\x00", 1),
        "length overruns": raw_batch(b"\x7e" + good[1:], 1),
        "null header key": raw_batch(good.replace(b"\x02h", b"\x01"), 1),
        "bad utf-8 key": raw_batch(good.replace(b"\x02h", b"\x02\xff"), 1),
        "overlong varint": raw_batch(b"\x80\x80\x80\x80\x80\x00", 1),
        "negative key len": raw_batch(good[:4] + b"\x03" + good[5:], 1),
        "garbage gzip": raw_batch(b"not gzip at all", 1, attributes=Compression.GZIP),
        "garbage xerial": raw_batch(b"\x82SNAPPY\x00\0\0\0\1\0\0\0\1\0\0\0\\9x", 1, attributes=2),
    }
    for name, buf in cases.items():
        with pytest.raises(ProtocolError) as info:
            list(RecordBatch(buf).records())
        assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE, name


# --- fuzz -----------------------------------------------------------------------------------------


def exercise(buf: bytes | bytearray, partial: bool) -> None:
    """Everything a reader might do with untrusted bytes; only ProtocolError may come out."""
    try:
        for batch in iter_batches(buf, allow_partial_tail=partial):
            batch.header()
            batch.crc_valid()
            for name in ("timestamp_type", "is_control", "last_offset", "size", "crc", "magic"):
                getattr(batch, name)
            try:
                batch.validate()
            except ProtocolError:
                pass
            for _ in batch.records():
                pass
    except ProtocolError:
        pass


@settings(max_examples=500)
@given(st.binary(max_size=300), st.booleans())
def test_fuzz_random_bytes(data: bytes, partial: bool) -> None:
    exercise(data, partial)
    try:
        RecordBatch(data, 0)
    except ProtocolError:
        pass


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytearray:
    records = draw(record_lists)
    codec = draw(st.sampled_from(ALL_CODECS))
    buf = bytearray(build_batch(records, compression=codec))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        position = draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[position] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and buf:
            buf[position] = draw(st.integers(0, 255))
        elif kind == "cut":
            del buf[position:]
        elif kind == "insert":
            buf[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del buf[position : position + draw(st.integers(1, 8))]
    return buf


@settings(max_examples=500)
@given(mutated_batches(), st.booleans())
def test_fuzz_mutated_batches(buf: bytearray, partial: bool) -> None:
    exercise(buf, partial)


@settings(max_examples=500)
@given(record_lists, st.sampled_from(ALL_CODECS), st.data())
def test_fuzz_mutated_record_sections(records: list[tuple], codec: Compression, data: st.DataObject) -> None:
    # Mutate the uncompressed record section and re-wrap it with a valid CRC (and compression), so the
    # record decoder itself sees the garbage rather than the CRC check or the decompressor.
    body = bytearray(build_batch(records)[BATCH_HEADER_SIZE:])
    for _ in range(data.draw(st.integers(1, 3))):
        position = data.draw(st.integers(0, len(body) - 1))
        body[position] = data.draw(st.integers(0, 255))
    count = data.draw(st.sampled_from([len(records), len(records) + 1, max(len(records) - 1, 0), 1 << 30]))
    exercise(raw_batch(bytes(body), count, int(codec)), False)


# --- varints --------------------------------------------------------------------------------------


@given(st.integers(-(1 << 31), (1 << 31) - 1))
def test_varint_round_trip_matches_kafka_python(value: int) -> None:
    encoded = encode_varint(value)
    theirs = bytearray()
    kp_encode_varint(value, theirs.append)
    assert encoded == bytes(theirs)
    assert decode_varint(encoded) == value
    assert varint_size(value) == len(encoded) <= 5


@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert decode_varlong(encoded) == value
    assert varint_size(value) == len(encoded) <= 10


def test_varint_bounds() -> None:
    assert decode_varint(b"\xfe\xff\xff\xff\x0f") == (1 << 31) - 1
    assert decode_varint(b"\xff\xff\xff\xff\x0f") == -(1 << 31)
    for bad in (b"\xff\xff\xff\xff\x1f", b"\x80\x80\x80\x80\x80\x00", b"\x80", b""):
        with pytest.raises(ProtocolError) as info:
            decode_varint(bad)
        assert info.value.error_code == ErrorCode.CORRUPT_MESSAGE
    assert decode_varlong(b"\xfe" + b"\xff" * 8 + b"\x01") == (1 << 63) - 1
    for bad in (b"\xff" * 9 + b"\x03", b"\x80" * 10 + b"\x00"):
        with pytest.raises(ProtocolError):
            decode_varlong(bad)
    with pytest.raises(ValueError):
        encode_varint(1 << 31)
    out = bytearray()
    write_unsigned_varint(out, 300)
    assert read_unsigned_varint(out, 0) == (300, 2)
    assert read_varint(b"\x00\x03", 1) == (-2, 2)
