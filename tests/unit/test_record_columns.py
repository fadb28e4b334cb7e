"""The compiled record decoder (pipeline/_recordcols.c through pipeline/record_columns.py) gives the
same rows as the client's Python decoder, for every codec, nulls, headers, LogAppendTime, control
batches, a range cut at both ends and a partial last batch; damaged records are CORRUPT_MESSAGE."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.consumer import decode_partition
from client.types import TopicPartition
from pipeline.fast_read import arrow_schema
from pipeline.record_columns import decode
from protocol.errors import ErrorCode, ProtocolError
from protocol.records import Compression, TimestampType, build_batch

TP = TopicPartition("t", 3)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def python_rows(data, position, end, with_headers):
    records, _ = decode_partition(TP, position, data)
    rows = []
    for r in records:
        if r.offset >= end:
            break
        row = {"key": r.key, "value": r.value, "topic": TP.topic, "partition": TP.partition, "offset": r.offset,
               "timestamp": EPOCH + timedelta(milliseconds=r.timestamp), "timestampType": r.timestamp_type}
        if with_headers:
            row["headers"] = [{"key": k, "value": v} for k, v in r.headers]
        rows.append(row)
    return rows


def compiled_rows(data, position, end, with_headers):
    batch, _ = decode(data, position, end, TP.topic, TP.partition, arrow_schema(with_headers))
    batch.validate(full=True)
    return batch.to_pylist()


blobs = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(st.tuples(st.text(max_size=8), blobs), max_size=3)
records = st.lists(st.tuples(blobs, blobs, headers, st.integers(0, 2**41)), min_size=1, max_size=12)
batches = st.lists(st.tuples(records, st.sampled_from(list(Compression)), st.sampled_from(list(TimestampType)),
                             st.booleans()), min_size=1, max_size=4)


@settings(max_examples=150)
@given(batches, st.integers(0, 20), st.integers(0, 60), st.booleans(), st.integers(0, 30))
def test_the_compiled_decoder_gives_the_python_decoders_rows(spec, position, span, with_headers, cut):
    data, offset = b"", 0
    for recs, codec, timestamp_type, control in spec:
        data += build_batch(recs, base_offset=offset, compression=codec, timestamp_type=timestamp_type,
                            is_control=control)
        offset += len(recs)
    data = data[:len(data) - cut]  # a fetch may end inside its last batch
    end = position + span
    assert compiled_rows(data, position, end, with_headers) == python_rows(data, position, end, with_headers)


def test_where_a_reader_goes_on_from():
    data = build_batch([(b"k", b"v", [], 1)] * 5) + build_batch([(None, b"w", [], 2)] * 5, base_offset=5)
    schema = arrow_schema(False)
    assert decode(data, 0, 100, "t", 0, schema)[1] == 10
    assert decode(data, 0, 3, "t", 0, schema)[1] == 5  # the batch holding the end is consumed whole
    assert decode(data[:-1], 0, 100, "t", 0, schema)[1] == 5  # a partial batch is fetched again
    assert decode(None, 7, 100, "t", 0, schema)[0].num_rows == 0


def test_damage_is_corrupt_message():
    data = bytearray(build_batch([(b"key", b"value", [("h", b"x")], 1)]))
    data[-3] ^= 0xFF
    with pytest.raises(ProtocolError) as crc:
        decode(bytes(data), 0, 10, "t", 0, arrow_schema(True))
    assert crc.value.error_code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("section", [b"\x7f", b"\x02\x00", b"\x0c\x00\x00\x00\x7f\x00\x00\x00\x00\x00\x00\x00",
                                     b"\x0a\x00\x00\x00\x01" + b"\x00" * 5, b"\x0e\x00\x00\x00\x01\x01\x00\x00"])
def test_malformed_records_are_refused_by_name(section):
    from pipeline import _recordcols

    with pytest.raises(ValueError, match="record 0 of the batch at offset 9"):
        _recordcols.decode([(section, 1, 9, 0, False, 0)], 0, 100, True)
