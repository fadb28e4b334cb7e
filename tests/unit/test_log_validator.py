"""broker/log/validator.py and protocol/recompress.py without a broker: when the header lets a batch
through unread, Kafka's timestamp rules and wording record by record, and recompression keeping every
record and producer field."""

from __future__ import annotations

import asyncio

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.common import InvalidRecordError, TopicPartition
from broker.log.config import LogConfig
from broker.log.validator import check_records, needs_validation, target_codec, validate
from protocol.compression import Compression
from protocol.errors import ErrorCode
from protocol.recompress import recompressed
from protocol.records import (
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    TIMESTAMP_TYPE_BIT,
    RecordBatch,
    RecordBatchBuilder,
    build_batch,
)

NOW = 1_800_000_000_000
HOUR = 3_600_000
TP = TopicPartition("t", 0)
DEFAULT = LogConfig()


def _batch(timestamps, compression=Compression.NONE, keys=None, **fields) -> RecordBatch:
    keys = keys or [b"k"] * len(timestamps)
    return RecordBatch(build_batch([(k, b"v%d" % i, [], t) for i, (k, t) in enumerate(zip(keys, timestamps,
                                                                                          strict=True))],
                                   compression=compression, **fields))


def _run_inline(fn, *args):
    async def run():
        return fn(*args)
    return run()


def _validate(config: LogConfig, batch: RecordBatch):
    return asyncio.run(validate(config, TP, memoryview(bytearray(batch.raw())), batch, NOW, _run_inline))


def test_kafka_4_defaults():
    assert (DEFAULT.message_timestamp_after_max_ms, DEFAULT.message_timestamp_before_max_ms) == (HOUR, 2**63 - 1)
    assert DEFAULT.compression_type == "producer"


@pytest.mark.parametrize(("timestamps", "needed"), [
    ([NOW - 10**12, NOW, NOW + HOUR], False),  # the header's max is at the bound: no record can be later
    ([NOW, NOW + HOUR + 1], True),
    ([-1, -1], False),
])
def test_the_header_decides_under_the_defaults(timestamps, needed):
    assert needs_validation(DEFAULT, _batch(timestamps).header(), NOW) is needed


def test_before_max_ms_reads_every_batch_but_a_lone_record_the_header_vouches_for():
    config = LogConfig(message_timestamp_before_max_ms=HOUR)
    assert needs_validation(config, _batch([NOW, NOW]).header(), NOW)
    assert not needs_validation(config, _batch([NOW - 5]).header(), NOW)
    assert needs_validation(config, _batch([NOW - 2 * HOUR]).header(), NOW)


def test_log_append_time_topics_read_nothing_but_a_producer_batch_marked_so():
    config = LogConfig(message_timestamp_type="LogAppendTime")
    assert not needs_validation(config, _batch([NOW + 100 * HOUR]).header(), NOW)
    raw = bytearray(_batch([NOW]).raw())
    raw[22] |= TIMESTAMP_TYPE_BIT
    assert needs_validation(config, RecordBatch(raw).header(), NOW)


def test_records_out_of_range_are_named_in_kafkas_words():
    batch = _batch([NOW, NOW + 2 * HOUR, NOW - 5, NOW + HOUR + 1])
    with pytest.raises(InvalidRecordError) as caught:
        check_records(DEFAULT, TP, batch, batch.body(), NOW)
    error = caught.value
    assert error.error_code == ErrorCode.INVALID_TIMESTAMP
    assert error.message == "One or more records have been rejected due to invalid timestamp"
    low = NOW - (2**63 - 1)
    assert error.record_errors == [
        (i, f"Timestamp {t} of message with offset {i} is out of range. The timestamp should be within "
            f"[{low}, {NOW + HOUR}]") for i, t in [(1, NOW + 2 * HOUR), (3, NOW + HOUR + 1)]]


def test_bounds_wrap_as_java_longs():
    config = LogConfig(message_timestamp_after_max_ms=2**63 - 1, message_timestamp_before_max_ms=0)
    batch = _batch([NOW - 1])
    with pytest.raises(InvalidRecordError) as caught:
        check_records(config, TP, batch, batch.body(), NOW)
    assert caught.value.record_errors[0][1].endswith(f"[{NOW}, {NOW + 2**63 - 1 - 2**64}]")


def test_keyless_records_join_timestamp_errors_on_a_compacted_topic():
    config = LogConfig(cleanup_policy=("compact",))
    batch = _batch([NOW, NOW + 2 * HOUR], keys=[None, b"k"])
    with pytest.raises(InvalidRecordError) as caught:
        check_records(config, TP, batch, batch.body(), NOW)
    assert caught.value.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [i for i, _ in caught.value.record_errors] == [0, 1]
    keyless = _batch([NOW], keys=[None])
    with pytest.raises(InvalidRecordError) as caught:
        check_records(config, TP, keyless, keyless.body(), NOW)
    assert caught.value.error_code == ErrorCode.INVALID_RECORD


