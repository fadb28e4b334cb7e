"""The cleaner's compiled walks over a batch's records (protocol/_record_spans.c) against their Python
references: on every input, either both give the same answer (and the same key map), or the compiled
one steps aside (None) and the Python one raises ProtocolError; and the references against the record
decoder."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import cleaner_records
from broker.log.cleaner_records import map_batch, map_batch_in_python, retain, retain_in_python
from broker.log.offset_map import KeyOffsetMap, digest, map_key
from protocol import record_format
from protocol.errors import ProtocolError
from protocol.record_format import decode_records, record_spans, record_spans_in_python
from protocol.records import Compression, RecordBatch, build_batch, with_records


def test_the_compiled_walks_are_built_and_used():
    # make test builds them (pip install -e .): a missing compiler must fail here, not slow the cleaner unseen
    from protocol import _record_spans

    assert record_format._compiled_spans is _record_spans.spans
    assert cleaner_records._compiled_map_keys is _record_spans.map_keys
    assert cleaner_records._compiled_retain is _record_spans.retain


keys = st.one_of(st.none(), st.binary(max_size=40), st.sampled_from([b"a", b"b", b"k" * 15, b"k" * 16, b"k" * 40]))
records = st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=30)),
                             st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))),
                                      max_size=2),
                             st.integers(0, 2**40)), min_size=0, max_size=12)


def _section(recs: list) -> tuple[bytes, int]:
    batch = RecordBatch(build_batch(recs or [(b"x", b"y", [], 0)]))
    return bytes(batch.body()), batch.records_count


def _damaged(body: bytes, at: int, byte: int) -> bytes:
    if not body:
        return bytes([byte])
    data = bytearray(body)
    data[at % len(data)] = byte
    return bytes(data)


@settings(max_examples=300)
@given(records, st.integers(0, 10_000), st.integers(0, 255), st.integers(-1, 2), st.booleans())
def test_spans_compiled_equal_python(recs, at, byte, count_change, damage):
    body, count = _section(recs)
    if damage:
        body = _damaged(body, at, byte)
        count += count_change
    compiled = record_format._compiled_spans(body, count)
    try:
        expected = record_spans_in_python(body, count)
    except ProtocolError:
        assert compiled is None
        return
    assert compiled == expected
    if count >= 0:  # and the spans agree with the decoder
        decoded = list(decode_records(body, count, 0, 0, None))
        assert [(s[2], s[4], s[5]) for s in expected] == [(r.offset, r.key, r.value is None) for r in decoded]


def _map(capacity: int, entries: dict[bytes, int], latest: int) -> KeyOffsetMap:
    key_map = KeyOffsetMap(capacity)
    for key, offset in entries.items():
        key_map.put(key, offset)
    key_map.cover_up_to(latest)
    return key_map


mapped = st.dictionaries(st.sampled_from([b"a", b"b", b"k" * 15, b"k" * 16, b"k" * 40, b""]),
                         st.integers(0, 30), max_size=4)


@settings(max_examples=300)
@given(records, mapped, st.integers(1, 12), st.integers(0, 20), st.integers(0, 20),
       st.integers(0, 10_000), st.integers(0, 255), st.booleans())
def test_map_batch_compiled_equals_python(recs, entries, capacity, base_offset, start, at, byte, damage):
    body, count = _section(recs)
    if damage:
        body = _damaged(body, at, byte)
    ours, reference = _map(capacity, entries, -1), _map(capacity, entries, -1)
    try:
        full = map_batch_in_python(reference, body, count, base_offset, start)
    except ProtocolError:
        assert cleaner_records._compiled_map_keys(body, count, base_offset, start, ours.offsets, capacity,
                                                  digest) is None
        assert ours.offsets == _map(capacity, entries, -1).offsets  # nothing was put
        return
    assert map_batch(ours, body, count, base_offset, start) == full
    assert ours.offsets == reference.offsets
    assert ours.latest_offset == reference.latest_offset


@settings(max_examples=300)
@given(records, mapped, st.integers(-1, 40), st.integers(0, 20), st.booleans(),
       st.integers(0, 10_000), st.integers(0, 255), st.booleans())
def test_retain_compiled_equals_python(recs, entries, latest, base_offset, tombstones_stay, at, byte, damage):
    body, count = _section(recs)
    if damage:
        body = _damaged(body, at, byte)
    key_map = _map(100, entries, latest)
    try:
        expected = retain_in_python(body, count, base_offset, key_map, tombstones_stay)
    except ProtocolError:
        assert cleaner_records._compiled_retain(body, count, base_offset, key_map.offsets, key_map.latest_offset,
                                                tombstones_stay, digest) is None
        return
    assert retain(body, count, base_offset, key_map, tombstones_stay) == expected


def test_long_keys_are_held_as_digests_short_ones_as_they_are():
    key_map = KeyOffsetMap(10)
    body, count = _section([(b"k" * 15, b"v", [], 0), (b"k" * 16, b"v", [], 0), (b"x" * 100, None, [], 0)])
    assert not map_batch(key_map, body, count, 5, 0)
    assert key_map.offsets == {b"k" * 15: 5, hashlib.md5(b"k" * 16).digest(): 6, hashlib.md5(b"x" * 100).digest(): 7}
    assert map_key(b"k" * 15) == b"k" * 15 and len(map_key(b"k" * 16)) == 16


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.GZIP, Compression.ZSTD])
def test_a_batch_that_loses_records_keeps_the_others_byte_for_byte(codec):
    recs = [(b"a", b"1", [("h", b"x")], 1_000), (b"b", b"2", [], 1_500), (b"a", b"3", [], 1_200)]
    batch = RecordBatch(build_batch(recs, base_offset=40, compression=codec, producer_id=7, producer_epoch=2,
                                    base_sequence=11))
    key_map = _map(10, {b"a": 42, b"b": 41}, 42)
    retained = retain(batch.body(), batch.records_count, 40, key_map, True)
    assert (retained.kept, retained.keyless_dropped, retained.tombstone_kept) == (2, 0, False)
    assert retained.section is not None and retained.max_timestamp_delta == 500
    cleaned = RecordBatch(with_records(batch, retained.section, retained.kept, 1_500))
    assert cleaned.crc_valid() and cleaned.compression == codec
    assert (cleaned.base_offset, cleaned.last_offset, cleaned.producer_id, cleaned.base_sequence) == (40, 42, 7, 11)
    assert cleaned.max_timestamp == 1_500 and cleaned.records_count == 2
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in cleaned.records()] == [
        (41, b"b", b"2", 1_500, []), (42, b"a", b"3", 1_200, [])]
    assert record_spans(bytes(cleaned.body()), 2)[0][4] == b"b"
