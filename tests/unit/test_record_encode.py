"""pipeline/_recordenc.c: Arrow columns to record sections, read back by protocol/records.py; Kafka's
murmur2 partitioner; damaged buffers refused with ValueError, never a crash."""

from __future__ import annotations

import random
import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_murmur2

from pipeline import _recordenc
from pipeline.fast_write import _binary
from pipeline.options import EbbSourceError
from protocol.records import Compression, batch_of_section, iter_batches


def encode(values, keys=None, partitions=None, count=4, batch_bytes=4096):
    encoder = _recordenc.encoder(count, batch_bytes)
    parts = None
    if partitions is not None:
        column = pc.cast(partitions, pa.int64())
        parts = (column.buffers()[0], column.buffers()[1], column.offset)
    out = _recordenc.add(encoder, len(values), _binary(values), None if keys is None else _binary(keys), parts)
    return out + _recordenc.finish(encoder)


def read_back(sections, compression=Compression.NONE) -> dict[int, list]:
    got: dict[int, list] = {}
    for partition, section, count in sections:
        batches = list(iter_batches(batch_of_section(section, count, 1_700_000_000_000, compression)))
        assert len(batches) == 1
        batches[0].validate()
        assert batches[0].header().records_count == count
        for record in batches[0].records():
            assert record.timestamp == 1_700_000_000_000 and record.headers == []
            got.setdefault(partition, []).append((record.offset, record.key, record.value))
    return got


def expected(values, keys, partitions, count) -> dict[int, list]:
    out: dict[int, list] = {}
    round_robin = 0
    for value, key, partition in zip(values, keys, partitions, strict=True):
        if partition is None:
            if key is not None:
                partition = (kafka_murmur2(key) & 0x7FFFFFFF) % count
            else:
                partition, round_robin = round_robin % count, round_robin + 1
        out.setdefault(partition, []).append((key, value))
    return out


@given(st.binary(max_size=40))
def test_murmur2_is_kafkas(key):
    assert _recordenc.murmur2(key) & 0xFFFFFFFF == kafka_murmur2(key)


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD, Compression.GZIP])
def test_rows_land_in_kafkas_partitions_and_read_back(compression):
    rng = random.Random(3)
    rows = 3000
    values = [None if i % 7 == 0 else rng.randbytes(rng.randrange(300)) for i in range(rows)]
    keys = [None if i % 3 == 0 else b"k%d" % i for i in range(rows)]
    partitions = [i % 4 if i % 5 == 0 else None for i in range(rows)]
    # sliced columns: Arrow offsets that do not start at 0
    sections = encode(pa.array(values, pa.binary()).slice(5), pa.array(keys, pa.large_binary()).slice(5),
                      pa.array(partitions, pa.int16()).slice(5))
    got = read_back(sections, compression)
    want = expected(values[5:], keys[5:], partitions[5:], 4)
    assert {p: [(k, v) for _, k, v in records] for p, records in got.items()} == want
    assert all(len(section) <= 4096 for _, section, _ in sections)
    for _, records in got.items():  # offsets restart at 0 in every section
        assert records[0][0] == 0


def test_a_record_larger_than_the_batch_size_goes_alone_and_strings_are_bytes():
    values = pa.array(["a", "b" * 10_000, "c"], pa.string())
    sections = encode(values, partitions=pa.array([0, 0, 0], pa.int32()), count=1, batch_bytes=1000)
    assert [count for _, _, count in sections] == [1, 1, 1]
    assert [v for p in read_back(sections).values() for _, _, v in p] == [b"a", b"b" * 10_000, b"c"]


def test_empty_values_and_keys_are_not_null():
    sections = encode(pa.array([b""], pa.binary()), pa.array([b""], pa.binary()), count=3)
    [(partition, _, _)] = sections
    assert partition == (kafka_murmur2(b"") & 0x7FFFFFFF) % 3
    assert read_back(sections) == {partition: [(0, b"", b"")]}


def column(offsets: list[int], data: bytes, offset: int = 0, wide: bool = False, valid=None) -> tuple:
    width = 8 if wide else 4
    return valid, b"".join(o.to_bytes(width, "little", signed=True) for o in offsets), data, offset, wide


@pytest.mark.parametrize("rows, values, partitions, message", [
    (3, column([0, 1], b"a"), None, "shorter than the rows"),
    (2, column([0, 5, 3], b"abcdef"), None, "out of order"),
    (1, column([0, 9], b"abc"), None, "past the data"),
    (1, column([-4, 1], b"abc"), None, "negative"),
    (1, column([0, 1], b"a", offset=-1), None, "column offset negative"),
    (1, column([0, 1], b"a", offset=2**63 - 2), None, "column offset negative or too large"),  # would wrap
    (1, column([0, 1], b"a"), (None, b"\0" * 8, 2**63 - 1), "partition buffers shorter"),  # would wrap
    (9, column([0, 1], b"a", valid=b"\xff"), None, "shorter than the rows"),
    (1, column([0, 1], b"a"), (None, (7).to_bytes(8, "little"), 0), "partition outside 0..3"),
    (1, column([0, 1], b"a"), (None, (-1).to_bytes(8, "little", signed=True), 0), "partition outside"),
    (2, column([0, 1, 2], b"ab"), (None, b"\0" * 8, 0), "partition buffers shorter"),
    (-1, column([0], b""), None, "negative row count"),
])
def test_damaged_buffers_are_refused(rows, values, partitions, message):
    encoder = _recordenc.encoder(4, 4096)
    with pytest.raises(ValueError, match=message):
        _recordenc.add(encoder, rows, values, None, partitions)
    assert _recordenc.finish(encoder) == []  # nothing half-written stays behind


@settings(max_examples=300)
@given(st.integers(0, 6), st.binary(max_size=64), st.binary(max_size=16), st.integers(-3, 3))
def test_arbitrary_buffers_never_crash(rows, offsets, data, offset):
    encoder = _recordenc.encoder(2, 64)
    try:
        sections = _recordenc.add(encoder, rows, (None, offsets, data, offset, False), None, None)
    except ValueError:
        return
    for _, section, count in sections + _recordenc.finish(encoder):
        assert count >= 1 and section


@pytest.mark.parametrize("array", [pa.array([b"a"], pa.binary_view()), pa.array(["a"], pa.string_view()),
                                   pa.array([1], pa.int32()), pa.array([b"ab"], pa.binary(2))])
def test_only_offset_laid_out_binary_and_string_columns_are_taken(array):
    with pytest.raises(EbbSourceError, match=re.escape(str(array.type))):
        _binary(array)


@pytest.mark.parametrize("array", [pa.array([b"a"], pa.binary()), pa.array(["a"], pa.string()),
                                   pa.array([b"a"], pa.large_binary()), pa.array(["a"], pa.large_string())])
def test_binary_and_string_columns_are_taken(array):
    assert read_back(encode(array, count=1)) == {0: [(0, None, b"a")]}