def test_a_producer_batch_marked_log_append_time_is_refused_on_such_a_topic():
    config = LogConfig(message_timestamp_type="LogAppendTime")
    raw = bytearray(_batch([NOW]).raw())
    raw[22] |= TIMESTAMP_TYPE_BIT
    batch = RecordBatch(raw)
    with pytest.raises(InvalidRecordError) as caught:
        check_records(config, TP, batch, batch.body(), NOW)
    assert caught.value.record_errors == [(0, f"Invalid timestamp type in message DefaultRecord(offset=0, "
                                              f"timestamp={NOW}, key=1 bytes, value=2 bytes). Producer should not "
                                              "set timestamp type to LogAppendTime.")]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_compressed_batches_are_decompressed_to_be_checked(codec):
    with pytest.raises(InvalidRecordError) as caught:
        _validate(DEFAULT, _batch([NOW + 2 * HOUR], compression=codec))
    assert caught.value.error_code == ErrorCode.INVALID_TIMESTAMP


def test_a_corrupt_batch_is_refused_before_its_records_are_read():
    raw = bytearray(_batch([NOW + 2 * HOUR]).raw())
    raw[-1] ^= 1
    with pytest.raises(InvalidRecordError) as caught:
        _validate(DEFAULT, RecordBatch(raw))
    assert caught.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_target_codec():
    gzip = LogConfig(compression_type="gzip")
    assert target_codec(DEFAULT, Compression.NONE) is None
    assert target_codec(gzip, Compression.GZIP) is None
    assert target_codec(gzip, Compression.LZ4) == Compression.GZIP
    assert target_codec(LogConfig(compression_type="uncompressed"), Compression.ZSTD) == Compression.NONE
    assert target_codec(gzip, CONTROL_BIT) is None  # an uncompressed marker stays so


def test_validate_returns_the_batch_unchanged_when_there_is_nothing_to_rebuild():
    batch = _batch([NOW, NOW + 1])
    records, same = _validate(LogConfig(message_timestamp_before_max_ms=HOUR), batch)
    assert same is batch


@settings(max_examples=60)
@given(source=st.sampled_from(list(Compression)), target=st.sampled_from(list(Compression)),
       timestamps=st.lists(st.integers(-1, 2**41), min_size=1, max_size=8), transactional=st.booleans(),
       level=st.sampled_from([None, 1]))
def test_recompression_keeps_records_and_producer_fields(source, target, timestamps, transactional, level):
    batch = _batch(timestamps, compression=source, keys=[None if i % 2 else b"k%d" % i for i in range(len(timestamps))],
                   producer_id=7, producer_epoch=3, base_sequence=11, is_transactional=transactional)
    out = RecordBatch(recompressed(batch, target, level))
    out.validate()
    assert out.compression == target
    assert (out.producer_id, out.producer_epoch, out.base_sequence, out.is_transactional) == (7, 3, 11, transactional)
    assert (out.records_count, out.last_offset_delta) == (len(timestamps), len(timestamps) - 1)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in out.records()] == \
        [(r.offset, r.timestamp, r.key, r.value) for r in batch.records()]
    assert out.max_timestamp == max(timestamps) and out.header().base_timestamp == timestamps[0]


def test_records_not_in_the_producers_form_are_written_again():
    builder = RecordBatchBuilder(delete_horizon_ms=1_000)  # timestamps relative to 1000, not to the first record
    builder.append(b"a", b"1", [("h", b"x")], 5_000)
    builder.append(b"b", None, [], 4_000)
    raw = bytearray(builder.build())
    raw[22] &= ~DELETE_HORIZON_BIT
    out = RecordBatch(recompressed(RecordBatch(raw), Compression.GZIP, None))
    assert (out.header().base_timestamp, out.max_timestamp) == (5_000, 5_000)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out.records()] == \
        [(0, 5_000, b"a", b"1", [("h", b"x")]), (1, 4_000, b"b", None, [])]


def test_a_producer_batch_marked_log_append_time_inside_the_bounds_is_stored_as_create_time():
    raw = bytearray(_batch([NOW - 5, NOW]).raw())
    raw[22] |= TIMESTAMP_TYPE_BIT
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    records, batch = _validate(DEFAULT, RecordBatch(raw))
    batch.validate()
    assert not batch.attributes & TIMESTAMP_TYPE_BIT and batch.max_timestamp == NOW
    assert [r.timestamp for r in batch.records()] == [NOW - 5, NOW]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP])
def test_a_compressed_batch_kept_in_its_codec_prints_its_records_as_kafkas_partial_reader(codec):
    config = LogConfig(message_timestamp_type="LogAppendTime")
    raw = bytearray(_batch([NOW], keys=[None], compression=codec).raw())
    raw[22] |= TIMESTAMP_TYPE_BIT
    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError) as caught:
        _validate(config, RecordBatch(raw))
    name, key = ("PartialDefaultRecord", -1) if codec else ("DefaultRecord", 0)
    assert caught.value.record_errors[0][1].startswith(f"Invalid timestamp type in message {name}(offset=0, "
                                                       f"timestamp={NOW}, key={key} bytes, value=2 bytes).")
